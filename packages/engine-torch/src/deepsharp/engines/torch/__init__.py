"""deepsharp's torch engine: the same arithmetic on libtorch, on the processor or an NVIDIA card.

This distribution depends on no torch: the application brings the build it runs on.
Importing this module never imports torch; making an engine does, and where torch (or the card
asked for) is missing, `EngineUnavailableError` says which packages bring it.

- `TorchEngine.on_cpu()`, `TorchEngine.on_gpu(index=0)`: the engines (binding).
- `from_spec(option)`: the `deepsharp.engines` entry point (`torch`, `torch:cpu`, `torch:cuda:N`,
  each optionally with `:float32-totals`).
- `describe_torch()`: what `deepsharp doctor` reports about torch, builds and cards.
"""

from __future__ import annotations

from deepsharp.core.errors import EngineUnavailableError
from deepsharp.engines.torch._engine import TorchEngine
from deepsharp.engines.torch._probe import CPU_BUILD, CUDA_BUILDS, TorchReport, describe_torch

__all__ = ["CPU_BUILD", "CUDA_BUILDS", "TorchEngine", "TorchReport", "describe_torch", "from_spec"]


def from_spec(option: str = "") -> TorchEngine:
    """The entry point's factory: '' or 'cpu' -> on_cpu(); 'cuda' or 'cuda:N' -> on_gpu(N);
    either followed by ':float32-totals' adds totals in libtorch's float32 kernels."""
    text = option.strip().lower()
    totals = "float64"
    if text.endswith("float32-totals"):
        text, totals = text[: -len("float32-totals")].rstrip(":"), "float32"
    if text in ("", "cpu"):
        return TorchEngine.on_cpu(totals)
    if text == "cuda" or text == "gpu":
        return TorchEngine.on_gpu(0, totals)
    kind, _, number = text.partition(":")
    if kind in ("cuda", "gpu") and number.isdigit():
        return TorchEngine.on_gpu(int(number), totals)
    raise EngineUnavailableError(
        f"the torch engine takes 'cpu', 'cuda' or 'cuda:N' (N a card's index), each optionally "
        f"followed by ':float32-totals', not {option!r}: e.g. torch:cpu, torch:cuda:0 or "
        "torch:cpu:float32-totals"
    )
