"""The commands on a saved trained network: `deepsharp predict` (its predictions of a file's
rows, as CSV), `deepsharp evaluate` (its loss and metrics on rows with their targets, or a next-token model's
on a text) and
`deepsharp generate` (a next-token model's text after a prompt). Each reads the file once and
a file of rows part by part, so memory stays flat whatever the rows' count (a next-token
model's text is read whole, its ids held: 4 bytes a token)."""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import os
import sys
from collections.abc import Iterator
from typing import Any

from deepsharp.core.cli_arguments import STDIN, add_imports, at_least_one, not_an_input
from deepsharp.core.cli_output import (
    CommandError,
    engine_named,
    left_behind,
    system_said,
    to_stdout,
    writable,
)
from deepsharp.core.errors import DataError, DeepSharpError

__all__ = ["SERVING", "add_commands", "run_command"]

SERVING = ("predict", "evaluate", "generate")
"""The commands of this module."""


def add_commands(commands: Any, engine_help: str) -> None:
    """The `predict`, `evaluate` and `generate` subcommands, on the command line's
    subparsers."""
    predict = commands.add_parser(
        "predict",
        help="predict the rows of a CSV (or Parquet) file with a saved trained network",
        description="Predict every row of ROWS.csv with the trained network in FILE; the "
        "predictions as CSV. A Parquet file is read as Parquet (needs deepsharp[parquet]).",
    )
    _file_and_rows(
        predict, "rows with the pipeline's columns (CSV, Parquet; -: stdin)", engine_help
    )
    predict.add_argument(
        "--output", metavar="FILE", help="write the predictions to FILE (default: stdout)"
    )
    predict.add_argument(
        "--keep",
        metavar="COLUMN",
        action="append",
        default=[],
        help="a column of the rows to write before the predictions, as it is (an id to join "
        "them back to their rows by; again for more)",
    )
    add_imports(predict)

    evaluate = commands.add_parser(
        "evaluate",
        help="measure a saved trained network on rows with their targets",
        description="The loss of the trained network in FILE on every row of ROWS.csv (rows "
        "with the target column), the accuracy for a classifier, and the metrics named: a "
        "line each, as a run's report gives its test rows (but a number target's loss in its own "
        "units: a run's report gives it of the target standardised). A Parquet file is read as Parquet. "
        "A next-token model (the shakespeare sample's) is measured on a UTF-8 text file "
        "instead (its line ends read as \\n, a byte-order mark dropped): each token after the "
        "first a target (those a last, "
        "overlapping window shares with the one before count twice), the loss in nats a token.",
    )
    _file_and_rows(
        evaluate,
        "rows with the pipeline's columns and the target (a next-token model: a text file)",
        engine_help,
    )
    evaluate.add_argument(
        "--metrics",
        default="",
        metavar="NAMES",
        help="metrics to measure too, by commas: accuracy, auc, f1, precision, recall (and their "
        "_macro forms), mae, mse, rmse, r2, or one of one's own that a module given to --import "
        "registers (register_metric)",
    )
    evaluate.add_argument(
        "--batch-size", type=at_least_one, default=32, help="rows a pass (default 32, as fit's)"
    )
    add_imports(evaluate)

    generate = commands.add_parser(
        "generate",
        help="write text after a prompt with a saved next-token model",
        description="Draw LENGTH tokens after PROMPT from the next-token model in FILE (one text "
        "column in, each position's next-token logits out: the shakespeare sample's --save), "
        "each from softmax(logits / temperature); the prompt and the text on standard output.",
    )
    generate.add_argument("file", metavar="FILE", help="a trained next-token model")
    generate.add_argument(
        "prompt",
        metavar="PROMPT",
        help='the text to go on from (one that starts with "-" goes after --: generate FILE -- "-ROMEO")',
    )
    generate.add_argument(
        "--length", type=_whole_from_0, default=200, help="tokens to draw (default 200)"
    )
    generate.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="lower: likelier text; 0: the likeliest token each time (default 1.0)",
    )
    generate.add_argument(
        "--top-k", type=at_least_one, default=None, help="draw from the K likeliest tokens alone"
    )
    generate.add_argument(
        "--seed", type=_whole_from_0, default=0, help="the draws' seed, 0 to 2**64 - 1 (default 0)"
    )
    generate.add_argument("--engine", default=None, metavar="SPEC", help=engine_help)
    add_imports(generate)


def _file_and_rows(command: argparse.ArgumentParser, rows: str, engine_help: str) -> None:
    """FILE (a trained network), ROWS.csv (`rows` says what they hold) and --engine."""
    command.add_argument(
        "file", metavar="FILE", help="a trained network (from fit, train, or sample --save)"
    )
    command.add_argument("rows", metavar="ROWS.csv", help=rows)
    command.add_argument("--engine", default=None, metavar="SPEC", help=engine_help)


def run_command(arguments: argparse.Namespace) -> int:
    """Run the serving command `arguments` name."""
    if arguments.command == "predict":
        return _predict(arguments)
    if arguments.command == "evaluate":
        return _evaluate(arguments)
    return _generate(arguments)


