"""Where two engines part: a training step compared operation by operation, and runs checked
against a shadow engine.

- `step`: `compare`, one training step on two engines, every operation judged by its bound;
- `witness`: the engine that takes the step and has each operation done again by the reference;
- `bounds` and `terms`: each operation's bound at a precision, from its inputs on the host;
- `comparison`: what a comparison found (`Comparison`, `Difference`), as text, table and plot;
- `shadow`: `Shadow`, a run's sampled steps compared against a second engine;
- `command`: `deepsharp compare FILE ROWS.csv --engines REFERENCE OTHER`.
"""

from deepsharp.core.comparing.comparison import Comparison, Difference
from deepsharp.core.comparing.step import compare

__all__ = ["Comparison", "Difference", "compare"]
