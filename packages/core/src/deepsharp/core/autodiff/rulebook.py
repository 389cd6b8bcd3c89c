"""The rulebook: every operation's forward in engine operations, beside its rule.

A rule says how an operation sends the gradient of its output back to its inputs, written once
in engine operations — so every engine gets its gradients from the same rules. A rule is asked
only for the inputs that lead to a tensor asked for (`node.needs`); it returns None for the rest.
`apply` runs a rule forward and, while a `Recording` is open, leaves its node on the tape.
"""

from __future__ import annotations

import math
from typing import Any

from deepsharp.core.autodiff.plan import on_host
from deepsharp.core.autodiff.tensor import RULES, Grads, Node, Rule, Tensor, Value, register
from deepsharp.core.engine import Engine, Handle, fused
from deepsharp.core.errors import ShapeError

__all__ = ["same_padding"]


def _shape(value: Value) -> tuple[int, ...]:
    return value.shape if isinstance(value, Tensor) else ()


def _output(node: Node) -> Handle:
    return node.saved[0]


def _unbroadcast(
    engine: Engine, grad: Handle, grad_shape: tuple[int, ...], shape: tuple[int, ...]
) -> Handle:
    """Sum a broadcast gradient back down to `shape`."""
    if grad_shape == shape:
        return grad
    lead = len(grad_shape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, size in enumerate(shape) if size == 1 and grad_shape[lead + i] != 1
    )
    total = engine.sum(grad, axes) if axes else grad
    return engine.reshape(total, shape)


# --- value by value, with broadcasting -------------------------------------------------------


@register
class Add(Rule):
    name = "add"
    keeps_output = keeps_inputs = False  # shapes are all its way back reads

    def forward(self, engine: Engine, a: Any, b: Any) -> tuple[Handle, Any]:
        return engine.add(a, b), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        a, b = node.inputs
        return (
            _unbroadcast(engine, grad, node.shape, _shape(a)) if node.needs[0] else None,
            _unbroadcast(engine, grad, node.shape, _shape(b)) if node.needs[1] else None,
        )


@register
class Sub(Rule):
    name = "sub"
    keeps_output = keeps_inputs = False  # shapes are all its way back reads

    def forward(self, engine: Engine, a: Any, b: Any) -> tuple[Handle, Any]:
        return engine.sub(a, b), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        a, b = node.inputs
        return (
            _unbroadcast(engine, grad, node.shape, _shape(a)) if node.needs[0] else None,
            _unbroadcast(engine, engine.neg(grad), node.shape, _shape(b))
            if node.needs[1]
            else None,
        )


def _handle(value: Value) -> Any:
    return value.handle if isinstance(value, Tensor) else value


@register
class Mul(Rule):
    name = "mul"
    keeps_output = False

    def forward(self, engine: Engine, a: Any, b: Any) -> tuple[Handle, Any]:
        return engine.mul(a, b), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        a, b = node.inputs
        return (
            _unbroadcast(engine, engine.mul(grad, _handle(b)), node.shape, _shape(a))
            if node.needs[0]
            else None,
            _unbroadcast(engine, engine.mul(grad, _handle(a)), node.shape, _shape(b))
            if node.needs[1]
            else None,
        )


@register
class Div(Rule):
    name = "div"

    def forward(self, engine: Engine, a: Any, b: Any) -> tuple[Handle, Any]:
        return engine.div(a, b), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        a, b = node.inputs
        towards_a = engine.div(grad, _handle(b))
        return (
            _unbroadcast(engine, towards_a, node.shape, _shape(a)) if node.needs[0] else None,
            _unbroadcast(
                engine, engine.neg(engine.mul(towards_a, _output(node))), node.shape, _shape(b)
            )
            if node.needs[1]
            else None,
        )


@register
class Maximum(Rule):
    """The larger of two values; where they are equal, the gradient goes to the first."""

    name = "maximum"
    keeps_output = False

    def forward(self, engine: Engine, a: Any, b: Any) -> tuple[Handle, Any]:
        return engine.maximum(a, b), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        a, b = node.inputs
        to_b = engine.mul(grad, engine.greater(_handle(b), _handle(a)))
        return (
            _unbroadcast(engine, engine.sub(grad, to_b), node.shape, _shape(a))
            if node.needs[0]
            else None,
            _unbroadcast(engine, to_b, node.shape, _shape(b)) if node.needs[1] else None,
        )


