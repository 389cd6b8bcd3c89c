"""The bounds of the contract, and the checks that hold an engine to them and keep the worst.

Each check compares what an engine gave with the float64 reference the suite computed from the
same float32 inputs (`deepsharp.contracts.reference`), records how close it came (in the
family's own unit) and fails with the worst element named when it is outside its bound.

Totals are held to the bound of the engine's precision (`deepsharp.core.engine.precision`),
u = 2**-24, n the terms of that element's total: strict 3u·Σ|terms|; float32 (n + 1)u·Σ|terms|;
mixed ((1 + u_h)³(1 + (n + 1)u) - 1)·Σ|terms| on products and convolutions (3u_h + (n + 1)u to
first order; plus, below the half format's smallest normal value, `Precision.totals_floor`), the
float32 bound on sums and means. They are recorded in units of u·Σ|terms| (how many roundings they came to), as a
fraction of their bound, and by the size of the totals (n).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.engine.precision import (
    PRECISIONS,
    Precision,
    precision_named,
    update_tolerances,
)

__all__ = [
    "BOUNDS",
    "SIZES",
    "TAIL_RTOL",
    "UNIT",
    "UNITS",
    "VALUE_ATOL",
    "VALUE_RTOL",
    "Contract",
    "IdentityMissing",
    "Measurements",
    "engine_precision",
    "mismatching_bits",
    "size_of",
    "value_tolerance",
]

UNIT = 2.0**-24
"""float32's unit roundoff, u."""

VALUE_ATOL = 1e-5
VALUE_RTOL = 1.3e-6
"""The value family's tolerance, PyTorch's for float32: |got - ref| <= 1e-5 + 1.3e-6·|ref|."""

TAIL_RTOL = VALUE_RTOL
"""The tails (sigmoid, exp and softplus far below 0, log1p near 0) are held to the value
family's relative part alone, |got - ref| <= 1.3e-6·|ref| (about 22u, 11 to 22 ulps): there the
absolute 1e-5 would pass anything, 0 included, while any float32 libm function or the usual
stable formulas stay within a few ulps."""

BOUNDS: dict[str, float] = {
    "transfers": 0.0,  # mismatching bits
    "totals": 1.0,  # a fraction of the precision's bound (recorded in u·Σ|terms| as well)
    "values": 1.0,  # |got - ref| as a fraction of 1e-5 + 1.3e-6 * |ref|
    "tails": 1.0,  # |got - ref| as a fraction of 1.3e-6 * |ref|
    "moves": 0.0,  # mismatching bits
    "inputs": 0.0,  # mismatching bits of an operation's inputs, before and after it
    "rules": 1.0,  # a rule's forward and gradient on the engine: fraction of its tolerance
    "nudging": 1.0,  # a rule's gradient against central differences (deepsharp.contracts.nudging)
    "steps": 0.0,  # mismatching bits between steps that must agree bit for bit
}

UNITS: dict[str, str] = {
    "transfers": "mismatching bits",
    "totals": "u·Σ|terms| (u = 2^-24); of_bound: fraction of the precision's bound",
    "values": "fraction of 1e-5 + 1.3e-6·|ref|",
    "tails": "fraction of 1.3e-6·|ref|",
    "moves": "mismatching bits",
    "inputs": "mismatching bits",
    "rules": "fraction of 1e-5 + 1.3e-6·|ref| + (the precision's totals factor)·u·S",
    "nudging": "fraction of 1e-7 + 1e-5·|nudged|",
    "steps": "mismatching bits",
}

TOTALS_BOUNDS: dict[str, str] = {
    "strict": "3u·Σ|terms|",
    "float32": "(n + 1)u·Σ|terms|",
    "mixed_bfloat16": "((1 + 2^-8)³(1 + (n + 1)u) - 1)·Σ|terms| on products (3·2^-8 + (n + 1)u to "
    "first order), (n + 1)u·Σ|terms| on sums",
    "mixed_float16": "((1 + 2^-11)³(1 + (n + 1)u) - 1)·Σ|terms| on products (3·2^-11 + (n + 1)u to "
    "first order; below 2^-14 an absolute part, Precision.totals_floor), (n + 1)u·Σ|terms| on sums",
}
"""Each precision's totals bound, as the report states it."""

