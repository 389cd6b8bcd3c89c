"""The onnx engine: every operation a graph of its ONNX form alone, run by onnxruntime.

It ships with the core and needs the optional extra `deepsharp[onnx]` (onnx and onnxruntime).
Its forms are the exporter's (`deepsharp.core.export.forms`), so holding it to the contract
(`pytest --pyargs deepsharp.contracts --engine onnx`) holds every operator an exported file
holds (docs/export.md).

- `OnnxEngine(opset=17)`: the engine; precision `float32` (onnxruntime's own kernels).
- `DESCRIPTION`: what the `deepsharp.engines` entry point gives (`onnx`, `onnx:opset18`).
"""

from deepsharp.core.engine import EngineDescription, split_precision
from deepsharp.core.errors import EngineUnavailableError
from deepsharp.core.export.graph import DEFAULT_OPSET, MIN_OPSET
from deepsharp.engines.onnx._engine import INSTALL, OnnxEngine

__all__ = ["DESCRIPTION", "OnnxEngine", "from_spec"]

PRECISIONS = ("float32",)
"""The precision the onnx engine offers: onnxruntime adds totals in its float32 kernels."""


def from_spec(option: str = "") -> OnnxEngine:
    """An onnx engine from what follows `onnx:` in a spec: '', `opsetN`, and the precision."""
    rest, _ = split_precision("onnx", option, PRECISIONS)
    rest = rest.strip()
    if not rest:
        return OnnxEngine(DEFAULT_OPSET)
    if rest.startswith("opset") and rest[5:].isdigit() and int(rest[5:]) >= MIN_OPSET:
        return OnnxEngine(int(rest[5:]))
    raise EngineUnavailableError(
        f"the onnx engine takes an opset of {MIN_OPSET} or more and its precision, not "
        f"{option!r}: onnx, onnx:opset18, onnx:float32"
    )


def _doctor() -> list[str]:
    try:
        made = OnnxEngine()
    except EngineUnavailableError as error:
        return [str(error)]
    return [f"onnxruntime {made.version}; forms written for opset {made.opset}"]


DESCRIPTION = EngineDescription(
    name="onnx",
    make=from_spec,
    default_spec="onnx",
    precisions=PRECISIONS,
    specs=("onnx", "onnx:opset18", "onnx:float32"),
    install=INSTALL,
    doctor=_doctor,
)
"""The onnx engine as it describes itself through its entry point."""