@register
class Greater(Rule):
    """1.0 where a > b, else 0.0: a step, whose gradient is 0 wherever it has one. Recorded like
    any rule, so that a replayed pass computes it again from its inputs (a padding mask made
    from a batch's ids)."""

    name = "greater"
    keeps_output = keeps_inputs = False  # shapes are all its way back reads

    def forward(self, engine: Engine, a: Any, b: Any) -> tuple[Handle, Any]:
        return engine.greater(a, b), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        a, b = node.inputs
        return (
            engine.zeros(_shape(a)) if node.needs[0] else None,
            engine.zeros(_shape(b)) if node.needs[1] else None,
        )


class _Unary(Rule):
    def forward(self, engine: Engine, x: Any) -> tuple[Handle, Any]:
        return getattr(engine, self.name)(x), None

    def local(self, engine: Engine, x: Handle, out: Handle) -> Handle:
        """d out / d x, value by value."""
        raise NotImplementedError

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x = node.inputs[0]
        assert isinstance(x, Tensor)
        return (engine.mul(grad, self.local(engine, x.handle, _output(node))),)


@register
class Neg(_Unary):
    name = "neg"
    keeps_output = keeps_inputs = False  # its way back reads nothing

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        return (engine.neg(grad),)


@register
class Exp(_Unary):
    name = "exp"
    keeps_inputs = False  # its way back reads its output only

    def local(self, engine: Engine, x: Handle, out: Handle) -> Handle:
        return out


@register
class Log(_Unary):
    name = "log"

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x = node.inputs[0]
        assert isinstance(x, Tensor)
        return (engine.div(grad, x.handle),)


@register
class Log1p(_Unary):
    name = "log1p"

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x = node.inputs[0]
        assert isinstance(x, Tensor)
        return (engine.div(grad, engine.add(x.handle, 1.0)),)


@register
class Sqrt(_Unary):
    name = "sqrt"
    keeps_inputs = False  # its way back reads its output only

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        return (engine.div(engine.mul(grad, 0.5), _output(node)),)


@register
class Tanh(_Unary):
    name = "tanh"
    keeps_inputs = False  # its way back reads its output only

    def local(self, engine: Engine, x: Handle, out: Handle) -> Handle:
        return engine.sub(1.0, engine.mul(out, out))


@register
class Sigmoid(_Unary):
    name = "sigmoid"
    keeps_inputs = False  # its way back reads its output only

    def local(self, engine: Engine, x: Handle, out: Handle) -> Handle:
        return engine.mul(out, engine.sub(1.0, out))


@register
class Relu(_Unary):
    name = "relu"
    keeps_inputs = False  # its output says where the input was positive: the input can go

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        return (fused.relu_back(engine, _output(node), grad),)


@register
class Abs(_Unary):
    name = "abs"

    def local(self, engine: Engine, x: Handle, out: Handle) -> Handle:
        return engine.sub(engine.greater(x, 0.0), engine.greater(0.0, x))


TWO_OVER_ROOT_PI = 2.0 / math.sqrt(math.pi)


@register
class Erf(_Unary):
    """The error function (GELU's exact form): a fast path, its reference in primitives."""

    name = "erf"
    keeps_output = False  # its way back reads its input only

    def forward(self, engine: Engine, x: Any) -> tuple[Handle, Any]:
        return fused.erf(engine, x), None

    def local(self, engine: Engine, x: Handle, out: Handle) -> Handle:
        return engine.mul(engine.exp(engine.neg(engine.mul(x, x))), TWO_OVER_ROOT_PI)


# --- totals ----------------------------------------------------------------------------------


