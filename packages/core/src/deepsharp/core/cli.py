"""The command line: `deepsharp sample`, `deepsharp predict`, `deepsharp doctor`."""

from __future__ import annotations

import argparse
import csv
import io
import sys
from collections.abc import Iterator, Sequence
from importlib import import_module
from typing import Any

from deepsharp.core.engine import (
    EngineDescription,
    available_engines,
    describe_engine,
    make_engine,
)
from deepsharp.core.errors import DeepSharpError
from deepsharp.core.version import __version__

__all__ = ["main"]

SAMPLES = ("titanic", "digits")
ENGINE_HELP = "light (default), testbuffer, torch:cpu, torch:cuda:N, or module:factory"


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
    sample.add_argument("--seed", type=int, default=42, help="the run's seed (default 42)")
    sample.add_argument("--save", metavar="FILE", help="save the trained network to FILE")
    sample.add_argument(
        "--plot", metavar="FILE", help="draw the training curves into FILE (matplotlib)"
    )
    sample.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress bar (default: on a terminal)",
    )

    predict = commands.add_parser(
        "predict",
        help="answer the rows of a CSV file with a saved trained network",
        description="Answer every row of ROWS.csv with the trained network in FILE; answers as CSV.",
    )
    predict.add_argument(
        "file", metavar="FILE", help="a trained network (from fit, or sample --save)"
    )
    predict.add_argument(
        "rows", metavar="ROWS.csv", help="rows with the columns the pipeline reads"
    )
    predict.add_argument("--engine", default=None, metavar="SPEC", help=ENGINE_HELP)
    predict.add_argument(
        "--output", metavar="FILE", help="write the answers to FILE (default: stdout)"
    )

    commands.add_parser(
        "doctor",
        help="say which engines are installed and usable, and what is missing",
        description="Which engines are installed and usable, what torch build and cards are found, "
        "and which packages to install for what is missing.",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    try:
        if arguments.command == "sample":
            return _sample(arguments)
        if arguments.command == "predict":
            return _predict(arguments)
        return _doctor()
    except (DeepSharpError, FileNotFoundError) as error:
        print(f"deepsharp: {error}", file=sys.stderr)
        return 1


def _sample(arguments: argparse.Namespace) -> int:
    module: Any = import_module(f"deepsharp.core.samples.{arguments.name}")
    engine = make_engine(arguments.engine)
    run = module.run(engine=engine, seed=arguments.seed, progress=arguments.progress)
    print(run.report)
    if arguments.save:
        run.trained.save(arguments.save)
        print(f"saved the trained network to {arguments.save}")
    if arguments.plot:
        run.report.plot(arguments.plot)
        print(f"drew the training curves into {arguments.plot}")
    return 0


def _predict(arguments: argparse.Namespace) -> int:
    from deepsharp.core.data.scan import scan_csv
    from deepsharp.core.files import write_atomically
    from deepsharp.core.serving import TrainedNetwork

    trained = TrainedNetwork.load(arguments.file)
    rows = scan_csv(arguments.rows)  # read and answered a part at a time: memory stays flat
    answers = _AnswerLines(trained, trained.predict_parts(rows, make_engine(arguments.engine)))
    if arguments.output:
        write_atomically(arguments.output, answers)
        print(f"wrote {answers.rows} answers to {arguments.output}", file=sys.stderr)
    else:
        for text in answers:
            sys.stdout.buffer.write(text)
        sys.stdout.flush()
    return 0


class _AnswerLines:
    """The answers as CSV text, a part at a time: the header, then a line a row (counted)."""

    def __init__(self, trained: Any, parts: Iterator[Any]) -> None:
        self.trained = trained
        self.parts = parts
        self.rows = 0

    def __iter__(self) -> Iterator[bytes]:
        pipeline, outputs = self.trained.pipeline, self.trained.outputs
        if outputs == 1:
            header = [f"{pipeline.target_name or 'answer'}"]
        elif pipeline.classes is not None and len(pipeline.classes) == outputs:
            header = [f"{pipeline.target_name}={label}" for label in pipeline.classes]
        else:
            header = [f"output{index}" for index in range(outputs)]
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerow(header)
        yield text.getvalue().encode("utf-8")
        for answers in self.parts:
            self.rows += len(answers)
            # Each value as repr(float(value)), the shortest text that reads back the same.
            yield "".join(",".join(map(repr, row)) + "\n" for row in answers.tolist()).encode()


def _doctor() -> int:
    print(f"deepsharp {__version__} on Python {sys.version.split()[0]}")
    names = available_engines()
    print(f"engines installed: {', '.join(names) or 'none'}")
    usable = 0
    for name in names:
        try:
            description = describe_engine(name)
        except DeepSharpError as error:
            print(f"  {name:<12} not usable: {error}")
            continue
        usable += _doctor_engine(description)
    print(
        "  other engines come as packages named deepsharp-engine-NAME "
        "(pip install deepsharp-engine-NAME; docs/install.md lists them)"
    )
    return 0 if usable else 1


def _doctor_engine(description: EngineDescription) -> int:
    """Print what one engine says of itself and whether it can be made here: 1 if it can."""
    spec = description.default_spec
    stated = "not stated by its entry point"
    try:
        engine = make_engine(spec)
    except DeepSharpError as error:
        made = 0
        print(f"  {spec:<12} not usable: {error}")
        if description.install and description.doctor is None:  # else its lines advise
            print(f"  {'':<12} to use it, install {description.install}")
    else:
        made = 1
        stated += f" (its identity says {engine.identity.precision})"
        print(f"  {spec:<12} usable: {engine.identity}")
    precisions = [
        f"{precision} ({description.spec_with(precision)}{', default' if i == 0 else ''})"
        for i, precision in enumerate(description.precisions)
    ]
    print(f"  {'':<12} precisions: {', '.join(precisions) or stated}")
    lines: Sequence[str] = []
    if description.doctor is not None:
        try:
            lines = description.doctor()
        except Exception as error:  # what an engine says of itself never stops the doctor
            lines = [f"{description.name}: asking what it runs on failed: {error!r}"]
    for line in lines:
        print(f"  {'':<12} {line}")
    return made


if __name__ == "__main__":
    raise SystemExit(main())
