"""Fast paths: fused operations, each with a reference written in the engine's primitives.

The core calls every fused operation through this module, `fused.<name>(engine, ...)`: where
the engine offers a method of that name (and the signature given here, without the engine) it
runs that, else the reference below. A new engine is thus the primitives alone; an engine may
add any of these for speed, and the contract suite holds each one it offers to its reference
(`FAST_PATHS`: name -> reference function, taking the engine first).

- `conv2d_bias(x, w, bias, stride, padding)`: the convolution plus each filter's bias (F,).
- `matmul_bias(x, w, bias, transpose_b=False)`: a dense layer's product plus its bias, x (n, k)
  @ w (k, m) (w stored (m, k) with `transpose_b`) + bias (m,) on every row, in one call (where
  an engine has one kernel for it: the product's total starts from the bias, as PyTorch's
  Linear runs it). Reference: `matmul`, then `add` (the calls a dense layer made before).
- `conv2d_weight_bias_grad(x, gy, kernel, stride, padding)`: the filters' gradient and the
  biases' (gy's totals over images and places), as a pair.
- `relu_back(x, grad)`: ReLU's way back: grad where x > 0, else 0.
- `binary_cross_entropy_terms(z, y)`: each value's binary cross entropy from logits z and
  targets y of the same shape, max(z, 0) - z·y + log(1 + e^-|z|) (BinaryCrossEntropy's loss,
  before its mean; so that an engine with a kernel for it runs the loss in one call, not
  seven). Reference: those calls in primitives (the ones the loss made before it had a fast
  path, so the same bits).
- `sgd_update(slots, grads, velocities, *, learning_rate, momentum)`: in place, for each slot:
  v = momentum·v - learning_rate·g; slot += v.
- `adam_update(slots, grads, firsts, seconds, *, step_size, beta1, beta2, epsilon)`: in place
  (Keras's Adam; step_size holds the bias corrections): m += (g - m)(1 - beta1);
  v += (g² - v)(1 - beta2); slot -= step_size·m / (√v + epsilon).
- `decay_update(slots, *, factor)`: in place: each slot times `factor` (AdamW's decoupled
  weight decay, factor = 1 - learning_rate·weight_decay).
- `parts(flat, shapes)`: consecutive parts of a flat tensor, each of its shape: how the core
  lays out slots and an optimizer's memory (an engine that offers it may then do an update over
  all of a flat tensor's parts in one pass).

What networks as graphs need (attention, embeddings, GELU, pooling over a pair), each written in
the primitives an engine had before them, so an engine written before them keeps working:

- `batch_matmul(a, b, transpose_a, transpose_b)`: a product of stacks, a (..., m, k) @ b
  (..., k, n) -> (..., m, n), the same leading axes on both (attention's (N, heads, L, d)), each
  transposing its last two axes when asked. Reference: one 2-D `matmul` a stack.
- `add_rows(values, indices, rows)`: the way back of `take_rows` (an embedding's): a float32
  (rows, *values.shape[indices.ndim:]) of zeros with values[i...] added into row indices[i...],
  indices an int64 handle of any shape. Reference: the one-hot of the flattened indices,
  transposed, times the values flattened to rows (`one_hot`, `matmul`): exact products of 0 and
  1, so each row's total adds the values sent to it. An engine's own must not build the
  one-hot (a vocabulary of 20,000 by a batch's 2,048 ids is 160 MB) and must add in an order of
  its own choosing every time (the same bits run to run).
- `erf(x)`: the error function, value by value (GELU's exact form). Reference: Abramowitz and
  Stegun 7.1.26, erf(x) = 1 - (a1·t + a2·t² + a3·t³ + a4·t⁴ + a5·t⁵)·exp(-x²), t = 1/(1 + p·x)
  for x >= 0 (odd in x), within 1.5e-7 of erf in exact arithmetic; in float32 within 5.4e-7
  (light's primitives, measured over [-7, 7]), inside the value tolerance 1e-5 + 1.3e-6·|ref|.
- `gelu(x)`, `gelu_back(x, grad)`: GELU's exact form, x·Φ(x) = x/2·(1 + erf(x/√2)), and its way
  back, grad·(Φ(x) + x·φ(x)) with φ(x) = e^(-x²/2)/√(2π), value by value (so that an engine with
  a kernel for it passes over a transformer's widest activations once each way, not a dozen
  times). Reference: those formulas in primitives and `erf` (the forward the calls GELU made
  before it had a fast path, so the same bits).
- `layer_norm(x, scale, shift, epsilon)`, `layer_norm_back(x, scale, grad, epsilon)`: each
  position's last axis made mean 0 and variance 1, then scaled and shifted (LayerNorm), and its
  way back: the gradients of x, of the scale and of the shift. Reference: the mean, the centred
  values, their mean square, its root with epsilon, a division, the scale and the shift (the
  calls LayerNorm made before it had a fast path, so the same bits); back, those again and
  dx = (dn - mean(dn) - n·mean(dn·n)) / s with dn = grad·scale, n the normalised values and s
  the root, and the scale's and the shift's totals over the positions.
- `maxpool2d_pair(x, pool)`, `maxpool2d_pair_back(gy, selection, image, pool)`: max-pooling over
  windows of `pool` = (height, width), stride the window, trailing rows and columns dropped; the
  selection (int64) is each window's place of its first maximum counted row by row (0 ..
  height·width - 1), as `maxpool2d`'s is for a square. Reference: each window's values laid out
  in reading order and followed by copies of its first value up to s·s places (s the least
  side whose square holds the window), the windows side by side as s x s squares of one image,
  the square `maxpool2d` / `maxpool2d_back` on those, and moves back. A copy never becomes the
  first maximum: the value it copies comes first. A square window is `maxpool2d` itself.

The recurrent layers (`fused_recurrent`): `lstm_cell(share, state, cell, weight_hh)` and
`lstm_cell_back(dh, dc, i, f, g, o, k, cell)`, one position of an LSTM forward and back (so
that an engine can run a position in a few calls of its own instead of a rule's each); and
`lstm_sequence`, `lstm_sequence_back`, a whole sequence each way (an engine with a fused
kernel for it offers the pair: the torch engine, oneDNN's on the processor); and
`lstm_masked_sequence`, `lstm_masked_sequence_back`, the same over a sequence with a padding
mask, whose marked places carry the state on.

A step's batch: `put_checked(array, *, owned=False)`: the array put on the engine (one
transfer in, exact) and whether every value of it is finite, in one go where the engine can
(libtorch copies and totals it in its own threads); `owned`: the caller hands the array over,
so an engine may keep it as it is instead of copying it. Reference: `put`, and the array's
float32 total on the host (a float64 one where that overflowed).

Families: the convolutions, `matmul_bias`, `batch_matmul` and `add_rows` are totals, held to
the engine's precision (a bias is one more term of each total; `add_rows` is a product with the
one-hot, so a mixed precision may take its values in its half format); `erf`, GELU's pair,
ReLU's way back and the updates are value by value, held to the value tolerance; LayerNorm's
pair is a chain of means, sums and values, and the binary cross entropy's terms a chain of
values, each held to the bound its reference propagates; `parts` and the max-pooling pair
are moves, held bit for bit; `put_checked` is a transfer, exact, its answer exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from deepsharp.core.engine.protocol import Engine, Handle, Padding

__all__ = [
    "FAST_PATHS",
    "adam_update",
    "adam_update_reference",
    "add_rows",
    "binary_cross_entropy_terms",
    "binary_cross_entropy_terms_reference",
    "add_rows_reference",
    "batch_matmul",
    "batch_matmul_reference",
    "conv2d_bias",
    "conv2d_bias_reference",
    "conv2d_weight_bias_grad",
    "conv2d_weight_bias_grad_reference",
    "decay_update",
    "decay_update_reference",
    "erf",
    "erf_reference",
    "gelu",
    "gelu_back",
    "gelu_back_given",
    "gelu_back_reference",
    "gelu_reference",
    "gelu_rising",
    "matmul_bias",
    "matmul_bias_reference",
    "maxpool2d_pair",
    "maxpool2d_pair_back",
    "maxpool2d_pair_back_reference",
    "maxpool2d_pair_reference",
    "parts",
    "parts_reference",
    "relu_back",
    "relu_back_reference",
    "sgd_update",
    "sgd_update_reference",
]

Paddings = tuple[Padding, Padding]


# --- the references, in primitives ------------------------------------------------------------


def conv2d_bias_reference(
    engine: Engine, x: Handle, w: Handle, bias: Handle, stride: int, padding: Paddings
) -> Handle:
    filters = engine.shape(bias)[0]
    out = engine.conv2d(x, w, stride, padding)
    return engine.add(out, engine.reshape(bias, (1, filters, 1, 1)))


def matmul_bias_reference(
    engine: Engine, x: Handle, w: Handle, bias: Handle, transpose_b: bool = False
) -> Handle:
    return engine.add(engine.matmul(x, w, False, transpose_b), bias)


def conv2d_weight_bias_grad_reference(
    engine: Engine,
    x: Handle,
    gy: Handle,
    kernel: tuple[int, int],
    stride: int,
    padding: Paddings,
) -> tuple[Handle, Handle]:
    return engine.conv2d_weight_grad(x, gy, kernel, stride, padding), engine.sum(gy, (0, 2, 3))


def relu_back_reference(engine: Engine, x: Handle, grad: Handle) -> Handle:
    return engine.where(engine.greater(x, 0.0), grad, 0.0)


def binary_cross_entropy_terms_reference(engine: Engine, z: Handle, y: Handle) -> Handle:
    # max(z, 0) - z·y + log1p(e^-|z|): no overflow, and no cancellation of softplus(z) - z·y
    # to 0 for a confident positive (z = 20, y = 1).
    tail = engine.log1p(engine.exp(engine.neg(engine.abs(z))))
    return engine.add(engine.sub(engine.relu(z), engine.mul(z, y)), tail)


def sgd_update_reference(
    engine: Engine,
    slots: Sequence[Handle],
    grads: Sequence[Handle],
    velocities: Sequence[Handle],
    *,
    learning_rate: float,
    momentum: float,
) -> None:
    for slot, grad, velocity in zip(slots, grads, velocities, strict=True):
        kept = engine.mul(velocity, momentum)
        engine.assign(velocity, engine.sub(kept, engine.mul(grad, learning_rate)))
        engine.assign(slot, engine.add(slot, velocity))


def adam_update_reference(
    engine: Engine,
    slots: Sequence[Handle],
    grads: Sequence[Handle],
    firsts: Sequence[Handle],
    seconds: Sequence[Handle],
    *,
    step_size: float,
    beta1: float,
    beta2: float,
    epsilon: float,
) -> None:
    for slot, grad, first, second in zip(slots, grads, firsts, seconds, strict=True):
        engine.assign(first, engine.add(first, engine.mul(engine.sub(grad, first), 1.0 - beta1)))
        square = engine.mul(grad, grad)
        engine.assign(
            second, engine.add(second, engine.mul(engine.sub(square, second), 1.0 - beta2))
        )
        root = engine.add(engine.sqrt(second), epsilon)
        engine.assign(slot, engine.sub(slot, engine.mul(engine.div(first, root), step_size)))


def decay_update_reference(engine: Engine, slots: Sequence[Handle], *, factor: float) -> None:
    for slot in slots:
        engine.assign(slot, engine.mul(slot, factor))


def parts_reference(
    engine: Engine, flat: Handle, shapes: Sequence[tuple[int, ...]]
) -> list[Handle]:
    handles, start = [], 0
    for shape in shapes:
        count = math.prod(shape)
        handles.append(engine.reshape(engine.slice(flat, 0, start, start + count), tuple(shape)))
        start += count
    return handles


def batch_matmul_reference(
    engine: Engine, a: Handle, b: Handle, transpose_a: bool = False, transpose_b: bool = False
) -> Handle:
    a_shape, b_shape = engine.shape(a), engine.shape(b)
    lead = a_shape[:-2]
    if not lead:
        return engine.matmul(a, b, transpose_a, transpose_b)
    stacks = math.prod(lead)
    rows = a_shape[-1] if transpose_a else a_shape[-2]
    columns = b_shape[-2] if transpose_b else b_shape[-1]
    if stacks == 0:
        return engine.zeros((*lead, rows, columns))
    flat_a = engine.reshape(a, (stacks, *a_shape[-2:]))
    flat_b = engine.reshape(b, (stacks, *b_shape[-2:]))
    products = []
    for i in range(stacks):
        one_a = engine.reshape(engine.slice(flat_a, 0, i, i + 1), a_shape[-2:])
        one_b = engine.reshape(engine.slice(flat_b, 0, i, i + 1), b_shape[-2:])
        product = engine.matmul(one_a, one_b, transpose_a, transpose_b)
        products.append(engine.reshape(product, (1, rows, columns)))
    return engine.reshape(engine.concatenate(products, 0), (*lead, rows, columns))


def add_rows_reference(engine: Engine, values: Handle, indices: Handle, rows: int) -> Handle:
    index_shape = engine.shape(indices)
    row_shape = engine.shape(values)[len(index_shape) :]
    count, width = math.prod(index_shape), math.prod(row_shape)
    places = engine.one_hot(engine.reshape(indices, (count,)), rows)  # (count, rows)
    flat = engine.reshape(values, (count, width))
    return engine.reshape(engine.matmul(places, flat, True, False), (rows, *row_shape))


ERF_P = 0.3275911
ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
"""Abramowitz and Stegun 7.1.26's p and a1 .. a5."""


