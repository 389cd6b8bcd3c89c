"""Images as windows, over NumPy arrays: a convolution is a product of its filters with the
images' windows laid out as columns (a few images at a time), its way back to the images a
transposed convolution; pooling takes each window's places in reading order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.engines.testbuffer._totals import dot

__all__ = [
    "WINDOWS",
    "convolve",
    "filters_grad",
    "fold",
    "out_size",
    "pool_windows",
    "unpool",
    "windows_of",
]

F32 = np.float32
Array = NDArray[Any]
Padding = tuple[int, int]

WINDOWS = 1 << 22
"""About the most values of images' windows a convolution lays out at once (16 MiB)."""


def out_size(
    image: tuple[int, ...], kernel: tuple[int, ...], stride: int, padding: tuple[Padding, Padding]
) -> tuple[int, int]:
    """(oh, ow): how many windows fit down and across the padded image."""
    (top, bottom), (left, right) = padding
    return (
        (image[0] + top + bottom - kernel[0]) // stride + 1,
        (image[1] + left + right - kernel[1]) // stride + 1,
    )


def windows_of(
    images: Array,
    kernel: tuple[int, int],
    stride: int,
    padding: tuple[Padding, Padding],
    ones: bool = False,
) -> tuple[Array, int, int]:
    """Every window of the images as a column (C·kh·kw, N·oh·ow), with a row of ones after
    them if `ones` (a bias is one more term of each total)."""
    if any(any(side) for side in padding):
        images = np.pad(images, [(0, 0), (0, 0), padding[0], padding[1]])
    count, channels = images.shape[:2]
    (kh, kw), (out_h, out_w) = kernel, out_size(images.shape[2:], kernel, stride, ((0, 0), (0, 0)))
    columns = np.empty((channels * kh * kw + ones, count * out_h * out_w), F32)
    grid = columns[: channels * kh * kw].reshape(channels, kh, kw, count, out_h, out_w)
    for i in range(kh):
        for j in range(kw):
            seen = images[:, :, i : i + (out_h - 1) * stride + 1 : stride]
            grid[:, i, j] = seen[:, :, :, j : j + (out_w - 1) * stride + 1 : stride].transpose(
                1, 0, 2, 3
            )
    if ones:
        columns[-1] = 1
    return columns, out_h, out_w


def convolve(
    images: Array,
    filters: Array,
    stride: int,
    padding: tuple[Padding, Padding],
    bias: Array | None,
    out: Array,
) -> None:
    """out (N, F, oh, ow) = the filters' totals over every window, a few images at a time."""
    count, number = images.shape[0], filters.shape[0]
    flat = filters.reshape(number, -1)
    if bias is not None:
        flat = np.concatenate([flat, bias.reshape(number, 1)], axis=1)
    places = out.shape[2] * out.shape[3]
    step = max(1, WINDOWS // max(1, flat.shape[1] * places))
    for start in range(0, count, step):
        chunk = images[start : start + step]
        windows, _, _ = windows_of(chunk, filters.shape[2:], stride, padding, bias is not None)
        totals = dot(flat, windows).reshape(number, chunk.shape[0], *out.shape[2:])
        out[start : start + step] = totals.transpose(1, 0, 2, 3)


def pool_windows(x: Array, pool: tuple[int, int]) -> Array:
    """(N, C, H//ph, W//pw, ph*pw): each (ph, pw) pooling window's places in reading order."""
    (count, channels, height, width), (down, across) = x.shape, pool
    out_h, out_w = height // down, width // across
    cropped: Array = x[:, :, : out_h * down, : out_w * across]
    grid = cropped.reshape(count, channels, out_h, down, out_w, across)
    windows: Array = grid.transpose(0, 1, 2, 4, 3, 5).reshape(
        count, channels, out_h, out_w, down * across
    )
    return windows


def filters_grad(
    images: Array,
    grad: Array,
    kernel: tuple[int, int],
    stride: int,
    padding: tuple[Padding, Padding],
    bias: bool,
) -> Array:
    """The filters' gradient (F, C·kh·kw), with the biases' as one more column if `bias`: gy
    (N, F, oh, ow) times the images' windows."""
    filters = grad.shape[1]
    windows, out_h, out_w = windows_of(images, kernel, stride, padding, ones=bias)
    if (out_h, out_w) != grad.shape[2:]:
        raise ValueError(f"conv2d_weight_grad: gy {grad.shape} does not match {images.shape}")
    # (F, N·oh·ow) @ (N·oh·ow, C·kh·kw [+ 1]): a bias's gradient is its filter's total of gy.
    sent = grad.transpose(1, 0, 2, 3).reshape(filters, -1)
    return dot(sent, windows.T)


def fold(
    grad: Array, filters: Array, stride: int, padding: tuple[Padding, Padding], out: Array
) -> None:
    """out (N, C, H, W) = what each place of the images gets back: gy spread out by the stride
    and framed with zeros, convolved with the filters turned around (a transposed convolution)."""
    image = out.shape[2:]
    count, number, out_h, out_w = grad.shape
    kh, kw = filters.shape[2:]
    (top, _), (left, _) = padding
    # Row y of the padded image gets from windows y - i (i < kh) of the stride's grid.
    tall, wide = (out_h - 1) * stride + kh, (out_w - 1) * stride + kw
    rows = slice(min(top, tall), min(top + image[0], tall))
    columns = slice(min(left, wide), min(left + image[1], wide))
    spread = np.zeros((count, number, tall + kh - 1, wide + kw - 1), F32)
    spread[
        :, :, kh - 1 : kh - 1 + tall - kh + 1 : stride, kw - 1 : kw - 1 + wide - kw + 1 : stride
    ] = grad
    framed = spread[:, :, rows.start : rows.stop + kh - 1, columns.start : columns.stop + kw - 1]
    turned = filters[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)
    out.fill(0)
    reached = out[:, :, : rows.stop - rows.start, : columns.stop - columns.start]
    if reached.size:
        convolve(framed, turned, 1, ((0, 0), (0, 0)), None, reached)


def unpool(grad: Array, chosen: Array, pool: tuple[int, int], out: Array) -> None:
    """out (N, C, H, W) = each window's gradient at the place its selection names, zeros
    elsewhere."""
    (count, channels, out_h, out_w), (down, across) = grad.shape, pool
    spread = np.zeros((count, channels, out_h, out_w, down * across), F32)
    np.put_along_axis(spread, chosen[..., None], grad[..., None], -1)
    grid = spread.reshape(count, channels, out_h, out_w, down, across)
    out.fill(0)
    out[:, :, : out_h * down, : out_w * across] = grid.transpose(0, 1, 2, 4, 3, 5).reshape(
        count, channels, out_h * down, out_w * across
    )
