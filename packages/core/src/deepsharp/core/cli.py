"""The command line: `deepsharp sample`, `deepsharp train`, `deepsharp predict`, `deepsharp
evaluate`, `deepsharp generate` (cli_serving.py), `deepsharp compare`, `deepsharp export`,
`deepsharp seal`, `deepsharp doctor`.

Whatever goes wrong ends in one line on stderr and a non-zero exit, never a traceback: what
can be checked before a long run (where files go, what --plot needs, the engine) is checked
before it starts, and predictions and networks are written atomically, so a failure leaves any
earlier file as it was.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Mapping, Sequence
from importlib import import_module
from typing import Any

from deepsharp.core.cli_arguments import (
    add_imports,
    at_least_one,
    check_names,
    import_modules,
    imported,
    not_an_input,
    plot_target,
    rows_from_stdin,
    said_of_stdin,
)
from deepsharp.core.cli_output import (
    CommandError,
    checked_checkpoints,
    engine_named,
    interrupted_run,
    left_behind,
    outliving_stdout,
    quiet_stdout,
    said_plainly,
    seed,
    system_said,
    writable,
)
from deepsharp.core.cli_serving import SERVING
from deepsharp.core.cli_serving import add_commands as add_serving
from deepsharp.core.cli_serving import run_command as run_serving
from deepsharp.core.comparing.command import add_command as add_compare
from deepsharp.core.comparing.command import run_command as run_compare
from deepsharp.core.doctor import doctor
from deepsharp.core.errors import DeepSharpError
from deepsharp.core.version import __version__

__all__ = ["main"]

SAMPLES = ("titanic", "digits", "resnet", "spam", "shakespeare")
ENGINE_HELP = (
    "light (default), light:float32, onnx (deepsharp[onnx]), torch:cpu, torch:cuda:N, "
    "testbuffer (each its own package: deepsharp doctor says which are here), or module:factory"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deepsharp",
        description="Train and serve networks; the engine is chosen where arithmetic is asked for.",
    )
    parser.add_argument("--version", action="version", version=f"deepsharp {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sample = commands.add_parser(
        "sample",
        help="train a sample that ships with deepsharp and print its report",
        description="Train a sample that ships with deepsharp (data included) and print its report.",
    )
    sample.add_argument("name", choices=SAMPLES, help="which sample")
    sample.add_argument("--engine", default=None, metavar="SPEC", help=ENGINE_HELP)
    sample.add_argument("--seed", type=seed, default=42, help="the run's seed (default 42)")
    sample.add_argument("--save", metavar="FILE", help="save the trained network to FILE")
    sample.add_argument(
        "--epochs",
        type=at_least_one,
        default=None,
        metavar="N",
        help="at most N epochs (no more than the sample's own; default: the sample's)",
    )
    sample.add_argument(
        "--steps",
        type=at_least_one,
        default=None,
        metavar="N",
        help="N training steps, for a sample counted in steps (shakespeare: 3000, in epochs of "
        "equal length of at most 300 steps: N rounded up to a multiple of them)",
    )
    sample.add_argument(
        "--plot", metavar="FILE", help="draw the training curves into FILE (matplotlib)"
    )
    sample.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress bar (default: on a terminal)",
    )

    train = commands.add_parser(
        "train",
        help="train a network on the rows of a CSV file, its pipeline inferred, and save it",
        description="Train a network to predict COLUMN of ROWS.csv from the other columns: the "
        "pipeline is inferred from the columns (numbers, categories, flags, text; each choice "
        "said, with why), the network is Dense(32), ReLU, Dense(outputs) (with text: each text "
        "through Embedding(32) and LSTM(32) beside the rest) unless --network names one, "
        "the optimizer Adam(0.001); the report is printed and the trained network written to "
        "FILE, for `deepsharp predict`. The file is read whole (about 30 times its size in "
        "memory): a larger one trains in Python, fit(pipeline, scan_csv(path), ...).",
    )
    train.add_argument("rows", metavar="ROWS.csv", help="the rows, a header first (-: stdin)")
    train.add_argument("--target", required=True, metavar="COLUMN", help="the column to predict")
    train.add_argument(
        "--out", required=True, metavar="FILE", help="write the trained network to FILE"
    )
    train.add_argument(
        "--network",
        metavar="MODULE:FUNCTION",
        help="a function that makes the network (given outputs= where it takes it, and for "
        "rows with text inputs= and vocabularies=); MODULE is looked for in the current folder "
        "first",
    )
    train.add_argument("--engine", default=None, metavar="SPEC", help=ENGINE_HELP)
    train.add_argument(
        "--epochs", type=at_least_one, default=200, help="at most this many epochs (200)"
    )
    train.add_argument("--seed", type=seed, default=42, help="the run's seed (default 42)")
    train.add_argument(
        "--checkpoints",
        metavar="FOLDER",
        help="write the run's checkpoint into FOLDER after every epoch (the latest kept), so "
        "that a run stopped (Ctrl-C, a crash) goes on from it with --resume",
    )
    train.add_argument(
        "--resume",
        action="store_true",
        help="go on from the latest checkpoint in --checkpoints FOLDER (the same rows, seed, "
        "engine and network as the run that wrote it)",
    )
    train.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress bar (default: on a terminal)",
    )

    add_serving(commands, ENGINE_HELP)
    add_compare(commands, ENGINE_HELP)
    export = commands.add_parser(
        "export",
        help="write a saved trained network as an ONNX file that serves raw rows",
        description="Write the trained network in FILE as one ONNX file: its pipeline, network "
        "and link, so onnxruntime serves the raw columns and gives what predict gives "
        "(docs/export.md); a network saved alone (Network.save) as its export_onnx writes it, "
        "arrays of features in, the network's outputs out. Needs deepsharp[onnx].",
    )
    export.add_argument(
        "file",
        metavar="FILE",
        help="a trained network (from fit, train, or sample --save), or a network alone",
    )
    export.add_argument("out", metavar="OUT.onnx", help="the ONNX file to write")
    export.add_argument(
        "--opset", type=at_least_one, default=17, help="the ONNX opset to write (default 17)"
    )
    add_imports(export)

    seal = commands.add_parser(
        "seal",
        help="record the digest in a file an older deepsharp saved without one",
        description="Record the SHA-256 digest of FILE's header and body in its metadata, as "
        "deepsharp does on every save, so that loading it can tell a damaged copy. Only for a "
        "copy you trust: the digest vouches for the file as it is now.",
    )
    seal.add_argument("file", metavar="FILE", help="a network, trained-network or checkpoint file")

    commands.add_parser(
        "doctor",
        help="say which engines are installed and usable, and what is missing",
        description="Which engines are installed and usable, what torch build and cards are found, "
        "and which packages to install for what is missing.",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    with said_plainly():
        return _main(arguments)


def _main(arguments: argparse.Namespace) -> int:
    try:
        check_names(arguments)
        rows_from_stdin(arguments)
        if arguments.command == "train" or (arguments.command == "sample" and arguments.save):
            with outliving_stdout():  # a file to write outlives a reader gone (| head)
                return _sample(arguments) if arguments.command == "sample" else _train(arguments)
        if arguments.command == "sample":
            return _sample(arguments)
        if arguments.command in (*SERVING, "export", "compare"):
            import_modules(arguments)
        if arguments.command in SERVING:
            return run_serving(arguments)
        if arguments.command == "compare":
            if arguments.plot:
                read = ((arguments.file, "the file compared"), (arguments.rows, "the rows read"))
                arguments.plot = plot_target(arguments.plot, *read)
            return run_compare(arguments)
        if arguments.command == "export":
            return _export(arguments)
        if arguments.command == "seal":
            return _seal(arguments)
        return doctor()
    except (DeepSharpError, CommandError, FileNotFoundError) as error:
        return _fail(said_of_stdin(str(error), arguments))
    except BrokenPipeError:  # a reader that stopped early (`| head`): quietly, as predict's
        quiet_stdout()  # rows end (what is left goes nowhere; exit 1, as Python's docs do)
        return 1
    except OSError as error:
        return _fail(system_said(error))
    except KeyboardInterrupt:
        return _fail("interrupted", code=130)
    except MemoryError as error:  # NumPy's names the array it could not make
        return _fail(  # (str: an error of no words is still an error, trial ST5)
            f"out of memory: {str(error) or 'an array could not be made'} (the network or its "
            "rows need more memory than this process may take; deepsharp train reads its rows "
            "whole, about 30 times the file's size: a larger file trains in Python, "
            "fit(pipeline, scan_csv(path), ...), a part at a time)"
        )


def _fail(message: str, code: int = 1) -> int:
    print(f"deepsharp: {message}", file=sys.stderr)
    return code


def _sample(arguments: argparse.Namespace) -> int:
    if arguments.save:
        writable(arguments.save, "--save")
    if arguments.plot:
        arguments.plot = plot_target(arguments.plot, (arguments.save, "the --save file"))
    module: Any = import_module(f"deepsharp.core.samples.{arguments.name}")
    engine = engine_named(arguments.engine)
    extra = {} if arguments.epochs is None else {"epochs": arguments.epochs}
    counted_in_steps = "steps" in inspect.signature(module.run).parameters
    if arguments.steps is not None:
        if not counted_in_steps:
            raise CommandError(
                f"--steps is for a sample counted in steps (shakespeare); {arguments.name} is "
                "counted in epochs: use --epochs N"
            )
        extra["steps"] = arguments.steps
    own = getattr(module, "EPOCHS", None)  # a sample whose schedule is made for its epochs
    if arguments.epochs is not None and (counted_in_steps or arguments.epochs > (own or 1e9)):
        raise CommandError(
            f"--epochs is for a sample counted in epochs; {arguments.name} is counted in steps: "
            "use --steps N"
            if counted_in_steps
            else f"--epochs {arguments.epochs}: the {arguments.name} sample runs {own} epochs "
            f"(its rate's schedule is made for them): give at most {own}"
        )
    run = module.run(engine=engine, seed=arguments.seed, progress=arguments.progress, **extra)
    print(run.report)
    if arguments.save:
        try:
            run.trained.save(arguments.save)
        except OSError as error:
            raise CommandError(
                system_said(error, "could not save the trained network to", arguments.save)
                + left_behind(arguments.save)
            ) from None
        print(f"saved the trained network to {arguments.save}")
    if arguments.plot:
        run.report.plot(arguments.plot)
        print(f"drew the training curves into {arguments.plot}")
    return 0


def _train(arguments: argparse.Namespace) -> int:
    from deepsharp.core.data.inference import infer_pipeline
    from deepsharp.core.data.sources import read_csv
    from deepsharp.core.nn.default import (
        default_network,
        is_identity,
        rescaled,
        standardised,
        targets_scale,
        text_network,
    )
    from deepsharp.core.nn.layers import Rescaling
    from deepsharp.core.nn.losses import BinaryCrossEntropy, CrossEntropy, Loss, MeanSquaredError
    from deepsharp.core.nn.optimizers import Adam
    from deepsharp.core.training.loop import FitOptions, fit

    resume = checked_checkpoints(arguments.checkpoints, arguments.resume, arguments.epochs)
    writable(arguments.out, "--out")
    not_an_input(
        arguments.out, (arguments.rows, "the rows"), option="--out", written="trained network"
    )
    builder = _builder(arguments.network) if arguments.network else default_network
    engine = engine_named(arguments.engine)
    rows = read_csv(arguments.rows)
    if not rows:
        raise CommandError(f"{arguments.rows} holds no rows under its header: nothing to train on")
    inferred = infer_pipeline(rows, arguments.target)
    loss: Loss = {"binary": BinaryCrossEntropy, "classes": CrossEntropy}.get(
        inferred.target_kind, MeanSquaredError
    )()
    outputs = len(inferred.classes) if inferred.target_kind == "classes" else 1
    shown = said_of_stdin(arguments.rows, arguments)
    print(f"{len(rows)} rows of {shown}; the pipeline the columns suggest:")
    print(inferred)
    # A number target is learned standardised (by its spread and mean over the rows a run of
    # this seed trains on) where the network ends in a Rescaling (the one made here does), the
    # identity while it trains, then set to them: its predictions on the target's own scale.
    number = inferred.target_kind == "number"
    learned: list[Any] = list(rows)
    last = Rescaling() if number and not arguments.network else None
    if number or inferred.inputs:  # learned once from the rows the run trains on
        pipeline, targets = _training(inferred.pipeline, rows, arguments.seed, number)
    if inferred.inputs:
        texts, features = _inputs(pipeline)
        network = (
            _network_from(builder, outputs, arguments.network, texts, features)
            if arguments.network
            else text_network(outputs, texts, features, last)
        )
    elif last is not None:
        network = default_network(outputs, last)
    else:
        network = _network_from(builder, outputs, arguments.network)
    scaled = number and is_identity(network.layers[-1])  # Rescaling(): its scale set after
    if scaled:
        spread, mean = targets_scale(targets)
        given = standardised(pipeline.targets(rows), spread, mean)[:, 0]
        learned = [dict(row) | {arguments.target: float(v)} for row, v in zip(rows, given)]
    later = " (its Rescaling set to the targets' scale once trained)" if scaled else ""
    print(f"network: {network!r}{later}; loss: {loss!r}; optimizer: Adam(0.001)", flush=True)
    if number and not scaled:
        print(
            f"(the network learns {arguments.target} as it is, unscaled: end it in "
            "Rescaling(), the identity, to have the targets standardised while it trains and "
            "its predictions set to their scale after)",
            flush=True,
        )
    options = FitOptions(
        seed=arguments.seed,
        engine=engine,
        epochs=arguments.epochs,
        progress=arguments.progress,
        checkpoint_dir=arguments.checkpoints,
    )
    try:
        run = fit(
            inferred.pipeline, learned, network, loss, Adam(0.001), options, resume_from=resume
        )
    except KeyboardInterrupt:
        return _fail(interrupted_run(arguments.out, arguments.checkpoints), code=130)
    print(run.report)
    if scaled:
        rescaled(run.trained.network, spread, mean)
        print(
            f"(its losses are of {arguments.target} standardised, ({arguments.target} - "
            f"{mean[0]:.15g}) / {spread[0]:.15g}; the saved network predicts in its own units)"
        )
    try:
        run.trained.save(arguments.out)
    except OSError as error:
        raise CommandError(
            system_said(error, "could not save the trained network to", arguments.out)
            + left_behind(arguments.out)
        ) from None
    print(
        f"saved the trained network to {arguments.out} "
        f"(deepsharp predict {arguments.out} ROWS.csv predicts rows with its columns)"
    )
    return 0


def _inputs(pipeline: Any) -> tuple[dict[str, tuple[int, int]], tuple[str, int] | None]:
    """The network inputs of rows with text, as wide as the pipeline (learned from the rows a
    run trains on: `_training`) makes them: each text input's (length, vocabulary) by name,
    and the other features' input (its name and width), if any."""
    from deepsharp.core.data.text import Text

    shapes = pipeline.input_shapes or {}
    texts = {
        str(c.input): (c.length, c.vocabulary) for c in pipeline.declared if isinstance(c, Text)
    }
    features = next(((name, shape[0]) for name, shape in shapes.items() if name not in texts), None)
    return texts, features


