"""The error function in float64, vectorised: W. J. Cody's rational approximations.

NumPy has no erf. These are the near-minimax rational functions of W. J. Cody, "Rational
Chebyshev approximations for the error function", Mathematics of Computation 23 (1969),
631-638, with the coefficients and intervals of his CALERF (netlib specfun, 1990), which
approximate erf and erfc to at least 18 significant digits in exact arithmetic:

- |x| <= 0.46875: erf(x) = x·R(x²), R a rational function of degree 4 over 4;
- 0.46875 < |x| <= 4: erfc(|x|) = exp(-x²)·R(|x|), degree 8 over 8;
- 4 < |x| < 6: erfc(|x|) = exp(-x²)/|x|·(1/√π - R(1/x²)/x²), degree 5 over 5;
- |x| >= 6: erfc(|x|) < 2.2e-17, below half of float64's last place under 1: erf is ±1.

exp(-x²) is taken as exp(-s²)·exp(-(|x| - s)(|x| + s)), s = |x| truncated to sixteenths, so
that the rounding of x² is not magnified by exp. Evaluated in float64 each value is within a
few units of float64's last place of erf; rounded once to float32 it is within half an ulp (and
a hair).

The formula is some forty passes over its values, so it is worked a block of `BLOCK` values at a
time, which stay in a core's cache from the first pass to the last (over the whole of a large
array every pass would go out to memory: twice the time). Each value's result depends on that
value alone: the bits are those of any other split.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["erf"]

Array = NDArray[np.float64]

SMALL = (
    (3.16112374387056560, 113.864154151050156, 377.485237685302021, 3209.37758913846947),
    (23.6012909523441209, 244.024637934444173, 1282.61652607737228, 2844.23683343917062),
    0.185777706184603153,
)
MIDDLE = (
    (
        0.564188496988670089,
        8.88314979438837594,
        66.1191906371416295,
        298.635138197400131,
        881.952221241769090,
        1712.04761263407058,
        2051.07837782607147,
        1230.33935479799725,
    ),
    (
        15.7449261107098347,
        117.693950891312499,
        537.181101862009858,
        1621.38957456669019,
        3290.79923573345963,
        4362.61909014324716,
        3439.36767414372164,
        1230.33935480374942,
    ),
    2.15311535474403846e-8,
)
LARGE = (
    (
        0.305326634961232344,
        0.360344899949804439,
        0.125781726111229246,
        0.0160837851487422766,
        6.58749161529837803e-4,
    ),
    (
        2.56852019228982242,
        1.87295284992346047,
        0.527905102951428412,
        0.0605183413124413191,
        2.33520497626869185e-3,
    ),
    0.0163153871373020978,
)
"""Each interval's numerator and denominator coefficients, and the numerator's leading one."""

ONE_OVER_ROOT_PI = 0.56418958354775628695

BLOCK = 1 << 15
"""The values worked at once: 256 KiB of float64 a temporary, a core's cache for the few alive."""


def _ratio(t: Array, coefficients: tuple[tuple[float, ...], tuple[float, ...], float]) -> Array:
    """Cody's P(t)/Q(t), both by Horner's rule, Q monic: (((lead·t + p0)·t + p1)·t ... + pn) /
    (((t + q0)·t + q1)·t ... + qn). In place: a float64 pass costs its allocation otherwise."""
    numerators, denominators, lead = coefficients
    top, bottom = t * lead, t.copy()
    for p, q in zip(numerators[:-1], denominators[:-1], strict=True):
        top += p
        top *= t
        bottom += q
        bottom *= t
    top += numerators[-1]
    bottom += denominators[-1]
    top /= bottom
    return top


def _exp_minus_square(y: Array) -> Array:
    """exp(-y²), y >= 0, without magnifying the rounding of y² (Cody's split: y = s + (y - s),
    s = y truncated to sixteenths, whose square is exact)."""
    s = np.trunc(y * 16.0)
    s *= 1.0 / 16.0
    rest = y - s
    rest *= y + s
    np.negative(rest, out=rest)
    np.exp(rest, out=rest)
    s *= s
    np.negative(s, out=s)
    np.exp(s, out=s)
    s *= rest
    return s


def _erfc_middle(y: Array) -> Array:
    """erfc(y) for 0.46875 < y <= 4."""
    tail = _ratio(y, MIDDLE)
    tail *= _exp_minus_square(y)
    return tail


def _erfc_large(y: Array) -> Array:
    """erfc(y) for 4 < y < 6."""
    inverse = y * y
    np.divide(1.0, inverse, out=inverse)
    tail = _ratio(inverse, LARGE)
    tail *= inverse
    np.subtract(ONE_OVER_ROOT_PI, tail, out=tail)
    tail /= y
    tail *= _exp_minus_square(y)
    return tail


def erf(x: Any, out: NDArray[Any] | None = None) -> NDArray[Any]:
    """erf of every value of x, in float64 (NaN stays NaN; ±inf gives ±1; -0.0 gives -0.0),
    into `out` where given (a C-ordered float array of x's size: the float64 results rounded
    once to its type), else into a new float64 array of x's shape."""
    shape = np.shape(x)
    flat = np.asarray(x).reshape(-1)
    result = np.empty(flat.size, np.float64) if out is None else out.reshape(-1)
    if out is not None and not np.shares_memory(result, out):
        raise ValueError("erf: out must be C-ordered, so that its flat values are its own")
    for start in range(0, flat.size, BLOCK):
        part = slice(start, start + BLOCK)
        result[part] = _block(np.asarray(flat[part], np.float64))
    return result.reshape(shape) if out is None else out


def _block(x: Array) -> Array:
    """erf of a flat block of float64 values (a new array): each interval's formula on its own
    values, gathered (in a block held in cache gathering costs less than the passes it saves:
    about half a network's values lie in the small interval, half in the middle one)."""
    y = np.abs(x)
    small = y <= 0.46875
    out = np.empty_like(x)
    middle = np.flatnonzero(~small)  # NaN too: its tail is NaN, and NaN stays
    if middle.size:
        with np.errstate(under="ignore"):
            tail = _erfc_middle(np.minimum(y[middle], 4.0))
        np.subtract(0.5, tail, out=tail)
        tail += 0.5
        out[middle] = np.copysign(tail, x[middle], out=tail)
    beyond = np.flatnonzero(y > 4.0)
    if beyond.size:
        far = y[beyond]
        with np.errstate(under="ignore"):
            edge = _erfc_large(np.minimum(far, 6.0))
        ones = np.where(far < 6.0, (0.5 - edge) + 0.5, 1.0)  # from 6 on erfc < 2.2e-17
        out[beyond] = np.copysign(ones, x[beyond])
    near = np.flatnonzero(small)
    if near.size:
        values = x[near]
        out[near] = values * _ratio(values * values, SMALL)
    return out
