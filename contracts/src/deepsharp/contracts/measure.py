"""The bounds of the contract, and the checks that hold an engine to them and keep the worst.

Each check compares what an engine gave with the float64 reference the suite computed from the
same float32 inputs, records how close it came (in the family's own unit) and fails with the
worst element named when it is outside its family's bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

FLOAT32_TOTALS = "float32"

__all__ = [
    "BOUNDS",
    "FLOAT32_TOTALS",
    "UNIT",
    "VALUE_ATOL",
    "VALUE_RTOL",
    "Contract",
    "Measurements",
    "mismatching_bits",
    "value_tolerance",
]

UNIT = 2.0**-24
"""float32's unit roundoff, u."""

VALUE_ATOL = 1e-5
VALUE_RTOL = 1.3e-6

BOUNDS: dict[str, float] = {
    "transfers": 0.0,  # mismatching bits
    "totals": 3.0,  # |got - ref| in units of u * sum(|terms|)
    "values": 1.0,  # |got - ref| as a fraction of 1e-5 + 1.3e-6 * |ref|
    "moves": 0.0,  # mismatching bits
    "rules": 1.0,  # a rule's forward and gradient on the engine: fraction of its tolerance
    "nudging": 1.0,  # a rule's gradient against central differences (deepsharp.contracts.nudging)
    "steps": 0.0,  # mismatching bits between steps that must agree bit for bit
}

# FLOAT32_TOTALS (deepsharp.core.engine) is the precision of an engine that adds its totals in
# float32 in an order of its own (the light and torch engines' `totals="float32"`: NumPy's and
# libtorch's kernels). No float32 order keeps 3u·Σ|terms| for long totals of one sign, so such an
# engine is held to the classical bound of a float32 sum of n terms added in any order:
# |got - ref| <= (n + 1)·u·Σ|terms| (gamma_n and the final rounding), n the number of terms in
# that element's total.

UNITS: dict[str, str] = {
    "transfers": "mismatching bits",
    "totals": "u·Σ|terms| (u = 2^-24)",
    "values": "fraction of 1e-5 + 1.3e-6·|ref|",
    "moves": "mismatching bits",
    "rules": "fraction of 1e-5 + 1.3e-6·|ref| + 3u·S",
    "nudging": "fraction of 1e-7 + 1e-5·|nudged|",
    "steps": "mismatching bits",
}

Array = NDArray[Any]


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


@dataclass
class Worst:
    family: str
    worst: float = 0.0
    checks: int = 0


@dataclass
class Measurements:
    """The worst each engine came to each bound, kept over a session (what the report writes)."""

    engines: dict[str, dict[str, Worst]] = field(default_factory=dict)
    identities: dict[str, dict[str, str | None]] = field(default_factory=dict)

    def record(self, spec: str, family: str, operation: str, value: float) -> None:
        operations = self.engines.setdefault(spec, {})
        entry = operations.setdefault(operation, Worst(family))
        entry.checks += 1
        if not value <= entry.worst:  # NaN counts as worst
            entry.worst = float(value)

    def to_json(self) -> dict[str, Any]:
        engines: dict[str, Any] = {}
        for spec, operations in sorted(self.engines.items()):
            families: dict[str, float] = {}
            for entry in operations.values():
                families[entry.family] = max(families.get(entry.family, 0.0), entry.worst)
            engines[spec] = {
                "identity": self.identities.get(spec),
                "families": dict(sorted(families.items())),
                "operations": {
                    name: {"family": e.family, "worst": e.worst, "checks": e.checks}
                    for name, e in sorted(operations.items())
                },
            }
        return {"bounds": BOUNDS, "units": UNITS, "engines": engines}


def _where(index: tuple[int, ...]) -> str:
    return f"at {list(index)}" if index else "(a single value)"


