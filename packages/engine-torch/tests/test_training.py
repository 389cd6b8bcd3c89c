"""Training on the torch engine: XOR, transfers per step, no autograd, thread counts, memory."""

from __future__ import annotations

import os
import subprocess
import sys
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from deepsharp.core import (  # noqa: E402
    Adam,
    BinaryCrossEntropy,
    Dense,
    EngineUnavailableError,
    Network,
    Relu,
    Tanh,
    Trainer,
)
from deepsharp.engines.torch import TorchEngine  # noqa: E402

THREADS = (1, 2, 4, 8)


@pytest.fixture
def restore_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def titanic_batches(steps: int) -> list[tuple[Any, Any]]:
    rng = np.random.default_rng(891)
    return [
        (
            rng.standard_normal((32, 14)).astype(np.float32),
            (rng.random((32, 1)) < 0.38).astype(np.float32),
        )
        for _ in range(steps)
    ]


def titanic_trainer(engine: TorchEngine) -> Trainer:
    network = Network([Dense(16), Relu(), Dense(1)], inputs=14)
    return Trainer(network, BinaryCrossEntropy(), Adam(0.001), engine=engine, seed=0)


def test_xor_trains() -> None:
    features = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)
    targets = np.array([[0], [1], [1], [0]], np.float32)
    network = Network([Dense(8), Tanh(), Dense(1)], inputs=2)
    trainer = Trainer(
        network, BinaryCrossEntropy(), Adam(0.05), engine=TorchEngine.on_cpu(), seed=0
    )
    losses = [trainer.step(features, targets) for _ in range(500)]
    assert losses[-1] < 0.05, losses[-1]
    predicted = network.predict(features, BinaryCrossEntropy(), engine=trainer.engine)
    assert ((predicted > 0.5) == (targets > 0.5)).all()


def test_a_step_moves_two_in_one_out() -> None:
    engine = TorchEngine.on_cpu()
    trainer = titanic_trainer(engine)
    batches = titanic_batches(3)
    trainer.step(*batches[0])  # the first step also puts the slots
    for features, targets in batches[1:]:
        before_in, before_out = engine.counters.transfers_in, engine.counters.transfers_out
        trainer.step(features, targets)
        assert engine.counters.transfers_in - before_in == 2
        assert engine.counters.transfers_out - before_out == 1


def test_nothing_requires_grad_after_a_step() -> None:
    engine = TorchEngine.on_cpu()
    trainer = titanic_trainer(engine)
    features, targets = titanic_batches(1)[0]
    value = trainer.step_tensor(features, targets)
    assert torch.is_grad_enabled()
    handles = [value.handle, *(t.handle for t in trainer.bound.tensors.values())]
    assert trainer.state is not None
    for memory in trainer.state.memory.values():
        handles.extend(memory)
    for handle in handles:
        assert isinstance(handle, torch.Tensor)
        assert not handle.requires_grad and handle.grad_fn is None and handle.grad is None


def _titanic_run(threads: int) -> tuple[list[float], dict[str, Any]]:
    torch.set_num_threads(threads)
    trainer = titanic_trainer(TorchEngine.on_cpu("strict"))
    losses = [trainer.step(x, y) for x, y in titanic_batches(200)]
    return losses, dict(trainer.network.slots)


@pytest.mark.usefixtures("restore_threads")
def test_strict_same_bits_whatever_the_thread_count() -> None:
    runs = {threads: _titanic_run(threads) for threads in THREADS}
    losses, slots = runs[1]
    for threads in THREADS[1:]:
        other_losses, other_slots = runs[threads]
        assert other_losses == losses, f"losses differ with {threads} threads"
        for name, value in slots.items():
            assert other_slots[name].tobytes() == value.tobytes(), (name, threads)


def _large_values(engine: TorchEngine) -> list[Any]:
    """Value-by-value operations on more values than one thread takes (32,768)."""
    flat = engine.put(np.random.default_rng(6).standard_normal((1_000_003,)).astype(np.float32))
    scaled = engine.mul(flat, 30.0)
    return [
        engine.sigmoid(scaled),
        engine.softplus(scaled),
        engine.tanh(flat),
        engine.exp(flat),
        engine.log1p(engine.abs(flat)),
        engine.sqrt(engine.abs(flat)),
        engine.div(flat, engine.add(engine.abs(flat), 1.0)),
        engine.relu(flat),
        engine.max(flat, (0,)),
        engine.erf(engine.mul(flat, 3.0)),
    ]


