"""Reading a network while a run trains it (issue 25's torn reads): `network.slots`,
`network.buffers` and `network.predict` from another thread see one step's values, whole — never
some slots of one step and some of the next."""

from __future__ import annotations

import threading
import time

import numpy as np

from deepsharp.core import (
    Adam,
    BatchNorm,
    BinaryCrossEntropy,
    Dense,
    Network,
    Relu,
    Trainer,
    make_engine,
)

STEPS = 150


def _network() -> Network:
    return Network([Dense(32), BatchNorm(), Relu(), Dense(16), Relu(), Dense(1)], inputs=8)


def _batches() -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(3)
    made = []
    for _ in range(STEPS):
        x = rng.standard_normal((64, 8)).astype(np.float32)
        made.append((x, (x[:, :1] > 0).astype(np.float32)))
    return made


def _steps_values(batches: list[tuple[np.ndarray, np.ndarray]]) -> list[bytes]:
    """Every step's slots and buffers, as one run alone leaves them, step after step."""
    network = _network()
    seen = []
    with Trainer(network, BinaryCrossEntropy(), Adam(0.01), seed=1) as trainer:
        seen.append(_joined(*network.values()))
        for x, y in batches:
            trainer.step(x, y)
            seen.append(_joined(*network.values()))
    return seen


def _joined(slots: dict[str, np.ndarray], buffers: dict[str, np.ndarray]) -> bytes:
    return b"".join(v.tobytes() for v in [*slots.values(), *buffers.values()])


def _after_one_more(made: list[bytes]) -> None:
    """Wait (5 s at most) for the reading thread to make one more: on a busy machine it got 7
    turns in a whole run of 150 steps, and the count of its reads failed (CI, Python 3.12)."""
    seen, began = len(made), time.monotonic()
    while len(made) == seen and time.monotonic() - began < 5:
        time.sleep(0.0005)


def test_a_read_from_another_thread_sees_one_step_s_slots_and_buffers_whole() -> None:
    batches = _batches()
    every_step = set(_steps_values(batches))
    network = _network()
    reads: list[bytes] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            reads.append(_joined(*network.values()))

    with Trainer(network, BinaryCrossEntropy(), Adam(0.01), seed=1) as trainer:
        reader = threading.Thread(target=read)
        reader.start()
        try:
            for x, y in batches:
                _after_one_more(reads)  # (the reader's turns, on a busy machine: below)
                trainer.step(x, y)
        finally:
            done.set()
            reader.join()
    assert len(reads) > 10
    torn = [index for index, values in enumerate(reads) if values not in every_step]
    assert not torn, f"{len(torn)} of {len(reads)} reads matched no step"


def test_predictions_during_training_are_some_step_s_on_the_run_s_engine_and_another() -> None:
    batches = _batches()
    probe = np.random.default_rng(9).standard_normal((40, 8)).astype(np.float32)
    loss = BinaryCrossEntropy()
    expected: set[bytes] = set()
    network = _network()
    with Trainer(network, loss, Adam(0.01), seed=1) as trainer:
        expected.add(network.predict(probe, loss, trainer.engine).tobytes())
        for x, y in batches:
            trainer.step(x, y)
            expected.add(network.predict(probe, loss, trainer.engine).tobytes())
    network = _network()
    engine = make_engine("light")
    other = make_engine("light")
    predicted: list[bytes] = []
    done = threading.Event()

    def predict() -> None:
        turn = 0
        while not done.is_set():
            made = network.predict(probe, loss, engine if turn % 2 else other)
            predicted.append(made.tobytes())
            turn += 1

    with Trainer(network, loss, Adam(0.01), engine=engine, seed=1) as trainer:
        reader = threading.Thread(target=predict)
        reader.start()
        try:
            for x, y in batches:
                _after_one_more(predicted)
                trainer.step(x, y)
        finally:
            done.set()
            reader.join()
    assert len(predicted) > 10
    torn = [i for i, made in enumerate(predicted) if made not in expected]
    assert not torn, f"{len(torn)} of {len(predicted)} predictions matched no step's"
