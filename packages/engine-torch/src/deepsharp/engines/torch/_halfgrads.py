"""A mixed precision's weight gradient on the processor: x.T @ grad in the half format, given
in float32 laid out in rows (the optimizer reads it so), formed the way this processor's oneDNN
takes faster.

torch is bound (`bind`) when the first engine is made, never when this module is imported.
"""

from __future__ import annotations

from typing import Any

Tensor = Any

torch: Any = None
F32: Any = None
TURNED = True
"""Whether a weight gradient is formed as PyTorch's Linear forms it, (grad.T @ x).T, and then
laid out: on processors with AMX, or where torch cannot say (`weight_gradient`)."""


def bind(module: Any) -> None:
    """Bind torch (the engine's `_bind` calls this with the module it loaded)."""
    global torch, F32, TURNED
    torch, F32 = module, module.float32
    amx = getattr(getattr(module, "cpu", None), "_is_amx_tile_supported", None)
    TURNED = True if amx is None else bool(amx())


LAID_OUT = 1 << 17
"""The fewest values of a transposed half tensor `laid_out` moves before it widens them."""

DIRECT = 128
"""The fewest columns of a weight gradient formed as it stands where that is faster
(`weight_gradient`)."""


def laid_out(turned: Tensor) -> Tensor:
    """A half tensor's transpose `turned` (a weight gradient formed wide) laid out in rows, in
    float32: a large one moved in the half format first, then widened (half the bytes crossing
    the caches strided: 1,024 x 1,024, 0.38 ms against 0.87 ms in one pass; 512 x 2,048,
    0.38 against 1.05 ms), a narrow or small one in one pass (10 x 21,632: 0.05 against
    0.17 ms). Two threads, torch 2.13.0, AMD EPYC; the same values either way."""
    if turned.numel() >= LAID_OUT and min(turned.shape) >= 32:
        return turned.contiguous().to(F32)
    return turned.to(F32, memory_format=torch.contiguous_format)


def weight_gradient(x: Tensor, grad: Tensor) -> Tensor:
    """x.T @ grad, both in the half format and x tall, in float32 laid out in rows.

    oneDNN's AMX kernels read a stored-transposed left operand slowly, so there it is formed
    as PyTorch's Linear forms its weights' gradient, (grad.T @ x).T, and laid out (`laid_out`):
    4,096 x 1,024 x 1,024 took 13.4 ms as it stands against 10.6 ms so (Intel Xeon with AMX).
    Without AMX (AVX-512 BF16) a gradient of `DIRECT` columns or more, and no more columns than
    rows, is faster as it stands, with nothing to lay out: 10.7 against 11.2 ms there, 0.35
    against 0.44 ms at 512 x 2,048 x 128; a narrow one (10 columns: 0.45 against 0.38 ms at
    256 x 21,632 x 10) or a wide one (128 x 512: the same) is not (AMD EPYC, two threads,
    torch 2.13.0: the same bits either way in each of these)."""
    rows, columns = x.shape[1], grad.shape[1]
    if not TURNED and DIRECT <= columns <= rows:
        return torch.mm(x.t(), grad).to(F32)
    return laid_out(torch.mm(grad.t(), x).t())