@pytest.mark.usefixtures("restore_threads")
@pytest.mark.parametrize("precision", ["float32", "strict"])
def test_value_by_value_same_bits_whatever_the_thread_count(precision: str) -> None:
    engine = TorchEngine.on_cpu(precision)
    results: dict[int, list[Any]] = {}
    for threads in THREADS:
        torch.set_num_threads(threads)
        results[threads] = [engine.get(out) for out in _large_values(engine)]
    for threads in THREADS[1:]:
        for i, (mine, other) in enumerate(zip(results[1], results[threads], strict=True)):
            assert mine.tobytes() == other.tobytes(), f"result {i} differs with {threads} threads"


def _large_ops(engine: TorchEngine) -> list[Any]:
    rng = np.random.default_rng(5)
    x = engine.put(rng.standard_normal((16, 8, 30, 30)).astype(np.float32))
    w = engine.put(rng.standard_normal((16, 8, 3, 3)).astype(np.float32))
    a = engine.put(rng.standard_normal((257, 1031)).astype(np.float32))
    b = engine.put(rng.standard_normal((1031, 129)).astype(np.float32))
    flat = engine.put(rng.standard_normal((1_000_003,)).astype(np.float32))
    same = ((1, 1), (1, 1))
    y = engine.conv2d(x, w, 1, same)
    values, selection = engine.maxpool2d(y, 2)
    pair, chosen = engine.maxpool2d_pair(y, (2, 3))
    ids = engine.put(rng.integers(0, 300, 100_000).astype(np.int64))
    stacks = engine.reshape(x, (16, 240, 30))
    return [
        engine.matmul(a, b),
        engine.matmul(a, a, transpose_b=True),
        engine.matmul(a, a, transpose_a=True),
        engine.sum(flat, (0,)),
        engine.mean(flat, (0,)),
        engine.sum(y, (0, 2, 3)),
        engine.sum(a, (1,)),
        engine.sum(a, (0,)),
        engine.max(flat, (0,)),
        engine.sigmoid(flat),
        engine.tanh(flat),
        engine.exp(flat),
        engine.log1p(engine.abs(flat)),
        y,
        engine.conv2d(x, w, 2, ((0, 1), (0, 1))),
        engine.conv2d_weight_grad(x, y, (3, 3), 1, same),
        engine.conv2d_fold(y, w, (30, 30), 1, same),
        values,
        selection,
        engine.maxpool2d_back(values, selection, (30, 30), 2),
        engine.batch_matmul(stacks, stacks, False, True),
        engine.batch_matmul(stacks, stacks, True, False),
        engine.add_rows(engine.slice(flat, 0, 0, 100_000), ids, 300),
        engine.add_rows(engine.reshape(engine.slice(flat, 0, 0, 800_000), (100_000, 8)), ids, 300),
        pair,
        chosen,
        engine.maxpool2d_pair_back(pair, chosen, (30, 30), (2, 3)),
    ]


@pytest.mark.usefixtures("restore_threads")
def test_strict_large_operations_same_bits_whatever_the_thread_count() -> None:
    engine = TorchEngine.on_cpu("strict")
    results: dict[int, list[Any]] = {}
    for threads in THREADS:
        torch.set_num_threads(threads)
        results[threads] = [engine.get(out) for out in _large_ops(engine)]
    for threads in THREADS[1:]:
        for i, (mine, other) in enumerate(zip(results[1], results[threads], strict=True)):
            assert mine.tobytes() == other.tobytes(), f"result {i} differs with {threads} threads"


def test_thread_count_never_set_by_the_engine() -> None:
    before = torch.get_num_threads()
    trainer = titanic_trainer(TorchEngine.on_cpu())
    for x, y in titanic_batches(3):
        trainer.step(x, y)
    assert torch.get_num_threads() == before


def _count_alive(make: Callable[[int], Any], rounds: int) -> int:
    alive = 0
    most = 0

    def gone() -> None:
        nonlocal alive
        alive -= 1

    for i in range(rounds):
        handle = make(i)
        weakref.finalize(handle, gone)
        alive += 1
        most = max(most, alive)
        del handle
    return most


def test_tensors_are_freed_when_dropped() -> None:
    engine = TorchEngine.on_cpu()
    block = engine.put(np.ones((1024, 1024), np.float32))  # 4 MB

    def make(i: int) -> Any:
        return engine.mul(engine.add(block, float(i)), 0.5)

    assert _count_alive(make, 500) <= 3
    assert _count_alive(lambda i: engine.zeros((1024, 1024)), 500) <= 3


