"""Precision: how an engine adds its totals, and the bound each of its totals is held to.

Precision is a property of an engine, chosen when it is made, named in its identity (and so in
every checkpoint: a run goes on only with the same precision), and each precision is held by the
contract suite to a bound it can prove. With u = 2**-24 (float32's unit roundoff), n the number
of terms one total adds and Σ|terms| the sum of their sizes:

- ``strict``: every total added in float64 (or compensated) and rounded once:
  |got - ref| <= 3·u·Σ|terms| at any size; a row's answer is the same bits in any company and at
  any thread count. The default of the light and test engines.
- ``float32``: totals as the library's own float32 kernels add them (NumPy's sgemm, libtorch,
  cuBLAS with TF32 off): |got - ref| <= (n + 1)·u·Σ|terms|, the classical bound of a float32
  sum; bit for bit run to run on one engine at one thread count. The default of the torch engine.
- ``mixed_bfloat16`` / ``mixed_float16``: products and convolutions take their inputs in the
  half format and add in float32: (3·u_h + (n + 1)·u)·Σ|terms| to first order, u_h = 2**-8
  (bfloat16) or 2**-11 (float16): two roundings of the inputs, the float32 total, and one
  rounding of an output an engine keeps in the half format. The bound held is the exact one,
  ((1 + u_h)³·(1 + (n + 1)·u) - 1)·Σ|terms|, and where inputs lie below the half format's
  smallest normal value μ_h (float16's 2**-14) its fixed spacing adds an absolute part
  (`totals_floor`). Sums and means stay float32 totals; slots, the optimizer's memory, losses,
  softmax, exp and log stay float32. docs/contracts.md derives both.

Value-by-value operations are held to PyTorch's float32 tolerance at every precision,
|got - ref| <= 1e-5 + 1.3e-6·|ref| (`value_tolerance`), and their tails (e^x, sigmoid and
softplus far below 0, log1p near 0) to its relative part alone, 1.3e-6·|ref|; moves (reshape,
slice, max-pooling's selection, ...) and transfers are exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "FLOAT32",
    "MIXED_BFLOAT16",
    "MIXED_FLOAT16",
    "PRECISIONS",
    "STRICT",
    "TAIL_RTOL",
    "UNIT",
    "VALUE_ATOL",
    "VALUE_RTOL",
    "Precision",
    "precision_named",
    "update_tolerances",
    "value_tolerance",
]

UNIT = 2.0**-24
"""u: float32's unit roundoff."""

VALUE_ATOL = 1e-5
VALUE_RTOL = 1.3e-6
"""The value family's tolerance, PyTorch's for float32: |got - ref| <= 1e-5 + 1.3e-6·|ref|."""

TAIL_RTOL = VALUE_RTOL
"""The tails' tolerance, relative alone: |got - ref| <= 1.3e-6·|ref| (there the absolute 1e-5
would pass anything, 0 included)."""


def value_tolerance(ref: Any) -> Any:
    """How far a value-by-value operation's result may lie from `ref`, element by element."""
    return VALUE_ATOL + VALUE_RTOL * np.abs(np.asarray(ref, np.float64))


SUBNORMAL_SPACING = 2.0**-149
"""float32's spacing below its least normal number: what rounding a product there strays."""

UPDATE_FACTOR = 16.0
"""An optimizer's update, value by value in float32 at every precision, is held to its own
size: each value it writes within 16·u of the sizes it is made of (`update_tolerances`)."""

UPDATE_FLOOR = 2.0**-126
"""The least of an update's bound: float32's least normal number (below it an engine may
flush to 0)."""


def update_tolerances(
    operation: str,
    before: Sequence[Sequence[Any]],
    after: Sequence[Sequence[Any]],
    **settings: float,
) -> list[list[Any]]:
    """How far each value an optimizer's update writes may lie from the reference's (`after`:
    the groups it updates in place, in order, as float64), from the values it was handed
    (`before`: every group of its arguments): UPDATE_FACTOR·u times the sizes the value is made
    of, and UPDATE_FLOOR. Its memory (Adam's moments, SGD's velocities) is held to its own size
    (from the memory before and after: the gradient's part is within their sum), the slots to
    theirs and to the step's: a value tolerance's absolute 1e-5 was far above Adam's second
    moment, so an engine that kept it in float16 passed (trial CP4).

    `adam_update`: before (slots, grads, firsts, seconds), after (slots, firsts, seconds);
    `sgd_update`: before (slots, grads, velocities), after (slots, velocities);
    `decay_update`: before (slots,), after (slots,)."""

    def allowed(*sizes: Any) -> Any:
        total = sum(np.abs(np.asarray(size, np.float64)) for size in sizes)
        return UPDATE_FACTOR * UNIT * total + UPDATE_FLOOR

    if operation == "adam_update":
        slots, _, firsts, seconds = before
        new_slots, new_firsts, new_seconds = after
        step, epsilon = settings["step_size"], settings["epsilon"]
        steps = [
            step
            * (np.abs(np.asarray(m, np.float64)) + np.abs(m2))
            / (np.sqrt(np.abs(v2)) + epsilon)
            for m, m2, v2 in zip(firsts, new_firsts, new_seconds, strict=True)
        ]
        return [
            [allowed(p, p2, s) for p, p2, s in zip(slots, new_slots, steps, strict=True)],
            [allowed(m, m2) for m, m2 in zip(firsts, new_firsts, strict=True)],
            [allowed(v, v2) for v, v2 in zip(seconds, new_seconds, strict=True)],
        ]
    if operation == "sgd_update":
        slots, _, velocities = before
        new_slots, new_velocities = after
        return [
            [
                allowed(p, p2, v, v2)
                for p, p2, v, v2 in zip(slots, new_slots, velocities, new_velocities, strict=True)
            ],
            [allowed(v, v2) for v, v2 in zip(velocities, new_velocities, strict=True)],
        ]
    if operation == "decay_update":
        return [[allowed(p, p2) for p, p2 in zip(before[0], after[0], strict=True)]]
    raise ValueError(f"update_tolerances: {operation!r} is no optimizer's update")


