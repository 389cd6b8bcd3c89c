"""The rulebook: every operation's forward in engine operations, beside its rule.

A rule says how an operation sends the gradient of its output back to its inputs, written once
in engine operations — so every engine gets its gradients from the same rules. A rule is asked
only for the inputs that lead to a tensor asked for (`node.needs`); it returns None for the rest.
`apply` runs a rule forward and, while a `Recording` is open, leaves its node on the tape.

This module holds the rules of operations value by value (with broadcasting) and the helpers
every rule uses; the other families are each a module beside it: `rules_totals` (products,
totals, softmax and the losses' terms), `rules_images` (convolution and pooling), `rules_moves`
(reshapes, slices, pads, rows picked by index). Each rule registers itself in `RULES` when its
class is made; `deepsharp.core.autodiff` imports every family, so all are entered.
"""

from __future__ import annotations

import math
from typing import Any

from deepsharp.core.autodiff.tensor import Grads, Node, Rule, Tensor, Value, register
from deepsharp.core.engine import Engine, Handle, fused

__all__ = ["handle_of", "output_of", "shape_of", "unbroadcast"]


def shape_of(value: Value) -> tuple[int, ...]:
    """An input's shape (a number's is ())."""
    return value.shape if isinstance(value, Tensor) else ()


def output_of(node: Node) -> Handle:
    """The output of a rule that keeps it (saved first)."""
    return node.saved[0]


def unbroadcast(
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
            unbroadcast(engine, grad, node.shape, shape_of(a)) if node.needs[0] else None,
            unbroadcast(engine, grad, node.shape, shape_of(b)) if node.needs[1] else None,
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
            unbroadcast(engine, grad, node.shape, shape_of(a)) if node.needs[0] else None,
            unbroadcast(engine, engine.neg(grad), node.shape, shape_of(b))
            if node.needs[1]
            else None,
        )


def handle_of(value: Value) -> Any:
    """What an engine takes for an input: a tensor's handle, or the number itself."""
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
            unbroadcast(engine, engine.mul(grad, handle_of(b)), node.shape, shape_of(a))
            if node.needs[0]
            else None,
            unbroadcast(engine, engine.mul(grad, handle_of(a)), node.shape, shape_of(b))
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
        towards_a = engine.div(grad, handle_of(b))
        return (
            unbroadcast(engine, towards_a, node.shape, shape_of(a)) if node.needs[0] else None,
            unbroadcast(
                engine, engine.neg(engine.mul(towards_a, output_of(node))), node.shape, shape_of(b)
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
        to_b = engine.mul(grad, engine.greater(handle_of(b), handle_of(a)))
        return (
            unbroadcast(engine, engine.sub(grad, to_b), node.shape, shape_of(a))
            if node.needs[0]
            else None,
            unbroadcast(engine, to_b, node.shape, shape_of(b)) if node.needs[1] else None,
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
            engine.zeros(shape_of(a)) if node.needs[0] else None,
            engine.zeros(shape_of(b)) if node.needs[1] else None,
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
        return (engine.mul(grad, self.local(engine, x.handle, output_of(node))),)


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
        return (engine.div(engine.mul(grad, 0.5), output_of(node)),)


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
        return (fused.relu_back(engine, output_of(node), grad),)


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


@register
class Gelu(_Unary):
    """GELU's exact form, x·Φ(x): a fast path each way (`fused.gelu`, `fused.gelu_back`), their
    references in primitives."""

    name = "gelu"
    keeps_output = False  # its way back reads its input only

    def forward(self, engine: Engine, x: Any) -> tuple[Handle, Any]:
        return fused.gelu(engine, x), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x = node.inputs[0]
        assert isinstance(x, Tensor)
        return (fused.gelu_back(engine, x.handle, grad),)
