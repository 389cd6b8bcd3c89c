"""The torch engine's helpers over many tensors at once: a group of slots found to be one flat
tensor's parts (an update then passes over the flat tensor, a block at a time), gradients joined
as the slots lie, and tensors padded to whole vector passes of libtorch's value-by-value kernels.

torch is bound (`bind`) when the first engine is made, never when this module is imported.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
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


FRESH = 1 << 15
"""The most values a flat update joins into fresh tensors, not the kept scratch (`_spans`)."""

UPDATE_BLOCK = 1 << 20
"""Values of a flat tensor an update's passes cover at a time (`adam_blocks`, `sgd_blocks`): the
gradients' values are joined a block at a time into scratch tensors of this size, which the
engine keeps. Joining all of them, and squaring them, into fresh tensors of every slot's
values made the kernels page-fault: the dense mixed step's update of 3.2 M values took
4.5-4.9 ms of libtorch's time so, 2.1-2.6 ms in blocks of 2^18 or 2^20 values, 3.4 ms in one
kept block (AMD EPYC, two threads, torch 2.13.0). A multiple of `LANES` times any thread
count: each block's share of a thread is whole vector passes."""


def _fits(scratch: Tensor, size: int, flat: Tensor) -> bool:
    return bool(
        scratch.numel() >= size and (scratch.dtype, scratch.device) == (flat.dtype, flat.device)
    )


class Scratch(threading.local):
    """An engine's two scratch tensors for a flat update's blocks (`UPDATE_BLOCK`), kept between
    updates, a pair for each thread (trainers in several threads may share one engine: libtorch
    lets go of the interpreter inside each call, so another thread's update would write into
    a block between its join and its use). Called with a flat tensor: two tensors of its
    block's size (views of the kept pair, made once a size) and its type."""

    kept: tuple[Tensor, Tensor] | None = None
    sized: dict[int, tuple[Tensor, Tensor]] | None = None

    def __call__(self, flat: Tensor) -> tuple[Tensor, Tensor]:
        size, kept, sized = min(UPDATE_BLOCK, flat.numel()), self.kept, self.sized
        if kept is None or sized is None or not _fits(kept[0], size, flat):
            kept = self.kept = (flat.new_empty(size), flat.new_empty(size))
            sized = self.sized = {}
        made = sized.get(size)
        if made is None:
            made = sized[size] = (kept[0][:size], kept[1][:size])
        return made


def blocks(grads: Sequence[Tensor], size: int) -> Iterator[tuple[int, list[Tensor]]]:
    """The gradients' values, as the slots lie in their flat tensor, `size` at a time: each
    block's start in the flat tensor, and the parts of gradients that fill it in order."""
    pieces: list[Tensor] = []
    start = filled = 0
    for grad in grads:
        flat = grad.reshape(-1)
        at, count = 0, flat.numel()
        while at < count:
            take = min(count - at, size - filled)
            pieces.append(flat if take == count else flat[at : at + take])
            at += take
            filled += take
            if filled == size:
                yield start, pieces
                start, pieces, filled = start + size, [], 0
    if pieces:
        yield start, pieces


def _joined(pieces: list[Tensor], into: Tensor) -> Tensor:
    """A block's gradient values in one tensor: the one part itself where it is one."""
    if len(pieces) == 1:
        return pieces[0]
    count = sum(piece.numel() for piece in pieces)
    return torch.cat(pieces, out=into if count == into.numel() else into[:count])


def _spans(
    flat: Sequence[Tensor], grads: Sequence[Tensor], scratch: Scratch
) -> Iterator[tuple[tuple[Tensor, ...], Tensor, Tensor | None]]:
    """A flat update's blocks: each block's part of every flat tensor, its gradients' values
    joined, and a scratch tensor of its size. Under `FRESH` values, one block of the flat
    tensors themselves, the gradients joined into a fresh tensor and no scratch (the heap's
    small tensors cost no page faults, and a slice or an `out=` costs a microsecond)."""
    if flat[0].numel() <= FRESH:
        joined = torch.cat([grad.reshape(-1) for grad in grads])
        if joined.shape != flat[0].shape or joined.dtype is not flat[0].dtype:
            _covering(flat[0], grads)  # says which
        yield tuple(flat), joined, None
        return
    _covering(flat[0], grads)
    kept = scratch(flat[0])
    for start, pieces in blocks(grads, UPDATE_BLOCK):
        grad = _joined(pieces, kept[0])
        stop = start + grad.numel()
        spare = kept[1] if grad.numel() == kept[1].numel() else kept[1][: grad.numel()]
        yield tuple(part[start:stop] for part in flat), grad, spare


def adam_blocks(
    flat: Sequence[Tensor], grads: Sequence[Tensor], scratch: Scratch, **kw: float
) -> None:
    """Adam's update of one flat tensor of slots (`flat`: slots, first and second memories), a
    block at a time: the kernels of `TorchEngine.adam_update`'s passes over the lists, so the
    same bits."""
    # lerp with a weight under 0.5 is m + w * (g - m): Keras's m += (g - m) * (1 - beta1).
    weight1, weight2 = 1.0 - kw["beta1"], 1.0 - kw["beta2"]
    for (slot, first, second), grad, spare in _spans(flat, grads, scratch):
        square = grad * grad if spare is None else torch.mul(grad, grad, out=spare)
        first.lerp_(grad, weight1)
        second.lerp_(square, weight2)
        root = second.sqrt() if spare is None else torch.sqrt(second, out=square)
        slot.addcdiv_(first, root.add_(kw["epsilon"]), value=-kw["step_size"])


def sgd_blocks(
    flat: Sequence[Tensor], grads: Sequence[Tensor], scratch: Scratch, **kw: float
) -> None:
    """SGD's update with momentum of one flat tensor of slots (`flat`: slots and velocities), a
    block at a time, with the kernels of `TorchEngine.sgd_update`'s passes over the lists."""
    for (slot, velocity), grad, _ in _spans(flat, grads, scratch):
        velocity.mul_(kw["momentum"]).add_(grad, alpha=-kw["learning_rate"])
        slot.add_(velocity)


def _covering(slot: Tensor, grads: Sequence[Tensor]) -> None:
    """Refuses, before anything changes, gradients that are not the slots' values one for one
    in their type (a block joins them into a tensor of the slots' type, which would convert)."""
    count = 0
    for grad in grads:
        if grad.dtype is not slot.dtype:
            raise ValueError(f"a gradient of {grad.dtype} for slots of {slot.dtype}")
        count += grad.numel()
    if count != slot.numel():
        raise ValueError(f"the gradients hold {count} values where the slots hold {slot.numel()}")