def erf_reference(engine: Engine, x: Handle) -> Handle:
    t = engine.div(1.0, engine.add(engine.mul(engine.abs(x), ERF_P), 1.0))
    poly = engine.mul(t, ERF_A[-1])
    for a in reversed(ERF_A[:-1]):  # Horner: (((a5·t + a4)·t + a3)·t + a2)·t + a1, times t
        poly = engine.mul(engine.add(poly, a), t)
    size = engine.sub(1.0, engine.mul(poly, engine.exp(engine.neg(engine.mul(x, x)))))
    sign = engine.sub(engine.greater(x, 0.0), engine.greater(0.0, x))  # 0 at 0: erf(0) = 0
    return engine.mul(sign, size)


ROOT_HALF = 1.0 / math.sqrt(2.0)
ONE_OVER_ROOT_TWO_PI = 1.0 / math.sqrt(2.0 * math.pi)


def gelu_rising(engine: Engine, x: Handle) -> Handle:
    """1 + erf(x/√2): twice GELU's Φ(x), what its forward and its way back both make."""
    return engine.add(erf(engine, engine.mul(x, ROOT_HALF)), 1.0)


def gelu_reference(engine: Engine, x: Handle) -> Handle:
    return engine.mul(engine.mul(x, gelu_rising(engine, x)), 0.5)


