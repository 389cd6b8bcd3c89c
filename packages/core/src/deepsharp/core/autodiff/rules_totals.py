"""The rules of totals: products (matmul, affine, stacks of products), sums and means, softmax
and log-softmax, the losses' terms (binary and categorical cross-entropy) and a batch's total,
each forward beside its way back. Importing the module enters them in `RULES`."""

from __future__ import annotations

import math
from typing import Any

from deepsharp.core.autodiff.plan import on_host
from deepsharp.core.autodiff.rulebook import handle_of, output_of, shape_of
from deepsharp.core.autodiff.tensor import RULES, Grads, Node, Rule, Tensor, Value, register
from deepsharp.core.engine import Engine, Handle, fused
from deepsharp.core.errors import ShapeError

__all__: list[str] = []


@register
class Matmul(Rule):
    name = "matmul"
    keeps_output = False

    def check(self, inputs: tuple[Value, ...], attrs: dict[str, Any]) -> None:
        a, b = shape_of(inputs[0]), shape_of(inputs[1])
        if (
            len(a) != 2
            or len(b) != 2
            or (
                (a[0] if attrs.get("transpose_a") else a[1])
                != (b[1] if attrs.get("transpose_b") else b[0])
            )
        ):
            raise ShapeError(f"matmul: shapes {a} and {b} do not multiply")

    def forward(
        self, engine: Engine, a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False
    ) -> tuple[Handle, Any]:
        return engine.matmul(a, b, transpose_a, transpose_b), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        a, b = node.inputs
        assert isinstance(a, Tensor) and isinstance(b, Tensor)
        ta, tb = node.attrs.get("transpose_a", False), node.attrs.get("transpose_b", False)
        ga = gb = None
        if node.needs[0]:
            ga = (
                engine.matmul(b.handle, grad, tb, True)
                if ta
                else engine.matmul(grad, b.handle, False, not tb)
            )
        if node.needs[1]:
            gb = (
                engine.matmul(grad, a.handle, True, ta)
                if tb
                else engine.matmul(a.handle, grad, not ta, False)
            )
        return ga, gb


@register
class Affine(Rule):
    """x @ w + b in one step (a dense layer): one node on the tape instead of two, and one call
    (`fused.matmul_bias`) where the engine has a kernel for it. Weights (in, out), or stored
    (out, in) with `transpose_b` (attention's projections, laid out as PyTorch's)."""

    name = "affine"
    keeps_output = False

    def check(self, inputs: tuple[Value, ...], attrs: dict[str, Any]) -> None:
        xs, ws, bs = (shape_of(value) for value in inputs)
        tb = attrs.get("transpose_b", False)
        if len(xs) != 2 or len(ws) != 2 or xs[1] != ws[tb] or bs != (ws[not tb],):
            stored = " (weights stored (out, in))" if tb else ""
            raise ShapeError(f"affine: shapes {xs} @ {ws} + {bs} do not fit{stored}")

    def forward(
        self, engine: Engine, x: Any, w: Any, b: Any, transpose_b: bool = False
    ) -> tuple[Handle, Any]:
        return fused.matmul_bias(engine, x, w, b, transpose_b), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x, w, _ = node.inputs
        assert isinstance(x, Tensor) and isinstance(w, Tensor)
        tb = node.attrs.get("transpose_b", False)
        gw = None
        if node.needs[1]:
            gw = (
                engine.matmul(grad, x.handle, True, False)
                if tb
                else engine.matmul(x.handle, grad, True, False)
            )
        return (
            engine.matmul(grad, w.handle, False, not tb) if node.needs[0] else None,
            gw,
            engine.sum(grad, (0,)) if node.needs[2] else None,
        )