class Contract:
    """The checks one engine (named by `spec`) is held to; every check records its worst."""

    def __init__(self, spec: str, measurements: Measurements, precision: str | None = None) -> None:
        self.spec = spec
        self.measurements = measurements
        self.precision = precision

    def _same_form(self, operation: str, got: Array, shape: tuple[int, ...], dtype: Any) -> None:
        assert isinstance(got, np.ndarray), (
            f"{operation}: get() must give a numpy.ndarray, not {type(got).__name__}"
        )
        assert got.shape == shape, f"{operation}: shape {got.shape}, expected {shape}"
        assert got.dtype == np.dtype(dtype), (
            f"{operation}: dtype {got.dtype}, expected {np.dtype(dtype)}"
        )

    def totals_factor(self, count: Any) -> Any:
        """How many u·Σ|terms| a total of `count` terms may stray on this engine: 3, or for
        an engine with float32 totals n + 1 (at least 3)."""
        if self.precision != FLOAT32_TOTALS:
            return BOUNDS["totals"]
        if count is None:
            raise ValueError("a check of float32 totals must say how many terms each one adds")
        return np.maximum(BOUNDS["totals"], np.asarray(count, np.float64) + 1.0)

    def totals(
        self, operation: str, got: Array, ref: Array, terms: Array, count: Any = None
    ) -> float:
        """|got - ref| <= 3u * sum(|terms|) for every element; `terms` holds sum(|terms|) and
        `count` how many terms each element adds (needed for float32 totals only)."""
        ref = np.asarray(ref, np.float64)
        self._same_form(operation, got, ref.shape, np.float32)
        scale = UNIT * np.asarray(terms, np.float64)
        if self.precision != FLOAT32_TOTALS:
            ratio = _ratio(np.abs(got.astype(np.float64) - ref), scale)
            return self._judge("totals", operation, got, ref, ratio, "u·Σ|terms|")
        ratio = _ratio(np.abs(got.astype(np.float64) - ref), scale * self.totals_factor(count))
        unit = "of (n + 1)u·Σ|terms|, n the terms of a total"
        return self._judge("totals", operation, got, ref, ratio, unit, bound=1.0)

    def values(self, operation: str, got: Array, ref: Array) -> float:
        """|got - ref| <= 1e-5 + 1.3e-6 * |ref| for every element."""
        ref = np.asarray(ref, np.float64)
        self._same_form(operation, got, ref.shape, np.float32)
        ratio = _ratio(np.abs(got.astype(np.float64) - ref), value_tolerance(ref))
        return self._judge("values", operation, got, ref, ratio, "of the tolerance")

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

    def measured(self, family: str, operation: str, worst: float, unit: str) -> float:
        """A worst measured elsewhere (the core's nudging check measures its own), recorded and
        held to the family's bound."""
        if np.isnan(worst):
            worst = float("inf")
        self.measurements.record(self.spec, family, operation, worst)
        bound = BOUNDS[family]
        if not worst <= bound:
            raise AssertionError(
                f"{operation} on {self.spec} breaks the {family} contract: {worst:.3g} {unit} "
                f"(bound {bound:g})"
            )
        return worst

    def moves(self, operation: str, got: Array, expected: Array, family: str = "moves") -> int:
        """The same bits: shape, dtype and every value's bit pattern."""
        expected = np.asarray(expected)
        self._same_form(operation, got, expected.shape, expected.dtype)
        bits = mismatching_bits(got, expected)
        self.measurements.record(self.spec, family, operation, float(bits))
        if bits:
            wrong = (
                np.flatnonzero(
                    np.ascontiguousarray(got).view(np.uint8).reshape(got.size, -1)
                    != np.ascontiguousarray(expected).view(np.uint8).reshape(expected.size, -1)
                )
                // expected.itemsize
            )
            first = np.unravel_index(int(wrong[0]), expected.shape) if expected.ndim else ()
            raise AssertionError(
                f"{operation} on {self.spec}: {bits} bits differ (a move must be exact); first "
                f"{_where(tuple(int(i) for i in first))}: "
                f"got {got[first]!r}, expected {expected[first]!r}"
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
        bound: float | None = None,
    ) -> float:
        worst = float(ratio.max()) if ratio.size else 0.0
        if np.isnan(worst):
            worst = float("inf")
        self.measurements.record(self.spec, family, operation, worst)
        bound = BOUNDS[family] if bound is None else bound
        if not worst <= bound:
            index = np.unravel_index(int(np.argmax(ratio)), ratio.shape) if ratio.ndim else ()
            raise AssertionError(
                f"{operation} on {self.spec} breaks the {family} contract "
                f"{_where(tuple(int(i) for i in index))}: got {float(got[index])!r}, "
                f"float64 reference {float(ref[index])!r}: {worst:.3g} {unit} (bound {bound:g})"
            )
        return worst
