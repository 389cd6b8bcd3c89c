"""What each process of a data-parallel job takes of the work, and the checks that keep a run
one run: pure arithmetic, no communication, no torch.

- A global batch of B rows over W processes: process r takes the contiguous rows
  [r·q + min(r, m), ...) with q, m = divmod(B, W), so the first m processes take one row more
  (`share_of`). Concatenated in rank order, the shares are the batch.
- Each share's mean loss is weighted by share/B (`Share.weight`), so the sum of the processes'
  gradients is the gradient of the whole batch's mean loss.
- Randomness is keyed by the global row, never by the rank: `uniform_for_share` draws a share's
  values at the places the whole batch's draw would have put them, so a dropout mask is the
  same at every world size.
- A checkpoint taken at one world size goes on only at that world size (`check_world_size`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.random import Generator
from deepsharp.distributed.errors import WorldSizeMismatchError

__all__ = ["Share", "check_world_size", "share_of", "uniform_for_share"]


@dataclass(frozen=True)
class Share:
    """One process's contiguous rows [start, stop) of a batch (or a set) of `total` rows."""

    start: int
    stop: int
    total: int

    @property
    def rows(self) -> slice:
        """The share as a slice of the batch: `features[share.rows]`."""
        return slice(self.start, self.stop)

    @property
    def count(self) -> int:
        return self.stop - self.start

    @property
    def weight(self) -> float:
        """share/B: what this share's mean loss (and so its gradient) is multiplied by, so that
        the processes' gradients add up to the gradient of the batch's mean loss."""
        return self.count / self.total if self.total else 0.0


def share_of(total: int, rank: int, world_size: int) -> Share:
    """Process `rank`'s share of `total` rows: contiguous, the first total mod W one row longer.

    A batch smaller than the world leaves the last processes an empty share (weight 0): such a
    process takes no forward pass and hands zeros as its gradients.
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not one of a world of {world_size} processes")
    if total < 0:
        raise ValueError(f"a batch holds no negative number of rows, not {total}")
    base, extra = divmod(total, world_size)
    start = rank * base + min(rank, extra)
    return Share(start, start + base + (1 if rank < extra else 0), total)


def uniform_for_share(generator: Generator, share: Share, per_row: int) -> NDArray[np.float64]:
    """The uniform floats of `share`'s rows, `per_row` a row, taken from the places the draw of
    the whole batch (`generator.uniform(share.total * per_row)`, row after row) gives them; the
    generator then stands where that whole draw leaves it, on every process alike.

    deepsharp's generator is counter-based, so this is a skip ahead, not a new stream: one
    process (a share of the whole batch) draws exactly what it draws today.
    """
    if per_row < 0:
        raise ValueError(f"per_row counts values a row: 0 or more, not {per_row}")
    first = generator.counter
    generator.counter = first + share.start * per_row
    values = generator.uniform(share.count * per_row)
    generator.counter = first + share.total * per_row
    return values


def check_world_size(recorded: int | None, world_size: int, where: str = "") -> None:
    """Refuse to go on from a checkpoint taken at another world size, naming both.

    `recorded` is the checkpoint's world size; None (a checkpoint that records none) was taken
    by one process. `where`: the checkpoint's file, or a phrase that names it ("the checkpoint
    runs/checkpoint-000007.safetensors", as the training loop says). The shares of every batch, and so a run's bits, depend on the world size.
    """
    taken = 1 if recorded is None else int(recorded)
    if taken == world_size:
        return
    subject = where if where.startswith("the checkpoint") else f"the checkpoint {where}".rstrip()
    raise WorldSizeMismatchError(
        f"{subject} was taken at world size {taken}; this run has {world_size} "
        f"process{'es' if world_size != 1 else ''}. A run goes on only at the world size it was "
        f"taken at (each batch's shares, and so the run's bits, depend on it): resume with "
        f"{taken} process{'es' if taken != 1 else ''}, or start the run afresh"
    )
