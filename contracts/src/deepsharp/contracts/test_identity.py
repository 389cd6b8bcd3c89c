"""The engine says what it is: an identity naming the precision its totals are held to.

The `contract` fixture reads it before any check runs, and every check of an engine without one
fails with the same message; this check states the promise on its own.
"""

from __future__ import annotations

from collections.abc import Callable

from deepsharp.contracts.measure import Contract
from deepsharp.core.engine import Engine, precision_named


def test_the_engine_states_its_name_and_precision(
    engine_factory: Callable[[], Engine], contract: Contract
) -> None:
    identity = engine_factory().identity
    assert isinstance(identity.name, str) and identity.name, (
        f"the identity's name must be non-empty text, not {identity.name!r}"
    )
    assert precision_named(identity.precision) == contract.precision
    for field in ("version", "device"):
        value = getattr(identity, field, None)
        assert value is None or isinstance(value, str), (
            f"the identity's {field} must be text or None, not {value!r}"
        )
