"""One Titanic training step as the loop takes it, held to the suite's float64 reference from
identical state; determinism, serving independence, transfers per step and flat memory.

The step: 32 rows x 14 features from a fixed generator, Network([Dense(16), Relu(), Dense(1)],
inputs=14), BinaryCrossEntropy(), Adam(0.001), taken by `Trainer.step` on the engine and on
`deepsharp.contracts.reference.Float64Engine` (the same step in float64). Outputs, loss and
gradients must lie within the precision's totals bound of the reference's (3u·S for strict,
(n + 1)u·S for float32 with n = 32 rows, ...), S being each quantity's float64 magnitude: the
same computation on absolute values, with every earlier quantity's magnitude carried along (so
that what an earlier total rounded is covered where it flows on). Slots and Adam's moments after
the step must lie within the value tolerance of the reference's, widened by what the gradients'
own bound carries into them.
"""

from __future__ import annotations

import gc
import tracemalloc
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.contracts.measure import UNIT, Contract, value_tolerance
from deepsharp.contracts.reference import Float64Engine
from deepsharp.core import Adam, BinaryCrossEntropy, Dense, Network, Relu, Trainer
from deepsharp.core.engine import Engine
from deepsharp.core.nn.predicting import Predictor
from deepsharp.core.random import Generator

SEED = 1912
ROWS, FEATURES = 32, 14
Array = NDArray[Any]


def titanic_batch(batch: int = 0) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """Rows shaped like the Titanic sample's: 6 scaled numbers and 8 one-hot flags, targets 0/1."""
    generator = Generator(SEED + 1 + batch)
    numbers = generator.uniform(ROWS * 6).reshape(ROWS, 6) * 4.0 - 2.0
    flags = (generator.uniform(ROWS * 8).reshape(ROWS, 8) < 0.4).astype(np.float64)
    targets = (generator.uniform(ROWS) < 0.38).astype(np.float32).reshape(ROWS, 1)
    return np.hstack([numbers, flags]).astype(np.float32), targets


def titanic_trainer(engine: Engine, compile: bool = True) -> Trainer:
    network = Network([Dense(16), Relu(), Dense(1)], inputs=FEATURES)
    return Trainer(
        network, BinaryCrossEntropy(), Adam(0.001), engine=engine, seed=SEED, compile=compile
    )


def watched_step(trainer: Trainer, batch: int = 0) -> dict[str, Any]:
    """One `trainer.step`, watching the outputs and the gradients it hands the optimizer."""
    engine, network = trainer.engine, trainer.network
    seen: dict[str, Any] = {}
    forward, update = network.forward, trainer.update

    def watching_forward(*args: Any) -> Any:
        seen["outputs"] = forward(*args)
        return seen["outputs"]

    def watching_update(grads: Any) -> None:
        seen["gradients"] = [engine.get(g) for g in grads]
        update(grads)

    network.forward, trainer.update = watching_forward, watching_update  # type: ignore[method-assign,assignment]
    try:
        seen["loss"] = np.float64(trainer.step(*titanic_batch(batch)))
    finally:
        del network.forward, trainer.update
    if "outputs" in seen:  # a compiled step's replay runs its plan, not the forward
        seen["outputs"] = engine.get(seen.pop("outputs").handle)
    seen["slots"] = [engine.get(t.handle) for t in trainer.bound.tensors.values()]
    assert trainer.state is not None
    seen["moments"] = [
        engine.get(h) for name in ("first", "second") for h in trainer.state.memory[name]
    ]
    return seen