def gelu_back_reference(engine: Engine, x: Handle, grad: Handle) -> Handle:
    return gelu_back_given(engine, x, grad, gelu_rising(engine, x))


def gelu_back_given(engine: Engine, x: Handle, grad: Handle, rising: Handle) -> Handle:
    """GELU's way back from `gelu_rising(x)` made already (an engine may keep its forward's)."""
    pdf = engine.mul(
        engine.exp(engine.neg(engine.mul(engine.mul(x, x), 0.5))), ONE_OVER_ROOT_TWO_PI
    )
    return engine.mul(grad, engine.add(engine.mul(rising, 0.5), engine.mul(x, pdf)))


def _square_side(pool: tuple[int, int]) -> int:
    """The least side s whose s x s square holds a window of pool[0] x pool[1] places."""
    side = math.isqrt(pool[0] * pool[1])
    return side if side * side == pool[0] * pool[1] else side + 1


def maxpool2d_pair_reference(
    engine: Engine, x: Handle, pool: tuple[int, int]
) -> tuple[Handle, Handle]:
    height, width = pool
    if height == width:
        return engine.maxpool2d(x, height)
    count, channels, rows, columns = engine.shape(x)
    out_h, out_w = rows // height, columns // width
    windows, side = out_h * out_w, _square_side(pool)
    x = engine.slice(engine.slice(x, 2, 0, out_h * height), 3, 0, out_w * width)
    grid = engine.reshape(x, (count, channels, out_h, height, out_w, width))
    grid = engine.transpose(grid, (0, 1, 2, 4, 3, 5))
    places = engine.reshape(grid, (count, channels, windows, height * width))
    if side * side > height * width:  # copies of each window's first value fill its square
        first = engine.slice(places, 3, 0, 1)
        copies = (count, channels, windows, side * side - height * width)
        places = engine.concatenate([places, engine.broadcast_to(first, copies)], 3)
    squares = engine.reshape(places, (count, channels, windows, side, side))
    image = engine.transpose(squares, (0, 1, 3, 2, 4))  # the squares side by side
    maxima, selection = engine.maxpool2d(
        engine.reshape(image, (count, channels, side, windows * side)), side
    )
    shape = (count, channels, out_h, out_w)
    return engine.reshape(maxima, shape), engine.reshape(selection, shape)


