"""How an engine adds its totals: one strategy per precision, chosen when the engine is made.

The totals are the operations whose arithmetic a precision decides (`TOTALS_OPERATIONS`, and
the fused ones that add totals: a convolution with its bias, the filters' and biases' gradients
together, a product of stacks, rows added into places). An engine that offers several precisions writes one `Totals` strategy for
each and holds the one its precision names; every other operation is the same whichever it
holds. The light engine, for instance, has `StrictTotals` (float64, rounded once) and
`Float32Totals` (NumPy's own kernels): a mixed precision is one more strategy (its products'
inputs rounded to the half format, added in float32), offered by adding it to the engine's
table of strategies.

`choose_totals(engine, precision, offered)` picks from such a table, refusing a precision the
engine does not offer with a message that names those it does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from deepsharp.core.engine.precision import PRECISIONS, Precision

__all__ = ["TOTALS_OPERATIONS", "Totals", "choose_totals"]

TOTALS_OPERATIONS = ("matmul", "sum", "mean", "conv2d", "conv2d_weight_grad", "conv2d_fold")
"""The primitives whose arithmetic a precision chooses; every other one is the same either way."""

Strategy = TypeVar("Strategy")


class Totals(Protocol):
    """A way of adding totals: the totals primitives and the fused operations that add totals,
    with the signatures they have on the engine (handles are the engine's own)."""

    precision: Precision

    def matmul(
        self, a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False
    ) -> Any: ...

    def sum(self, x: Any, axes: tuple[int, ...], keepdims: bool = False) -> Any: ...

    def mean(self, x: Any, axes: tuple[int, ...], keepdims: bool = False) -> Any: ...

    def conv2d(self, x: Any, w: Any, stride: int, padding: Any) -> Any: ...

    def conv2d_bias(self, x: Any, w: Any, bias: Any, stride: int, padding: Any) -> Any: ...

    def conv2d_weight_grad(
        self, x: Any, gy: Any, kernel: tuple[int, int], stride: int, padding: Any
    ) -> Any: ...

    def conv2d_weight_bias_grad(
        self, x: Any, gy: Any, kernel: tuple[int, int], stride: int, padding: Any
    ) -> tuple[Any, Any]: ...

    def conv2d_fold(
        self, gy: Any, w: Any, image: tuple[int, int], stride: int, padding: Any
    ) -> Any: ...

    def batch_matmul(
        self, a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False
    ) -> Any: ...

    def add_rows(self, values: Any, indices: Any, rows: int) -> Any: ...


def choose_totals(
    engine: str, precision: str | Precision, offered: Mapping[str, Callable[[], Strategy]]
) -> Strategy:
    """The strategy `offered[precision]` made; a ValueError naming what the engine called
    `engine` offers otherwise (an unknown precision, or one it does not offer)."""
    name = precision.name if isinstance(precision, Precision) else precision
    make = offered.get(name) if isinstance(name, str) else None
    if make is not None:
        return make()
    choices = ", ".join(repr(known) for known in offered)
    if isinstance(name, str) and name in PRECISIONS:
        why = f"does not offer the precision {name!r}"
    else:
        why = f"has no precision {name!r} (the precisions are {', '.join(PRECISIONS)})"
    raise ValueError(f"the {engine} engine {why}: it offers {choices}")