@register
class Matmul(Rule):
    name = "matmul"
    keeps_output = False

    def check(self, inputs: tuple[Value, ...], attrs: dict[str, Any]) -> None:
        a, b = _shape(inputs[0]), _shape(inputs[1])
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
    """x @ w + b in one step (a dense layer): one node on the tape instead of two."""

    name = "affine"
    keeps_output = False

    def check(self, inputs: tuple[Value, ...], attrs: dict[str, Any]) -> None:
        xs, ws, bs = (_shape(value) for value in inputs)
        if len(xs) != 2 or len(ws) != 2 or xs[1] != ws[0] or bs != (ws[1],):
            raise ShapeError(f"affine: shapes {xs} @ {ws} + {bs} do not fit")

    def forward(self, engine: Engine, x: Any, w: Any, b: Any) -> tuple[Handle, Any]:
        return engine.add(engine.matmul(x, w), b), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x, w, _ = node.inputs
        assert isinstance(x, Tensor) and isinstance(w, Tensor)
        return (
            engine.matmul(grad, w.handle, False, True) if node.needs[0] else None,
            engine.matmul(x.handle, grad, True, False) if node.needs[1] else None,
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
        a, b = _shape(inputs[0]), _shape(inputs[1])
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
        softmax = engine.exp(_output(node))
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
        out = _output(node)
        return (engine.mul(out, engine.sub(grad, engine.sum(engine.mul(grad, out), last, True))),)


@register
class BinaryCrossEntropyTerms(Rule):
    """Each value's binary cross entropy from logits z and targets y, without overflow or
    cancellation: max(z, 0) - z * y + log(1 + exp(-|z|)) (softplus(z) - z * y cancels to 0
    for a confident positive: z = 20, y = 1)."""

    name = "binary_cross_entropy_terms"
    keeps_output = False

    def forward(self, engine: Engine, z: Any, y: Any) -> tuple[Handle, Any]:
        tail = engine.log1p(engine.exp(engine.neg(engine.abs(z))))
        return engine.add(engine.sub(engine.relu(z), engine.mul(z, y)), tail), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        z, y = node.inputs
        assert isinstance(z, Tensor)
        gz = engine.mul(grad, engine.sub(engine.sigmoid(z.handle), _handle(y)))
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
        gz = engine.mul(engine.sub(engine.sigmoid(z.handle), _handle(y)), scale)
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
        z, t = (_shape(value) for value in inputs)
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
        weight = engine.sum(_handle(t), (1,), True)  # 1 a row for one-hot targets
        gz = engine.mul(engine.sub(engine.mul(engine.exp(logs), weight), _handle(t)), scale)
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


# --- images ----------------------------------------------------------------------------------


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TensorFlow's 'same': the output has ceil(size / stride) places; extra zero goes after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


@register
class Conv2D(Rule):
    name = "conv2d"
    keeps_output = False  # its largest tensor, read by nothing on the way back

    def forward(
        self,
        engine: Engine,
        x: Any,
        w: Any,
        *bias: Any,
        stride: int,
        padding: tuple[tuple[int, int], ...],
    ) -> tuple[Handle, Any]:
        if bias:  # the bias added inside the convolution: one pass over the output, not two
            return fused.conv2d_bias(engine, x, w, bias[0], stride, (padding[0], padding[1])), None
        return engine.conv2d(x, w, stride, (padding[0], padding[1])), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x, w = node.inputs[:2]
        assert isinstance(x, Tensor) and isinstance(w, Tensor)
        stride, padding = node.attrs["stride"], node.attrs["padding"]
        gx = (
            engine.conv2d_fold(grad, w.handle, (x.shape[2], x.shape[3]), stride, padding)
            if node.needs[0]
            else None
        )
        kernel = (w.shape[2], w.shape[3])
        if len(node.inputs) == 3 and node.needs[1] and node.needs[2]:
            # The filters' and the biases' gradients from one pass over grad.
            gw, gb = fused.conv2d_weight_bias_grad(engine, x.handle, grad, kernel, stride, padding)
            return gx, gw, gb
        gw = (
            engine.conv2d_weight_grad(x.handle, grad, kernel, stride, padding)
            if node.needs[1]
            else None
        )
        if len(node.inputs) == 2:
            return gx, gw
        return gx, gw, engine.sum(grad, (0, 2, 3)) if node.needs[2] else None


@register
class MaxPool2D(Rule):
    name = "maxpool2d"
    keeps_output = keeps_inputs = False  # the selection and the input's shape suffice

    def forward(self, engine: Engine, x: Any, pool: int) -> tuple[Handle, Any]:
        return engine.maxpool2d(x, pool)

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x = node.inputs[0]
        assert isinstance(x, Tensor)
        image = (x.shape[2], x.shape[3])
        return (engine.maxpool2d_back(grad, node.saved[1], image, node.attrs["pool"]),)


@register
class MaxPool2DPair(Rule):
    """Max-pooling over windows of two sizes, (height, width) (a fast path)."""

    name = "maxpool2d_pair"
    keeps_output = keeps_inputs = False  # the selection and the input's shape suffice

    def check(self, inputs: tuple[Value, ...], attrs: dict[str, Any]) -> None:
        shape, pool = _shape(inputs[0]), tuple(attrs["pool"])
        if (
            len(shape) != 4
            or len(pool) != 2
            or not all(0 < p <= n for p, n in zip(pool, shape[2:]))
        ):
            raise ShapeError(
                f"maxpool2d: images of shape {shape} cannot be pooled over windows of {pool}: "
                "images are (N, C, H, W), each at least as large as the window"
            )

    def forward(self, engine: Engine, x: Any, pool: tuple[int, int]) -> tuple[Handle, Any]:
        return fused.maxpool2d_pair(engine, x, pool)

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x = node.inputs[0]
        assert isinstance(x, Tensor)
        image, pool = (x.shape[2], x.shape[3]), node.attrs["pool"]
        return (fused.maxpool2d_pair_back(engine, grad, node.saved[1], image, pool),)


# --- moves -----------------------------------------------------------------------------------


@register
class Reshape(Rule):
    moves = True  # int64 ids stay ids
    name = "reshape"
    keeps_output = keeps_inputs = False  # shapes are all its way back reads

    def forward(self, engine: Engine, x: Any, shape: tuple[int, ...]) -> tuple[Handle, Any]:
        return engine.reshape(x, shape), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x = node.inputs[0]
        assert isinstance(x, Tensor)
        return (engine.reshape(grad, x.shape),)


@register
class Transpose(Rule):
    moves = True  # int64 ids stay ids
    name = "transpose"
    keeps_output = keeps_inputs = False  # shapes are all its way back reads

    def forward(self, engine: Engine, x: Any, axes: tuple[int, ...]) -> tuple[Handle, Any]:
        return engine.transpose(x, axes), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        axes = node.attrs["axes"]
        inverse = tuple(sorted(range(len(axes)), key=lambda i: axes[i]))
        return (engine.transpose(grad, inverse),)


@register
class Slice(Rule):
    moves = True  # int64 ids stay ids
    name = "slice"
    keeps_output = keeps_inputs = False  # shapes are all its way back reads

    def forward(
        self, engine: Engine, x: Any, axis: int, start: int, stop: int
    ) -> tuple[Handle, Any]:
        return engine.slice(x, axis, start, stop), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x = node.inputs[0]
        assert isinstance(x, Tensor)
        axis, start, stop = node.attrs["axis"], node.attrs["start"], node.attrs["stop"]
        widths = [(0, 0)] * len(x.shape)
        widths[axis] = (start, x.shape[axis] - stop)
        return (engine.pad(grad, widths),)


@register
class Pad(Rule):
    moves = True  # int64 ids stay ids
    name = "pad"
    keeps_output = keeps_inputs = False  # shapes are all its way back reads

    def forward(
        self, engine: Engine, x: Any, widths: tuple[tuple[int, int], ...]
    ) -> tuple[Handle, Any]:
        return engine.pad(x, widths), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x = node.inputs[0]
        assert isinstance(x, Tensor)
        for axis, (before, _) in enumerate(node.attrs["widths"]):
            if node.shape[axis] != x.shape[axis]:
                grad = engine.slice(grad, axis, before, before + x.shape[axis])
        return (grad,)


@register
class Concatenate(Rule):
    moves = True  # int64 ids stay ids
    name = "concatenate"
    keeps_output = keeps_inputs = False  # shapes are all its way back reads

    def forward(self, engine: Engine, *xs: Any, axis: int) -> tuple[Handle, Any]:
        return engine.concatenate(xs, axis), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        axis = node.attrs["axis"]
        sizes = [x.shape[axis] for x in node.inputs if isinstance(x, Tensor)]
        parts = engine.split(grad, sizes, axis)
        return tuple(part if need else None for part, need in zip(parts, node.needs))


@register
class BroadcastTo(Rule):
    moves = True  # int64 ids stay ids
    name = "broadcast_to"
    keeps_output = keeps_inputs = False  # shapes are all its way back reads

    def forward(self, engine: Engine, x: Any, shape: tuple[int, ...]) -> tuple[Handle, Any]:
        return engine.broadcast_to(x, shape), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x = node.inputs[0]
        assert isinstance(x, Tensor)
        return (_unbroadcast(engine, grad, node.shape, x.shape),)


@register
class TakeRows(Rule):
    """Rows of a table picked by int64 indices of any shape (an embedding): table (V, ...) and
    ids (N, ...) -> (N, ..., *table.shape[1:]). Its way back adds each row's gradients into the
    row it came from (`add_rows`, a fast path); the indices get none."""

    name = "take_rows"
    keeps_output = False  # its way back reads the indices and the table's shape

    def check(self, inputs: tuple[Value, ...], attrs: dict[str, Any]) -> None:
        if len(_shape(inputs[0])) < 1 or not isinstance(inputs[1], Tensor):
            raise ShapeError(
                f"take_rows: a table of shape {_shape(inputs[0])} and indices {inputs[1]!r}: "
                "a table of at least one axis and an int64 tensor of indices"
            )

    def forward(self, engine: Engine, table: Any, ids: Any) -> tuple[Handle, Any]:
        return engine.take_rows(table, ids), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        table, ids = node.inputs
        assert isinstance(table, Tensor) and isinstance(ids, Tensor)
        sent = fused.add_rows(engine, grad, ids.handle, table.shape[0]) if node.needs[0] else None
        return sent, None