def _training(pipeline: Any, rows: Any, seed: int, targets: bool) -> tuple[Any, Any]:
    """The pipeline learned from the rows a run of this seed trains on, and (`targets`) their
    targets."""
    from deepsharp.core.data.sources import row_naming, take
    from deepsharp.core.data.values import rows_named
    from deepsharp.core.random import Streams
    from deepsharp.core.training.feeds import Rows

    training, _, _ = Rows(rows).parts(pipeline, Streams(seed))
    with rows_named(row_naming(rows, training)):
        taken = take(rows, training)
        learned = pipeline.learn(taken)
        return learned, learned.targets(taken) if targets else None


def _builder(spec: str) -> Any:
    """The function `--network MODULE:FUNCTION` names (MODULE looked for in the current folder
    first), refused on one line when it cannot be found."""
    module_name, _, name = spec.partition(":")
    if not module_name or not name.isidentifier():
        raise CommandError(
            f"--network takes MODULE:FUNCTION, a function that makes the network (e.g. "
            f"mynetworks:small), not {spec!r}"
        )
    module = imported(module_name, f"--network {spec!r}: module {module_name!r}")
    function = getattr(module, name, None)
    if not callable(function):
        own = [
            key
            for key, value in vars(module).items()
            if callable(value) and getattr(value, "__module__", None) == module.__name__
        ]
        raise CommandError(
            f"--network {spec!r}: module {module_name!r} has no function {name!r} (its "
            f"functions: {', '.join(sorted(own)) or 'none'})"
        )
    return function


