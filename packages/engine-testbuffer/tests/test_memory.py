"""Memory and transfer promises: values outside Python's heap, freed when dropped, counted."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np

from deepsharp.core import BinaryCrossEntropy, Dense, Network, Tanh, Trainer, make_engine
from deepsharp.core.nn.optimizers import Adam
from deepsharp.engines.testbuffer import BufferCounters, TestBuffer, TestBufferEngine

MEGA = 1024 * 1024  # float32 values in 4 MB


def test_counters_are_core_counters() -> None:
    from deepsharp.core.engine import Counters

    engine = TestBufferEngine()
    assert isinstance(engine.counters, Counters)
    assert isinstance(engine.counters, BufferCounters)
    assert engine.counters.live_buffers == 0
    assert engine.counters.live_bytes == 0
    assert engine.counters.max_live_buffers == 0


def test_make_engine_finds_it_through_the_entry_point() -> None:
    from deepsharp.core import available_engines

    assert "testbuffer" in available_engines()
    engine = make_engine("testbuffer")
    assert isinstance(engine, TestBufferEngine)
    assert str(engine.identity) == "testbuffer 0.1.0 on cpu (strict)"


def test_live_buffers_and_bytes_follow_handles() -> None:
    engine = TestBufferEngine()
    a = engine.zeros((3, 4))
    b = engine.put(np.arange(5))
    assert engine.counters.live_buffers == 2
    assert engine.counters.live_bytes == 3 * 4 * 4 + 5 * 8
    c = engine.add(a, 1.0)
    assert engine.counters.live_buffers == 3
    del a, b
    assert engine.counters.live_buffers == 1
    assert engine.counters.live_bytes == 3 * 4 * 4
    del c
    assert engine.counters.live_buffers == 0
    assert engine.counters.live_bytes == 0
    assert engine.counters.max_live_buffers == 3


def test_zero_size_tensors_have_buffers() -> None:
    engine = TestBufferEngine()
    empty = engine.zeros((0, 3))
    assert empty.address != 0
    assert empty.nbytes == 0
    assert engine.get(engine.add(empty, 1.0)).shape == (0, 3)
    del empty
    gc.collect()
    assert engine.counters.live_buffers == 0


def test_many_large_tensors_made_and_dropped_one_after_another() -> None:
    engine = TestBufferEngine()
    keep = engine.zeros((2,))  # one buffer alive throughout
    start = engine.counters.max_live_buffers
    for i in range(500):
        if i % 2:
            handle = engine.zeros((MEGA,))
        else:
            handle = engine.add(engine.zeros((MEGA,)), 1.0)  # a temporary and a result
        assert handle.nbytes == 4 * MEGA
        del handle
    assert engine.counters.max_live_buffers <= start + 3
    assert engine.counters.live_buffers == 1
    assert engine.counters.live_bytes == 8
    del keep
    assert engine.counters.live_buffers == 0


def test_values_do_not_live_on_pythons_heap() -> None:
    engine = TestBufferEngine()
    tracemalloc.start()
    try:
        gc.collect()
        before, _ = tracemalloc.get_traced_memory()
        held = []
        for _ in range(10):
            host = np.ones(MEGA, np.float32)  # 4 MB on Python's heap (NumPy is traced) ...
            held.append(engine.put(host))
            del host  # ... dropped: only the engine's copy remains, outside the heap.
        held.append(engine.mul(held[0], held[1]))  # results too live outside
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert engine.counters.live_buffers == 11
    assert engine.counters.live_bytes == 11 * 4 * MEGA
    assert after - before < MEGA, f"Python's heap grew by {after - before} bytes"
    assert float(engine.get(engine.sum(held[-1], (0,)))) == float(MEGA)
    del held
    assert engine.counters.live_buffers == 0


def test_transfers_are_counted_exactly() -> None:
    engine = TestBufferEngine()
    a = engine.put(np.ones((2, 3), np.float32))
    b = engine.put(np.arange(3))
    c = engine.add(engine.mul(a, 2.0), engine.zeros((2, 3)))
    engine.sum(c, (0,))
    engine.one_hot(b, 4)
    engine.adam_update(
        [a],
        [c],
        [engine.zeros((2, 3))],
        [engine.zeros((2, 3))],
        step_size=0.01,
        beta1=0.9,
        beta2=0.999,
        epsilon=1e-7,
    )
    assert (engine.counters.transfers_in, engine.counters.transfers_out) == (2, 0)
    engine.get(c)
    engine.get(a)
    engine.get(b)
    assert (engine.counters.transfers_in, engine.counters.transfers_out) == (2, 3)


def test_handles_do_not_keep_each_other_alive() -> None:
    engine = TestBufferEngine()
    base = engine.put(np.arange(12, dtype=np.float32))
    derived = [
        engine.reshape(base, (3, 4)),
        engine.slice(base, 0, 2, 5),
        engine.broadcast_to(base, (2, 12)),
        *engine.split(base, [4, 8], 0),
    ]
    assert engine.counters.live_buffers == 1 + len(derived)
    del base
    assert engine.counters.live_buffers == len(derived)
    assert all(isinstance(h, TestBuffer) and h.address for h in derived)
    np.testing.assert_array_equal(engine.get(derived[0]), np.arange(12).reshape(3, 4))
    del derived
    assert engine.counters.live_buffers == 0


def test_a_small_network_trains_on_it() -> None:
    engine = TestBufferEngine()
    features = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)
    targets = np.array([0, 1, 1, 0], np.float32)
    network = Network([Dense(8), Tanh(), Dense(1)])
    trainer = Trainer(network, BinaryCrossEntropy(), Adam(0.05), engine=engine, seed=0)
    loss = trainer.step(features, targets)
    live_after_first = engine.counters.live_buffers
    transfers = (engine.counters.transfers_in, engine.counters.transfers_out)
    gc.collect()
    gc.disable()  # buffers must be freed by reference counting alone: no cycles hold them
    try:
        for _ in range(499):
            loss = trainer.step(features, targets)
        assert engine.counters.live_buffers == live_after_first
    finally:
        gc.enable()
    assert loss < 0.05
    # Each step puts rows and targets and gets the loss, nothing else; memory stays flat.
    assert engine.counters.transfers_in - transfers[0] == 2 * 499
    assert engine.counters.transfers_out - transfers[1] == 499
    assert engine.counters.live_buffers == live_after_first


def test_a_copy_of_the_engine_counts_its_own_transfers_and_buffers() -> None:
    """Failed before (trial PK): copy.copy shared the original's counters."""
    import copy

    engine = TestBufferEngine()
    for made in (copy.copy(engine), copy.deepcopy(engine)):
        kept = made.put(np.ones((2, 2), np.float32))
        assert (made.counters.transfers_in, made.counters.live_buffers) == (1, 1)
        del kept
    assert (engine.counters.transfers_in, engine.counters.live_buffers) == (0, 0)
