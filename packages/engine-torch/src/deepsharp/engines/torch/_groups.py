"""The torch engine's helpers over many tensors at once: a group of slots found to be one flat
tensor's parts (an update then passes over the flat tensor once), gradients joined as the slots
lie, and tensors padded to whole vector passes of libtorch's value-by-value kernels.

torch is bound (`bind`) when the first engine is made, never when this module is imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Tensor = Any

torch: Any = None
F: Any = None


def bind(module: Any) -> None:
    """Bind torch (the engine's `_bind` calls this with the module it loaded)."""
    global torch, F
    torch, F = module, module.nn.functional


LANES = 64
"""Values every one of libtorch's vector passes of a value-by-value kernel covers (two vectors
of 16 float32 values on AVX-512, of 8 on AVX2; 64 covers any)."""


def lanes(*xs: Tensor) -> tuple[list[Tensor], int]:
    """The tensors flattened and padded with zeros to a multiple of `LANES` times libtorch's
    threads, and their count of values: each thread's share of a value-by-value kernel (the
    values split evenly among them) is then whole vector passes, none finished on the scalar
    formula (test_torch_value_tails holds every size and thread count to the same bits)."""
    count = xs[0].numel()
    short = -count % (LANES * torch.get_num_threads()) if xs[0].device.type == "cpu" else 0
    if not short:
        return [x.reshape(-1) for x in xs], count
    return [F.pad(x.reshape(-1), (0, short)) for x in xs], count


FLATS_KEPT = 8
"""Groups of tensors whose flat tensors an engine remembers (`TorchEngine._flat`)."""


def flat_tensors(*groups: Sequence[Tensor]) -> list[Tensor] | None:
    """The flat tensors behind these groups, where each group is exactly one flat tensor's
    consecutive parts, in order (how the core lays out slots and an optimizer's memory): an
    update then makes each of its passes once over every slot, not once a slot."""
    found = []
    for group in groups:
        base = group[0]._base if group else None
        if base is None or base.dim() != 1 or not base.is_contiguous():
            return None
        start = 0
        for part in group:
            if part._base is not base or part.storage_offset() != base.storage_offset() + start:
                return None
            if not part.is_contiguous():
                return None
            start += part.numel()
        if start != base.numel():
            return None
        found.append(base)
    return found


def joined(grads: Sequence[Tensor]) -> Tensor:
    """Every gradient's values one after the other, as the slots lie in their flat tensor."""
    return torch.cat([grad.reshape(-1) for grad in grads])
