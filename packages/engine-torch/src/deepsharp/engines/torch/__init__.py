"""deepsharp's torch engine: the same arithmetic on libtorch, on the processor or an NVIDIA card.

This distribution depends on no torch: the application brings the build it runs on.
Importing this module never imports torch; making an engine does, and where torch (or the card
asked for) is missing, `EngineUnavailableError` says which packages bring it.

- `TorchEngine.on_cpu(precision="float32")`, `TorchEngine.on_gpu(index=0, precision="float32")`:
  the engines (binding); precisions `float32` (the default: libtorch's own kernels), `strict`
  (every total in float64, rounded once), `mixed_bfloat16` (products and convolutions in
  bfloat16, added in float32) and, on a card, `mixed_float16`.
- `DESCRIPTION`: what the `deepsharp.engines` entry point gives: specs `torch` (= `torch:cpu`),
  `torch:cpu`, `torch:cuda:N`, each optionally followed by a precision (`torch:cpu:strict`).
- `describe_torch()`: what `deepsharp doctor` reports about torch, builds and cards.
"""

from deepsharp.core.engine import EngineDescription, split_precision
from deepsharp.core.errors import EngineUnavailableError
from deepsharp.engines.torch import _mixed as _entered  # makes a mixed precision's engines
from deepsharp.engines.torch._engine import CARD_ONLY, TorchEngine
from deepsharp.engines.torch._probe import (
    CPU_BUILD,
    CUDA_BUILDS,
    TorchReport,
    describe_torch,
    doctor_lines,
)
from deepsharp.engines.torch._totals import OFFERED

__all__ = [
    "CPU_BUILD",
    "CUDA_BUILDS",
    "DESCRIPTION",
    "TorchEngine",
    "TorchReport",
    "describe_torch",
    "from_spec",
]

PRECISIONS = tuple(OFFERED)
"""The precisions the torch engine offers, its default first."""
ON_CPU = tuple(precision for precision in PRECISIONS if precision not in CARD_ONLY)
"""Those it offers on the processor (mixed_float16 is a card's)."""


def from_spec(option: str = "") -> TorchEngine:
    """A torch engine from what follows `torch:` in a spec: '' or 'cpu' -> on_cpu();
    'cuda' or 'cuda:N' -> on_gpu(N); either followed by a precision (':strict', ':float32')."""
    on_card = option.strip().lower().startswith(("cuda", "gpu"))
    card_only = option.rpartition(":")[2].strip().lower() in CARD_ONLY  # refused below, saying
    offered = PRECISIONS if on_card or card_only else ON_CPU  # why; on the processor, a near
    place, precision = split_precision("torch", option, offered)  # name's list is its own
    text = place.strip().lower()
    if text in ("", "cpu"):
        return TorchEngine.on_cpu(precision)
    if text in ("cuda", "gpu"):
        return TorchEngine.on_gpu(0, precision)
    kind, _, number = text.partition(":")
    if kind in ("cuda", "gpu") and number.isdigit():
        return TorchEngine.on_gpu(int(number), precision)
    raise EngineUnavailableError(
        f"the torch engine takes 'cpu', 'cuda' or 'cuda:N' (N a card's index), each optionally "
        f"followed by a precision ({', '.join(PRECISIONS)}), not {option!r}: e.g. torch:cpu, "
        "torch:cuda:0 or torch:cpu:strict"
    )


DESCRIPTION = EngineDescription(
    name="torch",
    make=from_spec,
    default_spec="torch:cpu",
    precisions=PRECISIONS,
    specs=(
        "torch",
        "torch:cpu",
        "torch:cpu:strict",
        "torch:cpu:mixed_bfloat16",
        "torch:cuda:0",
        "torch:cuda:0:strict",
        "torch:cuda:0:mixed_bfloat16",
        "torch:cuda:0:mixed_float16",
    ),
    install=f"a torch build: for the processor, {CPU_BUILD} ; for NVIDIA cards, {CUDA_BUILDS}",
    doctor=doctor_lines,
)
"""The torch engine as it describes itself through its entry point."""

del _entered
