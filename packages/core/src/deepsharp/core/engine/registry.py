"""The engines installed here, found through the `deepsharp.engines` entry points, and made from specs."""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from deepsharp.core.engine.protocol import Engine
from deepsharp.core.errors import EngineUnavailableError

__all__ = ["available_engines", "make_engine"]


def _registered() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group="deepsharp.engines")}


def available_engines() -> list[str]:
    """The names of the engines installed here (found through the `deepsharp.engines` entry points)."""
    return sorted(_registered())


KNOWN_ENGINES = {
    "light": "it ships with deepsharp itself: reinstall deepsharp",
    "torch": "pip install deepsharp-engine-torch, and a torch build (see docs/install.md)",
    "testbuffer": "pip install deepsharp-engine-testbuffer",
}


def make_engine(spec: str | Engine | None = None) -> Engine:
    """An engine from a spec: `light`, `testbuffer`, `torch:cpu`, `torch:cuda:0`, `module:factory`.

    None gives the light engine; an engine passes through unchanged. An installed engine's
    entry point names a function `from_spec(option: str) -> Engine` (option: what follows
    the first colon, '' when nothing does); `module:factory` calls `factory()` from `module`.
    """
    if spec is None:
        spec = "light"
    if not isinstance(spec, str):
        return spec
    name, _, option = spec.partition(":")
    registered = _registered()
    if name in registered:
        from_spec = registered[name].load()
        engine: Engine = from_spec(option)
        return engine
    if name in KNOWN_ENGINES:
        installed = ", ".join(sorted(registered)) or "none"
        raise EngineUnavailableError(
            f"the {name!r} engine is not installed (installed: {installed}); {KNOWN_ENGINES[name]}"
        )
    if not option:
        raise EngineUnavailableError(
            f"no engine named {spec!r}: use light, testbuffer, torch:cpu, torch:cuda:N "
            "or module:factory for an outside engine"
        )
    import importlib

    try:
        module = importlib.import_module(name)
    except ImportError as error:
        raise EngineUnavailableError(
            f"engine spec {spec!r}: cannot import module {name!r} ({error})"
        ) from error
    factory = getattr(module, option, None)
    if not callable(factory):
        raise EngineUnavailableError(
            f"engine spec {spec!r}: module {name!r} has no callable {option!r}"
        )
    made: Engine = factory()
    return made