def maxpool2d_pair_back_reference(
    engine: Engine,
    gy: Handle,
    selection: Handle,
    image: tuple[int, int],
    pool: tuple[int, int],
) -> Handle:
    height, width = pool
    if height == width:
        return engine.maxpool2d_back(gy, selection, image, height)
    count, channels, out_h, out_w = engine.shape(gy)
    windows, side = out_h * out_w, _square_side(pool)
    flat = (count, channels, 1, windows)
    sent = engine.maxpool2d_back(
        engine.reshape(gy, flat),
        engine.reshape(selection, flat),
        (side, windows * side),
        side,
    )  # (N, C, side, windows·side): the squares side by side, as the forward laid them
    squares = engine.transpose(
        engine.reshape(sent, (count, channels, side, windows, side)), (0, 1, 3, 2, 4)
    )
    places = engine.reshape(squares, (count, channels, windows, side * side))
    places = engine.slice(places, 3, 0, height * width)  # the copies got nothing
    grid = engine.reshape(places, (count, channels, out_h, out_w, height, width))
    grid = engine.transpose(grid, (0, 1, 2, 4, 3, 5))
    grid = engine.reshape(grid, (count, channels, out_h * height, out_w * width))
    rest = (image[0] - out_h * height, image[1] - out_w * width)
    if rest == (0, 0):
        return grid
    return engine.pad(grid, [(0, 0), (0, 0), (0, rest[0]), (0, rest[1])])


