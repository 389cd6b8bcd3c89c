"""Recording and the rulebook: tensors, the tape of a pass, each operation's rule, the functions
layers call, and replaying a traced pass.

`tensor` holds the mechanism (Tensor, Node, Recording, Rule, `apply`); `rulebook` and its
families beside it (`rules_totals`, `rules_images`, `rules_moves`, `rules_recurrent`) enter every operation's rule
in `RULES`; `functions` is what layers call; `replay` runs a traced pass again.
"""

# Importing the rulebook's modules enters every rule in RULES.
from deepsharp.core.autodiff import rulebook as _rulebook
from deepsharp.core.autodiff import rules_images as _rules_images
from deepsharp.core.autodiff import rules_moves as _rules_moves
from deepsharp.core.autodiff import rules_recurrent as _rules_recurrent
from deepsharp.core.autodiff import rules_totals as _rules_totals
from deepsharp.core.autodiff.replay import Replay
from deepsharp.core.autodiff.tensor import RULES, Node, Recording, Rule, Tensor, apply

__all__ = ["RULES", "Node", "Recording", "Replay", "Rule", "Tensor", "apply"]

del _rulebook, _rules_images, _rules_moves, _rules_recurrent, _rules_totals