def magnitudes(slots: list[Array]) -> dict[str, Any]:
    """S for every quantity of the step, in float64 (see the module's docstring)."""
    w1, b1, w2, b2 = (np.abs(s.astype(np.float64)) for s in slots)
    x, y = (v.astype(np.float64) for v in titanic_batch())
    h = x @ slots[0].astype(np.float64) + slots[1]
    a = np.maximum(h, 0.0)
    z = a @ slots[2].astype(np.float64) + slots[3]
    p = 1.0 / (1.0 + np.exp(-z))
    s_h = np.abs(x) @ w1 + b1
    s_z = s_h @ w2 + b2
    s_dz = (p + np.abs(y) + s_z / 4.0) / ROWS  # sigmoid' <= 1/4 carries z's rounding on
    s_loss = np.mean(np.abs(z) * (1.0 + np.abs(y)) + np.log1p(np.exp(-np.abs(z))) + s_z)
    s_dh = s_dz @ w2.T
    return {
        "outputs": s_z,
        "loss": np.float64(s_loss),
        "gradients": [np.abs(x).T @ s_dh, s_dh.sum(0), s_h.T @ s_dz, s_dz.sum(0)],
    }


def adam_carries(gradient: Array, error: Array) -> list[Array]:
    """How far the first Adam step's slot, first and second moments may move when its gradient
    is off by up to `error`: each is monotone (the moments) or convex (the second moment) in
    the gradient, so the ends of [g - error, g + error] bound it."""
    optimizer = Adam(0.001)
    size = optimizer.learning_rate * np.sqrt(1.0 - optimizer.beta2) / (1.0 - optimizer.beta1)

    def step(g: Array) -> list[Array]:
        first, second = (1.0 - optimizer.beta1) * g, (1.0 - optimizer.beta2) * g * g
        return [size * first / (np.sqrt(second) + optimizer.epsilon), first, second]

    middle = step(gradient)
    ends = [step(gradient - error), step(gradient + error)]
    return [np.maximum(np.abs(a - m), np.abs(b - m)) for m, a, b in zip(middle, *ends)]


def test_titanic_step_matches_the_reference(
    engine_factory: Callable[[], Engine], contract: Contract
) -> None:
    trainer, reference = titanic_trainer(engine_factory()), titanic_trainer(Float64Engine())
    start = trainer.network.slots
    assert all(np.array_equal(start[k], v) for k, v in reference.network.slots.items()), (
        "the same seed must give the same first slots on every engine"
    )
    scale = magnitudes(list(start.values()))
    got, ref = watched_step(trainer), watched_step(reference)
    # The step's longest total adds one term a row (float32 totals are held to (n + 1)u·S).
    for name, key in (("outputs", "outputs"), ("loss", "loss")):
        contract.totals(
            f"titanic step: {name}",
            np.asarray(got[key], np.float32),
            ref[key],
            scale[key],
            ROWS,
            product=True,
        )
    carried: list[list[Array]] = []
    for g, r, s in zip(got["gradients"], ref["gradients"], scale["gradients"], strict=True):
        contract.totals("titanic step: gradients", g, r, s, ROWS, product=True)
        carried.append(adam_carries(r, contract.totals_factor(ROWS, product=True) * UNIT * s))
    # slots, first moments, second moments: each slot's within the value tolerance, widened by
    # what its gradient's bound carries into it
    after = list(zip(got["slots"], got["moments"][:4], got["moments"][4:]))
    expected = list(zip(ref["slots"], ref["moments"][:4], ref["moments"][4:]))
    for gots, refs, carries in zip(after, expected, carried, strict=True):
        for g, r, carry in zip(gots, refs, carries, strict=True):
            contract.within(
                "values",
                "titanic step: slots after Adam",
                g,
                r,
                value_tolerance(r) + carry,
                "of the value tolerance (and what the gradient's bound carries)",
            )


def test_the_same_steps_give_the_same_bits(
    engine_factory: Callable[[], Engine], contract: Contract
) -> None:
    # Watched as recorded (a compiled step's replay calls no forward to watch), twice; then
    # compiled, where the later steps replay the first one's plan: the same bits again.
    runs = []
    for compile in (False, False, True):
        trainer = titanic_trainer(engine_factory(), compile=compile)
        runs.append([watched_step(trainer, batch) for batch in range(3)])
    for first, second, compiled in zip(*runs, strict=True):
        for again, what in ((second, "same step twice"), (compiled, "the step compiled")):
            contract.moves(what, np.asarray(again["loss"]), np.asarray(first["loss"]), "steps")
            for key in ("gradients", "slots", "moments"):
                for a, b in zip(again[key], first[key], strict=True):
                    contract.moves(what, a, b, "steps")
        contract.moves("same step twice", second["outputs"], first["outputs"], "steps")