SIZES: list[tuple[str, float]] = [
    ("n ≤ 16", 16),
    ("n ≤ 256", 256),
    ("n ≤ 4096", 4096),
    ("n > 4096", float("inf")),
]
"""The sizes of totals the report states apart (n: the terms one total adds)."""

Array = NDArray[Any]


def size_of(count: float) -> str:
    """The report's size bucket for a total of `count` terms."""
    return next(name for name, most in SIZES if count <= most)


def value_tolerance(ref: Array) -> Array:
    """PyTorch's float32 tolerance around each reference value."""
    return VALUE_ATOL + VALUE_RTOL * np.abs(ref)


def mismatching_bits(got: Array, expected: Array) -> int:
    """How many bits differ between two arrays of the same dtype and shape."""
    a = np.ascontiguousarray(got).view(np.uint8)
    b = np.ascontiguousarray(expected).view(np.uint8)
    return int(np.unpackbits(np.bitwise_xor(a, b)).sum())


def _ratio(error: Array, allowed: Array) -> Array:
    """error / allowed, with 0/0 = 0 and anything non-zero (or NaN) over 0 infinite."""
    error = np.where(np.isnan(error), np.inf, error)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(allowed > 0, error / np.where(allowed > 0, allowed, 1.0), np.inf)
    return np.where(error == 0, 0.0, ratio)


class IdentityMissing(Exception):
    """The engine does not say what it is: no identity, or no precision the contract knows."""


def engine_precision(engine: Any, spec: str) -> Precision:
    """The precision the engine's identity names; `IdentityMissing` saying what to do otherwise."""
    help_ = (
        "an engine must have an `identity` (deepsharp.core.EngineIdentity) naming its "
        f"precision, one of {', '.join(PRECISIONS)}: the contract holds its totals to that "
        "precision's bound (see docs/writing-an-engine.md)"
    )
    try:
        identity = getattr(engine, "identity", None)
    except Exception as error:  # a property that fails is no identity either
        raise IdentityMissing(f"{spec}: reading its identity raised {error!r}; {help_}") from error
    if identity is None:
        raise IdentityMissing(f"{spec} has no identity; {help_}")
    name = getattr(identity, "precision", None)
    if name is None:
        raise IdentityMissing(f"{spec}'s identity ({identity!r}) states no precision; {help_}")
    try:
        return precision_named(name)
    except ValueError:
        raise IdentityMissing(
            f"{spec}'s identity names the precision {name!r}, which is none of the precisions "
            f"there are; {help_}"
        ) from None


@dataclass
class Worst:
    """The worst one operation came to, over every check of it."""

    family: str
    worst: float = 0.0
    of_bound: float = 0.0
    checks: int = 0
    by_size: dict[str, list[float]] = field(default_factory=dict)
    """Totals only: size -> [worst in u·Σ|terms|, worst as a fraction of the bound, totals]."""

    def keep(self, worst: float, of_bound: float) -> None:
        self.checks += 1
        if _worse(worst, self.worst):
            self.worst = float(worst)
        if _worse(of_bound, self.of_bound):
            self.of_bound = float(of_bound)

    def keep_sizes(self, sizes: dict[str, list[float]]) -> None:
        for size, (worst, of_bound, totals) in sizes.items():
            kept = self.by_size.setdefault(size, [0.0, 0.0, 0])
            kept[0], kept[1] = _worst([kept[0], worst]), _worst([kept[1], of_bound])
            kept[2] += totals


def _worse(found: float, kept: float) -> bool:
    """Whether a measured value is worse than the one kept: NaN counts as the worst of all, and
    once kept stays (whatever comes after it, in whatever order)."""
    return math.isnan(found) or (not math.isnan(kept) and found > kept)


def _worst(values: list[float]) -> float:
    kept = values[0]
    for value in values[1:]:
        if _worse(value, kept):
            kept = value
    return kept


def _worst_of(entries: list[Worst]) -> dict[str, Any]:
    return {
        "worst": _worst([e.worst for e in entries]),
        "of_bound": _worst([e.of_bound for e in entries]),
        "checks": sum(e.checks for e in entries),
    }


def _sizes(entries: list[Worst]) -> dict[str, Any]:
    merged = Worst("totals")
    for entry in entries:
        merged.keep_sizes(entry.by_size)
    return {
        name: dict(zip(("worst", "of_bound", "totals"), merged.by_size[name]))
        for name, _ in SIZES
        if name in merged.by_size
    }


