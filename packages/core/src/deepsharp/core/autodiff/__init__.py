"""Recording and the rulebook: tensors, the tape of a pass, each operation's rule, the functions
layers call, and replaying a traced pass.

`tensor` holds the mechanism (Tensor, Node, Recording, Rule, `apply`); `rulebook` enters every
operation's rule in `RULES`; `functions` is what layers call; `replay` runs a traced pass again.
"""

from deepsharp.core.autodiff import rulebook as _rulebook  # enters every rule in RULES
from deepsharp.core.autodiff.replay import Replay
from deepsharp.core.autodiff.tensor import RULES, Node, Recording, Rule, Tensor, apply

__all__ = ["RULES", "Node", "Recording", "Replay", "Rule", "Tensor", "apply"]

del _rulebook
