"""torch.distributed, imported only when a job is joined or launched: the package imports (and
its pure parts work) where no torch is installed."""

from __future__ import annotations

from typing import Any

from deepsharp.distributed.errors import DistributedError

__all__ = ["require_torch", "resolve_backend"]

TESTED_TORCH = "2.13.0"
"""The torch deepsharp is tested with (deepsharp-engine-torch's; this package needs no engine)."""

INSTALL = (
    f"install the torch build you run on: `pip install torch=={TESTED_TORCH} --index-url "
    f"https://download.pytorch.org/whl/cpu` (processors only) or `pip install torch=={TESTED_TORCH}` "
    "(NVIDIA cards)"
)


def require_torch() -> tuple[Any, Any]:
    """torch and torch.distributed; a DistributedError naming what to install otherwise."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError as error:
        raise DistributedError(
            f"data-parallel training runs on torch.distributed, and torch cannot be imported "
            f"here ({error}): {INSTALL}"
        ) from None
    if not dist.is_available():
        raise DistributedError(
            f"this torch build ({torch.__version__}) was made without torch.distributed: {INSTALL}"
        )
    return torch, dist


def resolve_backend(backend: str) -> str:
    """The backend string torch.distributed is started with: "auto" is gloo for processors and,
    where this torch can use a card, NCCL for cards ("cpu:gloo,cuda:nccl")."""
    torch, dist = require_torch()
    cards = torch.cuda.is_available() and dist.is_nccl_available()
    if backend == "auto":
        return "cpu:gloo,cuda:nccl" if cards else "gloo"
    if backend == "gloo":
        if not dist.is_gloo_available():
            raise DistributedError(
                f"this torch build ({torch.__version__}) has no gloo backend: use backend='nccl' "
                "on cards, or a build with gloo (every official build has it)"
            )
        return "gloo"
    if not dist.is_nccl_available():
        raise DistributedError(
            f"backend 'nccl' needs a CUDA build of torch; this one ({torch.__version__}) has no "
            "NCCL: use backend='gloo' (processors) or install a CUDA build "
            f"(`pip install torch=={TESTED_TORCH}`)"
        )
    if not torch.cuda.is_available():
        raise DistributedError(
            "backend 'nccl' runs on NVIDIA cards, and torch finds none usable here (no card, or "
            "no driver): use backend='gloo' or 'auto'"
        )
    return "nccl"