@dataclass
class Measurements:
    """The worst each engine came to each bound, kept over a session (what the report writes).

    Nothing in it depends on time or on the order tests ran in, so the same suite on the same
    engine writes the same report."""

    engines: dict[str, dict[str, Worst]] = field(default_factory=dict)
    identities: dict[str, dict[str, str | None]] = field(default_factory=dict)
    precisions: dict[str, str] = field(default_factory=dict)

    def entry(self, spec: str, family: str, operation: str) -> Worst:
        found = self.engines.setdefault(spec, {}).setdefault(operation, Worst(family))
        if found.family != family:  # one name, two families: one's worst would read as the other's
            raise ValueError(
                f"the contract suite names two checks {operation!r}, of the families "
                f"{found.family} and {family}: name each family's check apart"
            )
        return found

    def record(
        self, spec: str, family: str, operation: str, value: float, of_bound: float | None = None
    ) -> None:
        bound = BOUNDS[family]
        if of_bound is None:
            of_bound = value / bound if bound > 0 else float(value)
        self.entry(spec, family, operation).keep(value, of_bound)

    def parts(self) -> dict[str, Any]:
        """Everything kept, as plain lists and dicts: what a pytest-xdist worker hands its
        controller (`merge` takes it back)."""
        return {
            "engines": {
                spec: {
                    name: [e.family, e.worst, e.of_bound, e.checks, e.by_size]
                    for name, e in operations.items()
                }
                for spec, operations in self.engines.items()
            },
            "identities": self.identities,
            "precisions": self.precisions,
        }

    def merge(self, parts: dict[str, Any]) -> None:
        """Another session's `parts` kept beside these: the worse of each worst, the checks and
        totals added (so the report of a run split over workers is the report of one process,
        whatever order the workers end in)."""
        for spec, operations in parts["engines"].items():
            for name, (family, worst, of_bound, checks, by_size) in operations.items():
                entry = self.entry(spec, family, name)
                entry.keep(worst, of_bound)
                entry.checks += checks - 1  # keep() counted one
                entry.keep_sizes(by_size)
        self.identities.update(parts["identities"])
        self.precisions.update(parts["precisions"])

    def to_json(self) -> dict[str, Any]:
        engines: dict[str, Any] = {}
        for spec, operations in sorted(self.engines.items()):
            by_family: dict[str, list[Worst]] = {}
            for entry in operations.values():
                by_family.setdefault(entry.family, []).append(entry)
            totals = by_family.get("totals", [])
            engines[spec] = {
                "identity": self.identities.get(spec),
                "precision": self.precisions.get(spec),
                "families": {name: _worst_of(by_family[name]) for name in sorted(by_family)},
                "totals_by_size": _sizes(totals),
                "operations": {
                    name: {
                        "family": e.family,
                        "worst": e.worst,
                        "of_bound": e.of_bound,
                        "checks": e.checks,
                        **({"by_size": _sizes([e])} if e.family == "totals" else {}),
                    }
                    for name, e in sorted(operations.items())
                },
            }
        return {
            "bounds": BOUNDS,
            "units": UNITS,
            "totals_bounds": TOTALS_BOUNDS,
            "sizes": [name for name, _ in SIZES],
            "engines": engines,
        }


def _where(index: tuple[int, ...]) -> str:
    return f"at {list(index)}" if index else "(a single value)"