def _network_from(
    builder: Any,
    outputs: int,
    spec: str | None,
    texts: dict[str, tuple[int, int]] | None = None,
    features: tuple[str, int] | None = None,
) -> Any:
    """The network the builder makes, given `outputs=` where it takes that parameter; where the
    rows hold text (`texts`, `features`: the inputs `_inputs` found), `inputs=` (an `Input` of
    each, by name) and `vocabularies=` (each text input's vocabulary), which it must take."""
    from deepsharp.core.nn.default import built, takes
    from deepsharp.core.nn.graph import Input
    from deepsharp.core.nn.network import Network

    where = f"--network {spec!r}" if spec else "the default network"
    more: dict[str, Any] = {}
    if texts is not None:
        inputs = {name: Input(length, dtype="int64", name=name) for name, (length, _) in
                  texts.items()}  # fmt: skip
        if features is not None:
            inputs[features[0]] = Input(features[1], name=features[0])
        shown = ", ".join(
            f"{name!r} ({'ids' if name in texts else 'numbers'}, {symbol.shape})"
            for name, symbol in inputs.items()
        )
        if not takes(builder, "inputs"):
            raise CommandError(
                f"{where}: the rows hold text, so the pipeline feeds {len(inputs)} inputs "
                f"({shown}); the function is given them where it takes inputs= (a dict of "
                "Inputs by name) and vocabularies= (each text's, by name): make the network of "
                "them, Network(inputs=list(inputs.values()), outputs=...)"
            )
        more = {"inputs": inputs, "vocabularies": {n: v for n, (_, v) in texts.items()}}
    try:
        made = built(builder, outputs, **more)
    except (Exception, SystemExit) as error:  # a user's function must not end the command
        raise CommandError(f"{where}: making the network raised {error!r}") from None
    if not isinstance(made, Network):
        raise CommandError(
            f"{where} gave {type(made).__name__}, not a Network: the function must return "
            f"deepsharp.core.Network([...]) (with {outputs} output{'s' if outputs > 1 else ''})"
        )
    return made


