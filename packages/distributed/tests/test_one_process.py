"""A job of one process, in the test's own process: how each engine's tensors cross (in place, no
transfer; or one get and one put), and what each collective gives when there is one rank."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core import make_engine
from deepsharp.core.engine import Counters, EngineIdentity
from deepsharp.distributed import DataParallel, DistributedError, Job
from deepsharp.distributed.bridge import shared_tensor

torch = pytest.importorskip("torch")
dist = torch.distributed

ENGINES = ["light", "testbuffer", "torch:cpu"]


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Job]:
    meeting = tmp_path_factory.mktemp("rendezvous") / "file"
    dist.init_process_group("gloo", init_method=f"file://{meeting}", rank=0, world_size=1)
    try:
        yield DataParallel().join()
    finally:
        dist.destroy_process_group()


def _address(engine_name: str, handle: Any) -> int:
    if engine_name == "light":
        return int(handle.ctypes.data)
    if engine_name == "testbuffer":
        return int(handle.address)
    return int(handle.data_ptr())


@pytest.mark.parametrize("spec", ENGINES)
def test_an_engine_s_tensor_crosses_as_a_cpu_tensor_over_its_own_memory(spec: str) -> None:
    engine = make_engine(spec)
    handle = engine.put(np.arange(6, dtype=np.float32))
    tensor = shared_tensor(handle)
    assert tensor is not None and tensor.device.type == "cpu"
    assert tensor.data_ptr() == _address(spec.partition(":")[0], handle)
    tensor[2] = 40.0  # the same memory: the engine sees it
    assert engine.get(handle)[2] == 40.0


@pytest.mark.parametrize("spec", ENGINES)
@pytest.mark.parametrize("reduction", ["ordered", "fast"])
def test_a_reduction_makes_no_transfer_where_memory_is_shared(
    job: Job, spec: str, reduction: str
) -> None:
    engine = make_engine(spec)
    values = [np.full(shape, 3.0, np.float32) for shape in [(2, 3), (5,), (1,)]]
    grads = [engine.put(v) for v in values]
    job.config = DataParallel(reduction=reduction)
    before = (engine.counters.transfers_in, engine.counters.transfers_out)
    reduced = job.reduce_gradients(engine, grads, 0.25)
    assert (engine.counters.transfers_in, engine.counters.transfers_out) == before
    for got, value in zip(reduced, values):
        assert np.array_equal(engine.get(got), value * np.float32(0.25))


class Boxed:
    """A handle whose memory no one else can see."""

    def __init__(self, array: Any) -> None:
        self.array = array


class OpaqueEngine:
    """An engine of someone else's, just the operations a reduction uses, over boxed arrays."""

    name = "opaque"

    def __init__(self) -> None:
        self.counters = Counters()
        self.identity = EngineIdentity("opaque", precision="strict")

    def put(self, array: Any) -> Boxed:
        self.counters.transfers_in += 1
        return Boxed(np.array(array, np.float32))

    def get(self, handle: Boxed) -> Any:
        self.counters.transfers_out += 1
        return handle.array.copy()

    def shape(self, handle: Boxed) -> tuple[int, ...]:
        return tuple(handle.array.shape)

    def zeros(self, shape: tuple[int, ...]) -> Boxed:
        return Boxed(np.zeros(shape, np.float32))

    def reshape(self, x: Boxed, shape: tuple[int, ...]) -> Boxed:
        return Boxed(x.array.reshape(shape))

    def concatenate(self, xs: list[Boxed], axis: int) -> Boxed:
        return Boxed(np.concatenate([x.array for x in xs], axis))

    def mul(self, a: Boxed, b: float) -> Boxed:
        return Boxed(a.array * np.float32(b))

    def slice(self, x: Boxed, axis: int, start: int, stop: int) -> Boxed:
        return Boxed(x.array[start:stop])

    def split(self, x: Boxed, sizes: list[int], axis: int) -> list[Boxed]:
        return [Boxed(part) for part in np.split(x.array, np.cumsum(sizes)[:-1])]

    def assign(self, target: Boxed, source: Boxed) -> None:
        target.array[...] = source.array


@pytest.mark.parametrize("reduction", ["ordered", "fast"])
def test_an_engine_whose_memory_is_its_own_crosses_by_one_get_and_one_put(
    job: Job, reduction: str
) -> None:
    engine = OpaqueEngine()
    grads = [engine.put(np.ones(shape, np.float32)) for shape in [(3, 3), (4,)]]
    job.config = DataParallel(reduction=reduction)
    reduced = job.reduce_gradients(engine, grads)  # type: ignore[arg-type]
    assert (engine.counters.transfers_in, engine.counters.transfers_out) == (2 + 1, 1)
    assert [r.array.shape for r in reduced] == [(3, 3), (4,)]
    assert all(np.all(r.array == 1.0) for r in reduced)


@pytest.mark.parametrize("spec", ENGINES)
def test_slots_made_identical_and_checked_cost_no_transfer(job: Job, spec: str) -> None:
    engine = make_engine(spec)
    slots = {"w": engine.put(np.ones((3, 2), np.float32)), "b": engine.put(np.zeros(2, np.float32))}
    before = (engine.counters.transfers_in, engine.counters.transfers_out)
    job.start_identical(engine, slots)
    assert (engine.counters.transfers_in, engine.counters.transfers_out) == before


def test_the_means_of_one_process_are_its_sums_over_its_rows(job: Job) -> None:
    assert job.means({"loss": 6.0, "right": 3.0}, 4) == {"loss": 1.5, "right": 0.75}
    with pytest.raises(ValueError, match="no rows"):
        job.means({"loss": 0.0}, 0)


def test_one_process_is_rank_0_of_1_and_writes_the_files(job: Job) -> None:
    assert (job.rank, job.world_size, job.writes) == (0, 1, True)
    assert job.share(32).rows == slice(0, 32) and job.share(32).weight == 1.0
    assert "rank 0 of 1" in repr(job)


def test_empty_gradients_stay_empty(job: Job) -> None:
    engine = make_engine("light")
    reduced = job.reduce_gradients(engine, [engine.zeros((0, 3))])
    assert engine.shape(reduced[0]) == (0, 3) and math.prod(engine.shape(reduced[0])) == 0


def test_the_module_needs_no_torch_to_import() -> None:
    source = Path(__file__).resolve().parents[1] / "src" / "deepsharp" / "distributed"
    for module in source.glob("*.py"):
        text = module.read_text(encoding="utf-8")
        top = [
            line for line in text.splitlines() if line.startswith(("import torch", "from torch"))
        ]
        assert not top, f"{module.name} imports torch at its top: {top}"


def test_a_job_asked_for_another_backend_than_it_was_started_with_is_refused(job: Job) -> None:
    with pytest.raises(DistributedError, match="asks for backend 'nccl'; the job was started"):
        DataParallel(backend="nccl").join()


def test_processor_tensors_are_refused_by_a_job_that_carries_only_cards_tensors() -> None:
    cards_only = Job(DataParallel(), 0, 1, 0, {"cuda": "nccl"})
    engine = make_engine("light")
    with pytest.raises(DistributedError, match="start the job with backend 'gloo' or 'auto'"):
        cards_only.reduce_gradients(engine, [engine.zeros((3,))])
