"""`deepsharp compare FILE ROWS.csv --engines light torch:cpu`: a saved network's training step
on two engines, operation by operation, on the first rows of a CSV file.

FILE is a trained file (its pipeline reads the rows, its loss takes the step, with a fresh
Adam(0.001)), a checkpoint (its slots, optimizer, memory and loss scale; the rows read by the
pipeline of `--pipeline TRAINED` or, with `--target COLUMN`, as numbers) or a network file (its
slots and a fresh Adam(0.001); the rows likewise). The table goes to standard output; the
command exits 1 where an operation is past its bound, 2 where none is but an operation's bound
bounds nothing (compare cannot tell there).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np

from deepsharp.core.cli_arguments import add_imports, at_least_one
from deepsharp.core.cli_output import seed
from deepsharp.core.comparing.step import _engines, compare_step
from deepsharp.core.data.pipeline import Pipeline
from deepsharp.core.data.scan import scan_csv
from deepsharp.core.errors import ConfigurationError, DataError, FileFormatError
from deepsharp.core.files import read_safetensors
from deepsharp.core.nn.losses import BinaryCrossEntropy, CrossEntropy, Loss, MeanSquaredError
from deepsharp.core.nn.network import Network
from deepsharp.core.nn.optimizers import Adam, Optimizer
from deepsharp.core.training.scaling import SETTINGS, LossScale, LossScaleSetting
from deepsharp.core.training.state import TrainerState

__all__ = ["add_command", "run_command"]

HELP = (
    "Take one training step of the network in FILE on two engines, every operation done by both "
    "on the same inputs and judged by its bound (the contract's, at each engine's precision; the "
    "looser where they differ); print a table of them and name the first past its bound (exit "
    "1 then; exit 2 where none is but a bound bounds nothing: compare cannot tell there). "
    "FILE is a trained file (its pipeline reads the rows), a checkpoint or a network file (the "
    "rows read by --pipeline's, or as numbers with --target)."
)


def add_command(commands: Any, engine_help: str) -> None:
    """The `compare` subcommand, on the command line's subparsers."""
    command = commands.add_parser(
        "compare",
        help="one training step on two engines, operation by operation, against the contract",
        description=HELP,
    )
    command.add_argument(
        "file", metavar="FILE", help="a trained file, a checkpoint or a network file"
    )
    add_imports(command)  # a file of layers of one's own (its refusal said --import: trial X)
    command.add_argument(
        "rows", metavar="ROWS.csv", help="rows with the columns the pipeline reads (-: stdin)"
    )
    command.add_argument(
        "--engines",
        nargs=2,
        default=["light", "torch:cpu"],
        metavar=("REFERENCE", "OTHER"),
        help=f"the reference, then the engine that takes the step (default light torch:cpu); "
        f"each {engine_help}",
    )
    command.add_argument(
        "--rows",
        type=at_least_one,
        default=32,
        dest="count",
        metavar="N",
        help="the batch: the file's first N rows (default 32)",
    )
    command.add_argument(
        "--pipeline",
        metavar="TRAINED",
        help="for a checkpoint or network file: the trained file whose pipeline reads the rows "
        "and whose loss takes the step",
    )
    command.add_argument(
        "--target",
        metavar="COLUMN",
        help="for a checkpoint or network file without --pipeline: the target column; every "
        "other column is a number, in order",
    )
    command.add_argument("--seed", type=seed, default=0, help="draws the step's dropout masks (0)")
    command.add_argument(
        "--plot", metavar="IMAGE", help="draw the ratios along the step into IMAGE"
    )