def _export(arguments: argparse.Namespace) -> int:
    from deepsharp.core.export.model import export_network, export_trained, sha256_of
    from deepsharp.core.files import read_metadata
    from deepsharp.core.nn.network import Network
    from deepsharp.core.nn.saving import NETWORK_FORMAT
    from deepsharp.core.serving import TrainedNetwork

    writable(arguments.out, "OUT.onnx")
    not_an_input(
        arguments.out,
        (arguments.file, "the trained network"),
        option="OUT.onnx",
        written="ONNX file",
    )
    alone = read_metadata(arguments.file, "trained-network file").get("format") == NETWORK_FORMAT
    # A network saved alone (Network.save) has no pipeline or loss: its file takes the features
    # as arrays and gives the network's outputs (the O4 trial found it refused, naming a call).
    loaded = Network.load(arguments.file) if alone else TrainedNetwork.load(arguments.file)
    with open(arguments.file, "rb") as stream:
        source = sha256_of(stream.read())
    try:
        if isinstance(loaded, Network):
            export_network(loaded, arguments.out, arguments.opset, None, source)
        else:
            export_trained(loaded, arguments.out, arguments.opset, source)
    except OSError as error:
        raise CommandError(
            system_said(error, "could not write the ONNX file", arguments.out)
            + left_behind(arguments.out)
        ) from None
    print(f"wrote {arguments.out} (opset {arguments.opset}; from {arguments.file}, {source})")
    return 0