def test_a_row_alone_gets_the_bits_it_gets_in_a_chunk(engine: Engine, contract: Contract) -> None:
    network = Network([Dense(16), Relu(), Dense(1)], inputs=FEATURES)
    network.initialize(Generator(SEED))
    rows, _ = titanic_batch()
    served = Predictor(network, BinaryCrossEntropy(), engine)
    together = served.predict(rows)
    for index in (0, 1, 13, ROWS - 1):
        alone = np.zeros_like(rows)
        alone[0] = rows[index]  # padded with zeros to a chunk of 32, as serving pads
        contract.moves(
            "served alone or in a chunk", served.predict(alone)[0], together[index], "steps"
        )


def test_a_titanic_step_makes_two_transfers_in_and_one_out(
    engine_factory: Callable[[], Engine],
) -> None:
    engine = engine_factory()
    trainer = titanic_trainer(engine)
    for batch in range(3):
        before = (engine.counters.transfers_in, engine.counters.transfers_out)
        trainer.step(*titanic_batch(batch))
        moved = (
            engine.counters.transfers_in - before[0],
            engine.counters.transfers_out - before[1],
        )
        assert moved == (2, 1), (
            f"step {batch + 1} made {moved[0]} transfers in and {moved[1]} out; a step puts the "
            "rows and targets (2 in) and gets the loss (1 out), nothing else crosses"
        )


class LiveHandles:
    """The engine under test, counting the handles its operations made that are still alive."""

    _HOST = frozenset({"get", "shape", "identity", "counters", "name", "version", "device"})

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.alive = 0
        self.unwatchable = 0
        self._watched: set[int] = set()  # each live handle counted once (a put may give back
        # the caller's own array, the same one every step: `put_checked(owned=True)`)

    def _gone(self, key: int) -> None:
        self.alive -= 1
        self._watched.discard(key)

    def _watch(self, result: Any) -> None:
        for item in result if isinstance(result, (tuple, list)) else (result,):
            if item is None or id(item) in self._watched:
                continue
            try:
                weakref.finalize(item, self._gone, id(item))
            except TypeError:
                self.unwatchable += 1
            else:
                self.alive += 1
                self._watched.add(id(item))

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._engine, name)
        if name in self._HOST or name.startswith("_") or not callable(value):
            return value

        def operation(*args: Any, **kwargs: Any) -> Any:
            result = value(*args, **kwargs)
            self._watch(result)
            return result

        return operation


def _held(engine: Any, watched: LiveHandles) -> tuple[int, ...]:
    gc.collect()
    counters = engine.counters
    buffers = (counters.live_buffers,) if hasattr(counters, "live_buffers") else ()
    return (watched.alive, *buffers)


def test_memory_stays_flat_over_2000_steps(engine_factory: Callable[[], Engine]) -> None:
    engine = engine_factory()
    watched = LiveHandles(engine)
    trainer = titanic_trainer(watched)
    batches = [titanic_batch(b) for b in range(4)]
    tracemalloc.start()
    try:
        for step in range(30):
            trainer.step(*batches[step % 4])
        held, (traced, _) = _held(engine, watched), tracemalloc.get_traced_memory()
        for step in range(30, 2000):
            trainer.step(*batches[step % 4])
        held_after, (traced_after, _) = _held(engine, watched), tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held_after == held, (
        f"after 2,000 steps the engine holds {held_after} (live handles, live buffers), "
        f"after 30 it held {held}: something keeps tensors from each step"
    )
    assert traced_after - traced < 256 * 1024, (
        f"Python's heap grew by {(traced_after - traced) / 1024:.0f} KiB between step 30 and 2,000"
    )