@register
class BatchMatmul(Rule):
    """A product of stacks (attention's): a (..., m, k) @ b (..., k, n) with the same leading
    axes, each stack transposed where asked (a fast path); or stacks a (..., m, k) times one
    matrix b (k, n) shared by all (a dense layer over a sequence): a's stacks as the rows of one
    product, the same bits as row by row."""

    name = "batch_matmul"
    keeps_output = False

    def check(self, inputs: tuple[Value, ...], attrs: dict[str, Any]) -> None:
        a, b = shape_of(inputs[0]), shape_of(inputs[1])
        ta, tb = attrs.get("transpose_a", False), attrs.get("transpose_b", False)
        shared = len(b) == 2 and len(a) > 2
        if (
            len(a) < 2
            or len(b) < 2
            or (not shared and a[:-2] != b[:-2])
            or (shared and ta)
            or (a[-2] if ta else a[-1]) != (b[-1] if tb else b[-2])
        ):
            raise ShapeError(
                f"matmul: shapes {a} and {b} do not multiply: stacks (..., m, k) @ (..., k, n) "
                "take the same leading axes, or one matrix (k, n) shared by every stack "
                "(without transpose_a)"
            )

    def forward(
        self, engine: Engine, a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False
    ) -> tuple[Handle, Any]:
        a_shape, b_shape = engine.shape(a), engine.shape(b)
        if len(b_shape) == 2 and len(a_shape) > 2:  # one matrix for every stack
            rows = engine.reshape(a, (-1, a_shape[-1]))
            out = engine.matmul(rows, b, False, transpose_b)
            return engine.reshape(out, (*a_shape[:-1], engine.shape(out)[1])), None
        return fused.batch_matmul(engine, a, b, transpose_a, transpose_b), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        a, b = node.inputs
        assert isinstance(a, Tensor) and isinstance(b, Tensor)
        ta, tb = node.attrs.get("transpose_a", False), node.attrs.get("transpose_b", False)
        ga = gb = None
        if b.ndim == 2:  # shared: the stacks' rows are one product's
            rows = engine.reshape(grad, (-1, node.shape[-1]))
            if node.needs[0]:
                ga = engine.reshape(engine.matmul(rows, b.handle, False, not tb), a.shape)
            if node.needs[1]:
                flat = engine.reshape(a.handle, (-1, a.shape[-1]))
                gb = (
                    engine.matmul(rows, flat, True, False)
                    if tb
                    else engine.matmul(flat, rows, True, False)
                )
            return ga, gb
        product = fused.batch_matmul
        if node.needs[0]:
            ga = (
                product(engine, b.handle, grad, tb, True)
                if ta
                else product(engine, grad, b.handle, False, not tb)
            )
        if node.needs[1]:
            gb = (
                product(engine, grad, a.handle, True, ta)
                if tb
                else product(engine, a.handle, grad, not ta, False)
            )
        return ga, gb


def _restore(
    engine: Engine, grad: Handle, shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool
) -> Handle:
    """A reduction's gradient spread back over the places it reduced."""
    if not keepdims:
        kept = tuple(1 if i in axes else size for i, size in enumerate(shape))
        grad = engine.reshape(grad, kept)
    return engine.broadcast_to(grad, shape)


@register
class Sum(Rule):
    name = "sum"
    keeps_output = keeps_inputs = False  # shapes are all its way back reads

    def forward(
        self, engine: Engine, x: Any, axes: tuple[int, ...], keepdims: bool = False
    ) -> tuple[Handle, Any]:
        return engine.sum(x, axes, keepdims), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x = node.inputs[0]
        assert isinstance(x, Tensor)
        return (_restore(engine, grad, x.shape, node.attrs["axes"], node.attrs["keepdims"]),)


@register
class Mean(Rule):
    name = "mean"
    keeps_output = keeps_inputs = False  # shapes are all its way back reads

    def forward(
        self, engine: Engine, x: Any, axes: tuple[int, ...], keepdims: bool = False
    ) -> tuple[Handle, Any]:
        return engine.mean(x, axes, keepdims), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x = node.inputs[0]
        assert isinstance(x, Tensor)
        count = 1
        for axis in node.attrs["axes"]:
            count *= x.shape[axis]
        spread = _restore(engine, grad, x.shape, node.attrs["axes"], node.attrs["keepdims"])
        return (engine.div(spread, float(count)),)


@register
class LogSoftmax(Rule):
    """log(softmax(x)) over the last axis, taken as x - max - log(sum(exp(x - max)))."""

    name = "log_softmax"
    keeps_inputs = False  # its way back reads its output only

    def forward(self, engine: Engine, x: Any) -> tuple[Handle, Any]:
        last = (len(engine.shape(x)) - 1,)
        shifted = engine.sub(x, engine.max(x, last, True))
        return engine.sub(shifted, engine.log(engine.sum(engine.exp(shifted), last, True))), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        last = (len(node.shape) - 1,)
        softmax = engine.exp(output_of(node))
        return (engine.sub(grad, engine.mul(softmax, engine.sum(grad, last, True))),)


@register
class Softmax(Rule):
    """exp(x - max) / sum(exp(x - max)) over the last axis: one exponential, and a way back
    that reads its output only, y·(g - sum(g·y)) (attention's weights, the Softmax layer)."""

    name = "softmax"
    keeps_inputs = False  # its way back reads its output only

    def forward(self, engine: Engine, x: Any) -> tuple[Handle, Any]:
        last = (len(engine.shape(x)) - 1,)
        exps = engine.exp(engine.sub(x, engine.max(x, last, True)))
        return engine.div(exps, engine.sum(exps, last, True)), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        last = (len(node.shape) - 1,)
        out = output_of(node)
        return (engine.mul(out, engine.sub(grad, engine.sum(engine.mul(grad, out), last, True))),)


@register
class BinaryCrossEntropyTerms(Rule):
    """Each value's binary cross entropy from logits z and targets y, without overflow or
    cancellation: max(z, 0) - z * y + log(1 + exp(-|z|)) (softplus(z) - z * y cancels to 0
    for a confident positive: z = 20, y = 1), a fast path (`fused.binary_cross_entropy_terms`)."""

    name = "binary_cross_entropy_terms"
    keeps_output = False

    def forward(self, engine: Engine, z: Any, y: Any) -> tuple[Handle, Any]:
        return fused.binary_cross_entropy_terms(engine, z, y), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        z, y = node.inputs
        assert isinstance(z, Tensor)
        gz = engine.mul(grad, engine.sub(engine.sigmoid(z.handle), handle_of(y)))
        gy = engine.neg(engine.mul(grad, z.handle)) if node.needs[1] else None
        return gz, gy


