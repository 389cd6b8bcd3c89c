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


def test_the_engine_s_identity_holds_still_and_is_its_own(
    engine_factory: Callable[[], Engine],
) -> None:
    """The identity a checkpoint records is the same read twice and on a fresh engine (one of
    a build stamp or a counter made every resume fail), and names no engine of deepsharp's
    but one of its own making (one borrowed from the light engine resumed the light engine's
    checkpoints, silently: trial E)."""
    engine = engine_factory()
    identity = engine.identity
    assert engine.identity == identity, f"read twice: {identity} and then {engine.identity}"
    fresh = engine_factory().identity
    assert fresh == identity, f"a fresh engine's identity {fresh} is not {identity}"
    module = type(engine).__module__
    for own in OWN_ENGINES:
        if identity.name == own:
            home = f"deepsharp.engines.{own}"
            assert module == home or module.startswith(f"{home}."), (
                f"the identity names deepsharp's {own!r} engine, and this engine is "
                f"{type(engine).__qualname__} of {module}: name an engine of one's own by its "
                "own name (a subclass's too: name = '...'), so that checkpoints taken on it "
                "resume on it alone"
            )


OWN_ENGINES = ("light", "torch", "testbuffer", "onnx")
"""The engines deepsharp makes (an identity naming one is theirs alone)."""