@dataclass(frozen=True)
class Precision:
    """One way of adding totals: its binding `name`, the half format of its products (mixed
    precisions only) and the bound the contract holds its totals to."""

    name: str
    half: str | None = None
    """"bfloat16" or "float16" for the mixed precisions: the format products take their inputs in."""
    summary: str = ""

    @property
    def half_unit(self) -> float:
        """u_h: the unit roundoff of the half format (0 where there is none)."""
        return {"bfloat16": 2.0**-8, "float16": 2.0**-11}.get(self.half or "", 0.0)

    @property
    def half_floor(self) -> float:
        """μ_h: the half format's smallest normal value (2**-126 bfloat16, 2**-14 float16; 0
        where there is none). Below it the format's values are evenly spaced, 2·u_h·μ_h apart,
        so rounding there strays up to u_h·μ_h whatever the value's size."""
        return {"bfloat16": 2.0**-126, "float16": 2.0**-14}.get(self.half or "", 0.0)

    @property
    def half_beyond(self) -> float:
        """The least magnitude a product's output rounds to infinity in the half format, where
        it is below float32's: float16's 65,520 (its largest value, 65,504, and half a step);
        infinity where there is none (bfloat16 has float32's range). A card's float16 product
        past it is infinite, and the light engine's too, so the loss scale sees it."""
        return 65520.0 if self.half == "float16" else math.inf

    @property
    def mixed(self) -> bool:
        return self.half is not None

    @property
    def batch_invariant(self) -> bool:
        """Whether a row's answer is the same bits in any company (only strict promises it)."""
        return self.name == "strict"

    def totals_factor(self, count: Any, product: bool = True) -> Any:
        """How many u·Σ|terms| a total of `count` terms may stray from the exact one: 3 for
        strict; n + 1 for float32 (at least 3); for a mixed precision, on products and
        convolutions (`product`), ((1 + u_h)³·(1 + (n + 1)·u) - 1)/u: 3·u_h/u + n + 1 to first
        order; on other totals the float32 bound."""
        if self.name == "strict":
            return 3.0
        terms = np.maximum(np.asarray(count, np.float64) + 1.0, 3.0)
        if self.mixed and product:
            return ((1.0 + self.half_unit) ** 3 * (1.0 + terms * UNIT) - 1.0) / UNIT
        return terms

    def totals_floor(self, count: Any, inputs: Any) -> Any:
        """What a mixed precision's product or convolution may stray beyond
        totals_factor·u·Σ|terms| because inputs below μ_h are rounded to the half format's
        fixed spacing: u_h·μ_h·((1 + u_h)·(1 + (n + 1)·u)·((1 + u_h)·E + n·u_h·μ_h) + 1), E
        being the sizes of the inputs its terms multiply, Σ(|a| + |b|) (`inputs`); 0 for the
        other precisions and totals; for those, float32's own underflow: below its least
        normal number each product rounds to the fixed spacing 2^-149, so (n + 1)·2^-149 (trial
        CP4: a saturated sigmoid's gradient, 1e-42, made honest engines' products part by
        that and be judged past their bound)."""
        if not self.mixed:
            spacing = (np.asarray(count, np.float64) + 1.0) * SUBNORMAL_SPACING
            return np.zeros_like(np.asarray(inputs, np.float64)) + spacing
        half, floor = self.half_unit, self.half_floor
        n = np.asarray(count, np.float64)
        terms = np.maximum(n + 1.0, 3.0)
        spread = (1.0 + half) * np.asarray(inputs, np.float64) + n * half * floor
        return half * floor * ((1.0 + half) * (1.0 + terms * UNIT) * spread + 1.0)

    def __str__(self) -> str:
        return self.name


STRICT = Precision(
    "strict",
    summary="every total added in float64 (or compensated) and rounded once: 3u·Σ|terms|; "
    "the same bits in any company and at any thread count",
)
FLOAT32 = Precision(
    "float32",
    summary="totals in the library's float32 kernels: (n + 1)u·Σ|terms|; "
    "bit for bit run to run at one thread count",
)
MIXED_BFLOAT16 = Precision(
    "mixed_bfloat16",
    "bfloat16",
    "products and convolutions on bfloat16 inputs, added in float32: (3·2^-8 + (n + 1)u)·Σ|terms| "
    "to first order",
)
MIXED_FLOAT16 = Precision(
    "mixed_float16",
    "float16",
    "products and convolutions on float16 inputs, added in float32: "
    "(3·2^-11 + (n + 1)u)·Σ|terms| to first order; train with loss scaling",
)

PRECISIONS: dict[str, Precision] = {
    precision.name: precision for precision in (STRICT, FLOAT32, MIXED_BFLOAT16, MIXED_FLOAT16)
}


def precision_named(name: str | Precision) -> Precision:
    """The precision called `name`; a ValueError naming the precisions there are otherwise."""
    if isinstance(name, Precision):
        return name
    found = PRECISIONS.get(name) if isinstance(name, str) else None
    if found is None:
        known = ", ".join(PRECISIONS)
        raise ValueError(f"no precision named {name!r}: the precisions are {known}")
    return found
