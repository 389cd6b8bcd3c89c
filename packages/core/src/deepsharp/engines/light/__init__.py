"""The light engine: NumPy float32 arrays in the process's memory; it ships with the core.

- `LightEngine(precision="strict")`: the engine (binding); precisions `strict` (the default:
  every total added in float64 and rounded once), `float32` (NumPy's own float32 kernels),
  `mixed_bfloat16` and `mixed_float16` (products' inputs rounded to the half format, added in
  float32).
- `DESCRIPTION`: what the `deepsharp.engines` entry point gives (`light`, `light:strict`,
  `light:float32`, `light:mixed_bfloat16`, `light:mixed_float16`).
"""

from deepsharp.core.engine import EngineDescription, split_precision
from deepsharp.core.errors import EngineUnavailableError
from deepsharp.engines.light._engine import LightEngine, ReferenceEngine
from deepsharp.engines.light._totals import OFFERED

__all__ = ["DESCRIPTION", "LightEngine", "ReferenceEngine", "from_spec"]

PRECISIONS = tuple(OFFERED)
"""The precisions the light engine offers, its default first."""


def from_spec(option: str = "") -> LightEngine:
    """A light engine from what follows `light:` in a spec: '' or a precision."""
    rest, precision = split_precision("light", option, PRECISIONS)
    if rest.strip():
        raise EngineUnavailableError(
            f"the light engine takes only a precision, not {option!r}: "
            + ", ".join(f"light:{name}" for name in PRECISIONS)
        )
    return LightEngine(precision)


DESCRIPTION = EngineDescription(
    name="light",
    make=from_spec,
    default_spec="light",
    precisions=PRECISIONS,
    specs=("light", *(f"light:{name}" for name in PRECISIONS)),
    install="it ships with deepsharp itself: pip install --force-reinstall deepsharp",
)
"""The light engine as it describes itself through its entry point."""