def test_identity() -> None:
    engine = TorchEngine.on_cpu()
    identity = engine.identity
    assert (identity.name, identity.version, identity.device) == ("torch", torch.__version__, "cpu")
    assert identity.precision == "float32"
    assert engine.counters.transfers_in == 0 and engine.counters.transfers_out == 0


def _conv_run(threads: int) -> tuple[list[float], dict[str, Any]]:
    from deepsharp.core import Conv2D, CrossEntropy, Flatten, MaxPool2D

    torch.set_num_threads(threads)
    rng = np.random.default_rng(28)
    network = Network(
        [
            Conv2D(8, 3, padding="same"),
            Relu(),
            MaxPool2D(2),
            Conv2D(4, 3, stride=2),
            Relu(),
            Flatten(),
            Dense(10),
        ],
        inputs=(1, 28, 28),
    )
    engine = TorchEngine.on_cpu("strict")
    trainer = Trainer(network, CrossEntropy(), Adam(0.001), engine=engine, seed=0)
    losses = []
    for _ in range(5):
        images = rng.standard_normal((32, 1, 28, 28)).astype(np.float32)
        losses.append(trainer.step(images, rng.integers(0, 10, 32)))
    return losses, dict(network.slots)


@pytest.mark.usefixtures("restore_threads")
def test_strict_convolution_steps_same_bits_whatever_the_thread_count() -> None:
    runs = {threads: _conv_run(threads) for threads in THREADS}
    losses, slots = runs[1]
    for threads in THREADS[1:]:
        assert runs[threads][0] == losses, f"losses differ with {threads} threads"
        for name, value in slots.items():
            assert runs[threads][1][name].tobytes() == value.tobytes(), (name, threads)


def test_an_engine_unpickled_in_a_new_process_works() -> None:
    """torch is imported lazily: an engine unpickled where no engine was made yet (a worker of
    cross_val_score(n_jobs=2)) found `torch` unbound (AttributeError on 'from_numpy')."""
    import pickle
    import subprocess
    import sys

    engine = TorchEngine.on_cpu("strict")
    engine.put(np.zeros(2, np.float32))
    code = (
        "import pickle, sys, numpy as np\n"
        "engine = pickle.loads(sys.stdin.buffer.read())\n"
        "print(type(engine).__name__, engine.precision, engine.counters.transfers_in,\n"
        "      engine.get(engine.put(np.arange(3, dtype=np.float32))).tolist())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=pickle.dumps(engine),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().split() == ["TorchEngine", "strict", "1", "[0.0,", "1.0,", "2.0]"]
    copied = pickle.loads(pickle.dumps(TorchEngine.on_cpu("mixed_bfloat16")))
    assert type(copied).__name__ == "HalfOutputs" and copied.precision == "mixed_bfloat16"
    import copy

    shallow = copy.copy(engine)  # its own counters (trial CF: they were shared)
    shallow.put(np.zeros(2, np.float32))
    assert (engine.counters.transfers_in, shallow.counters.transfers_in) == (1, 2)


def test_an_engine_of_a_card_loads_where_there_is_none_and_refuses_to_be_used() -> None:
    """Failed before (trial CF): an estimator fitted on a card could not be unpickled on a
    machine without one (EngineUnavailableError while loading: its trained_ lost too)."""
    import copy
    import pickle

    import torch

    if torch.cuda.is_available():
        pytest.skip("a card is here: the engine is made on it")
    engine = TorchEngine.on_cpu("float32")
    engine.device = "cuda:0"  # as pickled where it ran on a card
    held = pickle.loads(pickle.dumps({"engine": engine, "kept": [1, 2]}))
    assert held["kept"] == [1, 2] and "unavailable here" in repr(held["engine"])
    with pytest.raises(EngineUnavailableError, match=r"this torch engine \(cuda:0, float32\) "
                       r"was pickled where it ran and loaded where it cannot be made: .*"
                       r"trained_\.predict\(x, 'light'\)"):  # fmt: skip
        held["engine"].put(np.zeros(2, np.float32))
    again = pickle.loads(pickle.dumps(held["engine"]))  # passed on: made again where it can be
    assert "unavailable here" in repr(again)
    # asked whether it has a name, it has none (scikit-learn's clone asks for get_params, and
    # the refusal stopped it: trial CH); a clone copies it as a parameter, deeply
    assert not hasattr(again, "put") and getattr(again, "precision", None) is None
    assert not hasattr(again, "get_params")
    assert "unavailable here" in repr(copy.deepcopy(again))


def test_an_engine_unavailable_here_says_why_where_a_network_serves_or_fits() -> None:
    """Failed before (trial PK: a fitted estimator loaded without the card it ran on): predict
    and fit said "engine <TorchEngine on cuda:0 ...> is not an engine: it lacks name, identity,
    put, ..." — the stand-in's reason (and the way to serve on another engine) never reached
    the user."""
    import pickle

    import torch

    from deepsharp.core import CrossEntropy, Dense, FitOptions, Network, fit, make_engine

    if torch.cuda.is_available():
        pytest.skip("a card is here: the engine is made on it")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 3)).astype(np.float32)
    engine = TorchEngine.on_cpu("float32")
    options = FitOptions(seed=0, epochs=1, progress=False, engine=engine)
    run = fit(None, (x, (x[:, 0] > 0).astype(np.int64)), Network([Dense(2)]), CrossEntropy(),
              Adam(0.01), options)  # fmt: skip
    engine.device = "cuda:0"  # as pickled where it ran on a card
    trained, stand_in = pickle.loads(pickle.dumps((run.trained, engine)))
    said = r"this torch engine \(cuda:0, float32\) was pickled where it ran and loaded where it"
    with pytest.raises(EngineUnavailableError, match=said):
        trained.predict(x[:3], stand_in)
    with pytest.raises(EngineUnavailableError, match=said):
        make_engine(stand_in)
    with pytest.raises(EngineUnavailableError, match=r"^FitOptions: engine: this torch engine"):
        FitOptions(seed=0, engine=stand_in)
    assert trained.predict(x[:3], "light").shape == (3, 2)


