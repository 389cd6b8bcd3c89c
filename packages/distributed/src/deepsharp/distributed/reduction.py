"""The two ways the processes' gradients are added, on flat float32 torch tensors.

"ordered" (`ordered_sum`): the flat gradient of W·S values is cut into W contiguous shards of
S; an all_to_all hands each rank the W copies of its own shard, in rank order; the rank adds
them one after another, 0 .. W-1, in float32; an all_gather gives every rank every summed
shard. The collectives only move values, and each sum is added in one fixed order, so the
result is the same bits at a given world size whatever algorithm, topology or backend carries
it, on every rank. A small gradient (below `GATHER_BELOW` values times W) takes one collective
instead of two, its time being the collectives' latency: an all_gather of the whole gradients,
each rank adding all W in rank order itself - element by element the same sums, the same bits.

"fast" (`fast_sum`): the backend's all_reduce, which adds in whatever order its algorithm takes
(within the same float32 bound, not the same bits).

gloo runs all_to_all_single on processors (checked on torch 2.13; gloo's alltoall entered
torch in 2020, pytorch/pytorch#41424), NCCL on cards: torch.distributed's collectives only.
"""

from __future__ import annotations

from typing import Any

from deepsharp.distributed._torch import require_torch

__all__ = ["GATHER_BELOW", "all_gather", "fast_sum", "ordered_sum", "shard_width"]

GATHER_BELOW = 1 << 16
"""Below this many values times W, the ordered sum gathers every rank's whole gradient (one
collective, W·N values in) rather than shards (two collectives, 2·(W-1)/W·N values each way)."""


def shard_width(count: int, world_size: int) -> int:
    """S: how many values each rank's shard holds (the flat gradient is padded to W·S)."""
    return -(-count // world_size)


def all_gather(output: Any, shard: Any, group: Any = None) -> None:
    """`output` (W times `shard`'s values) <- every rank's `shard`, in rank order."""
    _, dist = require_torch()
    gather = getattr(dist, "all_gather_single", None)  # torch 2.13's name
    if gather is None:
        gather = dist.all_gather_into_tensor
    gather(output, shard, group=group)


def ordered_sum(tensor: Any, group: Any = None) -> None:
    """`tensor` <- the sum over ranks of `tensor` (flat float32, W·S values), in place, added in
    rank order: the same bits on every rank, whatever carries the values."""
    _, dist = require_torch()
    world = dist.get_world_size(group)
    width = tensor.numel() // world
    if tensor.dim() != 1 or tensor.numel() != world * width:
        raise ValueError(
            f"ordered_sum takes a flat tensor of W·S values (W = {world}), not one of shape "
            f"{tuple(tensor.shape)}"
        )
    if tensor.numel() * world < GATHER_BELOW:
        every = tensor.new_empty((world * tensor.numel(),))
        all_gather(every, tensor, group)
        _add_in_rank_order(every.view(world, -1), tensor)
        return
    copies = tensor.new_empty(tensor.shape)  # row r: rank r's values of this rank's shard
    dist.all_to_all_single(copies, tensor, group=group)
    shard = tensor.new_empty((width,))
    _add_in_rank_order(copies.view(world, width), shard)
    all_gather(tensor, shard, group)


def _add_in_rank_order(rows: Any, out: Any) -> None:
    """`out` <- rows[0] + rows[1] + ... in that order, one float32 rounding each."""
    out.copy_(rows[0])
    for other in range(1, rows.shape[0]):
        out.add_(rows[other])


def fast_sum(tensor: Any, group: Any = None) -> None:
    """`tensor` <- the sum over ranks of `tensor`, in place, by the backend's all_reduce."""
    _, dist = require_torch()
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