@register
class BinaryCrossEntropy(Rule):
    """The mean over every value of the binary cross entropy from logits z and targets y."""

    name = "binary_cross_entropy"
    keeps_output = False

    def forward(self, engine: Engine, z: Any, y: Any) -> tuple[Handle, Any]:
        terms = RULES["binary_cross_entropy_terms"].forward(engine, z, y)[0]
        return engine.mean(terms, tuple(range(len(engine.shape(z))))), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        z, y = node.inputs
        assert isinstance(z, Tensor)
        scale = engine.div(grad, float(math.prod(z.shape)))
        gz = engine.mul(engine.sub(engine.sigmoid(z.handle), handle_of(y)), scale)
        gy = engine.neg(engine.mul(z.handle, scale)) if node.needs[1] else None
        return gz, gy


@register
class CrossEntropy(Rule):
    """The mean over rows of -sum(t * log_softmax(z)) for logits z (N, C) and targets t (N, C),
    each row's terms where t is 0 taken as 0 (selected, not multiplied: a logit of -3e38 gives
    a log_softmax of -inf, and 0 * -inf is NaN). For one-hot t: the target's -log probability."""

    name = "cross_entropy"
    keeps_output = False

    def check(self, inputs: tuple[Value, ...], attrs: dict[str, Any]) -> None:
        z, t = (shape_of(value) for value in inputs)
        if len(z) != 2 or z != t:
            raise ShapeError(
                f"cross_entropy: logits of shape {z} and targets of shape {t}; both (rows, classes)"
            )

    def forward(self, engine: Engine, z: Any, t: Any) -> tuple[Handle, Any]:
        shape = engine.shape(z)
        last = (len(shape) - 1,)
        shifted = engine.sub(z, engine.max(z, last, True))
        logs = engine.sub(shifted, engine.log(engine.sum(engine.exp(shifted), last, True)))
        picked = engine.where(t, engine.mul(t, logs), 0.0)
        total = engine.sum(picked, tuple(range(len(shape))))
        return engine.sub(0.0, engine.div(total, float(shape[0]))), logs  # 0 - x: never -0.0

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        z, t = node.inputs
        logs = node.saved[1]
        scale = engine.div(grad, float(z.shape[0]))  # type: ignore[union-attr]
        weight = engine.sum(handle_of(t), (1,), True)  # 1 a row for one-hot targets
        gz = engine.mul(engine.sub(engine.mul(engine.exp(logs), weight), handle_of(t)), scale)
        gt = engine.neg(engine.mul(logs, scale)) if node.needs[1] else None
        return gz, gt


@register
class BatchTotal(Rule):
    """A total this process took over its own rows of a batch, summed over every process's
    (`reduce`: in rank order, the same bits on every process) — a data-parallel pass's statistics
    of the whole batch. Its way back sums the same way: each process's gradient of the total,
    weighted by its share of the batch (`weight`, as the processes' gradients are before their
    sum), added over the processes and unweighted again, so that once the step's sum weighs
    this process's gradients by its share, the total's part is every process's."""

    name = "batch_total"
    keeps_output = keeps_inputs = False  # its way back reads nothing but its gradient

    def forward(self, engine: Engine, x: Any, reduce: Any, weight: float) -> tuple[Handle, Any]:
        # The sum over processes is host work (a collective): a compiled step runs it again.
        return on_host(engine, reduce, x), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        reduce, weight = node.attrs["reduce"], node.attrs["weight"]
        return (engine.div(on_host(engine, reduce, engine.mul(grad, weight)), weight),)


@register
class LayerNorm(Rule):
    """x (..., D), scale (D,), shift (D,) -> each position's last axis made mean 0 and variance
    1, scaled and shifted; epsilon added to the variance. A fast path each way
    (`fused.layer_norm`, `fused.layer_norm_back`), their references in primitives."""

    name = "layer_norm"
    keeps_output = False  # its way back reads its inputs

    def check(self, inputs: tuple[Value, ...], attrs: dict[str, Any]) -> None:
        x, scale, shift = (shape_of(value) for value in inputs)
        if not x or scale != (x[-1],) or shift != (x[-1],):
            raise ShapeError(
                f"layer_norm: x of shape {x}, scale {scale} and shift {shift}: the scale and the "
                "shift one value each along x's last axis"
            )

    def forward(
        self, engine: Engine, x: Any, scale: Any, shift: Any, epsilon: float
    ) -> tuple[Handle, Any]:
        return fused.layer_norm(engine, x, scale, shift, epsilon), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x, scale, _ = node.inputs
        assert isinstance(x, Tensor) and isinstance(scale, Tensor)
        toward = fused.layer_norm_back(engine, x.handle, scale.handle, grad, node.attrs["epsilon"])
        return tuple(g if need else None for g, need in zip(toward, node.needs, strict=True))
