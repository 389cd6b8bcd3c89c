"""The test engine's totals: float32 arithmetic alone, each within 3u·Σ|terms|, at any size.

A total here is S = Σ x_k·y_k over k < n, of float32 x and y (a sum is the case y = 1); its
terms are the exact products x_k·y_k, and T = Σ|x_k·y_k|. u = 2**-24 is float32's unit
roundoff and γ_j = j·u / (1 - j·u), as in Higham, "Accuracy and Stability of Numerical
Algorithms" (2002), §3.1. Every operation below is a float32 operation rounded to nearest (NumPy
element by element); no float64 value is ever made.

How a total is added
--------------------
1. Each product is rounded once: p_k = fl(x_k·y_k) = x_k·y_k·(1 + δ_k), |δ_k| <= u, and δ_k = 0
   for a sum. So |Σp_k - S| <= u·T and Σ|p_k| <= (1 + u)·T.
2. The p_k are added pairwise, as a tree: each level adds the first half of what is left onto
   the second (an odd one out waits a level). Every addition t = fl(a + b) keeps its exact
   rounding error e = a + b - t, found by Knuth's TwoSum in six float32 operations
   (z = t - a; e = (a - (t - z)) + (b - z)), error-free for any a and b that do not overflow.
   The errors are added in float32 along the same tree into a carry (c = (c_a + c_b) + e at
   each addition). A total of more than CHUNK terms is cut into J = ceil(n / CHUNK) chunks,
   term t of chunk j being p_(t·J + j) (zeros after the n-th): each chunk is added by such a
   tree, then the chunks' totals and carries by one more. The trees depend on n alone, so a
   place's answer is the same bits whatever is worked out beside it, in whatever layout or
   block, at any thread count.
3. At the end Σp_k = s + C exactly, where s is the tree's total and C the exact sum of every
   error made; c is C added in float32. The answer is r = fl(s + c).

The bound
---------
Let d be the most additions of totals that any product goes through (the trees' height,
d <= ceil(log2 n) + 1) and m the most additions of carries that any error goes through (two a
level: m <= 2·d).

(a) Σ|e| <= γ_d·Σ|p_k|: an addition at height h adds two computed totals, each at most
    (1 + u)**(h - 1) times the Σ|p_k| beneath it, and its error is at most u times their exact
    sum; each product lies beneath at most d additions.
(b) |c - C| <= γ_m·Σ|e|: c is a float32 sum of the errors along a tree of depth m (Higham (4.3)).
(c) r = (s + c)(1 + ε), |ε| <= u, so |r - Σp_k| <= u·|Σp_k| + (1 + u)·|c - C|.

Together: |r - S| <= u·T + u·(1 + u)·T + (1 + u)**2·γ_m·γ_d·T. For any n < 2**63, d <= 64 and
m <= 128, so γ_m·γ_d < 8193·u**2 < 0.0005·u, and

    |r - S| < (2u + u**2 + 0.0005u)·T < 3u·T     (a product's total: matmul, convolutions),
    |r - S| < 1.0005u·T                          (a sum: its terms are exact).

A mean divides the unrounded s + c by n, within 2u·(1 + u) of (s + c)/n (`_quotient`: one
rounding more where n is a float32, else a remainder's correction), so it is within
2.001u·T/n of S/n, and T/n is the mean's own Σ|terms|.

The argument asks that no product fall below float32's smallest normal number (2**-126, where a
rounding may lose more than u relatively) and that no total overflow. A total of finite terms
that overflows on its way (3e38 + 3e38 in a mean of [3e38, 3e38, 0, 0]; a product of two
factors of 2e19) is added again with its terms scaled down by a power of two (`_shift`), and its
result scaled back: exact but for terms that fall below the smallest normal value, whose loss is
far below u·T for a total this large; so a total or mean that lies in float32's range comes out
in it. A total with an infinity or a NaN among its terms comes out as float addition makes it:
where s is not finite, c (which then holds the NaN of an infinity's TwoSum) is left out.

Cost: about nine float32 operations a term (a product, eight for TwoSum and carries), worked in
blocks of at most BLOCK terms laid out so that every NumPy operation runs over whole contiguous
arrays that stay in a core's cache; every temporary is bounded by BLOCK or by the operands' size.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["BLOCK", "CHUNK", "add_rows_into", "dot", "pairs", "totals"]

Array = NDArray[Any]
F32 = np.float32

CHUNK = 64
"""The most terms one tree adds: a longer total is cut into chunks, and a tree adds those."""

BLOCK = 1 << 16
"""The most terms worked out at once (256 KiB): a block and its scratch stay in the cache."""


def dot(a: Array, b: Array) -> Array:
    """a (M, K) @ b (K, N) in float32 arithmetic, each place within 3u·Σ|terms|."""
    if a.ndim != 2 or b.ndim != 2 or b.shape[0] != a.shape[1]:
        raise ValueError(f"dot takes (M, K) and (K, N) operands, not {a.shape} and {b.shape}")
    result: Array = _finish(*pairs(a, b))
    finite_rows = np.asarray(np.isfinite(a).all(1))
    with np.errstate(invalid="ignore"):
        lost = ~np.isfinite(result) & finite_rows[:, None] & np.isfinite(b).all(0)
    if lost.any():  # a product or a partial total overflowed: the rows again, scaled down
        rows = np.flatnonzero(lost.any(1))
        shift = _shift(a.shape[1]) // 2 + 1
        again = _finish(*pairs(np.ldexp(a[rows], -shift), np.ldexp(b, -shift)))
        with np.errstate(over="ignore"):
            result[rows] = np.where(lost[rows], np.ldexp(again, 2 * shift), result[rows])
    return result


def totals(rows: Array, mean: bool = False) -> Array:
    """Each row's total, rows (P, K) -> (P,), or with `mean` the total divided by K."""
    total, carry = pairs(None, rows.T)
    if not mean:
        result: Array = _finish(total, carry)[0]
    elif rows.shape[1] == 0:  # the mean of nothing
        result = np.full(rows.shape[0], np.nan, F32)
    else:
        result = _quotient(total, carry, rows.shape[1])[0]
    with np.errstate(invalid="ignore"):
        lost = ~np.isfinite(result) & np.isfinite(rows).all(1)
    if lost.any() and rows.shape[1]:  # a partial total overflowed (3e38 + 3e38): those rows
        # again, scaled down (a mean of nothing is NaN as it stands)
        shift = _shift(rows.shape[1])
        again = totals(np.ldexp(rows[lost], -shift), mean)
        with np.errstate(over="ignore"):
            result[lost] = np.ldexp(again, shift)
    return result


