"""`compare`: one training step on two engines, operation by operation, against the contract.

The second engine takes the step — forward, the way back, the optimizer's update — as a run
takes it (`Trainer.step`), on a copy of the network; the first, the reference, does each of its
operations again on the same inputs (`deepsharp.core.comparing.witness`). Every operation is
judged by its family's bound at both engines' precisions (`deepsharp.core.comparing.bounds`), and
the first past its bound is named with its layer, rule, shapes and figures.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from deepsharp.core.comparing.comparison import Comparison
from deepsharp.core.comparing.witness import Witness
from deepsharp.core.engine import Engine, Precision, make_engine, precision_named
from deepsharp.core.engine.registry import check_spec
from deepsharp.core.errors import ConfigurationError, DataError
from deepsharp.core.nn.losses import Loss
from deepsharp.core.nn.network import Network, in_order
from deepsharp.core.nn.optimizers import Adam, Optimizer
from deepsharp.core.training.checks import check_parts
from deepsharp.core.training.scaling import LossScaleSetting
from deepsharp.core.training.state import TrainerState
from deepsharp.core.training.trainer import Trainer

__all__ = ["compare", "compare_step", "engine_precision"]

EngineSpec = Engine | str


def compare(
    network: Network,
    loss: Loss,
    batch: tuple[Any, Any],
    engines: Sequence[EngineSpec] = ("light", "torch:cpu"),
    optimizer: Optimizer | None = None,
    seed: int = 0,
) -> Comparison:
    """Where two engines part: one training step of `network` on `batch` ((features, targets),
    as `Trainer.step` takes them), taken by the second of `engines` with every operation done
    again by the first (the reference) on the same inputs, so that differences never compound.
    Each operation is judged by the contract's bound at both engines' precisions (the looser
    used where they differ); the result names the first past its bound.

    `optimizer` makes the update (Adam() when None), from fresh memory; `seed` draws the slots
    of a network that has none yet (and the step's dropout masks). The network itself is left as
    it was: the step is taken on a copy.
    """
    where = "compare"
    optimizer = Adam() if optimizer is None else optimizer
    check_parts(network, loss, optimizer, where)
    features, targets = _pair(batch)
    reference, engine = _engines(engines)
    return compare_step(network, loss, features, targets, reference, engine, optimizer, seed=seed)


def compare_step(
    network: Network,
    loss: Loss,
    features: Any,
    targets: Any,
    reference: Engine,
    engine: Engine,
    optimizer: Optimizer,
    state: TrainerState | None = None,
    seed: int = 0,
    loss_scale: LossScaleSetting = "auto",
    where: str = "compare",
) -> Comparison:
    """`compare`'s step on engines already made, from a trainer's `state` where given (the
    slots, the optimizer's memory and steps, the loss scale's: a shadow check's, a
    checkpoint's), with the loss scale a run of `engine` would take (`loss_scale`)."""
    precisions = (engine_precision(reference, where), engine_precision(engine, where))
    labels = (str(reference.identity), str(engine.identity))
    copied = copy.deepcopy(network)
    _build(copied, features, where)
    witness = Witness(engine, reference, precisions, labels)
    notes = [] if copied.initialized else [f"the network had no slots yet: drawn from seed {seed}"]
    taker = cast(Engine, witness)  # an engine in all but its declared type
    with Trainer(
        copied, loss, copy.deepcopy(optimizer), taker, seed=seed, loss_scale=loss_scale
    ) as trainer:
        trainer.start()
        if state is not None:
            trainer.load_state(state, where)
        witness.name_handles({name: t.handle for name, t in trainer.bound.tensors.items()})
        assert trainer.state is not None
        for kind, handles in trainer.state.memory.items():
            witness.name_handles(
                {f"{kind} of {name}": h for name, h in zip(trainer.slot_names, handles)}
            )
        witness.phase = "step"
        try:
            trainer.step(features, targets)
        except Exception as error:
            if not any(row.broken for row in witness.rows):
                raise
            # An operation past its bound may leave the rest of the step unable to go on (a
            # shape astray): what was found up to there is the answer.
            notes.append(f"the step stopped after it: {type(error).__name__}: {error}")
        witness.phase = "setup"
    return Comparison((reference.identity, engine.identity), precisions, witness.rows, notes)


def _pair(batch: Any) -> tuple[Any, Any]:
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise DataError(
            f"compare: the batch is a pair (features, targets), as Trainer.step takes them, not "
            f"{_described(batch)}"
        )
    return batch[0], batch[1]


def _described(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _engines(engines: Any) -> tuple[Engine, Engine]:
    """The two engines, made from their specs; the same engine named twice is refused."""
    if (
        isinstance(engines, (str, Engine))
        or not isinstance(engines, (tuple, list))
        or len(engines) != 2
    ):
        raise ConfigurationError(
            f"compare: engines is a pair, the reference first: ('light', 'torch:cpu'), not "
            f"{_described(engines)}"
        )
    for index, spec in enumerate(engines):
        check_spec(spec, f"compare: engine {index + 1}")
    if engines[0] is engines[1] or (isinstance(engines[0], str) and engines[0] == engines[1]):
        raise ConfigurationError(
            f"compare: both engines are {engines[0]!r}: one engine named twice has nothing to "
            "compare. Name two engines (light and torch:cpu), or one at two precisions (light "
            "and light:float32)"
        )
    reference, engine = make_engine(engines[0]), make_engine(engines[1])
    if reference is engine or _identity(reference) == _identity(engine):
        raise ConfigurationError(
            f"compare: both engines are {reference.identity} (named {engines[0]!r} and "
            f"{engines[1]!r}): one engine named twice has nothing to compare. Name two engines, "
            "or one at two precisions (light and light:float32)"
        )
    return reference, engine


def _identity(engine: Engine) -> Any:
    try:
        return engine.identity
    except Exception:  # judged, with what to do, by engine_precision
        return None


def engine_precision(engine: Engine, where: str = "compare") -> Precision:
    """The precision `engine`'s identity names; a ConfigurationError saying what to do where it
    names none the contract knows (its bound cannot be stated)."""
    help_ = (
        "compare holds each operation to the bound of the engines' precisions, so an engine must "
        "say its own: an `identity` (deepsharp.core.EngineIdentity) naming one of strict, "
        "float32, mixed_bfloat16, mixed_float16 (docs/writing-an-engine.md)"
    )
    name = getattr(engine, "name", type(engine).__name__)
    identity = _identity(engine)
    if identity is None:
        raise ConfigurationError(f"{where}: the engine {name!r} has no identity; {help_}")
    try:
        return precision_named(getattr(identity, "precision", None))  # type: ignore[arg-type]
    except ValueError:
        raise ConfigurationError(
            f"{where}: the engine {name!r} names the precision "
            f"{getattr(identity, 'precision', None)!r}, none there is; {help_}"
        ) from None


def _build(network: Network, features: Any, where: str) -> None:
    """Build a chain for the batch's rows where it is not built; refuse a batch it cannot take."""
    if not network.built and len(network.input_specs) == 1:
        rows = features[0] if in_order(features) else features
        shape = np.shape(rows)
        if len(shape) < 2:
            raise DataError(
                f"{where}: the batch's features are (rows, ...) with at least one row, not of "
                f"shape {shape}"
            )
        network.build(tuple(shape[1:]))
    network.arrange(features, f"{where}'s batch")
