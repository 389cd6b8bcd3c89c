"""The compiled step (DESIGN §19): each kind of batch's forward pass and way back traced once and
replayed as a flat plan, giving the bits of the step run as recorded — for every layer kind of
the layer harness on every CPU engine of the core's tests, for every sample, under gradient
accumulation, a dynamic loss scale, clipping, checkpoints and resumes — and falling back,
saying why, where a step cannot be replayed."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from core_helpers import titanic_shaped
from test_layer_harness import CASES

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    Conv2D,
    CrossEntropy,
    Dense,
    Dropout,
    FitOptions,
    Flatten,
    Input,
    Layer,
    LossScale,
    MeanSquaredError,
    Network,
    Relu,
    StepHook,
    Trainer,
    fit,
)
from deepsharp.core.autodiff.plan import capture
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.engine import fused, make_engine
from deepsharp.engines.light import LightEngine
from deepsharp.engines.testbuffer import TestBufferEngine

ENGINES = ["light", "light:float32", "testbuffer", "light:mixed_bfloat16", "light:mixed_float16"]


def harness_network(name: str) -> tuple[Network, list[np.ndarray]]:
    """The harness case's layer on its inputs, flattened into Dense(2): a network with slots
    whose output a squared error takes; and four rows of its inputs."""
    factory, shape, options = CASES[name]
    listed = bool(shape) and isinstance(shape[0], (tuple, list))
    shapes = [tuple(s) for s in (shape if listed else [shape])]
    given = options.get("inputs")
    rng = np.random.default_rng(3)
    if given is None:
        arrays = [rng.standard_normal((4, *s)).astype(np.float32) for s in shapes]
    else:
        arrays = [np.concatenate([np.asarray(a)] * 2)[:4] for a in given]
        arrays = [a if a.dtype.kind in "iu" else a.astype(np.float32) for a in arrays]
    symbols = [
        Input(s, dtype="int64" if a.dtype.kind in "iu" else "float32", name=f"x{i}")
        for i, (s, a) in enumerate(zip(shapes, arrays))
    ]
    out = factory()(symbols if len(symbols) > 1 else symbols[0])
    if len(out.shape) > 1:
        out = Flatten()(out)
    return Network(inputs=symbols, outputs=Dense(2)(out)), arrays


def steps(network: Network, arrays: list[np.ndarray], engine: str, compile: bool) -> Any:
    """Five steps — four rows, three (a smaller last batch), four again twice, three — each
    step's loss, then the slots and buffers, and the trainer's record of its steps."""
    rng = np.random.default_rng(5)
    targets = rng.standard_normal((4, 2)).astype(np.float32)
    optimizer = Adam(0.01, global_clip_norm=1.0)
    losses = []
    # Under mixed_float16 a dynamic scale from 2**8: from 2**16 these steps' scaled products
    # pass float16's 65,504, and each step's halved scale made a kind of batch of its own.
    scale: Any = LossScale(2.0**8) if engine.endswith("mixed_float16") else "auto"
    with Trainer(
        network, MeanSquaredError(), optimizer, engine=engine, seed=1, compile=compile,
        loss_scale=scale,
    ) as trainer:  # fmt: skip
        for rows in (4, 3, 4, 4, 3):
            losses.append(trainer.step([a[:rows] for a in arrays], targets[:rows]))
        record = trainer.compiled.record()
    slots, buffers = network.values()
    return np.array(losses, np.float32), slots, buffers, record


def same_bits(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(a[n].tobytes() == b[n].tobytes() for n in a)


def compiled_beside_recorded(name: str, engine: str) -> Any:
    """The harness case's five steps recorded and compiled on `engine`: the same losses, slots
    and buffers bit for bit (asserted); the compiled run's record of its steps."""
    recorded = steps(*harness_network(name), engine, compile=False)
    compiled = steps(*harness_network(name), engine, compile=True)
    where = f"{name} on {engine}"
    assert recorded[0].tobytes() == compiled[0].tobytes(), f"{where}: the losses differ"
    assert same_bits(recorded[1], compiled[1]), f"{where}: the slots differ"
    assert same_bits(recorded[2], compiled[2]), f"{where}: the buffers differ"
    assert recorded[3].replayed == 0 and not recorded[3].compiled, where
    return compiled[3]