FORKED = """
import os, signal, sys
import numpy as np
from deepsharp.core import Dense, MeanSquaredError, Network
from deepsharp.core.engine import make_engine

engine = make_engine("torch:cpu")
network = Network([Dense(512), Dense(512)], inputs=512)
rows = np.random.default_rng(0).standard_normal((2048, 512)).astype(np.float32)
from deepsharp.core.random import Generator
network.initialize(Generator(0))
parent = network.predict(rows, MeanSquaredError(), engine)  # products split over threads
child = os.fork()
if child == 0:
    signal.alarm(60)  # a child that hangs ends itself
    again = network.predict(rows, MeanSquaredError(), engine)
    os._exit(0 if again.shape == parent.shape else 3)
_, status = os.waitpid(child, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")
def test_a_process_forked_after_libtorch_ran_on_threads_predicts() -> None:
    # Trial K: GNU OpenMP's pool does not survive a fork, and a child's first operation split
    # over threads waited for it forever (a fork Pool calling predict hung): a forked process
    # runs libtorch at one thread, as PyTorch's DataLoader workers do.
    environment = {**os.environ, "OMP_NUM_THREADS": "2"}
    done = subprocess.run(
        [sys.executable, "-c", FORKED], env=environment, timeout=120, capture_output=True
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]


def test_a_run_resumed_at_another_thread_count_than_its_bits_depend_on_is_warned_of(
    tmp_path: Any,
) -> None:
    # Trial J: a torch:cpu checkpoint taken at one thread resumed at two without a word, and
    # ended elsewhere than the uninterrupted run (float32's totals depend on the thread count).
    import warnings

    from deepsharp.core import BinaryCrossEntropy, DeepSharpWarning, FitOptions, fit

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)

    def run(threads: int, engine: str, resume_from: Any = None, **more: Any) -> Any:
        network = Network([Dense(8), Dense(1)])
        options = FitOptions(seed=0, epochs=2, progress=False, engine=engine, **more)
        torch.set_num_threads(threads)
        return fit(None, (x, y), network, BinaryCrossEntropy(), Adam(0.01), options,
                   resume_from=resume_from)  # fmt: skip

    before = torch.get_num_threads()
    try:
        for engine, warned in (("torch:cpu", True), ("torch:cpu:strict", False)):
            folder = tmp_path / engine.replace(":", "-")
            run(1, engine, checkpoint_dir=folder, checkpoint_every=1, checkpoint_keep=2)
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                run(2, engine, resume_from=folder / "checkpoint-000001.safetensors")
            found = [str(w.message) for w in said if issubclass(w.category, DeepSharpWarning)]
            assert any("taken at 1 thread(s) of the engine and this run has 2" in text
                       for text in found) is warned, found  # fmt: skip
            with warnings.catch_warnings():
                warnings.simplefilter("error", DeepSharpWarning)
                run(1, engine, resume_from=folder / "checkpoint-000001.safetensors")
    finally:
        torch.set_num_threads(before)