def _seal(arguments: argparse.Namespace) -> int:
    from deepsharp.core.files import seal_safetensors

    try:
        written = seal_safetensors(arguments.file, check=_loaded)
    except OSError as error:
        if isinstance(error, FileNotFoundError) and not error.filename:
            raise  # no file to seal: said as the loaders say it
        raise CommandError(
            system_said(error, "could not record the digest in", arguments.file)
            + left_behind(arguments.file)
        ) from None
    print(
        f"recorded the digest of {arguments.file}"
        if written
        else f"{arguments.file} carries its digest already, and it matches: nothing written"
    )
    return 0


def _loaded(sealed: str, metadata: Mapping[str, str]) -> None:
    """A sealed copy loaded as its format's loader loads it: a file no loader would take is not
    sealed (seal recorded digests of files every loader then refused: trial HG)."""
    from deepsharp.core.nn.network import Network
    from deepsharp.core.serving import TrainedNetwork
    from deepsharp.core.training.checkpoint import Checkpoint

    loader = {
        "deepsharp.network": Network.load,
        "deepsharp.trained": TrainedNetwork.load,
        "deepsharp.checkpoint": Checkpoint.load,
    }.get(str(metadata.get("format")))
    if loader is not None:
        loader(sealed)


if __name__ == "__main__":
    raise SystemExit(main())