@pytest.mark.parametrize("name", list(CASES))
def test_a_compiled_step_gives_the_recorded_steps_bits_for_every_layer_kind(name: str) -> None:
    for engine in ENGINES:
        where = f"{name} on {engine}"
        record = compiled_beside_recorded(name, engine)
        # Two kinds of batch (4 rows, 3 rows): each traced once, the others replayed; under
        # mixed_float16 a loss scale halved by an overflow makes a kind of its own.
        assert record.why == () and record.replayed + record.recorded == 5, where
        assert record.replayed == 3 or (engine.endswith("float16") and record.replayed), where


def test_an_operation_the_engine_holds_as_its_own_is_kept_after_a_capture() -> None:
    """An engine may offer a fast path only at some settings, set on it when made (the torch
    engine's LSTM over a sequence, at float32 on the processor). Before, the capture's watchers
    were taken off by deleting the name, the engine's own with them: later steps ran without
    it (a capture of another batch size another way, other bits than a recorded run)."""
    engine = LightEngine()
    calls = []

    def relu_back(x: Any, grad: Any) -> Any:
        calls.append(1)
        return fused.relu_back_reference(engine, x, grad)

    engine.relu_back = relu_back  # type: ignore[method-assign]
    rows, targets = titanic_shaped()
    network = Network([Dense(16), Relu(), Dense(1)], inputs=14)
    with Trainer(network, BinaryCrossEntropy(), Adam(), engine, compile=True) as trainer:
        for count in (32, 16, 32):  # two captures, then a replay
            trainer.step(rows[:count], targets[:count])
        assert trainer.compiled.record().replayed == 1
    assert engine.__dict__["relu_back"] is relu_back
    assert len(calls) == 3


def test_a_replayed_step_makes_the_recorded_steps_engine_calls_and_no_transfer_more() -> None:
    rows, targets = titanic_shaped()
    counts = {}
    for compile in (False, True):
        engine = make_engine("testbuffer")
        network = Network([Dense(16), Relu(), Dropout(0.3), Dense(1)], inputs=14)
        with Trainer(network, BinaryCrossEntropy(), Adam(), engine, compile=compile) as trainer:
            trainer.step(rows, targets)
            before = engine.counters.transfers_in, engine.counters.transfers_out
            live = engine.counters.live_buffers
            for _ in range(20):
                trainer.step(rows, targets)
            after = engine.counters.transfers_in, engine.counters.transfers_out
            counts[compile] = (after[0] - before[0], after[1] - before[1])
            # Flat memory: what a replayed step allocates it lets go of.
            assert engine.counters.live_buffers == live
    # A step puts the rows, the targets and the dropout mask, and brings back the loss.
    assert counts[True] == counts[False] == (60, 20)


def test_a_plan_is_one_flat_function_of_the_steps_engine_calls() -> None:
    rows, targets = titanic_shaped()
    trainer = Trainer(
        Network([Dense(16), Relu(), Dense(1)], inputs=14), BinaryCrossEntropy(), Adam()
    )
    trainer.step(rows, targets)
    (found,) = [found for found in trainer.compiled.plans.values() if found is not None]
    assert found.rules == 4  # affine, relu, affine, the loss: the recorded step's rules
    source = found.plan.source
    assert source.startswith("def plan(i0, i1, i2):") and "matmul_bias(i0, c0, c1" in source
    assert "relu_back(" in source and "Tensor" not in source and "forward" not in source
    trainer.close()


class Peeks(Layer):
    """A layer that reads a value on the host during its forward pass (and passes x on)."""

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        self.seen = float(np.asarray(x.numpy()).ravel()[0])
        return x


def test_a_step_that_reads_a_value_on_the_host_runs_as_recorded_and_says_why() -> None:
    rows, targets = titanic_shaped()
    network = Network([Dense(4), Peeks(name="peeks"), Dense(1)], inputs=14)
    run = fit(
        None,
        (np.concatenate([rows] * 3), np.concatenate([targets] * 3)),
        network,
        BinaryCrossEntropy(),
        Adam(),
        FitOptions(seed=0, epochs=2, progress=False),
    )
    said = run.report.steps
    assert said is not None and said.replayed == 0 and said.recorded > 0
    assert said.why == (
        "layer 'peeks' brings a value to the host (get) during the step, outside a host step: "
        "a step whose transfers may depend on its values cannot be replayed",
    )
    assert "not compiled: layer 'peeks' brings a value to the host" in str(run.report)