FAST_PATHS: dict[str, Callable[..., Any]] = {
    "conv2d_bias": conv2d_bias_reference,
    "conv2d_weight_bias_grad": conv2d_weight_bias_grad_reference,
    "matmul_bias": matmul_bias_reference,
    "relu_back": relu_back_reference,
    "binary_cross_entropy_terms": binary_cross_entropy_terms_reference,
    "sgd_update": sgd_update_reference,
    "adam_update": adam_update_reference,
    "decay_update": decay_update_reference,
    "parts": parts_reference,
    "batch_matmul": batch_matmul_reference,
    "add_rows": add_rows_reference,
    "erf": erf_reference,
    "gelu": gelu_reference,
    "gelu_back": gelu_back_reference,
    "maxpool2d_pair": maxpool2d_pair_reference,
    "maxpool2d_pair_back": maxpool2d_pair_back_reference,
}
"""Every fast path an engine may offer: its name -> its reference (taking the engine first)."""


# --- what the core calls: the engine's own where it offers one --------------------------------


def conv2d_bias(
    engine: Engine, x: Handle, w: Handle, bias: Handle, stride: int, padding: Paddings
) -> Handle:
    own = getattr(engine, "conv2d_bias", None)
    if own is not None:
        return own(x, w, bias, stride, padding)
    return conv2d_bias_reference(engine, x, w, bias, stride, padding)


def matmul_bias(
    engine: Engine, x: Handle, w: Handle, bias: Handle, transpose_b: bool = False
) -> Handle:
    own = getattr(engine, "matmul_bias", None)
    if own is not None:
        return own(x, w, bias, transpose_b)
    return matmul_bias_reference(engine, x, w, bias, transpose_b)


