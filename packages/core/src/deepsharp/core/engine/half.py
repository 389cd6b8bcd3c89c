"""The half formats of the mixed precisions, on the host: rounding float32 values to them.

A mixed precision takes the inputs of its products and convolutions in a half format and adds
in float32 (`deepsharp.core.engine.precision`). An engine that has no such format of its own
(NumPy has float16 but no bfloat16) rounds its float32 arrays to the values the format holds,
kept as float32, and multiplies those: each product of two such values is exact in float32
(8 + 8 or 11 + 11 significant bits fit in float32's 24), so the arithmetic is exactly that of
a kernel that reads the half format and adds in float32.

- `to_bfloat16(x)`: to bfloat16 (8 significant bits, float32's exponent range), to nearest,
  ties to even, as libtorch and every bfloat16 unit round; NaN stays NaN, values beyond the
  largest bfloat16 (3.3895e38) round to infinity as the format says.
- `to_float16(x)`: to float16 (11 significant bits, largest 65,504, smallest normal 2^-14,
  subnormals down to 2^-24), to nearest, ties to even: NumPy's float16 values, computed on the
  bits.
- `HALF_FORMATS`: the format's name -> its rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["HALF_FORMATS", "to_bfloat16", "to_float16"]

Float32 = NDArray[np.float32]


def to_bfloat16(x: Any) -> Float32:
    """float32 values rounded to bfloat16's (to nearest, ties to even), kept as float32."""
    values = np.asarray(x, dtype=np.float32, order="C")
    bits = values.view(np.uint32)
    # Add half of the dropped 16 bits' weight, less one unless the kept last bit is odd (ties to
    # even), then drop them. A carry out of the significand raises the exponent, as rounding
    # should; the largest finite values carry into infinity's pattern, as they round.
    odd = (bits >> np.uint32(16)) & np.uint32(1)
    rounded = (bits + (np.uint32(0x7FFF) + odd)) & np.uint32(0xFFFF0000)
    out: Float32 = rounded.view(np.float32)
    nan = np.isnan(values)
    if nan.any():  # a NaN's payload could carry into the sign: keep it NaN
        out = np.where(nan, values, out)
    return out


def to_float16(x: Any) -> Float32:
    """float32 values rounded to float16's (to nearest, ties to even), kept as float32: the same
    values as NumPy's own float16 gives, three times as fast (its conversion is a scalar loop)."""
    values = np.asarray(x, dtype=np.float32, order="C")
    bits = values.view(np.uint32)
    # Normal float16 values: drop 13 of float32's 23 fraction bits, rounded as bfloat16's 16 are.
    odd = (bits >> np.uint32(13)) & np.uint32(1)
    out: Float32 = ((bits + (np.uint32(0x0FFF) + odd)) & np.uint32(0xFFFFE000)).view(np.float32)
    with np.errstate(invalid="ignore"):  # NaN is handled below
        size = np.abs(values)
        small = size < np.float32(2.0**-14)
        if small.any():
            # Below 2^-14 float16 is spaced 2^-24 apart: 0.5 + |x| lies where float32 is spaced
            # 2^-24 too, so adding and taking off 0.5 rounds |x| to that spacing, ties to even.
            spaced = (size + np.float32(0.5)) - np.float32(0.5)
            out = np.where(small, np.copysign(spaced, values), out)
        beyond = ~(np.abs(out) <= np.float32(65504.0))  # past the largest: infinity (or NaN)
    if beyond.any():
        nan = np.isnan(values)
        out = np.where(beyond, np.copysign(np.float32(np.inf), values), out)
        out = np.where(nan, values, out)
    return out


HALF_FORMATS: dict[str, Callable[[Any], Float32]] = {
    "bfloat16": to_bfloat16,
    "float16": to_float16,
}
"""Each half format's name -> the rounding of float32 values to it (kept as float32)."""