def _whole_from_0(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"a whole number from 0, not {text!r}")
    return value


def _predict(arguments: argparse.Namespace) -> int:
    from deepsharp.core.atomic import write_atomically

    if arguments.output:
        writable(arguments.output, "--output", printed=False)
        not_an_input(
            arguments.output, (arguments.rows, "the rows"), (arguments.file, "the trained network")
        )
    engine = engine_named(arguments.engine)
    trained, rows = _trained_and_rows(arguments, "predict")
    _next_token_note(trained, arguments.file)
    if arguments.keep:
        if isinstance(rows, str):
            raise CommandError("--keep keeps columns of rows: a next-token model reads a text")
        try:
            kept = trained.predict_parts_keeping(rows, arguments.keep, engine)
        except DataError as error:
            raise CommandError(str(error)) from None
        predictions = _PredictionLines(trained, kept, list(dict.fromkeys(arguments.keep)))
    else:
        parts: Iterator[tuple[Any, dict[str, Any]]] = (
            (made, {}) for made in trained.predict_parts(rows, engine)
        )
        predictions = _PredictionLines(trained, parts, [])
    if arguments.output:
        try:
            write_atomically(arguments.output, predictions)
        except OSError as error:
            raise CommandError(
                system_said(error, "could not write the predictions to", arguments.output)
                + left_behind(arguments.output)
            ) from None
        print(f"wrote {predictions.rows} predictions to {arguments.output}", file=sys.stderr)
        return 0
    return to_stdout(predictions)


def _trained_and_rows(arguments: argparse.Namespace, doing: str) -> tuple[Any, Any]:
    """The trained network FILE and a scan of ROWS (CSV, or Parquet), for `doing`
    (predict, evaluate); a network trained on arrays, which reads no columns, refused."""
    from deepsharp.core.data.paths import is_parquet
    from deepsharp.core.data.scan import scan_csv, scan_parquet
    from deepsharp.core.serving import TrainedNetwork

    if str(arguments.file).lower().endswith(".csv") and not str(arguments.rows).lower().endswith(
        ".csv"
    ):
        raise CommandError(
            f"{arguments.file} looks like the rows and {arguments.rows} like the trained "
            f"network: the trained network comes first, deepsharp {doing} FILE ROWS.csv"
        )
    trained = TrainedNetwork.load(arguments.file)
    if doing == "evaluate" and _next_token_model(trained):  # its rows: a text
        return trained, _text_of(arguments.rows)
    if trained.pipeline.takes_arrays:
        call = "predict(x)" if doing == "predict" else "evaluate((x, y))"
        raise CommandError(
            f"{arguments.file} was trained on arrays (fit(None, (x, y), ...)), not on rows of "
            "named columns: it holds no recipe for CSV columns, so the command line cannot read "
            f"{arguments.rows} for it. {doing.capitalize()} in Python with an array of its "
            f"features: TrainedNetwork.load({arguments.file!r}).{call}, x of shape (N, ...)"
        )
    try:  # read a part at a time: memory stays flat
        path = str(arguments.rows)
        named = not os.path.exists(path) and path.lower().endswith((".parquet", ".pq"))
        rows = (scan_parquet if is_parquet(path) or named else scan_csv)(arguments.rows)
    except ImportError as error:  # a Parquet file, without pyarrow
        raise CommandError(f"{arguments.rows} is a Parquet file: {error}") from None
    return trained, rows


def _next_token_model(trained: Any) -> bool:
    from deepsharp.core.generating import is_next_token_model

    return is_next_token_model(trained)