def conv2d_weight_bias_grad(
    engine: Engine,
    x: Handle,
    gy: Handle,
    kernel: tuple[int, int],
    stride: int,
    padding: Paddings,
) -> tuple[Handle, Handle]:
    own = getattr(engine, "conv2d_weight_bias_grad", None)
    if own is not None:
        pair: tuple[Handle, Handle] = own(x, gy, kernel, stride, padding)
        return pair
    return conv2d_weight_bias_grad_reference(engine, x, gy, kernel, stride, padding)


def relu_back(engine: Engine, x: Handle, grad: Handle) -> Handle:
    own = getattr(engine, "relu_back", None)
    if own is not None:
        return own(x, grad)
    return relu_back_reference(engine, x, grad)


def binary_cross_entropy_terms(engine: Engine, z: Handle, y: Handle) -> Handle:
    own = getattr(engine, "binary_cross_entropy_terms", None)
    if own is not None:
        return own(z, y)
    return binary_cross_entropy_terms_reference(engine, z, y)


def sgd_update(
    engine: Engine,
    slots: Sequence[Handle],
    grads: Sequence[Handle],
    velocities: Sequence[Handle],
    *,
    learning_rate: float,
    momentum: float,
) -> None:
    own = getattr(engine, "sgd_update", None)
    if own is not None:
        own(slots, grads, velocities, learning_rate=learning_rate, momentum=momentum)
    else:
        sgd_update_reference(
            engine, slots, grads, velocities, learning_rate=learning_rate, momentum=momentum
        )


def adam_update(
    engine: Engine,
    slots: Sequence[Handle],
    grads: Sequence[Handle],
    firsts: Sequence[Handle],
    seconds: Sequence[Handle],
    *,
    step_size: float,
    beta1: float,
    beta2: float,
    epsilon: float,
) -> None:
    settings = {"step_size": step_size, "beta1": beta1, "beta2": beta2, "epsilon": epsilon}
    own = getattr(engine, "adam_update", None)
    if own is not None:
        own(slots, grads, firsts, seconds, **settings)
    else:
        adam_update_reference(engine, slots, grads, firsts, seconds, **settings)


def decay_update(engine: Engine, slots: Sequence[Handle], *, factor: float) -> None:
    own = getattr(engine, "decay_update", None)
    if own is not None:
        own(slots, factor=factor)
    else:
        decay_update_reference(engine, slots, factor=factor)


def parts(engine: Engine, flat: Handle, shapes: Sequence[tuple[int, ...]]) -> list[Handle]:
    own = getattr(engine, "parts", None)
    if own is not None:
        made: list[Handle] = own(flat, shapes)
        return made
    return parts_reference(engine, flat, shapes)


def batch_matmul(
    engine: Engine, a: Handle, b: Handle, transpose_a: bool = False, transpose_b: bool = False
) -> Handle:
    own = getattr(engine, "batch_matmul", None)
    if own is not None:
        return own(a, b, transpose_a, transpose_b)
    return batch_matmul_reference(engine, a, b, transpose_a, transpose_b)


def add_rows(engine: Engine, values: Handle, indices: Handle, rows: int) -> Handle:
    own = getattr(engine, "add_rows", None)
    if own is not None:
        return own(values, indices, rows)
    return add_rows_reference(engine, values, indices, rows)


def erf(engine: Engine, x: Handle) -> Handle:
    own = getattr(engine, "erf", None)
    if own is not None:
        return own(x)
    return erf_reference(engine, x)


def gelu(engine: Engine, x: Handle) -> Handle:
    own = getattr(engine, "gelu", None)
    if own is not None:
        return own(x)
    return gelu_reference(engine, x)


def gelu_back(engine: Engine, x: Handle, grad: Handle) -> Handle:
    own = getattr(engine, "gelu_back", None)
    if own is not None:
        return own(x, grad)
    return gelu_back_reference(engine, x, grad)


def maxpool2d_pair(engine: Engine, x: Handle, pool: tuple[int, int]) -> tuple[Handle, Handle]:
    own = getattr(engine, "maxpool2d_pair", None)
    if own is not None:
        pair: tuple[Handle, Handle] = own(x, pool)
        return pair
    return maxpool2d_pair_reference(engine, x, pool)


