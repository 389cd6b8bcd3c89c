"""What the mixed precisions' half formats add to the contract: the sizes of a product's inputs.

A mixed precision rounds each input of a product or convolution to its half format. Above the
format's smallest normal value μ_h that rounding is relative (u_h·|a|), which the totals bound
covers; below μ_h (float16's 2^-14 ≈ 6.1e-5) the format's values are evenly spaced and the
rounding strays up to u_h·μ_h however small the input. That part of the bound grows with the
sizes of the inputs each total multiplies, E = Σ(|a| + |b|) over its terms
(`Precision.totals_floor`), computed here on the suite's float64 reference: the same operation
on (|a|, ones) and on (ones, |b|), added — inputs that are padding are exactly 0 in any format
and count for nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.contracts.reference import Float64Engine

__all__ = ["PRODUCTS", "input_sizes"]

Array = NDArray[Any]

PRODUCTS = ("matmul", "conv2d", "conv2d_weight_grad", "conv2d_fold")
"""The totals whose two array inputs a mixed precision takes in its half format."""


def input_sizes(operation: str, *args: Any) -> Array:
    """E = Σ(|a| + |b|) over the terms of each element of `operation` (one of `PRODUCTS`) on
    these inputs, as `deepsharp.contracts.data.references` takes them; a convolution's bias,
    one more term of each total, adds its own size."""
    if operation not in PRODUCTS:
        raise ValueError(f"input_sizes: {operation!r} is none of the products {PRODUCTS}")
    first, second, *rest = args
    bias = rest.pop() if operation == "conv2d" and len(rest) == 3 else None
    engine = Float64Engine()

    def total(a: Array, b: Array) -> Array:
        handles = [engine.put(a), engine.put(b), *rest]
        return np.asarray(engine.get(getattr(engine, operation)(*handles)), np.float64)

    sizes = total(np.abs(first), np.ones_like(second)) + total(np.ones_like(first), np.abs(second))
    if bias is not None:
        sizes += np.abs(np.asarray(bias, np.float64)).reshape(1, -1, 1, 1)
    return sizes