def _text_of(path: str) -> str:
    """A next-token model's text to evaluate: the file at `path` (or standard input), UTF-8."""
    if path == STDIN:
        data = sys.stdin.buffer.read()
    else:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            raise CommandError(f"no such text file: {path!r}") from None
    try:  # line ends made "\n", as Python reads a text file (the sample's training text was
        # read so; a review: each "\r" was measured as an unknown token), a byte-order mark
        # dropped (its U+FEFF is no token a text was trained on)
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        said = "standard input" if path == STDIN else path
        raise CommandError(
            f"{said} is no UTF-8 text (byte {error.start:,} cannot start a character): a "
            "next-token model is evaluated on a text file"
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _evaluate(arguments: argparse.Namespace) -> int:
    from deepsharp.core.training.metrics import check_metric_names

    engine = engine_named(arguments.engine)
    try:  # before the file is read; one line, not a traceback (trial EV)
        metrics = check_metric_names(
            [name.strip() for name in arguments.metrics.split(",") if name.strip()], "--metrics"
        )
    except ValueError as error:
        raise CommandError(str(error)) from None
    trained, rows = _trained_and_rows(arguments, "evaluate")
    measures = trained.evaluate(rows, engine, metrics=metrics, batch_size=arguments.batch_size)
    width = max(len(name) for name in measures)
    rows_said = "standard input" if arguments.rows == STDIN else arguments.rows  # (trial HC)
    what = "text" if isinstance(rows, str) else "rows"
    print(f"on the {what} of {rows_said}:", file=sys.stderr)
    lines = "".join(f"{name:<{width}}  {value!r}\n" for name, value in measures.items())
    return to_stdout([lines.encode()], output=False)  # (a closed one was not said: a review)


class _PredictionLines:
    """The predictions as CSV text, a part at a time: the header, then a line a row (counted)."""

    def __init__(self, trained: Any, parts: Iterator[Any], keep: list[str]) -> None:
        self.trained = trained
        self.parts = parts  # (predictions, the kept columns' values)
        self.keep = keep
        self.rows = 0

    def __iter__(self) -> Iterator[bytes]:
        # The first part's predictions before the header: a run that fails at once (a column
        # missing, no rows) prints nothing.
        first = next(self.parts, None)
        pipeline, outputs = self.trained.pipeline, self.trained.outputs
        classes = pipeline.classes
        if outputs == 1 and classes is not None and classes[-1] not in ("1", "1.0", "True", "true"):
            header = [f"{pipeline.target_name}={classes[-1]}"]  # the chance of the named label
        elif outputs == 1:
            header = [f"{pipeline.target_name or 'prediction'}"]
        elif pipeline.classes is not None and len(pipeline.classes) == outputs:
            header = [f"{pipeline.target_name}={label}" for label in pipeline.classes]
        else:
            header = [f"output{index}" for index in range(outputs)]
        text = io.StringIO()
        # A kept column named as a prediction's (the target's, kept to compare: trial D6) is
        # headed "NAME (given)", so that no header names a column twice.
        headed: list[str] = []
        for name in map(str, self.keep):
            while name in header or name in headed:  # ("y" and "y (given)" both kept: a review)
                name += " (given)"
            headed.append(name)
        csv.writer(text, lineterminator="\n").writerow([*headed, *header])
        # A lone surrogate in a file's names (no UTF-8 text) is written escaped (trial HF).
        yield text.getvalue().encode("utf-8", "backslashreplace")
        for predictions, kept in itertools.chain([] if first is None else [first], self.parts):
            self.rows += len(predictions)
            # Each value as repr(float(value)), the shortest text that reads back the same.
            if not self.keep:
                yield "".join(
                    ",".join(map(repr, row)) + "\n" for row in predictions.tolist()
                ).encode()
                continue
            text = io.StringIO()  # each kept value as the file held it, CSV-quoted where it must be
            columns = [_as_read(kept[name]) for name in self.keep]
            csv.writer(text, lineterminator="\n").writerows(
                [*front, *map(repr, row)] for front, row in zip(zip(*columns), predictions.tolist())
            )
            yield text.getvalue().encode("utf-8", "backslashreplace")


def _as_read(values: Any) -> list[str]:
    """A kept column's values as text: a CSV's fields as they are ('' where empty), a Parquet
    column's numbers as Python writes them, a missing one ''."""
    listed = values.tolist() if hasattr(values, "tolist") else list(values)
    return ["" if value is None or value != value else str(value) for value in listed]


def _generate(arguments: argparse.Namespace) -> int:
    from deepsharp.core.generating import pieces
    from deepsharp.core.serving import TrainedNetwork

    engine = engine_named(arguments.engine)
    trained = TrainedNetwork.load(arguments.file)
    try:  # the settings checked before the first piece
        text = pieces(
            trained,
            arguments.prompt,
            arguments.length,
            arguments.temperature,
            arguments.seed,
            engine,
            arguments.top_k,
        )
    except ValueError as error:  # a setting generate refuses: one line (a review)
        raise CommandError(str(error).replace("generate: ", "", 1)) from None
    # Each token as it is drawn (a long text was silent to its end: trial HC); a prompt's
    # bytes that were no UTF-8 written back as they came (surrogateescape, as Python read them).
    return to_stdout(_lines_of(text), each=True, output=False)


def _lines_of(text: Iterator[str]) -> Iterator[bytes]:
    """The pieces as bytes, then the line's end; a failure mid-text ends the line first, the
    text drawn before it kept (a review)."""
    try:
        for piece in text:
            yield _bytes_of(piece)
    except DeepSharpError:
        yield b"\n"
        raise
    yield b"\n"


def _bytes_of(text: str) -> bytes:
    """Text as standard output takes it: UTF-8, a byte Python read as no UTF-8 written back as
    it came (it came out as the text '\\udcff': trial HC), any other lone surrogate escaped."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace")


def _next_token_note(trained: Any, file: str) -> None:
    """Where `deepsharp predict` is given a next-token model: say that its predictions are
    logits, and which command writes its text."""
    if not _next_token_model(trained):
        return
    print(
        f"{file} is a next-token model: its predictions are each position's chances of the "
        f"next token; `deepsharp generate {file} PROMPT` writes text after a prompt, and "
        f"`deepsharp evaluate {file} TEXT.txt` measures it on a text",
        file=sys.stderr,
    )