class Doubles(StepHook):
    """Doubles the objective: says nothing of what it reads."""

    def objective(self, trainer: Trainer, value: Tensor, share: Any) -> Tensor:
        return value * 2.0


class Scales(Doubles):
    """Multiplies the objective by its own number, and says so."""

    def __init__(self) -> None:
        self.factor = 2.0

    def objective(self, trainer: Trainer, value: Tensor, share: Any) -> Tensor:
        return value * self.factor

    def objective_key(self) -> float:
        return self.factor


def test_a_hook_that_changes_the_objective_is_compiled_only_when_it_says_what_it_reads() -> None:
    rows, targets = titanic_shaped()
    results = {}
    for hook in (Doubles(), Scales(), None):
        network = Network([Dense(16), Relu(), Dense(1)], inputs=14)
        hooks = [] if hook is None else [hook]
        with Trainer(network, BinaryCrossEntropy(), Adam(), hooks=hooks) as trainer:
            for step in range(6):
                if isinstance(hook, Scales) and step == 3:
                    hook.factor = 4.0  # a new key: the step is traced again
                trainer.step(rows, targets)
            results[type(hook).__name__] = trainer.compiled.record()
    doubles, scales = results["Doubles"], results["Scales"]
    assert doubles.replayed == 0 and doubles.why == (
        "the step hook Doubles changes the objective and does not say what it reads "
        "(StepHook.objective_key): its steps ran as recorded",
    )
    assert (scales.replayed, scales.recorded, scales.plans) == (4, 2, 2)


def test_a_dynamic_loss_scale_is_compiled_with_the_recorded_bits_through_its_changes() -> None:
    rows, targets = titanic_shaped()
    targets = targets * 1e3  # large gradients: the first steps overflow float16, halving the scale
    kept = []
    for compile in (False, True):
        network = Network([Dense(16), Relu(), Dense(1)], inputs=14)
        with Trainer(
            network, MeanSquaredError(), Adam(), "light:mixed_float16", compile=compile
        ) as trainer:
            losses = [trainer.step(rows, targets) for _ in range(12)]
            assert trainer.skipped_steps > 0
            kept.append((np.array(losses).tobytes(), network.slots, trainer.loss_scale.scale))
    assert kept[0][0] == kept[1][0] and same_bits(kept[0][1], kept[1][1])
    assert kept[0][2] == kept[1][2]


def test_gradient_accumulation_compiled_gives_the_recorded_bits() -> None:
    rows, targets = titanic_shaped()
    kept = []
    for compile in (False, True):
        network = Network([Dense(16), Relu(), Dropout(0.2), Dense(1)], inputs=14)
        with Trainer(
            network, BinaryCrossEntropy(), Adam(), accumulate=3, compile=compile
        ) as trainer:
            losses = [trainer.step(rows[: 32 - step], targets[: 32 - step]) for step in (0, 0, 1)]
            kept.append((np.array(losses).tobytes(), network.slots, trainer.compiled.record()))
    assert kept[0][0] == kept[1][0] and same_bits(kept[0][1], kept[1][1])
    assert kept[1][2].replayed == 1  # 32 rows in 3 parts (11, 11, 10): the second step replays


def test_a_compiled_run_resumes_bit_for_bit_from_its_checkpoint(tmp_path: Path) -> None:
    rows, targets = titanic_shaped()
    data = (np.concatenate([rows] * 4), np.concatenate([targets] * 4))

    def run(epochs: int, **extra: Any) -> Any:
        network = Network([Dense(16), Relu(), Dropout(0.1), Dense(1)], inputs=14)
        options = FitOptions(seed=3, epochs=epochs, patience=50, progress=False, batch_size=20)
        return fit(None, data, network, BinaryCrossEntropy(), Adam(), options, **extra).trained

    whole = run(4)
    options = FitOptions(seed=3, epochs=2, patience=50, progress=False, batch_size=20)
    network = Network([Dense(16), Relu(), Dropout(0.1), Dense(1)], inputs=14)
    options.checkpoint_dir = tmp_path
    options.checkpoint_every = 1
    fit(None, data, network, BinaryCrossEntropy(), Adam(), options)
    resumed = run(4, resume_from=tmp_path)
    assert same_bits(whole.network.slots, resumed.network.slots)


