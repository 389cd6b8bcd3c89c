"""`Job`: this process's place in a running data-parallel job, and every collective the training
loop calls: the starting slots made identical, each step's gradients added, the epoch's
figures combined.

Every method is a collective: every process of the job calls it, in the same order, with
tensors of the same shapes. An engine's tensors cross as `deepsharp.distributed.bridge` says
(in place where the memory can be shared).
"""

from __future__ import annotations

import atexit
import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.engine import Engine, Handle
from deepsharp.distributed._torch import require_torch, resolve_backend
from deepsharp.distributed.bridge import host_bytes, shared_tensor
from deepsharp.distributed.errors import DistributedError, ReplicasDifferError
from deepsharp.distributed.reduction import all_gather, fast_sum, ordered_sum, shard_width
from deepsharp.distributed.shares import Share, check_world_size, share_of

if TYPE_CHECKING:  # the settings make jobs; a job reads its settings and imports nothing above
    from deepsharp.distributed.config import DataParallel

__all__ = ["Job", "environment_place", "join"]

TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def environment_place() -> tuple[int, int, int]:
    """This process's rank, the world size and its local rank, as the job's environment sets
    them (torchrun's, launch's), checked before any process waits on another: a value that is
    no whole number, or a rank outside the world, is a DistributedError naming it (torch waited
    out its timeout, or raised int()'s ValueError)."""

    def whole(name: str, least: int, below: int | None = None) -> int:
        said = os.environ[name]
        try:
            value = int(said)
        except ValueError:
            value = least - 1
        if value < least or (below is not None and value >= below):
            within = f"from {least}" + ("" if below is None else f" to {below - 1}")
            hint = {  # (a port's was RANK's advice: trial DS)
                "MASTER_PORT": "the port rank 0 listens on, the same on every process",
                "WORLD_SIZE": "how many processes the job has, the same on every process",
            }.get(name, "give each process its own RANK from 0 to WORLD_SIZE - 1")
            raise DistributedError(
                f"the environment sets {name}={said!r}, which must be a whole number {within} "
                f"(the launcher sets it: torchrun or deepsharp.distributed.launch; set by hand, "
                f"{hint})"
            )
        return value

    world_size = whole("WORLD_SIZE", 1)
    rank = whole("RANK", 0, world_size)
    local = whole("LOCAL_RANK", 0) if "LOCAL_RANK" in os.environ else rank
    if "MASTER_PORT" in os.environ:
        whole("MASTER_PORT", 1, 65536)
    return rank, world_size, local


def join(config: DataParallel) -> Job:
    """The job this process belongs to: the group already started (by `launch`, or by the
    application), or the one torchrun's environment describes."""
    _, dist = require_torch()
    if not dist.is_initialized():
        missing = [name for name in TORCHRUN_VARIABLES if name not in os.environ]
        if missing:
            raise DistributedError(
                f"DataParallel runs inside a job, and this process is in none ({', '.join(missing)} "
                "not set): start the script with torchrun (`torchrun --standalone "
                "--nproc-per-node 2 script.py` on one machine), or call "
                "deepsharp.distributed.launch(function, nprocs, ...) to start the processes"
            )
        environment_place()
        dist.init_process_group(
            resolve_backend(config.backend),
            init_method="env://",
            timeout=timedelta(seconds=config.timeout),
        )
        # The group stays for the process's later runs, left when it exits: started again on
        # torchrun's store, it met the keys the first one left there, and gloo's connections
        # to the first group's closed sockets were refused (trial DP: a second fit).
        atexit.register(_leave)
    carries = _carries(dist.get_backend_config())
    if config.backend != "auto" and config.backend not in carries.values():
        raise DistributedError(
            f"DataParallel asks for backend {config.backend!r}; the job was started with "
            f"{dist.get_backend_config()!r}: start it with the same backend "
            f"(launch(..., backend={config.backend!r})), or ask for 'auto'"
        )
    rank, world_size = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    return Job(config, rank, world_size, local_rank, carries)


def _leave() -> None:
    """At the process's exit: leave the group `join` started from torchrun's environment."""
    _, dist = require_torch()
    if dist.is_initialized():
        dist.destroy_process_group()


def _carries(config: str) -> dict[str, str]:
    """torch's backend config ("cpu:gloo,cuda:nccl") as device type -> backend."""
    pairs = (part.split(":", 1) for part in config.split(",") if ":" in part)
    return {device.strip(): backend.strip() for device, backend in pairs}


