"""A whole network's bound: each operation's contract, propagated through the network.

`Propagated(precision)` is an engine whose every value is a pair: the exact value (float64 from
the same float32 inputs, the suite's reference) and a bound on how far an engine that keeps the
contract at `precision` may have strayed from it by then. Each operation adds its own family's
bound, taken at its inputs as they may have strayed, to what its inputs' bounds become through
it:

- value by value: how far f moves over its inputs as they may be (sums and differences add
  their inputs' bounds; products |a|·e_b + |b|·e_a + e_a·e_b; a quotient (e_a + |a/b|·e_b) /
  (|b| - e_b); exp, log, sqrt and the non-decreasing functions, sigmoid, tanh, ReLU, softplus
  and erf, by their exact spread, max(f(x + e) - f(x), f(x) - f(x - e))), then 1e-5 +
  1.3e-6·|value| of its own;
- totals: the terms' bounds through the total (a product |A|·E_B + E_A·|B| + E_A·E_B, a
  convolution likewise), then the precision's factor times u·Σ|terms| of the inputs as they
  may be ((|A| + E_A)·(|B| + E_B));
- moves: the bounds moved as the values are (a max-pool keeps the largest of each window's).

Running a network's forward pass (and a loss's link) on it gives, for every output, the exact
value and the bound an engine of that precision is held to there: onnxruntime on an exported
file at `float32`, the light engine at `strict`. docs/export.md states it. Running one fast path's
reference on it (a chain of totals and values: LayerNorm, an LSTM's positions, clipping by a
norm) gives the bound compare holds that fast path's outputs to (`bounds.judge`, the family
"chains"); the contract suite holds those fast paths to it too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.comparing.exact import Float64Engine
from deepsharp.core.engine import Counters, EngineIdentity
from deepsharp.core.engine.precision import UNIT, precision_named
from deepsharp.core.nn.layer import Pass
from deepsharp.core.nn.losses import Loss
from deepsharp.core.nn.network import Network

__all__ = ["Bounded", "Propagated", "bounded_predictions"]

Array = NDArray[Any]
Padding = tuple[int, int]

_RELATIVE, _ABSOLUTE = 1.3e-6, 1e-5  # the value-by-value tolerance


class Bounded:
    """A value as it is exactly (`value`, float64; int64 for ids) and the bound (`bound`, one
    number a value) on how far an engine of the precision may be from it."""

    __slots__ = ("bound", "product", "value")

    def __init__(self, value: Array, bound: Array, product: bool = False) -> None:
        self.value = value
        self.bound = bound
        self.product = product
        """Whether it is a product's or a convolution's output (or one moved: reshaped,
        transposed): at a mixed precision a bias added onto it may stay in the half format."""

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)


def _tolerance(size: Array) -> Array:
    out: Array = _ABSOLUTE + _RELATIVE * size
    return out


def _parts(x: Any) -> tuple[Array, Array]:
    if isinstance(x, Bounded):
        return x.value, x.bound
    return np.float64(x), np.float64(0.0)


def _sigmoid(x: Array) -> Array:
    out: Array = 1.0 / (1.0 + np.exp(-x))
    return out


def _relu(x: Array) -> Array:
    return np.maximum(x, 0.0)


def _softplus(x: Array) -> Array:
    return np.logaddexp(0.0, x)


def _erf(x: Array) -> Array:
    return np.asarray(np.vectorize(math.erf)(x) if np.size(x) else x, np.float64)


class Propagated:
    """An engine of `Bounded` values: each operation's exact value and the propagated bound of
    an engine that keeps the contract at `precision` (strict, float32 or a mixed one: its
    products' and convolutions' totals then held to the half format's bound, and a bias added
    onto a product's output allowed the half format's two roundings)."""

    name = "propagated bound"

    def __init__(self, precision: str = "float32") -> None:
        self.precision = precision_named(precision)
        self.exact = Float64Engine()
        self.counters = Counters()

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, None, None, self.precision.name)

    def _totals(self, count: Any, product: bool = False) -> Any:
        return self.precision.totals_factor(count, product=product) * UNIT

    # --- transfers -------------------------------------------------------------------------
    def put(self, array: Any, bound: Any = 0.0) -> Bounded:
        """Values as they are (an input, a slot): exact, or within `bound` of what an engine
        holds (an input an exported pipeline rounded on its own)."""
        self.counters.transfers_in += 1
        value = self.exact.put(array)
        return Bounded(value, np.broadcast_to(np.asarray(bound, np.float64), value.shape).copy())

    def get(self, handle: Bounded) -> Array:
        self.counters.transfers_out += 1
        return np.array(handle.value)

    def zeros(self, shape: tuple[int, ...]) -> Bounded:
        return Bounded(np.zeros(shape), np.zeros(shape))

    def shape(self, handle: Bounded) -> tuple[int, ...]:
        return handle.shape

    # --- value by value --------------------------------------------------------------------
    def _value(self, value: Array, spread: Array) -> Bounded:
        """A value-by-value result: its inputs' spread through it, and its own tolerance at
        the size it may have."""
        bound = spread + _tolerance(np.abs(value) + spread)
        return Bounded(np.asarray(value, np.float64), np.asarray(bound, np.float64))

    def add(self, a: Any, b: Any) -> Bounded:
        (va, ea), (vb, eb) = _parts(a), _parts(b)
        made = self._value(va + vb, np.broadcast_to(ea + eb, np.broadcast(va, vb).shape))
        if self.precision.mixed and np.size(vb) < np.size(va) and getattr(a, "product", False):
            # A bias onto a product's output may stay in the half format, as a product's
            # kernel adds it: the bias rounded to it and the sum rounded once more. (Any other
            # value by value, LayerNorm's shift, is float32's.)
            half = self.precision.half_unit
            bound = made.bound + half * (np.abs(made.value) + made.bound + np.abs(vb) + eb)
            made = Bounded(made.value, bound)
        return made

    def sub(self, a: Any, b: Any) -> Bounded:
        (va, ea), (vb, eb) = _parts(a), _parts(b)
        return self._value(va - vb, np.broadcast_to(ea + eb, np.broadcast(va, vb).shape))

    def mul(self, a: Any, b: Any) -> Bounded:
        (va, ea), (vb, eb) = _parts(a), _parts(b)
        with np.errstate(invalid="ignore"):  # an infinite bound times 0: NaN, bounding nothing
            return self._value(va * vb, np.abs(va) * eb + np.abs(vb) * ea + ea * eb)

    def div(self, a: Any, b: Any) -> Bounded:
        (va, ea), (vb, eb) = _parts(a), _parts(b)
        with np.errstate(all="ignore"):
            value = va / vb
            room = np.abs(vb) - eb
            spread = np.where(room > 0, (ea + np.abs(value) * eb) / room, np.inf)
        return self._value(value, spread)

    def maximum(self, a: Any, b: Any) -> Bounded:
        (va, ea), (vb, eb) = _parts(a), _parts(b)
        return self._value(np.maximum(va, vb), np.maximum(ea, eb))

    def greater(self, a: Any, b: Any) -> Bounded:
        (va, ea), (vb, eb) = _parts(a), _parts(b)
        value = (va > vb).astype(np.float64)
        return Bounded(value, np.where(np.abs(va - vb) <= ea + eb, 1.0, 0.0))

    def where(self, condition: Bounded, a: Any, b: Any) -> Bounded:
        (va, ea), (vb, eb) = _parts(a), _parts(b)
        chosen = condition.value != 0
        value = np.where(chosen, va, vb)
        spread = np.where(chosen, ea, eb)
        unsure = condition.bound > 0  # the condition may have gone the other way
        spread = np.where(unsure, np.maximum(ea, eb) + np.abs(va - vb), spread)
        return self._value(value, spread)

    def neg(self, x: Bounded) -> Bounded:
        return self._value(-x.value, x.bound)

    def abs(self, x: Bounded) -> Bounded:
        return self._value(np.abs(x.value), x.bound)

    def exp(self, x: Bounded) -> Bounded:
        with np.errstate(all="ignore"):
            value = np.exp(x.value)
            return self._value(value, np.exp(x.value + x.bound) - value)  # 0 where both underflow

    def log(self, x: Bounded) -> Bounded:
        with np.errstate(all="ignore"):
            spread = np.where(x.value > x.bound, -np.log1p(-x.bound / x.value), np.inf)
            return self._value(np.log(x.value), spread)

    def log1p(self, x: Bounded) -> Bounded:
        with np.errstate(all="ignore"):
            base = 1.0 + x.value
            spread = np.where(base > x.bound, -np.log1p(-x.bound / base), np.inf)
            return self._value(np.log1p(x.value), spread)

    def sqrt(self, x: Bounded) -> Bounded:
        with np.errstate(all="ignore"):
            value = np.sqrt(np.maximum(x.value, 0.0))
            low = np.sqrt(np.maximum(x.value - x.bound, 0.0))
            return self._value(value, value - low + (np.sqrt(x.value + x.bound) - value))

    def _monotone(self, f: Any, x: Bounded) -> Bounded:
        """f, non-decreasing, value by value: its exact spread over the inputs as they may be,
        the larger of f(x + e) - f(x) and f(x) - f(x - e). A function that levels off (sigmoid,
        tanh, erf) holds a bound to its range and to its slope there: a saturated gate passes
        on almost none of its input's (a bound times the steepest slope anywhere, 0.25 for
        sigmoid, grew along an LSTM's positions until it bounded nothing)."""
        with np.errstate(all="ignore"):
            value = np.asarray(f(x.value), np.float64)
            above = np.asarray(f(x.value + x.bound), np.float64) - value
            below = value - np.asarray(f(x.value - x.bound), np.float64)
            return self._value(value, np.maximum(above, below))

    def tanh(self, x: Bounded) -> Bounded:
        return self._monotone(np.tanh, x)

    def sigmoid(self, x: Bounded) -> Bounded:
        return self._monotone(_sigmoid, x)

    def relu(self, x: Bounded) -> Bounded:
        return self._monotone(_relu, x)

    def softplus(self, x: Bounded) -> Bounded:
        return self._monotone(_softplus, x)

    def erf(self, x: Bounded) -> Bounded:
        return self._monotone(_erf, x)

    # --- totals ----------------------------------------------------------------------------
    def _total(
        self,
        value: Array,
        spread: Array,
        size: Array,
        count: Any,
        inputs: Array | None = None,
    ) -> Bounded:
        """A total: its terms' spread through it, then the precision's bound over its terms
        as they may be (`size`: Σ(|terms| + their spread)). A product's or convolution's
        `inputs`, Σ(|a| + |b|) over its terms as they may be, make it a product: at a mixed
        precision its bound is the half format's (`Precision.totals_factor(product=True)`,
        and `totals_floor` for inputs below the half format's smallest normal value)."""
        product = inputs is not None
        bound = spread + self._totals(count, product) * size
        if product:
            bound = bound + self.precision.totals_floor(count, inputs)
        return Bounded(np.asarray(value), np.asarray(bound), product)

    def matmul(
        self, a: Bounded, b: Bounded, transpose_a: bool = False, transpose_b: bool = False
    ) -> Bounded:
        f = self.exact
        va, ea, vb, eb = a.value, a.bound, b.value, b.bound
        value = f.matmul(va, vb, transpose_a, transpose_b)
        spread = (
            f.matmul(np.abs(va), eb, transpose_a, transpose_b)
            + f.matmul(ea, np.abs(vb), transpose_a, transpose_b)
            + f.matmul(ea, eb, transpose_a, transpose_b)
        )
        sa, sb = np.abs(va) + ea, np.abs(vb) + eb
        size = f.matmul(sa, sb, transpose_a, transpose_b)
        inputs = f.matmul(sa, np.ones_like(vb), transpose_a, transpose_b) + f.matmul(
            np.ones_like(va), sb, transpose_a, transpose_b
        )
        count = va.shape[0] if transpose_a else va.shape[1]
        return self._total(value, spread, size, count, inputs)

    def sum(self, x: Bounded, axes: tuple[int, ...], keepdims: bool = False) -> Bounded:
        f = self.exact
        count = math.prod(x.shape[a] for a in axes)
        return self._total(
            f.sum(x.value, axes, keepdims),
            f.sum(x.bound, axes, keepdims),
            f.sum(np.abs(x.value) + x.bound, axes, keepdims),
            count,
        )

    def mean(self, x: Bounded, axes: tuple[int, ...], keepdims: bool = False) -> Bounded:
        f = self.exact
        count = math.prod(x.shape[a] for a in axes)
        return self._total(
            f.mean(x.value, axes, keepdims),
            f.mean(x.bound, axes, keepdims),
            f.mean(np.abs(x.value) + x.bound, axes, keepdims),
            count,
        )

    def conv2d(
        self, x: Bounded, w: Bounded, stride: int, padding: tuple[Padding, Padding]
    ) -> Bounded:
        f = self.exact
        vx, ex, vw, ew = x.value, x.bound, w.value, w.bound
        value = f.conv2d(vx, vw, stride, padding)
        spread = (
            f.conv2d(np.abs(vx), ew, stride, padding)
            + f.conv2d(ex, np.abs(vw), stride, padding)
            + f.conv2d(ex, ew, stride, padding)
        )
        sx, sw = np.abs(vx) + ex, np.abs(vw) + ew
        size = f.conv2d(sx, sw, stride, padding)
        inputs = f.conv2d(sx, np.ones_like(vw), stride, padding) + f.conv2d(
            np.ones_like(vx), sw, stride, padding
        )
        count = vw.shape[1] * vw.shape[2] * vw.shape[3]
        return self._total(value, spread, size, count, inputs)

    def conv2d_bias(
        self,
        x: Bounded,
        w: Bounded,
        bias: Bounded,
        stride: int,
        padding: tuple[Padding, Padding],
    ) -> Bounded:
        """The convolution with its bias as one more term of each total (the fast path's
        family): an engine may add it inside, or after as the reference does (a value-by-value
        add more), so the larger of the two bounds."""
        inside = self.conv2d(x, w, stride, padding)
        shaped = (1, bias.shape[0], 1, 1)
        b = Bounded(bias.value.reshape(shaped), bias.bound.reshape(shaped))
        after = self.add(inside, b)
        count = w.shape[1] * w.shape[2] * w.shape[3] + 1
        extra = self._totals(count, True) - self._totals(count - 1, True)
        size = self.exact.conv2d(
            np.abs(x.value) + x.bound, np.abs(w.value) + w.bound, stride, padding
        )
        one_more = (
            inside.bound + extra * size + b.bound + self._totals(count, True) * np.abs(b.value)
        )
        return Bounded(after.value, np.maximum(after.bound, one_more))

    # --- moves -----------------------------------------------------------------------------
    def _moved(self, x: Bounded, name: str, *args: Any, **kwargs: Any) -> Bounded:
        f = self.exact
        return Bounded(
            getattr(f, name)(x.value, *args, **kwargs),
            getattr(f, name)(x.bound, *args, **kwargs),
            x.product,
        )

    def copy(self, x: Bounded) -> Bounded:
        return Bounded(x.value.copy(), x.bound.copy(), x.product)

    def reshape(self, x: Bounded, shape: tuple[int, ...]) -> Bounded:
        return self._moved(x, "reshape", shape)

    def transpose(self, x: Bounded, axes: tuple[int, ...]) -> Bounded:
        return self._moved(x, "transpose", axes)

    def slice(self, x: Bounded, axis: int, start: int, stop: int) -> Bounded:
        return self._moved(x, "slice", axis, start, stop)

    def pad(self, x: Bounded, widths: Sequence[Padding]) -> Bounded:
        return self._moved(x, "pad", widths)

    def broadcast_to(self, x: Bounded, shape: tuple[int, ...]) -> Bounded:
        return self._moved(x, "broadcast_to", shape)

    def take_rows(self, x: Bounded, rows: Bounded) -> Bounded:
        f = self.exact
        return Bounded(f.take_rows(x.value, rows.value), f.take_rows(x.bound, rows.value))

    def concatenate(self, xs: Sequence[Bounded], axis: int) -> Bounded:
        f = self.exact
        return Bounded(
            f.concatenate([x.value for x in xs], axis), f.concatenate([x.bound for x in xs], axis)
        )

    def split(self, x: Bounded, sizes: Sequence[int], axis: int) -> list[Bounded]:
        f = self.exact
        return [
            Bounded(v, e)
            for v, e in zip(f.split(x.value, sizes, axis), f.split(x.bound, sizes, axis))
        ]

    def max(self, x: Bounded, axes: tuple[int, ...], keepdims: bool = False) -> Bounded:
        f = self.exact
        return Bounded(f.max(x.value, axes, keepdims), f.max(x.bound, axes, keepdims))

    def one_hot(self, indices: Bounded, classes: int) -> Bounded:
        value = self.exact.one_hot(indices.value, classes)
        return Bounded(value, np.zeros_like(value))

    def maxpool2d(self, x: Bounded, pool: int) -> tuple[Bounded, Bounded]:
        """The maxima, each as far as the largest bound of its window (the largest of values
        each within e of the exact ones is within the largest e of the exact largest); the
        selection exact."""
        f = self.exact
        value, selection = f.maxpool2d(x.value, pool)
        spread, _ = f.maxpool2d(x.bound, pool)
        return Bounded(value, spread), Bounded(selection, np.zeros(selection.shape))

    def assign(self, target: Bounded, source: Bounded) -> None:
        target.value[...] = source.value
        target.bound[...] = source.bound


def bounded_predictions(
    network: Network,
    loss: Loss | None,
    features: Sequence[Array],
    precision: str = "float32",
    input_error: float = 0.0,
) -> tuple[Array, Array]:
    """The exact predictions (or outputs, without a loss) of a network for `features` (one array
    an input, in order), and the bound of an engine at `precision` there: (rows, outputs) each.
    `input_error` is how far, relative to each feature, the features it is fed may be from these
    (2**-23: an exported pipeline's rounding of its own float64 features)."""
    engine = Propagated(precision)
    bound = network.put(engine)  # type: ignore[arg-type]
    xs = [
        Tensor(
            engine.put(x, input_error * np.abs(np.asarray(x, np.float64))),
            tuple(np.shape(x)),
            engine,  # type: ignore[arg-type]
            None,
            "int64" if np.asarray(x).dtype.kind in "iu" else "float32",
        )
        for x in features
    ]
    out = network.forward(xs, bound, Pass(engine, False, None))  # type: ignore[arg-type]
    rows, width = out.shape[0], network.outputs
    if loss is None:
        made: Bounded = engine.reshape(out.handle, (rows, width))
    else:
        made = loss.predictions(engine, out.handle, rows, width)  # type: ignore[arg-type]
    return made.value, made.bound