def test_capture_refuses_a_value_from_outside_the_pass() -> None:
    engine = make_engine("light")
    outside = engine.put(np.ones(3, np.float32))
    inside = engine.put(np.ones(3, np.float32))
    captured = capture(
        engine, lambda: engine.add(inside, outside), [inside], [], lambda result: result
    )
    assert captured.plan is None and "neither one of the step's inputs" in str(captured.why)
    held = capture(
        engine, lambda: engine.add(inside, outside), [inside], [outside], lambda result: result
    )
    assert held.plan is not None
    again = engine.put(np.full(3, 2.0, np.float32))
    assert held.plan(again).tolist() == [3.0, 3.0, 3.0]
    assert "add" not in vars(engine)  # the engine is left as it was


def test_fit_says_which_steps_ran_and_compile_false_runs_them_as_recorded() -> None:
    rows, targets = titanic_shaped()
    data = (np.concatenate([rows] * 3), np.concatenate([targets] * 3))
    reports = {}
    for compile in (True, False):
        network = Network([Dense(8), Relu(), Dense(1)], inputs=14)
        options = FitOptions(seed=0, epochs=3, progress=False, compile=compile)
        reports[compile] = fit(None, data, network, BinaryCrossEntropy(), Adam(), options).report
    for report in reports.values():
        assert report.steps is not None
    assert [r.loss for r in reports[True].history] == [r.loss for r in reports[False].history]
    assert reports[True].steps.compiled and reports[True].steps.replayed > 0
    assert not reports[False].steps.compiled and reports[False].steps.replayed == 0
    assert "ran as recorded (compile=False)" in str(reports[False])
    with pytest.raises(TypeError, match="compile is True or False"):
        FitOptions(seed=0, compile="yes")  # type: ignore[arg-type]


def test_a_closed_trainer_s_plans_leave_nothing_on_the_engine_without_a_collection() -> None:
    # A plan's function was held by its own namespace (a reference cycle): once the trainer
    # was closed and dropped, its plans kept 216,692 bytes of the test engine's memory alive
    # until the garbage collector happened to run (the memory session's 2,000-step check).
    engine = TestBufferEngine()
    network = Network([Conv2D(2, 3), Relu(), Flatten(), Dense(3)], inputs=(1, 6, 6))
    trainer = Trainer(network, CrossEntropy(), Adam(0.001), engine=engine, seed=0)
    rng = np.random.default_rng(0)
    images, classes = rng.random((4, 1, 6, 6), dtype=np.float32), rng.integers(0, 3, size=4)
    for _ in range(3):
        trainer.step(images, classes)
    assert trainer.compiled.replayed > 0
    gc.disable()
    try:
        trainer.close()
        del trainer
        assert engine.counters.live_bytes == 0
    finally:
        gc.enable()


def _sample_runs() -> dict[str, Any]:
    """Each sample's run, short: (its module's run, the options that keep it to seconds)."""
    from deepsharp.core.samples import digits, resnet, shakespeare, spam, titanic

    return {
        "titanic": (titanic.run, {"epochs": 2}),
        "digits": (digits.run, {"epochs": 1}),
        "resnet": (resnet.run, {"epochs": 1}),
        "spam": (spam.run, {"epochs": 1}),
        "shakespeare": (shakespeare.run, {"steps": 3, "characters": 20}),
    }


@pytest.mark.once
@pytest.mark.parametrize("sample", ["titanic", "digits", "resnet", "spam", "shakespeare"])
def test_every_sample_s_run_compiled_gives_the_recorded_run_s_bits(sample: str) -> None:
    """Each sample, from its own `run` (pipeline, network, loss, optimizer, validation, early
    stopping, its report's notes), compiled and not: the same history, slots, buffers and
    notes (predictions, generated text) bit for bit, and the compiled run's steps replayed."""
    run, options = _sample_runs()[sample]
    runs = {
        compile: run(engine="light:float32", seed=3, compile=compile, **options)
        for compile in (True, False)
    }
    compiled, recorded = runs[True], runs[False]

    def curve(run: Any) -> list[tuple[Any, ...]]:  # each epoch less its seconds
        return [(e.epoch, e.loss, e.validation_loss, dict(e.metrics)) for e in run.report.history]

    assert curve(compiled) == curve(recorded), sample
    assert compiled.report.notes == recorded.report.notes, sample
    for made, given in zip(
        compiled.trained.network.values(), recorded.trained.network.values(), strict=True
    ):
        assert same_bits(made, given), f"{sample}: the trained values differ"
    steps = compiled.report.steps
    assert steps.compiled and steps.replayed > 0 and steps.why == (), (sample, steps)
    assert recorded.report.steps.replayed == 0