class Contract:
    """The checks one engine (named by `spec`, of `precision`) is held to; every check records
    its worst."""

    def __init__(self, spec: str, measurements: Measurements, precision: Precision | str) -> None:
        self.spec = spec
        self.measurements = measurements
        self.precision = precision_named(precision)
        measurements.precisions[spec] = self.precision.name

    def _same_form(self, operation: str, got: Array, shape: tuple[int, ...], dtype: Any) -> None:
        assert isinstance(got, np.ndarray), (
            f"{operation}: get() must give a numpy.ndarray, not {type(got).__name__}"
        )
        assert got.shape == shape, f"{operation}: shape {got.shape}, expected {shape}"
        assert got.dtype == np.dtype(dtype), (
            f"{operation}: dtype {got.dtype}, expected {np.dtype(dtype)}"
        )

    def totals_factor(self, count: Any, *, product: bool) -> Any:
        """How many u·Σ|terms| a total of `count` terms may stray on this engine's precision
        (`product`: a matrix product or a convolution, which a mixed precision takes in its
        half format)."""
        return self.precision.totals_factor(count, product=product)

    def totals(
        self,
        operation: str,
        got: Array,
        ref: Array,
        terms: Array,
        count: Any,
        *,
        product: bool,
        inputs: Array | None = None,
    ) -> float:
        """|got - ref| <= factor(n)·u·Σ|terms| for every element: `terms` holds Σ|terms| and
        `count` how many terms (n) each element adds. A product's `inputs`, Σ(|a| + |b|) over
        its terms (`deepsharp.contracts.half.input_sizes`), add the part of a mixed precision's
        bound that rounding inputs below the half format's smallest normal value strays
        (`Precision.totals_floor`). Gives the worst in units of u·Σ|terms|."""
        ref = np.asarray(ref, np.float64)
        self._same_form(operation, got, ref.shape, np.float32)
        scale = UNIT * np.broadcast_to(np.asarray(terms, np.float64), ref.shape)
        count = np.broadcast_to(np.asarray(count, np.float64), ref.shape)
        allowed = scale * self.totals_factor(count, product=product)
        if inputs is not None and product:
            allowed = allowed + self.precision.totals_floor(count, inputs)
        got64 = got.astype(np.float64)
        error = np.abs(got64 - ref)
        if product and self.precision.half_beyond < np.inf:
            # A product whose output the half format may round to infinity (float16's past
            # 65,504, as a card's output is) may be that infinity, of the exact result's sign.
            over = np.isinf(got64) & (np.sign(got64) == np.sign(ref))
            over &= np.abs(ref) + allowed >= self.precision.half_beyond
            error = np.where(over, 0.0, error)
        units = _ratio(error, scale)
        of_bound = _ratio(error, allowed)
        entry = self.measurements.entry(self.spec, "totals", operation)
        entry.keep_sizes(_by_size(units, of_bound, count))
        worst = float(units.max()) if units.size else 0.0
        bound = _bound_text(self.precision, product)
        self._judge("totals", operation, got, ref, of_bound, f"of {bound}", units=worst)
        return worst

    def values(self, operation: str, got: Array, ref: Array) -> float:
        """|got - ref| <= 1e-5 + 1.3e-6 * |ref| for every element."""
        ref = np.asarray(ref, np.float64)
        self._same_form(operation, got, ref.shape, np.float32)
        ratio = _ratio(np.abs(got.astype(np.float64) - ref), value_tolerance(ref))
        return self._judge("values", operation, got, ref, ratio, "of the tolerance")

    def tails(self, operation: str, got: Array, ref: Array) -> float:
        """|got - ref| <= 1.3e-6 * |ref| for every element: relative accuracy, no floor."""
        ref = np.asarray(ref, np.float64)
        self._same_form(operation, got, ref.shape, np.float32)
        ratio = _ratio(np.abs(got.astype(np.float64) - ref), TAIL_RTOL * np.abs(ref))
        return self._judge("tails", operation, got, ref, ratio, "of 1.3e-6·|ref|")

    def within(
        self, family: str, operation: str, got: Array, ref: Array, allowed: Array, unit: str
    ) -> float:
        """|got - ref| <= allowed for every element (a family whose bound is 1)."""
        ref = np.asarray(ref, np.float64)
        assert np.shape(got) == ref.shape, (
            f"{operation}: shape {np.shape(got)}, expected {ref.shape}"
        )
        got64 = np.asarray(got, np.float64)
        ratio = _ratio(np.abs(got64 - ref), np.asarray(allowed, np.float64))
        return self._judge(family, operation, got64, ref, ratio, unit)

    def own_size(
        self,
        operation: str,
        before: Sequence[Sequence[Array]],
        after: Sequence[Sequence[Array]],
        got: Sequence[Sequence[Array]],
        **settings: float,
    ) -> float:
        """An optimizer's update held to its own size (`update_tolerances`: 16·u of the sizes
        each value is made of), beside the value tolerance: `before` every group of its
        arguments, `after` the groups it updates as the formula gives them (float64), `got`
        the engine's (trial CP4: an Adam keeping its second moment in float16 passed the value
        tolerance's absolute 1e-5)."""
        allowed = update_tolerances(operation, before, after, **settings)
        worst = 0.0
        for bounds, refs, values in zip(allowed, after, got, strict=True):
            for bound, ref, value in zip(bounds, refs, values, strict=True):
                worst = max(
                    worst,
                    self.within(
                        "values",
                        f"{operation}, its own size",
                        value,
                        ref,
                        bound,
                        "of 16·u·Σ|sizes|",
                    ),
                )
        return worst

    def measured(self, family: str, operation: str, worst: float, unit: str) -> float:
        """A worst measured elsewhere (the nudging check measures its own), recorded and held
        to the family's bound."""
        if np.isnan(worst):
            worst = float("inf")
        self.measurements.record(self.spec, family, operation, worst)
        bound = BOUNDS[family]
        if not worst <= bound:
            raise AssertionError(
                f"{operation} on {self.spec} breaks the {family} contract: "
                f"{_over(worst, bound)} {unit} (bound {bound:g})"
            )
        return worst

    def moves(self, operation: str, got: Array, expected: Array, family: str = "moves") -> int:
        """The same bits: shape, dtype and every value's bit pattern."""
        expected = np.asarray(expected)
        self._same_form(operation, got, expected.shape, expected.dtype)
        bits = mismatching_bits(got, expected)
        self.measurements.record(self.spec, family, operation, float(bits))
        if bits:
            raise AssertionError(
                f"{operation} on {self.spec}: {bits} bits differ (a move must be exact); "
                + _first_difference(got, expected)
            )
        return bits

    def _judge(
        self,
        family: str,
        operation: str,
        got: Array,
        ref: Array,
        ratio: Array,
        unit: str,
        units: float | None = None,
    ) -> float:
        """Records the worst ratio (and for totals the worst in u·Σ|terms|, `units`) and fails
        at the worst element when it is over the family's bound."""
        worst = float(ratio.max()) if ratio.size else 0.0
        if np.isnan(worst):
            worst = float("inf")
        self.measurements.record(
            self.spec, family, operation, worst if units is None else units, of_bound=worst
        )
        bound = BOUNDS[family]
        if not worst <= bound:
            index = np.unravel_index(int(np.argmax(ratio)), ratio.shape) if ratio.ndim else ()
            raise AssertionError(
                f"{operation} on {self.spec} ({self.precision.name}) breaks the {family} "
                f"contract {_where(tuple(int(i) for i in index))}: got {float(got[index])!r}, "
                f"float64 reference {float(ref[index])!r}: {_over(worst, bound)} {unit} (bound "
                f"{bound:g})"
            )
        return worst