def run_command(arguments: argparse.Namespace) -> int:
    """Run `deepsharp compare` (0: every operation within its bound; 1: one past it; 2: none
    past it, but an operation's bound bounds nothing)."""
    reference, engine = _engines(arguments.engines)
    kind = _kind(arguments.file)
    given = [f"--{name}" for name in ("pipeline", "target") if getattr(arguments, name)]
    if kind == "trained" and given:
        raise ConfigurationError(
            f"{arguments.file} is a trained file: its own pipeline reads the rows, its target "
            f"among them; {' and '.join(given)} {'are' if len(given) > 1 else 'is'} for a "
            "checkpoint or network file: leave it out"
        )
    if len(given) > 1:
        raise ConfigurationError(
            "--pipeline and --target each say how the rows are read: give one (--pipeline "
            "TRAINED reads them as that trained file does, its target among them)"
        )
    state: TrainerState | None = None
    loss_scale: LossScaleSetting = "auto"
    optimizer: Optimizer = Adam(0.001)
    said = []
    if kind == "trained":
        from deepsharp.core.serving import TrainedNetwork

        trained = TrainedNetwork.load(arguments.file)
        network, loss = trained.network, trained.loss
        features, targets = _batch(arguments, network, trained.pipeline)
        said.append(f"{arguments.file}: a trained file; a fresh {optimizer!r} takes the update")
    else:
        if kind == "checkpoint":
            from deepsharp.core.training.checkpoint import Checkpoint

            checkpoint = Checkpoint.load(arguments.file)
            network = Network.from_json(checkpoint.network, arguments.file)
            network.set_slots(checkpoint.trainer.slots)
            if checkpoint.trainer.buffers:
                network.set_buffers(checkpoint.trainer.buffers)
            state = checkpoint.trainer
            optimizer = _optimizer(state.optimizer)
            loss_scale = _loss_scale(state)
            said.append(
                f"{arguments.file}: a checkpoint of epoch {checkpoint.epoch}; its {optimizer!r} "
                f"takes the update from its memory (step {state.optimizer['steps'] + 1})"
            )
        else:
            network = Network.load(arguments.file)
            said.append(f"{arguments.file}: a network file; a fresh {optimizer!r} takes the update")
        loss, features, targets, more = _reading(arguments, network)
        said.extend(more)
    seed = state.generator["seed"] if state is not None else arguments.seed
    comparison = compare_step(
        network,
        loss,
        features,
        targets,
        reference,
        engine,
        optimizer,
        state=state,
        seed=seed,
        loss_scale=loss_scale,
        where="compare",
    )
    rows = "standard input" if getattr(arguments, "stdin", False) else arguments.rows
    comparison.notes[:0] = [*said, f"the batch: the first {len(targets)} rows of {rows}"]
    try:
        print(comparison, flush=True)
    except BrokenPipeError:  # the reader stopped early (`deepsharp compare ... | head`): quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if arguments.plot:
        comparison.plot(arguments.plot)
        print(f"drew the ratios into {arguments.plot}", file=sys.stderr)
    if not comparison.within:
        return 1
    return 2 if comparison.vacuous else 0


def _kind(path: str) -> str:
    """What FILE is, by its format: "trained", "checkpoint" or "network" (a folder: its latest
    checkpoint)."""
    if os.path.isdir(path):
        return "checkpoint"
    _, metadata = read_safetensors(path, "file")
    found = metadata.get("format")
    kinds = {
        "deepsharp.trained": "trained",
        "deepsharp.checkpoint": "checkpoint",
        "deepsharp.network": "network",
    }
    if found not in kinds:
        raise FileFormatError(
            f"{path}: a file of format {found!r}; compare takes a trained file, a checkpoint or "
            "a network file of deepsharp"
        )
    return kinds[found]


def _optimizer(record: dict[str, Any]) -> Optimizer:
    """The optimizer a checkpoint records, made afresh from its settings."""
    kinds: dict[str, type[Optimizer]] = {}
    pending: list[type[Optimizer]] = [Optimizer]
    while pending:
        for sub in pending.pop().__subclasses__():
            kinds.setdefault(sub.__name__, sub)
            pending.append(sub)
    return kinds[record["kind"]](**record["config"])


def _loss_scale(state: TrainerState) -> LossScaleSetting:
    kept = state.hooks.get(LossScale.name)
    if kept is None:
        return None
    return LossScale(**{key: kept[key] for key in SETTINGS})


def _reading(arguments: argparse.Namespace, network: Network) -> tuple[Loss, Any, Any, list[str]]:
    """The loss and the batch for a checkpoint or network file: read by --pipeline's trained
    file, or (--target) the other columns as numbers, with a loss for the network's outputs."""
    if arguments.pipeline:
        from deepsharp.core.serving import TrainedNetwork

        trained = TrainedNetwork.load(arguments.pipeline)
        if trained.network.to_json() != network.to_json():
            raise ConfigurationError(
                f"--pipeline {arguments.pipeline} is a trained file of another network "
                f"({trained.network!r}); {arguments.file} holds {network!r}: give the trained "
                "file of the same run"
            )
        features, targets = _batch(arguments, network, trained.pipeline)
        return trained.loss, features, targets, []
    if not arguments.target:
        raise ConfigurationError(
            f"{arguments.file} holds no pipeline or loss: give --pipeline TRAINED (a trained file "
            "of the same network, whose pipeline reads the rows) or --target COLUMN (the other "
            "columns read as numbers)"
        )
    features, values = _numbers(arguments, network)
    loss: Loss
    ends = network.ends_in
    if network.outputs > 1:
        whole = values == np.floor(values)
        if not whole.all():  # was read as the class below it (1.5 as 1: trial CP)
            i = int(np.argmin(whole))
            raise DataError(
                f"{arguments.rows}, row {i + 1} (counting from 1), column {arguments.target!r}: "
                f"{float(values[i])!r} is not a class: the network's {network.outputs} outputs "
                f"are classes, each row's target one of 0..{network.outputs - 1}"
            )
        loss, targets = CrossEntropy(from_logits=ends != "softmax"), values.astype(np.int64)
    elif np.isin(values, (0.0, 1.0)).all():
        loss, targets = BinaryCrossEntropy(from_logits=ends != "sigmoid"), values.reshape(-1, 1)
    else:
        loss, targets = MeanSquaredError(), values.reshape(-1, 1)
    return loss, features, targets, [f"the loss: {loss!r}, for the network's outputs"]


