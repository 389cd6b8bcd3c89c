"""The rules of images: `same_padding`, the 2-D convolution and max-pooling (square windows and
pairs), each forward beside its way back. Importing the module enters them in `RULES`."""

from __future__ import annotations

from typing import Any

from deepsharp.core.autodiff.rulebook import shape_of
from deepsharp.core.autodiff.tensor import Grads, Node, Rule, Tensor, Value, register
from deepsharp.core.engine import Engine, Handle, fused
from deepsharp.core.errors import ShapeError

__all__ = ["same_padding"]


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
        shape, pool = shape_of(inputs[0]), tuple(attrs["pool"])
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