def _over(worst: float, bound: float) -> str:
    """A ratio past its bound, in as many digits as tell it from the bound (1.0000113, not 1)."""
    for digits in range(3, 10):
        text = f"{worst:.{digits}g}"
        if float(text) > bound:
            return text
    return repr(worst)


def _bound_text(precision: Precision, product: bool) -> str:
    if precision.name == "strict":
        return "3u·Σ|terms|"
    if precision.mixed and product:
        return f"((1 + {precision.half_unit:.3g})³(1 + (n + 1)u) - 1)·Σ|terms| (+ floor)"
    return "(n + 1)u·Σ|terms|"


def _by_size(units: Array, of_bound: Array, count: Array) -> dict[str, list[float]]:
    """The worst of each size of total: [u·Σ|terms|, fraction of the bound, how many totals]."""
    sizes: dict[str, list[float]] = {}
    low = -np.inf
    for name, most in SIZES:
        inside = (count > low) & (count <= most)
        low = most
        if inside.any():
            worst, of = float(units[inside].max()), float(of_bound[inside].max())
            sizes[name] = [worst, of, int(inside.sum())]
    return sizes


def _first_difference(got: Array, expected: Array) -> str:
    """Where two arrays of one dtype and shape first differ, and what each holds there."""
    width = expected.itemsize
    wrong = np.flatnonzero(
        np.ascontiguousarray(got).view(np.uint8).reshape(got.size, width)
        != np.ascontiguousarray(expected).view(np.uint8).reshape(expected.size, width)
    )
    first = np.unravel_index(int(wrong[0]) // width, expected.shape) if expected.ndim else ()
    return (
        f"first {_where(tuple(int(i) for i in first))}: "
        f"got {got[first]!r}, expected {expected[first]!r}"
    )
