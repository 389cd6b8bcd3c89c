"""Evaluation: a trained network's loss and metrics on rows with their targets
(`TrainedNetwork.evaluate`), as a run measures its test rows.

The rows go through the pipeline as a run's test rows do (rows of named columns with the target
column; for a network trained on arrays, a pair (x, y); a scanned file part by part), then
through the network `batch_size` rows at a time in one pass each, without padding: with the
run's batch size (32 unless it set another) and engine, the figures are the bits the run's
report gave for the same rows (`report.measures`). The loss is the mean over every row; the
accuracy is given for losses of classes; each metric named (`deepsharp.core.training.metrics`)
is computed once from every row's prediction and target.

A next-token model (`generating.next_token_column`: the Shakespeare sample's kind) is evaluated
on a text, a `str`: its tokens, as the text column cuts them, laid out as windows of L + 1 (the
network's L positions and the token after), the first L the input and the last L the targets,
each window starting L tokens after the one before, so that every token after the first is a
target once, predicted from those before it in its window; where tokens are left after the last
such window, one more ends at the text's last token (the tokens it predicts that the one before
predicted count twice). The loss is then nats a token (the mean over the windows' positions),
the accuracy the share of positions whose likeliest token is the one that follows.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.data.scan import Scan
from deepsharp.core.data.text import UNKNOWN, Text
from deepsharp.core.engine import Engine
from deepsharp.core.errors import DataError
from deepsharp.core.generating import is_next_token_model, next_token_column
from deepsharp.core.nn.predicting import Predictor
from deepsharp.core.nn.target_hints import of_a_trained_network
from deepsharp.core.reals import is_whole
from deepsharp.core.training.distribution import Sums
from deepsharp.core.training.feeds import ArrayFeed, arrays_made, made_feed, rows_made
from deepsharp.core.training.measuring import measured_part, measures_of
from deepsharp.core.training.metrics import check_metric_names, check_metrics_fit

if TYPE_CHECKING:
    from deepsharp.core.serving import TrainedNetwork

__all__ = ["evaluate"]

WHAT = "evaluated"
"""How messages name the rows evaluate is given ("row 3 of the evaluated rows")."""


def evaluate(
    trained: TrainedNetwork,
    rows: Any,
    engine: Engine | str | None,
    metrics: Sequence[str],
    batch_size: int,
) -> dict[str, float]:
    """`trained`'s measures on `rows` (see the module's docstring): {"loss": ..., "accuracy":
    ..., metric: ...}, in that order."""
    names = check_metric_names(metrics, "evaluate")
    if not is_whole(batch_size):
        raise TypeError(f"evaluate: batch_size is a whole number, not {batch_size!r}")
    if batch_size < 1:
        raise ValueError(f"evaluate: batch_size is 1 or more, not {batch_size!r}")
    pipeline, network, loss = trained.pipeline, trained.network, trained.loss
    check_metrics_fit(names, loss, network.outputs)
    if isinstance(rows, str):
        next_token_column(trained, "evaluate")  # a text is a next-token model's rows alone
    elif not pipeline.takes_arrays and pipeline.target_name is None:
        raise DataError(
            "evaluate measures predictions against the rows' targets, and this network's "
            "pipeline declares no target column to measure them against: "
            + (
                "it is a next-token model, so give evaluate a text (a str): each next token is "
                "its target"
                if is_next_token_model(trained)
                else "predict gives its predictions"
            )
        )
    with of_a_trained_network():  # a refused target advises no other last layer
        sums, figures = _measured(trained, rows, engine, names, int(batch_size))
    if sums.rows == 0:
        said = (
            f"{rows.path}: the file holds its header and no row"
            if isinstance(rows, Scan)
            else "the rows given hold none"
        )
        raise DataError(f"no {WHAT} rows: {said}; give at least one row")
    return measures_of(loss, sums, figures)


def _measured(
    trained: TrainedNetwork,
    rows: Any,
    engine: Engine | str | None,
    names: Sequence[str],
    size: int,
) -> tuple[Sums, dict[str, float]]:
    """The rows' sums and metrics (`evaluate`, its arguments checked)."""
    pipeline, network, loss = trained.pipeline, trained.network, trained.loss
    if pipeline.takes_arrays:
        if not (isinstance(rows, tuple) and len(rows) == 2):
            raise DataError(
                "evaluate: a network trained on arrays is evaluated on a pair (x, y), features "
                f"and their targets, not {type(rows).__name__}"
            )
        feeds: Iterable[ArrayFeed] = [arrays_made(rows, "evaluate", pipeline, network, loss)]
    elif isinstance(rows, str):
        feeds = _windows(trained, rows)
    elif isinstance(rows, Scan):
        feeds = _scanned(trained, rows)
    else:
        feeds = [rows_made(rows, WHAT, pipeline, network, loss)]
    predictor = Predictor(network, loss, engine)
    batches = (
        (*predictor.measured(features, targets), targets)
        for features, targets in _batches(feeds, size)
    )
    return measured_part(batches, loss, names, network.outputs)