def _shift(count: int) -> int:
    """A power of two to scale a total's terms down by so that no partial total of `count`
    terms of float32 values can overflow: every partial total is then under a quarter of
    float32's largest value. Scaling by a power of two is exact (bar terms that fall below the
    smallest normal value, whose loss is far below u·Σ|terms| of a total this large), and so
    is scaling the result back, unless it lies beyond float32's range."""
    return int(np.ceil(np.log2(max(count, 1)))) + 2


def pairs(a: Array | None, b: Array) -> tuple[Array, Array]:
    """Each place's total of a @ b (a None: a row of ones, whose products are exact) as it
    stands before its last rounding: a total and a carry, float32 arrays (M, N)."""
    count, columns = b.shape
    rows = 1 if a is None else a.shape[0]
    if a is not None and rows > columns:  # the longer side last, where the products broadcast
        total, carry = pairs(b.T, a.T)
        return total.T, carry.T
    total, carry = np.zeros((2, rows, columns), F32)
    if total.size == 0 or count == 0:
        return total, carry
    chunks = -(-count // CHUNK)
    # Terms are laid out (term of its chunk, ..., places...), C-ordered, with the chunks last
    # when there are more of them than columns, so that every operation runs over whole arrays.
    chunks_last = chunks > columns
    left = None if a is None else _arranged(a, chunks, chunks_last)
    right = _arranged(b.T, chunks, chunks_last)
    with np.errstate(invalid="ignore", over="ignore"):  # infinities make NaN errors: see _finish
        if chunks == 1 and total.size * count <= BLOCK:  # one block, one tree: the same tree
            ends = right[:, 0, None, :]
            terms = ends.copy() if left is None else np.multiply(left[:, 0, :, None], ends)
            return _tree(terms)
        for group in _tiles(rows, columns, max(1, BLOCK // chunks)):
            total[group], carry[group] = _group(left, right, group, chunks, chunks_last)
    return total, carry


def _arranged(x: Array, chunks: int, chunks_last: bool) -> Array:
    """x (R, K) as float32 (term, R, chunk) if `chunks_last`, else (term, chunk, R): term t of
    chunk j is column t·chunks + j of x, zeros past the K."""
    count = x.shape[1]
    width = -(-count // chunks)
    if not chunks_last:
        if width * chunks == count:  # a view where x.T is C-ordered float32 already
            return np.ascontiguousarray(x.T, F32).reshape(width, chunks, x.shape[0])
        laid = np.zeros((width, chunks, x.shape[0]), F32)
        laid.reshape(width * chunks, x.shape[0])[:count] = x.T
        return laid
    laid = np.zeros((width, x.shape[0], chunks), F32)
    whole, rest = divmod(count, chunks)
    laid[:whole] = x[:, : whole * chunks].reshape(x.shape[0], whole, chunks).transpose(1, 0, 2)
    if rest:
        laid[whole, :, :rest] = x[:, whole * chunks :]
    return laid


def _group(
    left: Array | None, right: Array, group: tuple[slice, slice], chunks: int, chunks_last: bool
) -> tuple[Array, Array]:
    """The totals and carries of a group of places: each chunk's tree, then the chunks' tree."""
    width = right.shape[0]
    rows, columns = group
    down, across = rows.stop - rows.start, columns.stop - columns.start
    parts = np.empty((2, chunks, down, across), F32)  # each chunk's total and carry
    along = BLOCK // width if chunks_last else BLOCK // (width * down * across)
    length = min(chunks, max(1, along))
    for start in range(0, chunks, length):
        span = slice(start, min(start + length, chunks))
        for block_rows, block_columns in _tiles(down, across, BLOCK // (width * length)):
            r = slice(rows.start + block_rows.start, rows.start + block_rows.stop)
            c = slice(columns.start + block_columns.start, columns.start + block_columns.stop)
            here = (slice(None), span, block_rows, block_columns)
            if chunks_last:  # (term, row, column, chunk)
                ends = right[:, None, c, span]
                terms = ends.copy() if left is None else np.multiply(left[:, r, None, span], ends)
                total, carry = _tree(terms)
                parts[here] = np.stack([total, carry]).transpose(0, 3, 1, 2)
            else:  # (term, chunk, row, column)
                ends = right[:, span, None, c]
                terms = ends.copy() if left is None else np.multiply(left[:, span, r, None], ends)
                parts[here] = _tree(terms)
    if chunks == 1:
        return parts[0, 0], parts[1, 0]
    return _tree(parts[0], parts[1])


def _tiles(rows: int, columns: int, places: int) -> Iterator[tuple[slice, slice]]:
    """Tiles of a (rows, columns) grid of about `places` places each, whole rows of it first."""
    across = min(columns, max(1, places))
    down = min(rows, max(1, places // across))
    for top in range(0, rows, down):
        for left in range(0, columns, across):
            yield slice(top, min(top + down, rows)), slice(left, min(left + across, columns))


def _tree(terms: Array, carries: Array | None = None) -> tuple[Array, Array]:
    """Add `terms` (width, places...) pairwise over its first axis, each addition's rounding
    error (TwoSum) added into a carry along the same tree: the total and carry of each place.

    `terms` is C-ordered and is overwritten; `carries` are carries the terms already have
    (none: zeros). Every output goes to memory apart from the inputs it is not, or NumPy would
    copy the inputs first.
    """
    width = terms.shape[0]
    if width == 1:
        return terms[0], (np.zeros_like(terms[0]) if carries is None else carries[0])
    work = np.empty((4, width // 2 + 1, *terms.shape[1:]), F32)
    spare, late, carry_buffers = work[0], work[1], (work[2], work[3])
    level = terms
    for turn in itertools.count():
        if width == 1:
            break
        half, odd = divmod(width, 2)
        carry = carry_buffers[turn % 2]  # the carries are written to each buffer in turn
        first, second, total, z = level[:half], level[half : 2 * half], spare[:half], late[:half]
        np.add(first, second, out=total)
        np.subtract(total, first, out=z)  # what of `second` went into the total
        np.subtract(second, z, out=second)  # what of `second` was lost
        np.subtract(total, z, out=z)  # what of `first` went in
        np.subtract(first, z, out=first)  # what of `first` was lost
        if carries is None:  # the first level: its errors are the carries
            np.add(first, second, out=carry[:half])
            if odd:
                carry[half] = 0
        else:
            np.add(first, second, out=z)  # the addition's exact error
            np.add(carries[:half], carries[half : 2 * half], out=carry[:half])
            np.add(carry[:half], z, out=carry[:half])
            if odd:
                carry[half] = carries[2 * half]
        if odd:
            spare[half] = level[2 * half]
        level, spare, carries = spare, level, carry
        width = half + odd
    assert carries is not None
    return level[0], carries[0]


def _finish(total: Array, carry: Array) -> Array:
    """total + carry, rounded once; a total that is not finite stays as float addition made it
    (its carry holds the NaN of an infinity's TwoSum)."""
    with np.errstate(invalid="ignore"):
        result: Array = np.add(total, carry, dtype=F32)
    finite = np.isfinite(total)
    if not finite.all():
        np.copyto(result, total, where=~finite)
    return result


def _quotient(total: Array, carry: Array, divisor: int) -> Array:
    """(total + carry) / divisor in float32 arithmetic, within 2u·(1 + u) of the exact quotient.

    Where the divisor is a float32 (below 2**24, or a power of two...), the total rounded and
    divided: two roundings. Where it is not, a rounded divisor would cost a third: the quotient
    q = fl(total / n1), n1 = fl(divisor), is corrected by the remainder, (total + carry) - q·n,
    worked out with q·n1 exactly (Dekker's product) and divided in its turn.
    """
    near = F32(divisor)
    if int(near) == divisor:
        result: Array = np.divide(_finish(total, carry), near, dtype=F32)
        return result
    rest = F32(divisor - int(near))  # divisor = near + rest (rest itself rounded: u² at most)
    with np.errstate(invalid="ignore", over="ignore"):
        first = np.divide(total, near, dtype=F32)
        high = first * near
        low = _product_error(first, near, high)
        remainder = ((total - high) - low + carry) - first * rest
        result = first + remainder / near
    lost = ~np.isfinite(total)
    if lost.any():
        np.divide(total, near, out=result, where=lost)
    return result


def _product_error(a: Array, b: F32, product: Array) -> Array:
    """a·b - fl(a·b), exactly (Dekker's TwoProduct, the factors split by Veltkamp's 2**12 + 1)."""
    split = F32(4097.0)
    spread = a * split
    a_high = spread - (spread - a)
    a_low = a - a_high
    b_spread = b * split
    b_high = b_spread - (b_spread - b)
    b_low = b - b_high
    error: Array = ((a_high * b_high - product) + a_high * b_low + a_low * b_high) + a_low * b_low
    return error


def add_rows_into(table: Array, flat: Array, ids: Array) -> None:
    """table[ids[i]] = the total of the rows flat[i] naming it, over a table of zeros (rows,
    width): each row's values gathered in the order they come (a stable sort of the ids) and
    added by `totals`, rows that get as many values together, so a row's bits are the same
    whatever the other rows get."""
    order = np.argsort(ids, kind="stable")
    named = ids[order]
    starts = np.flatnonzero(np.concatenate([[True], named[1:] != named[:-1]]))
    counts = np.diff(np.append(starts, ids.size))
    for count in np.unique(counts):
        firsts = starts[counts == count]  # the rows that get `count` values
        terms = flat[order[firsts[:, None] + np.arange(count)]]  # (rows, count, width)
        sums = totals(terms.transpose(0, 2, 1).reshape(-1, int(count)))
        table[named[firsts]] = sums.reshape(firsts.size, table.shape[1])