def test_captures_on_one_engine_in_two_threads_keep_apart() -> None:
    """Failed before (trial AH): two trainers tracing their first steps on one engine object
    in two threads replaced each other's watchers — the second fell back for the whole run
    ('the step gives back a value it did not make'), the engine kept the first's watchers for
    good, and at times a capture raised 'dictionary changed size during iteration'."""
    import _thread
    import threading

    def untold() -> Any:  # a lock held until what it stands for happens, then released
        lock = _thread.allocate_lock()
        lock.acquire()
        return lock

    a_in, b_in, a_done = untold(), untold(), untold()
    first = {"A": _thread.allocate_lock(), "B": _thread.allocate_lock()}

    class Gate(Layer):
        """Orders the two threads' first passes. What it changes is held in locks, which no
        trace reads (a dict or an Event changed in a pass would be state it changes)."""

        def __init__(self, who: str, name: str | None = None) -> None:
            super().__init__(name)
            self.who = who

        def forward(self, x: Any, slots: Any, context: Any) -> Any:
            if first[self.who].acquire(blocking=False):
                if self.who == "A":  # A is tracing: B starts tracing too
                    a_in.release()
                    b_in.acquire(timeout=10)
                else:  # B is tracing: A ends its trace first
                    b_in.release()
                    a_done.acquire(timeout=10)
            return x

    engine = make_engine("light")
    rows, targets = titanic_shaped()
    said: dict[str, str] = {}

    def train(who: str) -> None:
        network = Network([Dense(4), Gate(who), Relu(), Dense(1)], inputs=14)
        with Trainer(network, BinaryCrossEntropy(), Adam(0.05), engine=engine, seed=0) as t:
            if who == "B":
                a_in.acquire(timeout=10)
            for step in range(3):
                t.step(rows, targets)
                if who == "A" and step == 0:
                    a_done.release()
            said[who] = t.compiled.summary()

    threads = [threading.Thread(target=train, args=(who,)) for who in "AB"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert said["A"] == said["B"] == "steps: 2 replayed a compiled plan (1 made), 1 ran as recorded"
    assert not [name for name, value in vars(engine).items() if callable(value)]


def test_tracing_a_step_takes_no_more_memory_than_running_it_as_recorded() -> None:
    # Trial Q: the capture held every value of the pass until it ended, so a kind of batch's
    # first step took twice a step's memory (12 layers of 512, 4,096 rows: 434 MB against
    # 203 MB), again at every batch of a new size: out of memory on a card at the first step.
    import tracemalloc

    def peaks(compile: bool) -> list[int]:
        layers: list[Any] = []
        for _ in range(6):
            layers += [Dense(256), Relu()]
        network = Network([*layers, Dense(1)], inputs=32)
        rng = np.random.default_rng(0)
        x = rng.normal(size=(1024, 32)).astype(np.float32)
        trainer = Trainer(network, MeanSquaredError(), Adam(1e-4), seed=0, compile=compile)
        trainer.step(x, x[:, :1].copy())  # the network built, its slots drawn
        found = []
        tracemalloc.start()
        try:
            for rows in (1000, 1000):  # a new kind of batch: traced, then replayed
                tracemalloc.reset_peak()
                start = tracemalloc.get_traced_memory()[0]
                trainer.step(x[:rows], x[:rows, :1].copy())
                found.append(tracemalloc.get_traced_memory()[1] - start)
        finally:
            tracemalloc.stop()
            trainer.close()
        return found

    recorded, (traced, replayed) = peaks(False), peaks(True)
    assert traced <= 1.15 * max(recorded), (traced, recorded)
    assert replayed <= traced