PART = 1 << 20
"""Characters of a text cut into tokens at a time, and windows measured a feed (memory: a text's
ids, 4 bytes a token, and one part's tokens; not every token's string at once)."""


def _windows(trained: TrainedNetwork, text: str) -> Iterator[ArrayFeed]:
    """A next-token model's windows of `text` (see the module's docstring), a part at a time."""
    column = next_token_column(trained, "evaluate")
    ids = _ids(column, text)
    length = column.length
    if len(ids) < length + 1:
        raise DataError(
            f"evaluate: the text cuts into {len(ids):,} tokens of the column {column.name!r} "
            f"({column.tokens_of}), and a next-token model of {length} positions is measured on "
            f"windows of {length + 1} (its input and the token after): give a text of "
            f"{length + 1} tokens or more"
        )
    starts = np.arange(0, len(ids) - length, length)  # each window's L + 1 inside the text
    if starts[-1] != len(ids) - length - 1:  # tokens left: a last window ends at the last
        starts = np.append(starts, len(ids) - length - 1)
    step = max(1, PART // (length + 1))
    for first in range(0, len(starts), step):
        places = starts[first : first + step, None] + np.arange(length + 1)
        windows = ids[places].astype(np.int64)
        yield ArrayFeed((windows[:, :-1],), windows[:, 1:])


def _ids(column: Text, text: str) -> NDArray[np.int32]:
    """The text's ids as the column cuts it, about `PART` characters at a time (words cut after
    a character no word holds: no word, and no letter and its combining mark, lies across two
    parts; a review: a cut at a space alone split text of no spaces)."""
    parts: list[NDArray[np.int32]] = []
    start = 0
    while start < len(text):
        stop = min(len(text), start + PART)
        if stop < len(text) and column.tokens_of == "words":
            stop = _after_a_separator(text, start, stop)
        lookup = column.lookup
        tokens = column.split(text[start:stop])
        parts.append(np.fromiter((lookup.get(t, UNKNOWN) for t in tokens), np.int32, len(tokens)))
        start = stop
    return np.concatenate(parts) if parts else np.zeros(0, np.int32)


def _after_a_separator(text: str, start: int, stop: int) -> int:
    """The last place before `stop` (after `start`) that follows a character no word holds and
    precedes no combining mark (which NFC might compose with it), or else the first such place
    after it (the text's end where there is none)."""
    cut = stop
    while cut > start and not _cuttable(text, cut):
        cut -= 1
    if cut > start:
        return cut
    while stop < len(text) and not _cuttable(text, stop):
        stop += 1
    return stop


def _cuttable(text: str, place: int) -> bool:
    """Whether the words tokenizer cuts the text alike whole and in two at `place`."""
    return not _in_a_word(text[place - 1]) and (
        place == len(text) or unicodedata.category(text[place])[0] != "M"
    )


def _in_a_word(character: str) -> bool:
    """Whether the words tokenizer takes it into a word: a letter, digit or '_' (\\w), or a
    combining mark."""
    return character.isalnum() or character == "_" or unicodedata.category(character)[0] == "M"


def _scanned(trained: TrainedNetwork, scan: Scan) -> Iterator[ArrayFeed]:
    """A scanned file's rows part by part, each made as a run makes a scanned file's rows."""
    pipeline, network, loss = trained.pipeline, trained.network, trained.loss
    for part in scan.parts(pipeline.reads(scan.names, target=True)):
        if len(part) == 0:
            continue
        with scan.reading():
            yield made_feed(part, pipeline, network, loss)


def _batches(feeds: Iterable[ArrayFeed], size: int) -> Iterator[tuple[Any, NDArray[Any]]]:
    """Batches of `size` rows across the feeds in turn (the last may be smaller): the rows of a
    scanned file are batched as one run of rows, whatever its parts, as a run's are."""
    held: list[tuple[tuple[NDArray[Any], ...], NDArray[Any]]] = []
    count = 0
    for feed in feeds:
        start, rows = 0, len(feed)
        while start < rows:
            take = min(size - count, rows - start)
            span = slice(start, start + take)
            held.append((tuple(f[span] for f in feed.features), feed.targets[span]))
            count, start = count + take, start + take
            if count == size:
                yield _joined(held)
                held, count = [], 0
    if held:
        yield _joined(held)


def _joined(
    pieces: list[tuple[tuple[NDArray[Any], ...], NDArray[Any]]],
) -> tuple[tuple[NDArray[Any], ...], NDArray[Any]]:
    if len(pieces) == 1:
        return pieces[0]
    inputs = len(pieces[0][0])
    features = tuple(np.concatenate([p[0][i] for p in pieces]) for i in range(inputs))
    return features, np.concatenate([p[1] for p in pieces])
