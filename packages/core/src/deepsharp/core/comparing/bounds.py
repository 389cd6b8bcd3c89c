"""How far apart two engines may be on one operation: its family's bound, at each precision.

The bounds are the contract's (`deepsharp.core.engine.precision`), each operation by its family:

- totals (products, sums, means, convolutions and their gradients, a product of stacks, rows
  added into places): the precision's bound, `totals_factor(n)·u·Σ|terms|` (and, for a mixed
  precision's products, `totals_floor`), Σ|terms| and n worked out on the host in float64 from
  the operation's inputs (`deepsharp.core.comparing.terms`);
- the optimizers' updates: each value within 16·u of the sizes it is made of (its memory's
  before and after, a slot's and its step's: `update_tolerances`);
- value by value (arithmetic, functions): 1e-5 + 1.3e-6·|ref|, and
  1.3e-6·|ref| alone in the tails the contract holds to relative accuracy (e^x, sigmoid and
  softplus over [-80, ...], log1p near 0); at a mixed precision an `add` of a smaller operand
  onto a larger one (a bias onto a product's output, which such an engine may keep in its half
  format) also u_h·|ref| + u_h(1 + u_h)·|bias|;
- moves and transfers (reshape, slices, selections, copies, puts): exact, bit for bit;
- chains (fast paths made of several operations: LayerNorm and its way back, an LSTM's
  positions and sequences, clipping by a norm, the binary cross entropy's terms): the bound
  their reference carries when run on the `Propagated` engine from the same inputs at each
  precision (each total's and value's bound propagated through the chain,
  `deepsharp.core.comparing.propagated`), as the contract holds them.

Each engine's precision gives a bound; two engines are held to the looser of the two, element
by element (the reference engine's own rounding is far inside it: a strict engine rounds a
total once).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.comparing.terms import TOTALS, terms_of
from deepsharp.core.engine.precision import (
    TAIL_RTOL,
    UNIT,
    Precision,
    update_tolerances,
    value_tolerance,
)

__all__ = ["FAMILIES", "IN_PLACE", "Judged", "bounds_nothing", "family_of", "judge"]

Array = NDArray[Any]

VALUES = (
    "add sub mul div maximum greater where neg abs exp log log1p softplus sqrt tanh sigmoid "
    "relu relu_back erf gelu gelu_back sgd_update adam_update decay_update"
).split()
MOVES = (
    "zeros copy assign reshape transpose slice take_rows concatenate split pad broadcast_to max "
    "one_hot maxpool2d maxpool2d_back maxpool2d_pair maxpool2d_pair_back parts"
).split()

CHAINS = (
    "layer_norm layer_norm_back lstm_cell lstm_cell_back lstm_sequence lstm_sequence_back "
    "lstm_masked_sequence lstm_masked_sequence_back "
    "clip_norm global_clip_norm binary_cross_entropy_terms"
).split()

FAMILIES: dict[str, str] = {
    **dict.fromkeys(TOTALS, "totals"),
    **dict.fromkeys(CHAINS, "chains"),
    **dict.fromkeys(VALUES, "values"),
    **dict.fromkeys(MOVES, "moves"),
    "put": "transfers",
    "put_checked": "transfers",
}
"""Every operation compare knows: its name -> its family."""

IN_PLACE: dict[str, tuple[int, ...]] = {
    "assign": (0,),
    "sgd_update": (0, 2),
    "adam_update": (0, 2, 3),
    "decay_update": (0,),
}
"""The operations that change arguments in place, and which: what they give is those arguments
as they leave them."""

TAILS: dict[str, tuple[float, float]] = {
    "sigmoid": (-80.0, 16.0),
    "exp": (-80.0, 80.0),
    "softplus": (-80.0, 80.0),
}
"""Where the contract holds a function to relative accuracy alone: its inputs' range (log1p:
|x| from 1e-30 to 1e-3)."""


def family_of(operation: str) -> str | None:
    """The family of `operation`; None for an operation compare has no bound for."""
    return FAMILIES.get(operation)


@dataclass(frozen=True)
class Judged:
    """One operation's outputs, one engine's against the other's: at the element where the
    difference is worst against its bound, the `difference`, the bound at each precision
    (`bounds`, in the engines' order), the `ratio` to the looser of them; `place` is that
    element (which output, and where in it). A ratio of 0: the same values (bit for bit for
    moves); infinite: apart where no difference is allowed (a move, a NaN against a number).
    `vacuous`: where an output's bound bounds nothing (`bounds_nothing`), so that a ratio
    within 1 says nothing of the engines there, in words (which output, its largest bound and
    value); "" where none does."""

    difference: float
    bounds: tuple[float, float]
    ratio: float
    place: tuple[int, tuple[int, ...]]
    vacuous: str = ""


def judge(
    operation: str,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    reference: Sequence[Array],
    got: Sequence[Array],
    precisions: tuple[Precision, Precision],
    onto_product: bool = False,
) -> Judged:
    """`got` (the outputs of one engine) against `reference` (the other's, from the same
    inputs `args`, brought to the host) for `operation`, each element against its family's bound
    at both precisions. `onto_product`: an `add` of a smaller operand onto a product's output
    (a bias), which a mixed precision's half format may round."""
    family = FAMILIES[operation]
    worst: Judged | None = None
    vacuous = ""
    if family == "totals":
        terms = terms_of(operation, args, kwargs)
    elif family == "chains":
        chained = [_chained(operation, args, kwargs, precision) for precision in precisions]
    elif operation in UPDATES:
        updated = _updated(operation, args, kwargs, reference)
    for index, (ref, out) in enumerate(zip(reference, got, strict=True)):
        ref64, out64 = np.asarray(ref, np.float64), np.asarray(out, np.float64)
        if ref64.shape != out64.shape:
            raise ValueError(
                f"{operation}: the engines give outputs of shapes {ref64.shape} and {out64.shape}"
            )
        if family == "totals":
            bounds = tuple(_totals(terms[index], precision) for precision in precisions)
            over = _half_overflow(ref64, out64, bounds, precisions, terms[index].product)
            if over is not None:  # each side as the other: both within the contract there
                out64, out = np.where(over, ref64, out64), np.where(over, ref, out)
        elif family == "chains":
            bounds = tuple(np.broadcast_to(each[index], ref64.shape) for each in chained)
        elif operation in UPDATES:
            bounds = (updated[index], updated[index])
        elif family == "values":
            bounds = tuple(
                _values(operation, args, ref64, precision, ref64.shape, onto_product)
                for precision in precisions
            )
        else:
            bounds = (np.zeros(ref64.shape), np.zeros(ref64.shape))
        found = _worst(ref, out, ref64, out64, bounds[0], bounds[1], family, index)
        if family == "chains" and not vacuous:  # a propagated bound; the others are the
            looser = np.maximum(bounds[0], bounds[1])  # contract's own
            if bounds_nothing(ref64, looser):
                vacuous = _nothing_said(ref64, looser, index, len(reference))
        if worst is None or not found.ratio <= worst.ratio:
            worst = found
    if worst is None:
        return Judged(0.0, (0.0, 0.0), 0.0, (0, ()))
    return replace(worst, vacuous=vacuous)


SCALE_FLOOR = 1e-4
"""The least bound `bounds_nothing` takes for one that bounds nothing: ten times the value
tolerance's absolute part, which any value's bound holds (an output of values all below it is
held to it, as every value by value is), and which a chain of a few value-by-value
operations carries a few of (trial CP4: a binary cross entropy's terms at logits below -12,
each under 1e-5, were said to be held to a bound that bounds nothing, and compare could not
tell of two honest engines)."""


def bounds_nothing(reference: Array, bound: Array) -> bool:
    """Whether a chain's output's bound bounds nothing: infinite (or NaN) anywhere, or past
    every value of the output (and `SCALE_FLOOR`), so that values of the right size but any
    sign, or none at all, would be within it. A chain's bound is propagated through its
    operations with no cancellation, each value's absolute 1e-5 on top, and can outgrow its
    values: an LSTM's sequence (each position passes its inputs' bounds on through |W|, so
    over 20 positions of large weights they pass float64's range), a LayerNorm's scale
    gradient over many rows (each row's 1e-5 added up). The contract's own bounds (totals,
    values) are never so judged: a total that cancels to near 0 is still held to its terms'."""
    if bound.size == 0:
        return False
    if not np.isfinite(bound).all():
        return True
    largest = float(np.max(bound))
    return largest > SCALE_FLOOR and largest > float(np.max(np.abs(reference), initial=0.0))


def _nothing_said(reference: Array, bound: Array, index: int, count: int) -> str:
    where = f" at output {index + 1} of {count}" if count > 1 else ""
    if not np.isfinite(bound).all():
        return f"its bound bounds nothing{where}: infinite at some values"
    largest = float(np.max(np.abs(reference), initial=0.0))
    return (
        f"its bound bounds nothing{where}: up to {float(np.max(bound)):.3g} against values up "
        f"to {largest:.3g}"
    )


def _chained(
    operation: str, args: Sequence[Any], kwargs: dict[str, Any], precision: Precision
) -> list[Array]:
    """Each output's bound for a chain: the fast path's reference run on the `Propagated`
    engine at `precision` from these inputs (a bound that bounds nothing, where a division's
    is, is infinite)."""
    from deepsharp.core.comparing.propagated import Bounded, Propagated
    from deepsharp.core.engine import fused

    engine = Propagated(precision.name)

    def bounded(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return engine.put(value)
        if isinstance(value, (list, tuple)):
            return type(value)(bounded(item) for item in value)
        return value

    def flat(value: Any) -> list[Bounded]:
        if isinstance(value, (list, tuple)):
            return [found for item in value for found in flat(item)]
        return [] if value is None else [value]

    with np.errstate(all="ignore"):
        made = fused.FAST_PATHS[operation](engine, *(bounded(arg) for arg in args), **kwargs)
    return [np.nan_to_num(np.asarray(out.bound, np.float64), nan=np.inf) for out in flat(made)]


def _half_overflow(
    ref64: Array,
    out64: Array,
    bounds: Sequence[Array],
    precisions: Sequence[Precision],
    product: bool,
) -> Array | None:
    """Where one side's product is the infinity its half format may round it to (float16's past
    65,504, as the contract allows: `Precision.half_beyond`), of the other's sign, the other's
    exact value within its bound of that far; None where no such place is (trial M3: a
    mixed_float16 step whose products overflowed, skipped by its loss scale as it should be,
    was judged past its bound, ratio inf)."""
    beyond = min(precision.half_beyond for precision in precisions)
    if not product or beyond == np.inf:
        return None
    looser = np.maximum(bounds[0], bounds[1])
    with np.errstate(invalid="ignore"):
        same_sign = np.sign(out64) == np.sign(ref64)
        over = (np.isinf(out64) & np.isfinite(ref64) & (np.abs(ref64) + looser >= beyond)) | (
            np.isinf(ref64) & np.isfinite(out64) & (np.abs(out64) + looser >= beyond)
        )
    over &= same_sign
    return over if over.any() else None


UPDATES = ("adam_update", "sgd_update", "decay_update")
"""The optimizers' updates: each value held to its own size (`update_tolerances`)."""


def _updated(
    operation: str, args: Sequence[Any], kwargs: dict[str, Any], reference: Sequence[Array]
) -> list[Array]:
    """Each output's bound for an optimizer's update (its groups updated in place, in order:
    `IN_PLACE`), from its arguments before it and the reference's values after it."""
    after, start = [], 0
    for place in IN_PLACE[operation]:
        count = len(args[place])
        after.append([np.asarray(ref, np.float64) for ref in reference[start : start + count]])
        start += count
    found = update_tolerances(operation, args, after, **kwargs)
    return [bound for group in found for bound in group]


def _totals(terms: Any, precision: Precision) -> Array:
    factor = precision.totals_factor(terms.counts, terms.product)
    allowed = np.asarray(factor * UNIT * terms.sizes, np.float64)
    if terms.product:
        allowed = allowed + precision.totals_floor(terms.counts, terms.inputs)
    return allowed


def _values(
    operation: str,
    args: Sequence[Any],
    ref: Array,
    precision: Precision,
    shape: tuple[int, ...],
    onto_product: bool = False,
) -> Array:
    allowed = np.broadcast_to(value_tolerance(ref), shape).astype(np.float64)
    x = args[0] if args and isinstance(args[0], np.ndarray) else None
    if x is not None and x.shape == shape and (operation in TAILS or operation == "log1p"):
        wide = np.asarray(x, np.float64)
        if operation == "log1p":
            tail = (np.abs(wide) >= 1e-30) & (np.abs(wide) <= 1e-3)
        else:
            low, high = TAILS[operation]
            tail = (wide >= low) & (wide <= high)
        allowed = np.where(tail, np.minimum(allowed, TAIL_RTOL * np.abs(ref)), allowed)
    if precision.mixed and operation == "add" and len(args) == 2 and onto_product:
        bias = _bias(args[0], args[1])
        if bias is not None:
            half = precision.half_unit
            spread = np.broadcast_to(np.abs(np.asarray(bias, np.float64)), shape)
            allowed = allowed + half * np.abs(ref) + half * (1.0 + half) * spread
    return allowed


def _bias(a: Any, b: Any) -> Any:
    """The smaller of two arrays added where it is broadcast onto the larger (a bias), if so."""
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.size == b.size:
        return None
    return a if a.size < b.size else b


def _same(ref: Array, out: Array) -> Array:
    """Where two outputs hold the same value, bit for bit (a NaN meeting a NaN counts as the
    same; 0.0 and -0.0 do not)."""
    if ref.dtype.kind != "f" or out.dtype.kind != "f":
        return np.asarray(ref == out)
    equal = (ref == out) & (np.signbit(ref) == np.signbit(out))
    return np.asarray(equal | (np.isnan(ref) & np.isnan(out)))


def _worst(
    ref: Array,
    out: Array,
    ref64: Array,
    out64: Array,
    bound_a: Array,
    bound_b: Array,
    family: str,
    index: int,
) -> Judged:
    if ref64.size == 0:
        return Judged(0.0, (0.0, 0.0), 0.0, (index, ()))
    same = _same(np.asarray(ref), np.asarray(out))
    with np.errstate(invalid="ignore", over="ignore"):
        if np.asarray(ref).dtype.kind in "iu" and np.asarray(out).dtype.kind in "iu":
            # exactly, in integers: float64 holds no integer past 2^53 apart from its neighbour
            apart = np.abs(np.asarray(out, np.int64) - np.asarray(ref, np.int64))
            difference = np.where(same, 0.0, apart.astype(np.float64))
        else:
            difference = np.where(same, 0.0, np.abs(out64 - ref64))
    difference = np.where(np.isnan(difference), np.inf, difference)
    looser = np.maximum(bound_a, bound_b)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(
            same,
            0.0,
            np.where(looser > 0, difference / np.where(looser > 0, looser, 1.0), np.inf),
        )
    flat = int(np.argmax(ratio))
    place = tuple(int(i) for i in np.unravel_index(flat, ratio.shape))
    return Judged(
        float(difference[place]),
        (
            float(np.broadcast_to(bound_a, ratio.shape)[place]),
            float(np.broadcast_to(bound_b, ratio.shape)[place]),
        ),
        float(ratio[place]),
        (index, place),
    )