def _batch(arguments: argparse.Namespace, network: Network, pipeline: Pipeline) -> tuple[Any, Any]:
    """The first rows of ROWS.csv through the pipeline, as the network takes them, and their
    targets."""
    if pipeline.takes_arrays:
        raise DataError(
            f"{arguments.file} was trained on arrays, not on rows of named columns: it holds no "
            f"recipe for {arguments.rows}'s columns. Compare in Python: "
            "deepsharp.core.compare(network, loss, (x, y), engines=(...))"
        )
    if pipeline.target_name is None:
        raise ConfigurationError(
            f"{arguments.file}'s pipeline reads no target: a next-token model's targets are its "
            "text shifted by one token, which the command line does not cut; compare in Python, "
            "a batch of windows as the model trained on: deepsharp.core.compare(network, loss, "
            "(ids[:, :-1], ids[:, 1:]), engines=(...)) (docs/compare.md)"
        )
    scan = scan_csv(arguments.rows, read_rows=arguments.count)
    part = next(iter(scan.parts(pipeline.reads(scan.names))), None)
    if part is None:  # was a StopIteration traceback (trial CP)
        raise DataError(_no_rows(arguments.rows))
    features = network.arrange(pipeline.features(part), arguments.rows, reshape=True)
    return features, pipeline.targets(part)


def _no_rows(rows: object) -> str:
    return f"{rows} holds a header and no rows: compare takes a batch of at least one row"


def _numbers(arguments: argparse.Namespace, network: Network) -> tuple[Any, Any]:
    """The first rows of ROWS.csv as numbers: the target column's, and every other's in order."""
    scan = scan_csv(arguments.rows, read_rows=arguments.count)
    target = arguments.target
    if target not in scan.names:
        raise DataError(
            f"{arguments.rows} has no column {target!r} (its columns: "
            f"{', '.join(map(str, scan.names))})"
        )
    first = next(iter(scan.parts()), None)
    if first is None:  # was a StopIteration traceback (trial CP)
        raise DataError(_no_rows(arguments.rows))
    columns = first.columns
    # A network of one input of ids (an Embedding first) reads whole numbers (they were read as
    # float32 and refused with advice in Python, ids.astype('int64'): trial O).
    specs = network.input_specs
    ids = len(specs) == 1 and specs[0].dtype == "int64"
    names = [name for name in scan.names if name != target]
    x = np.array([_column(arguments.rows, name, columns[name], ids) for name in names]).T
    y = _column(arguments.rows, target, columns[target], None)
    return network.arrange(x, arguments.rows, reshape=True), y


def _column(rows: object, name: str | int, values: Any, ids: bool | None) -> Any:
    """A column of ROWS.csv as float32 numbers (int64 where `ids`; None: the target's), refusing
    a field that is none, naming its row and column (one error blamed "every other column"
    for an empty target field, with Python's own words: trial O)."""
    out = np.empty(len(values), np.int64 if ids else np.float32)
    read = int if ids else float
    for i, value in enumerate(values):
        try:
            out[i] = read(value)
        except (TypeError, ValueError, OverflowError):
            field = "an empty field" if value is None or value == "" else f"{value!r}"
            raise DataError(
                f"{rows}: row {i + 1} (counting from 1), column {name!r}: {field}, not "
                + (
                    "a number; the --target column holds each row's number to compare the loss with"
                    if ids is None
                    else (
                        "an id (a whole number): the network's input takes ids"
                        if ids
                        else "a number: with --target every other column must hold numbers"
                    )
                    + "; give --pipeline TRAINED for a file of other columns"
                )
            ) from None
    return out