def maxpool2d_pair_back(
    engine: Engine,
    gy: Handle,
    selection: Handle,
    image: tuple[int, int],
    pool: tuple[int, int],
) -> Handle:
    own = getattr(engine, "maxpool2d_pair_back", None)
    if own is not None:
        return own(gy, selection, image, pool)
    return maxpool2d_pair_back_reference(engine, gy, selection, image, pool)


# --- gradient clipping: the optimizers' clip_norm and global_clip_norm, as Keras's -------------
# (deepsharp.core.engine.fused_clipping)

from deepsharp.core.engine.fused_clipping import (  # noqa: E402
    clip_norm,
    clip_norm_reference,
    global_clip_norm,
    global_clip_norm_reference,
)

FAST_PATHS.update(clip_norm=clip_norm_reference, global_clip_norm=global_clip_norm_reference)
__all__ += [
    "clip_norm",
    "clip_norm_reference",
    "global_clip_norm",
    "global_clip_norm_reference",
]


# --- LayerNorm: each position's last axis normalised (deepsharp.core.engine.fused_norms) ----

from deepsharp.core.engine.fused_norms import (  # noqa: E402
    layer_norm,
    layer_norm_back,
    layer_norm_back_reference,
    layer_norm_reference,
)

FAST_PATHS.update(layer_norm=layer_norm_reference, layer_norm_back=layer_norm_back_reference)
__all__ += ["layer_norm", "layer_norm_back", "layer_norm_back_reference", "layer_norm_reference"]


# --- a batch onto the engine, checked: the trainer's put of a step's float features ----------


def all_finite(array: Any) -> bool:
    """Whether every value of a float array is finite: its float32 total, one pass (a finite
    total has no NaN or infinity in it); only where that total overflowed, a float64 one."""
    with np.errstate(over="ignore", invalid="ignore"):  # (inf - inf: NaN, the answer, not warned)
        if math.isfinite(np.add.reduce(array, axis=None)):
            return True
        return math.isfinite(np.add.reduce(array, axis=None, dtype=np.float64))


def put_checked_reference(
    engine: Engine, array: Any, *, owned: bool = False
) -> tuple[Handle, bool]:
    """`engine.put(array)` (one transfer in), and whether every value is finite (checked on
    the host first). `owned`: the caller hands the array over (an engine may keep it rather
    than copy it); the reference copies anyway."""
    return engine.put(array), all_finite(array)


def put_checked(engine: Engine, array: Any, *, owned: bool = False) -> tuple[Handle, bool]:
    own = getattr(engine, "put_checked", None)
    if own is not None:
        made: tuple[Handle, bool] = own(array, owned=owned)
        return made
    return put_checked_reference(engine, array, owned=owned)


FAST_PATHS.update(put_checked=put_checked_reference)
__all__ += ["all_finite", "put_checked", "put_checked_reference"]


# --- the recurrent layers' positions (deepsharp.core.engine.fused_recurrent) ------------------

from deepsharp.core.engine.fused_recurrent import (  # noqa: E402
    lstm_cell,
    lstm_cell_back,
    lstm_cell_back_reference,
    lstm_cell_reference,
    lstm_masked_sequence,
    lstm_masked_sequence_back,
    lstm_masked_sequence_back_reference,
    lstm_masked_sequence_reference,
    lstm_sequence,
    lstm_sequence_back,
    lstm_sequence_back_reference,
    lstm_sequence_reference,
)

FAST_PATHS.update(
    lstm_cell=lstm_cell_reference,
    lstm_cell_back=lstm_cell_back_reference,
    lstm_sequence=lstm_sequence_reference,
    lstm_sequence_back=lstm_sequence_back_reference,
    lstm_masked_sequence=lstm_masked_sequence_reference,
    lstm_masked_sequence_back=lstm_masked_sequence_back_reference,
)
__all__ += [
    "lstm_cell",
    "lstm_cell_back",
    "lstm_cell_back_reference",
    "lstm_cell_reference",
    "lstm_masked_sequence",
    "lstm_masked_sequence_back",
    "lstm_masked_sequence_back_reference",
    "lstm_masked_sequence_reference",
    "lstm_sequence",
    "lstm_sequence_back",
    "lstm_sequence_back_reference",
    "lstm_sequence_reference",
]