class Job:
    """This process's place in a data-parallel job: `rank` of `world_size`, and the collectives
    the loop calls. Made by `DataParallel.join()`; a context manager. The job's group outlives
    it: `launch` leaves the group it started when the function returns, and a group `join`
    started from torchrun's environment is left when the process exits, so that a script's
    later runs join it again."""

    def __init__(
        self,
        config: DataParallel,
        rank: int,
        world_size: int,
        local_rank: int,
        carries: Mapping[str, str],
    ) -> None:
        self.config = config
        self.rank = rank
        self.world_size = world_size
        self.local_rank = local_rank
        self.carries = dict(carries)
        """Which backend carries each device's tensors: {"cpu": "gloo", "cuda": "nccl"}."""

    def __repr__(self) -> str:
        carried = ", ".join(f"{device}: {backend}" for device, backend in self.carries.items())
        return (
            f"Job(rank {self.rank} of {self.world_size}, {carried}, "
            f"reduction {self.config.reduction!r})"
        )

    @property
    def writes(self) -> bool:
        """Whether this process writes the run's files (checkpoints, the report): rank 0 only."""
        return self.rank == 0

    # --- the work's shares (no communication) ----------------------------------------------
    def share(self, total: int) -> Share:
        """This process's contiguous share of `total` rows (a global batch, or a whole set)."""
        return share_of(total, self.rank, self.world_size)

    def check_world_size(self, recorded: int | None, where: str = "") -> None:
        """Refuse a checkpoint taken at another world size, naming both (before restoring)."""
        check_world_size(recorded, self.world_size, where)

    # --- collectives ------------------------------------------------------------------------
    def reduce_gradients(
        self, engine: Engine, grads: Sequence[Handle], weight: float = 1.0
    ) -> list[Handle]:
        """Every process's `grads`, each multiplied by its `weight` (its share/B), added up:
        new handles on `engine`, of the same shapes, the same values on every process.

        The gradients cross as one flat tensor: no transfer where the engine's memory is shared
        (light, test and torch engines), one `get` and one `put` otherwise. "ordered" adds in
        rank order (the same bits whatever the backend), "fast" by the backend's all_reduce.
        """
        shapes = [tuple(engine.shape(g)) for g in grads]
        sizes = [math.prod(shape) for shape in shapes]
        count = sum(sizes)
        if count == 0:
            return [engine.zeros(shape) for shape in shapes]
        padded = shard_width(count, self.world_size) * self.world_size
        pieces = [engine.reshape(g, (size,)) for g, size in zip(grads, sizes)]
        if padded > count:
            pieces.append(engine.zeros((padded - count,)))
        flat = engine.concatenate(pieces, 0)
        if weight != 1.0:
            flat = engine.mul(flat, float(weight))
        summed = self._sum(engine, flat)
        if padded > count:
            summed = engine.slice(summed, 0, 0, count)
        parts = engine.split(summed, sizes, 0)
        return [engine.reshape(part, shape) for part, shape in zip(parts, shapes)]

    def start_identical(self, engine: Engine, slots: Mapping[str, Handle]) -> None:
        """Give every process rank 0's slots (in place, by `engine.assign`), then check that
        every process holds the same bits (`check_identical`). Processes whose slots differ in
        names or shapes (different networks) are refused before anything moves."""
        names = list(slots)
        shapes = [tuple(engine.shape(slots[name])) for name in names]
        self._check_layouts(_layout(names, shapes))
        sizes = [math.prod(shape) for shape in shapes]
        if sum(sizes):
            flat = engine.concatenate(
                [engine.reshape(slots[n], (s,)) for n, s in zip(names, sizes)], 0
            )
            tensor, staged = self._cross(engine, flat)
            _, dist = require_torch()
            dist.broadcast(tensor, src=0)
            if self.rank != 0:
                if staged:
                    flat = engine.put(tensor.cpu().numpy())
                parts = engine.split(flat, sizes, 0)
                for name, part, shape in zip(names, parts, shapes):
                    engine.assign(slots[name], engine.reshape(part, shape))
        self.check_identical(engine, slots)

    def check_identical(
        self, engine: Engine, slots: Mapping[str, Handle], why: str | None = None
    ) -> None:
        """Raise `ReplicasDifferError` on every process unless every process holds the same
        slots, bit for bit: SHA-256 digests of each slot's bytes compared with rank 0's (one
        collective of 64 bytes where they agree; a second names the slots that differ)."""
        names = list(slots)
        shapes = [tuple(engine.shape(slots[name])) for name in names]
        layout = _layout(names, shapes)
        digests = [_digest(engine, slots[name]) for name in names]
        every = self._gather_bytes(layout + hashlib.sha256(b"".join(digests)).digest())
        if all(header == every[0] for header in every):
            return
        self._check_layouts(layout, every=[header[:32] for header in every])
        each = self._gather_bytes(b"".join(digests) or b"\0")
        differ: dict[int, list[str]] = {}
        for rank in range(1, self.world_size):
            for index, name in enumerate(names):
                part = slice(index * 32, (index + 1) * 32)
                if each[rank][part] != each[0][part]:
                    differ.setdefault(rank, []).append(name)
        said = "; ".join(
            f"rank {rank}: {', '.join(map(repr, found[:3]))}"
            + (f" and {len(found) - 3} more" if len(found) > 3 else "")
            for rank, found in differ.items()
        )
        raise ReplicasDifferError(
            f"the processes hold different slots where they must hold the same bits: "
            f"{said} differ from rank 0's. "
            + (
                why
                or "Every process must build the same network from the same seed (the same "
                "FitOptions.seed, the same network file); start_identical gives every process "
                "rank 0's slots"
            )
        )

    def _check_layouts(self, layout: bytes, every: list[bytes] | None = None) -> None:
        """Refuse processes whose slots differ in names or shapes from rank 0's."""
        every = every if every is not None else self._gather_bytes(layout)
        other = [rank for rank, seen in enumerate(every) if seen != every[0]]
        if other:
            raise ReplicasDifferError(
                f"{'ranks' if len(other) > 1 else 'rank'} {', '.join(map(str, other))} "
                f"{'hold' if len(other) > 1 else 'holds'} slots of other names or shapes than "
                "rank 0's: the processes train "
                "different networks. Every process must build the same network (the same "
                "layers, the same inputs)"
            )

    def totals(self, values: Mapping[str, float]) -> dict[str, float]:
        """Every process's `values` added up, name by name, in rank order in float64: the same
        totals on every process (an epoch's loss summed over its rows, the rows right, the rows).
        """
        torch, _ = require_torch()
        names = list(values)
        mine = torch.tensor([float(values[name]) for name in names], dtype=torch.float64)
        every = self._gather(mine.to(self._control_device())).cpu().numpy()
        total = every[0].copy()
        for rank in range(1, self.world_size):
            total = total + every[rank]
        return {name: float(total[index]) for index, name in enumerate(names)}

    def gather_rows(self, mine: NDArray[Any]) -> NDArray[Any]:
        """Every process's rows of `mine` (of one dtype and width on every process, any number
        of rows), joined in rank order: the same array on every process. Two collectives: the
        row counts, then the rows (as float64, padded to the longest)."""
        torch, _ = require_torch()
        rows = np.asarray(mine)
        counts = self._gather(
            torch.tensor([rows.shape[0]], dtype=torch.int64).to(self._control_device())
        )
        each = [int(c) for c in counts.view(-1).cpu().numpy()]
        longest, width = max(each), int(np.prod(rows.shape[1:], dtype=np.int64))
        padded = np.zeros((longest, width), np.float64)
        padded[: rows.shape[0]] = rows.reshape(rows.shape[0], width)
        every = self._gather(torch.from_numpy(padded).to(self._control_device())).cpu().numpy()
        joined = np.concatenate([every[rank, : each[rank]] for rank in range(self.world_size)])
        return joined.reshape((-1, *rows.shape[1:])).astype(rows.dtype)

    def means(self, sums: Mapping[str, float], rows: int) -> dict[str, float]:
        """The means over every process's rows: each process passes the sums of its figures over
        its `rows` (the loss times the rows, the rows answered right); the totals are added in
        rank order (float64) and divided by all the rows. The same values on every process."""
        total = self.totals({**{f"sum {name}": value for name, value in sums.items()}, "": rows})
        if total[""] <= 0:
            raise ValueError("means over no rows: every process passed rows=0")
        return {name: total[f"sum {name}"] / total[""] for name in sums}

    def check_agree(self, what: str, mine: bytes, why: str | None = None) -> None:
        """Raise `ReplicasDifferError` on every process unless every process passed the same
        bytes as rank 0 (compared by their SHA-256 digests), naming the ranks that differ and
        `what` they hold."""
        every = self._gather_bytes(hashlib.sha256(mine).digest())
        other = [rank for rank, seen in enumerate(every) if seen != every[0]]
        if other:
            ranks = f"{'ranks' if len(other) > 1 else 'rank'} {', '.join(map(str, other))}"
            raise ReplicasDifferError(
                f"{ranks} {'hold' if len(other) > 1 else 'holds'} other {what} than rank 0: "
                + (
                    why
                    or "every process must start from the same state (the same seed, the same "
                    "checkpoint file, or none on every process)"
                )
            )

    def check_same_parts(self, what: str, parts: Sequence[str], unit: str, why: str) -> None:
        """Raise `ReplicasDifferError` on every process unless every process passed the same
        `parts` (in words: a network's layers, one a part, each a `unit`) as rank 0, naming how
        many each has where the counts differ, else the first part that differs, with rank 0's
        and the other rank's, and `why` they must agree. One collective of 32 bytes where they
        agree."""
        each = [hashlib.sha256(part.encode()).digest() for part in parts]
        every = self._gather_bytes(hashlib.sha256(b"".join(each)).digest())
        if all(seen == every[0] for seen in every):
            return
        counts = [
            int.from_bytes(c, "little")
            for c in self._gather_bytes(len(parts).to_bytes(8, "little"))
        ]
        other = [rank for rank, count in enumerate(counts) if count != counts[0]]
        if other:
            said = "; ".join(f"rank {rank}: {counts[rank]} {unit}s" for rank in (0, *other))
            raise ReplicasDifferError(
                f"the processes build {what} of different sizes ({said}): {why}"
            )
        _, said = self._first_apart(each, parts)
        raise ReplicasDifferError(f"the processes build different {what} ({said}): {why}")

    def check_same_settings(self, settings: Mapping[str, str]) -> None:
        """Raise `ReplicasDifferError` on every process unless every process runs with the same
        `settings` as rank 0 (each named, in words: the engine, the optimizer, the loss ...),
        naming the first that differs, with rank 0's and the other rank's. One collective of
        32 bytes where they agree."""
        names = sorted(settings)
        each = [hashlib.sha256(settings[name].encode()).digest() for name in names]
        layout = hashlib.sha256(repr(names).encode()).digest()
        every = self._gather_bytes(hashlib.sha256(layout + b"".join(each)).digest())
        if all(seen == every[0] for seen in every):
            return
        layouts = self._gather_bytes(layout)
        other = [rank for rank, seen in enumerate(layouts) if seen != layouts[0]]
        if other:
            raise ReplicasDifferError(
                f"{_ranks(other)} {'check' if len(other) > 1 else 'checks'} other settings "
                "than rank 0: every process must run the same deepsharp"
            )
        first, said = self._first_apart(each, [settings[name] for name in names])
        name = names[first]
        raise ReplicasDifferError(
            f"the processes run with different {name} ({said}): every process must run "
            "with the same settings, or their replicas part at the first step (the same "
            "FitOptions and class weights; the same engine and precision, optimizer, loss, loss "
            "scale and accumulation)"
        )

    def _first_apart(self, each: Sequence[bytes], texts: Sequence[str]) -> tuple[int, str]:
        """Where processes' lists of as many digests (`each`, of `texts`) part: the first place
        any process's differs from rank 0's, and its text on rank 0 and on each process that
        differs there ("rank 0: ...; rank 1: ..."), each cut to 200 bytes."""
        digests = self._gather_bytes(b"".join(each))
        first = next(
            index
            for index in range(len(texts))
            if any(
                d[32 * index : 32 * index + 32] != digests[0][32 * index : 32 * index + 32]
                for d in digests
            )
        )
        shown = self._gather_bytes(_text(texts[first], 200))
        part = slice(32 * first, 32 * first + 32)
        other = [rank for rank, seen in enumerate(digests) if seen[part] != digests[0][part]]
        said = "; ".join(
            f"rank {rank}: {shown[rank].rstrip(bytes(1)).decode(errors='replace')}"
            for rank in (0, *other)
        )
        return first, said

    def check_same_run(self, seed: int, data: Mapping[str, Any]) -> None:
        """Raise `ReplicasDifferError` on every process unless every process runs from the
        same seed and holds the same data as rank 0 (`data`: its row counts per part, and
        digests of the recipe and of the rows' values), naming the ranks and how they differ."""
        seeds = [text.rstrip(b"\0").decode() for text in self._gather_bytes(_text(str(seed)))]
        if any(found != seeds[0] for found in seeds):
            each = ", ".join(f"rank {rank}: {found}" for rank, found in enumerate(seeds))
            raise ReplicasDifferError(
                f"the processes were started with different seeds ({each}): every process "
                "must run with the same FitOptions.seed (the split, the starting slots and "
                "the order of every epoch come from it)"
            )
        rows = [int(count) for count in data["rows"]]
        mine = np.array(rows, np.int64).tobytes() + bytes.fromhex(data["recipe"])
        every = self._gather_bytes(mine + bytes.fromhex(data["values"]))
        other = [rank for rank, seen in enumerate(every) if seen != every[0]]
        if not other:
            return
        width = 8 * len(rows)
        theirs = np.frombuffer(every[0][:width], np.int64).tolist()
        said = []
        for rank in other:
            counts = np.frombuffer(every[rank][:width], np.int64).tolist()
            if counts != theirs:
                said.append(f"rank {rank}: {_rows(counts)}, rank 0: {_rows(theirs)}")
            elif every[rank][width : width + 32] != every[0][width : width + 32]:
                said.append(f"rank {rank}: its training rows teach the pipeline another recipe")
            else:
                said.append(
                    f"rank {rank}: the same count of rows ({sum(counts)}), with other values"
                )
        ranks = f"{'ranks' if len(other) > 1 else 'rank'} {', '.join(map(str, other))}"
        raise ReplicasDifferError(
            f"{ranks} {'hold' if len(other) > 1 else 'holds'} other data than rank 0 "
            f"({'; '.join(said)}): every process must be handed the same rows (the same file "
            "or arrays, the same pipeline), and takes its share of every batch from them"
        )

    def barrier(self) -> None:
        """Wait until every process gets here (within the job's timeout)."""
        _, dist = require_torch()
        dist.barrier()

    def close(self) -> None:
        """The run is done with the job. Its group stays (see the class): nothing to leave."""

    def __enter__(self) -> Job:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- how tensors cross ------------------------------------------------------------------
    def _sum(self, engine: Engine, flat: Handle) -> Handle:
        """`flat` (made here, so ours to write) summed over every process, in place."""
        tensor, staged = self._cross(engine, flat)
        if self.config.reduction == "fast":
            fast_sum(tensor)
        else:
            ordered_sum(tensor)
        return engine.put(tensor.cpu().numpy()) if staged else flat

    def _cross(self, engine: Engine, flat: Handle) -> tuple[Any, bool]:
        """`flat` as a torch tensor a backend of this job carries: in place where its memory can
        be shared and its device is carried (staged False); else the host copy `engine.get`
        brings (staged True: the result goes back by `engine.put`)."""
        torch, _ = require_torch()
        tensor = shared_tensor(flat)
        if tensor is not None:
            device = tensor.device.type
            if device == "cuda" and self.carries.get("cuda") == "nccl":
                return tensor, False
            if device == "cpu" and self.carries.get("cpu") == "gloo":
                return tensor, False
        if self.carries.get("cpu") != "gloo":
            raise DistributedError(
                f"the engine {engine.identity} keeps its tensors on the processor (or in memory "
                f"of its own), and this job's backend carries only {self.carries}: start the job "
                "with backend 'gloo' or 'auto'"
            )
        host = np.ascontiguousarray(engine.get(flat), dtype=np.float32)
        return torch.from_numpy(host), True

    def _control_device(self) -> Any:
        """Where small tensors of figures and digests travel: the processor where gloo carries
        it, else this process's card."""
        torch, _ = require_torch()
        if self.carries.get("cpu") == "gloo":
            return torch.device("cpu")
        return torch.device("cuda", self.local_rank % max(torch.cuda.device_count(), 1))

    def _gather_bytes(self, mine: bytes) -> list[bytes]:
        """Every process's `mine` (of one length on every process), rank by rank."""
        torch, _ = require_torch()
        tensor = torch.frombuffer(bytearray(mine), dtype=torch.uint8)
        every = self._gather(tensor.to(self._control_device())).cpu().numpy()
        return [bytes(row.tobytes()) for row in every]

    def _gather(self, mine: Any) -> Any:
        """Every process's `mine` (one shape on every process), row r from rank r."""
        every = mine.new_empty((self.world_size * mine.numel(),))
        all_gather(every, mine.contiguous().view(-1))
        return every.view(self.world_size, *mine.shape)


def _ranks(ranks: list[int]) -> str:
    return f"{'ranks' if len(ranks) > 1 else 'rank'} {', '.join(map(str, ranks))}"


def _text(text: str, width: int = 64) -> bytes:
    """`text` as `width` bytes (cut, or padded with NULs): one length on every process."""
    return text.encode()[:width].ljust(width, b"\0")


def _rows(counts: list[int]) -> str:
    """A process's row counts, in words."""
    training, validation, test = (*counts, 0, 0, 0)[:3]
    return f"{sum(counts)} rows ({training} training, {validation} validation, {test} test)"


def _layout(names: list[str], shapes: list[tuple[int, ...]]) -> bytes:
    """A digest of the slots' names and shapes, in order."""
    return hashlib.sha256(repr(list(zip(names, shapes))).encode()).digest()


def _digest(engine: Engine, handle: Handle) -> bytes:
    """A digest of the handle's bytes."""
    return hashlib.sha256(host_bytes(engine, handle)).digest()
