"""What a run reads its batches from: the data handed to `fit`, split and made into feeds.

`fit(pipeline, data, ...)` takes rows (a list of mappings, a DataFrame: `Rows`), arrays
(`(x, y)`: `Arrays`), a scanned file (`scan_csv`, `scan_parquet`: `Streamed`) or any `Source`,
which splits its rows (from the run's generator), learns the pipeline on the training rows, builds
the network for their shape, and gives three feeds (training, validation, test). A feed gives
batches: this process's share of each batch's rows, features shaped for the network, targets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.data.features import array_features, feature_rows, take_features
from deepsharp.core.data.pipeline import Pipeline
from deepsharp.core.data.scan import Scan
from deepsharp.core.data.sources import Part, is_frame, row_count, row_naming, rows_of, take
from deepsharp.core.data.splitting import split_shares
from deepsharp.core.data.values import ColumnName, rows_named
from deepsharp.core.errors import ConfigurationError, DataError, ShapeError, described
from deepsharp.core.nn.losses import Loss
from deepsharp.core.nn.network import Features, Network
from deepsharp.core.nn.rows import image_layout_refusal
from deepsharp.core.nn.target_hints import classes_refusal
from deepsharp.core.random import Generator, KeyedOrder, Streams
from deepsharp.core.training.checks import checked_weights, refuse_target_in_features
from deepsharp.core.training.spill import Spill, block_rows, buffers, spill_folder

__all__ = [
    "ArrayFeed",
    "Arrays",
    "Batch",
    "Feed",
    "Feeds",
    "Rows",
    "Source",
    "SpillFeed",
    "Streamed",
    "feeds_for",
]

ShareOf = Callable[[int], tuple[int, int]]
"""This process's rows [start, stop) of a batch of so many rows (`Distribution.share`)."""


@dataclass
class Batch:
    """This process's rows of one batch: features (one array a network input), targets,
    `share` — where they lie in the whole batch: (start, stop, total), its rows the batch's
    start .. stop - 1 of total — and the rows' own weights (`sample_weight`; None: none)."""

    features: Features
    targets: NDArray[Any]
    share: tuple[int, int, int]
    weights: NDArray[np.float32] | None = None

    def __len__(self) -> int:
        return int(self.features[0].shape[0])


class Feed:
    """A part of the data (training, validation or test rows), read in batches."""

    def batches(self, size: int, order: Generator | None, share: ShareOf) -> Iterator[Batch]:
        """Batches of `size` rows (the last may be smaller), in a fresh order drawn from `order`
        (the training rows, each epoch) or in their own order (None)."""
        raise NotImplementedError


class ArrayFeed(Feed):
    """Features (one array a network input), targets and (where given) the rows' weights, held
    in memory."""

    def __init__(
        self,
        features: Features,
        targets: NDArray[Any],
        weights: NDArray[np.float32] | None = None,
    ) -> None:
        self.features = features
        self.targets = targets
        self.weights = weights

    def __len__(self) -> int:
        return int(self.features[0].shape[0])

    def take(self, rows: NDArray[np.int64]) -> ArrayFeed:
        """These rows of it, as a feed of their own."""
        weights = None if self.weights is None else self.weights[rows]
        return ArrayFeed(tuple(f[rows] for f in self.features), self.targets[rows], weights)

    def batches(self, size: int, order: Generator | None, share: ShareOf) -> Iterator[Batch]:
        count = len(self)
        rows = order.permutation(count) if order is not None else None
        for start in range(0, count, size):
            stop = min(start + size, count)
            first, last = share(stop - start)
            if rows is None:
                picked: Any = slice(start + first, start + last)
            else:
                picked = rows[start + first : start + last]
            features = tuple(f[picked] for f in self.features)
            weights = None if self.weights is None else self.weights[picked]
            yield Batch(features, self.targets[picked], (first, last, stop - start), weights)


@dataclass
class Feeds:
    """A run's data: the learned pipeline, and its three parts as feeds."""

    pipeline: Pipeline
    train: Feed
    validation: Feed
    test: Feed
    test_said: str = "test rows"
    """What the report calls the rows the test feed holds ("validation windows ..." where a
    source measures on its validation rows, holding no test rows apart)."""


class Source:
    """Data that makes its own feeds (a source streaming rows from a file, say)."""

    def feeds(
        self,
        pipeline: Pipeline | None,
        network: Network,
        loss: Loss,
        streams: Streams,
        test: object | None,
        validation: object | None = None,
    ) -> Feeds:
        """Split the rows (from `streams.split`), learn `pipeline` on the training rows, build
        `network` for their row shape (`network.build`), and give the three parts as feeds
        (their targets as `loss.targets` gives them). `test`, `validation`: the test or
        validation rows given apart (of the data's form), or None (cut from the rows). A
        source of one's own is handed `validation` only where a run is given some."""
        raise NotImplementedError


class Rows(Source):
    """Rows of named columns (a list of mappings, a DataFrame, what read_csv gives)."""

    def __init__(self, rows: object) -> None:
        if isinstance(rows, tuple):
            raise DataError(
                "rows come as one list or DataFrame; (x, y) arrays go to fit as they are"
            )
        self.rows = rows_of(rows)

    def parts(
        self, pipeline: Pipeline, streams: Streams, test: bool = True, validation: bool = True
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """The indices of the training, validation and test rows (no test rows with
        `test=False`, no validation rows with `validation=False`: they are given apart), as a
        run whose streams these are cuts them."""
        count = row_count(self.rows)
        if count == 0:
            raise DataError(
                "no rows: fit needs rows to learn from (a list of mappings, a DataFrame, or "
                "read_csv's rows)"
            )
        return pipeline.partition(
            count, streams.split.permutation(count), test=test, validation=validation
        )

    def feeds(
        self,
        pipeline: Pipeline | None,
        network: Network,
        loss: Loss,
        streams: Streams,
        test: object | None,
        validation: object | None = None,
    ) -> Feeds:
        if pipeline is None or pipeline.takes_arrays:
            raise DataError(
                "rows of named columns need a pipeline that declares them (for a DataFrame of "
                "numbers: Pipeline().numbers().target(name)); fit(None, (x, y), ...) takes arrays"
            )
        parts = self.parts(pipeline, streams, test is None, validation is None)
        # Messages name a row by its place in the rows handed in, not in the shuffled split.
        with rows_named(row_naming(self.rows, parts[0])):
            pipeline.learn(take(self.rows, parts[0]))
        with rows_named(row_naming(self.rows)):
            whole = made_feed(self.rows, pipeline, network, loss)
        loss.check_training_targets(whole.targets[parts[0]])
        return _in_memory(
            pipeline,
            whole,
            parts,
            _rows_apart(test, "test", pipeline, network, loss),
            _rows_apart(validation, "validation", pipeline, network, loss),
        )


class Arrays(Source):
    """Arrays as they are: features x (N, ...) and targets y (what the loss takes), and each
    row's weight where given (`sample_weight`, (N,))."""

    def __init__(self, data: object, sample_weight: object = None) -> None:
        if not (isinstance(data, tuple) and len(data) == 2):
            raise DataError(f"arrays come as a pair (x, y), not {type(data).__name__}")
        self.x, self.y = data
        self.sample_weight = sample_weight

    def feeds(
        self,
        pipeline: Pipeline | None,
        network: Network,
        loss: Loss,
        streams: Streams,
        test: object | None,
        validation: object | None = None,
    ) -> Feeds:
        pipeline = Pipeline() if pipeline is None else pipeline
        if not pipeline.takes_arrays:
            raise DataError(
                "this pipeline declares columns, so it reads rows of named columns; give fit "
                "the rows, or arrays (x, y) with a pipeline of no columns (or None)"
            )
        refuse_target_in_features(self.x, self.y)
        x, y = _pair(network.named(self.x), self.y)
        count = feature_rows(x)
        parts = pipeline.partition(
            count,
            streams.split.permutation(count),
            test=test is None,
            validation=validation is None,
        )
        with rows_named(row_naming(self.x, parts[0])):  # a row named by its place in x
            # A DataFrame learned as one: its columns' names are kept (a frame is read by them)
            pipeline.learn(
                self.x.iloc[parts[0]] if is_frame(self.x) else take_features(x, parts[0])
            )
        features = _shaped(x, pipeline, network)  # (the network built: its outputs known)
        targets = loss.targets(y, network.outputs)
        weights = None
        if self.sample_weight is not None:
            places = targets.shape[1] if loss.task == "classes" and targets.ndim == 2 else None
            weights = checked_weights(self.sample_weight, count, "fit: sample_weight", places)
            if not np.any(weights[parts[0]]):
                raise DataError(
                    f"fit: sample_weight: every training row's weight is zero (the "
                    f"{len(parts[0])} rows of {count} the split trains on), so no step would "
                    "learn anything; give the rows to learn from a weight above 0"
                )
        whole = ArrayFeed(features, targets, weights)
        loss.check_training_targets(whole.targets[parts[0]])
        return _in_memory(
            pipeline,
            whole,
            parts,
            _arrays_apart(test, "test", pipeline, network, loss),
            _arrays_apart(validation, "validation", pipeline, network, loss),
        )


class SpillFeed(Feed):
    """Rows made features once and spilled to a file (a scanned file's), read a buffer at a time.

    In a fresh order (the training rows, each epoch): the order's key is one draw from `order`;
    the spill's blocks of rows are visited in a permutation keyed by it (`KeyedOrder`), and the
    rows of each buffer of `buffer_rows` (whole blocks, with the rows a buffer left over) are
    shuffled together, so an epoch takes every row once. In their own order otherwise. Of every
    batch, a process keeps (and its engine is given) only its share."""

    def __init__(self, spill: Spill, buffer_rows: int) -> None:
        self.spill = spill
        self.buffer_rows = buffer_rows
        self.block = block_rows(buffer_rows)

    def __len__(self) -> int:
        return len(self.spill)

    def batches(self, size: int, order: Generator | None, share: ShareOf) -> Iterator[Batch]:
        count = len(self.spill)
        if order is None:
            window = max(1, self.buffer_rows // size) * size
            for low in range(0, count, window):
                high = min(low + window, count)
                arrays = self.spill.read(low, high)
                yield from self._cut(arrays, np.arange(high - low), size, share)
            return
        key = int(order.bits(1)[0])
        blocks, per_buffer = buffers(count, self.block, self.buffer_rows)
        visit = KeyedOrder(key, blocks)
        arrays = self.spill.read(0, 0)  # the rows a buffer leaves over: none yet
        for window, start in enumerate(range(0, blocks, per_buffer)):
            chosen = visit[np.arange(start, min(start + per_buffer, blocks), dtype=np.int64)]
            read = self.spill.blocks(chosen, self.block)
            arrays = [np.concatenate([kept, new]) for kept, new in zip(arrays, read)]
            shuffled = Generator(key, stream=window + 1).permutation(len(arrays[0]))
            cut = len(shuffled) if start + per_buffer >= blocks else len(shuffled) // size * size
            yield from self._cut(arrays, shuffled[:cut], size, share)
            arrays = [array[shuffled[cut:]] for array in arrays]

    def _cut(
        self, arrays: list[NDArray[Any]], rows: NDArray[np.int64], size: int, share: ShareOf
    ) -> Iterator[Batch]:
        """The batches of `size` of these rows of a buffer (its arrays: each input's features,
        then the targets), each process's share taken."""
        spans = []
        for start in range(0, len(rows), size):
            total = min(size, len(rows) - start)
            first, last = share(total)
            spans.append((start + first, start + last, (first, last, total)))
        mine = np.concatenate([rows[a:b] for a, b, _ in spans]) if spans else rows
        taken = [array[mine] for array in arrays]
        at = 0
        for a, b, where in spans:
            part = [array[at : at + b - a] for array in taken]
            yield Batch(tuple(part[:-1]), part[-1], where)
            at += b - a


class Streamed(Source):
    """A scanned file (`scan_csv`, `scan_parquet`) as a run's data, never whole in memory.

    One pass learns the pipeline from the training rows; a second makes every row's features
    and targets and spills them to temporary files (`SpillFeed`); the epochs read the spills.
    The split is drawn row by row: row i of the file (from 0) is a training row where the i-th
    float of the run's split stream lies below the training fraction, a validation row where it
    lies below the training and validation fractions together, else a test row. A row's part
    depends on the seed and its place alone; the fractions hold in expectation (a binomial count),
    not to the row as a permutation's are."""

    def __init__(self, scan: Scan) -> None:
        self.scan = scan

    def feeds(
        self,
        pipeline: Pipeline | None,
        network: Network,
        loss: Loss,
        streams: Streams,
        test: object | None,
        validation: object | None = None,
    ) -> Feeds:
        if pipeline is None or pipeline.takes_arrays:
            raise DataError(
                f"{self.scan.path}: a file's rows have named columns; fit needs a pipeline that "
                "declares them (.number(), .numbers(), .category(), .flag(), .image())"
            )
        for scan in (self.scan, test, validation):
            if isinstance(scan, Scan):
                spill_folder(scan.spill_dir)  # before a pass, not after one (trial SD)
        split = _Split(pipeline, streams.split, test is None, validation is None)
        reads = self._learn(pipeline, split)
        build_for(network, pipeline)

        def made(part: Part) -> tuple[Features, NDArray[Any]]:
            features = _shaped(pipeline.features(part), pipeline, network)
            return features, loss.targets(pipeline.targets(part), network.outputs)

        spills = self._spill(self.scan, reads, made, split, 3 if test is None else 2, loss)
        feeds: list[SpillFeed | ArrayFeed] = [
            SpillFeed(spill, self.scan.buffer_rows) for spill in spills
        ]
        for place, given, what in ((2, test, "test"), (1, validation, "validation")):
            if isinstance(given, Scan):
                (spill,) = self._spill(given, reads, made, None, 1, None)
                apart: SpillFeed | ArrayFeed = SpillFeed(spill, given.buffer_rows)
            elif given is not None:  # rows in memory: a row named as one of the rows given
                apart = rows_made(given, what, pipeline, network, loss)
            else:
                continue
            if len(apart) == 0:
                raise DataError(f"no {what} rows: the {what} rows given hold none")
            feeds[place : place + 1] = [apart]
        return Feeds(pipeline, feeds[0], feeds[1], feeds[2])

    def _learn(self, pipeline: Pipeline, split: _Split) -> list[ColumnName]:
        """The first pass: the pipeline learned from the training rows. The columns it reads."""
        learning = pipeline.learning(self.scan.names)
        counts = np.zeros(3, np.int64)
        with self.scan.reading():  # a row refused in a file changed: the change is said
            for part in self.scan.parts(learning.reads):
                where = split.of(part)
                counts += np.bincount(where, minlength=3)
                training = np.flatnonzero(where == 0)
                if len(training):
                    learning.add(part if len(training) == part.count else part.take(training))
        split.check(counts, self.scan.path)
        learning.finish()
        return learning.reads

    @staticmethod
    def _spill(
        scan: Scan,
        reads: list[ColumnName],
        made: Callable[[Part], tuple[Features, NDArray[Any]]],
        split: _Split | None,
        count: int,
        loss: Loss | None,
    ) -> list[Spill]:
        """A pass that makes every row's features and targets and spills them, each to the
        spill of its part of the split (all to one without a split); the loss sees the distinct
        training targets (its warnings)."""
        folder = spill_folder(scan.spill_dir)
        spills = [Spill(folder) for _ in range(count)]
        seen = _Distinct()
        with scan.reading():
            for part in scan.parts(reads):
                features, targets = made(part)
                if split is None:
                    spills[0].write([*features, targets])
                    continue
                where = split.of(part)
                for index, spill in enumerate(spills):
                    rows = np.flatnonzero(where == index)
                    spill.write([*(f[rows] for f in features), targets[rows]])
                seen.add(targets[where == 0])
        if loss is not None and seen.values is not None:
            loss.check_training_targets(seen.values)
        return spills


class _Split:
    """Which part of the rows each row of a file is, drawn from (seed, row index)."""

    def __init__(
        self, pipeline: Pipeline, stream: Generator, with_test: bool, with_validation: bool = True
    ) -> None:
        train, validation = pipeline.split_fractions
        self.fractions = (train, validation)
        self.with_test, self.with_validation = with_test, with_validation
        self.stream = stream
        if with_test and train + validation >= 1:
            raise DataError(
                f"split(train={train}, validation={validation}) leaves no test rows: give the run "
                "test rows of their own (test_rows=...), or split with train + validation below 1"
            )
        # a part given apart takes none: the rows are cut among the others in their ratio
        first, second = split_shares(train, validation, with_test, with_validation)
        self.cuts = np.array([first, first + second if with_test else 2.0])

    def of(self, part: Part) -> NDArray[np.intp]:
        """0 (training), 1 (validation) or 2 (test) for each row of a part read in order."""
        draws = Generator(self.stream.seed, counter=part.first, stream=self.stream.stream)
        return np.searchsorted(self.cuts, draws.uniform(part.count), side="right")

    def check(self, counts: NDArray[np.int64], path: str) -> None:
        train, validation, test = (int(c) for c in counts)
        if train and (validation or not self.with_validation) and (test or not self.with_test):
            return
        if not train + validation + test:
            raise DataError(f"{path}: no rows: fit needs rows to learn from (the file holds none)")
        wanted = ", ".join(
            part
            for part, kept in (
                ("training", True),
                ("validation", self.with_validation),
                ("test", self.with_test),
            )
            if kept
        )
        raise DataError(
            f"{path}: too few rows for the split: its {train + validation + test} rows drew "
            f"{train} training, {validation} validation and {test} test rows (each row's part "
            f"is drawn from the seed, so split(train={self.fractions[0]}, "
            f"validation={self.fractions[1]}) holds in expectation); a run needs {wanted} "
            "rows: give more rows, or larger fractions"
        )


class _Distinct:
    """The distinct training targets (at most `LIMIT` of them), for the loss's warnings."""

    LIMIT = 4096

    def __init__(self) -> None:
        self.values: NDArray[Any] | None = None

    def add(self, targets: NDArray[Any]) -> None:
        if len(targets) == 0:
            return
        found = np.unique(targets, axis=0)
        joined = found if self.values is None else np.concatenate([self.values, found])
        self.values = np.unique(joined, axis=0)[: self.LIMIT]


def feeds_for(
    pipeline: Pipeline | None,
    data: object,
    network: Network,
    loss: Loss,
    streams: Streams,
    test: object | None = None,
    sample_weight: object = None,
    validation: object | None = None,
) -> Feeds:
    """The feeds of whatever fit was handed: a Source, arrays (x, y), or rows; `sample_weight`
    (one weight a row) with arrays alone; test and validation rows given apart, or None."""
    if pipeline is not None and not isinstance(pipeline, Pipeline):
        hint = (
            " (arrays go to fit as fit(None, (x, y), network, loss, optimizer, options))"
            if isinstance(pipeline, np.ndarray)
            else ""
        )
        raise TypeError(
            f"fit: the first argument is the pipeline, a Pipeline or None, not "
            f"{described(pipeline)}{hint}"
        )
    if sample_weight is not None and not isinstance(data, tuple):
        raise DataError(
            "fit: sample_weight weighs the rows of arrays, fit(None, (x, y), ..., "
            "sample_weight=w), one weight a row of x; rows of named columns and scanned files "
            "take class_weight (a weight a class of the target)"
        )
    if isinstance(data, Source):
        source: Source = data
    elif isinstance(data, Scan):
        source = Streamed(data)
    elif isinstance(data, tuple):
        source = Arrays(data, sample_weight)
    elif pipeline is None and not is_frame(data):
        raise DataError(
            f"with no pipeline, fit takes arrays as a pair (x, y), not {type(data).__name__}"
        )
    else:
        source = Rows(data)
    if validation is None:  # (a source of one's own written before validation_rows)
        return source.feeds(pipeline, network, loss, streams, test)
    return source.feeds(pipeline, network, loss, streams, test, validation)


def _pair(x: object, y: object) -> tuple[Any, NDArray[Any]]:
    """Arrays (x, y) checked: x an array of features (or a dict of one array an input), y one
    target (or one row of targets) a row of x."""
    x_shape, y_shape = tuple(getattr(x, "shape", ())), tuple(getattr(y, "shape", ()))
    if len(x_shape) == 1 and len(y_shape) >= 2 and x_shape[0] == y_shape[0]:
        raise DataError(
            f"arrays come as (x, y), features first: x has shape {x_shape} and y {y_shape}, "
            "which looks the wrong way round; give fit (x, y)"
        )
    features = array_features(x)
    targets = np.asarray(y)
    count = feature_rows(features)
    if targets.ndim == 0 or targets.shape[0] != count:
        raise DataError(
            f"x holds {count} rows but y has shape {targets.shape}: give one target "
            "(or one row of targets) a row"
        )
    return features, targets


def build_for(network: Network, pipeline: Pipeline) -> None:
    """The network built for the learned pipeline's rows where it has no inputs yet; refused
    (DataError) where the pipeline feeds several inputs (or a dict) and the network one."""
    several = pipeline.input_shapes
    if several is not None and len(network.input_specs) == 1:
        named, one = ", ".join(map(repr, several)), network.input_specs[0].name
        raise DataError(  # (a dict of arrays was told to make a network of its input: trial O)
            f"the features are a dict of arrays ({named}), and the network takes one input "
            f"({one!r}): give it the array itself (a dict is for a network of several inputs)"
            if pipeline.takes_arrays
            else f"the pipeline feeds {len(several)} inputs ({named}), and the network takes "
            "one: make a network of those inputs, Network(inputs=[Input(..., name=...), ...], "
            "outputs=...), or leave input= out of the pipeline's columns"
        )
    if not network.built:
        try:
            network.build(pipeline.row_shape)
        except ShapeError as error:  # images of a layer built on the flat row (trial AP)
            images = pipeline.columns  # the hint fits an image alone (beside others: a review)
            if len(images) != 1 or images[0].kind != "image":
                raise
            shape = tuple(getattr(images[0], "shape", ()))
            raise ShapeError(
                f"{error}; the pipeline's image column {images[0].name!r} holds images of shape "
                f"{shape}, handed to the network as flat rows of {pipeline.feature_count} values "
                f"unless it says its input's shape: Network([...], inputs={shape})"
            ) from None
    laid_out = image_layout_refusal(pipeline, network)
    if laid_out is not None:
        raise DataError(f"{laid_out}: declare the image's shape as the network takes it")
    for input_name, group in pipeline.column_groups().items():
        spec = next((s for s in network.input_specs if s.name == input_name), None)
        spec = network.input_specs[0] if input_name is None else spec
        if spec is not None and group[0].dtype == "int64" and spec.dtype != "int64":
            names = ", ".join(repr(column.name) for column in group)
            raise ConfigurationError(
                f"the pipeline's text column{'s' if len(group) > 1 else ''} {names} "
                f"give{'' if len(group) > 1 else 's'} int64 ids, and the network's input {spec.name!r} takes float32 numbers: ids go to "
                "an Embedding first, Network([Embedding(vocabulary, width), ...]) (a word's id "
                "is a name, not an amount)"
            )


def check_classes(network: Network, loss: Loss, pipeline: Pipeline | None) -> None:
    """Refuse (ConfigurationError) a network whose outputs are not one a class of the learned
    pipeline's target where the loss takes one output a class: with more, it trained and its
    predictions gave chances to classes the target does not have, under no label."""
    classes = pipeline.classes if isinstance(pipeline, Pipeline) else None
    refused = classes_refusal(
        network.outputs, loss.task if loss.task == "classes" else None, classes
    )
    if refused is not None:
        raise ConfigurationError(refused.replace("its loss", repr(loss)))


def _shaped(features: Any, pipeline: Pipeline, network: Network) -> Features:
    """Features as the network takes them (one array an input, checked): the network built for
    the pipeline's rows where it has no inputs yet; flat pipeline columns reshaped to its
    images where it has."""
    build_for(network, pipeline)
    return network.arrange(features, reshape=True)


def made_feed(rows: object, pipeline: Pipeline, network: Network, loss: Loss) -> ArrayFeed:
    """Rows of named columns (a scanned file's part among them) as a feed: their features shaped for the network, their targets
    as the loss takes them."""
    return ArrayFeed(
        _shaped(pipeline.features(rows), pipeline, network),
        loss.targets(pipeline.targets(rows), network.outputs),
    )


def _rows_apart(
    given: object | None, what: str, pipeline: Pipeline, network: Network, loss: Loss
) -> ArrayFeed | None:
    """The test or validation rows of named columns given apart (`what`), made as the
    training rows are; None where none are given."""
    return None if given is None else rows_made(given, what, pipeline, network, loss)


def rows_made(
    given: object, what: str, pipeline: Pipeline, network: Network, loss: Loss
) -> ArrayFeed:
    """Rows of named columns given apart, made as the training rows are, a row named in
    messages by its place among them."""
    rows = rows_of(given)
    with rows_named(row_naming(rows, of=f"the {what} rows")):
        return made_feed(rows, pipeline, network, loss)


def _arrays_apart(
    given: object | None, what: str, pipeline: Pipeline, network: Network, loss: Loss
) -> ArrayFeed | None:
    """The test or validation arrays given apart (`what`), a pair (x, y) made as the
    training arrays are; None where none are given."""
    if given is None:
        return None
    if not (isinstance(given, tuple) and len(given) == 2):
        raise DataError(f"{what} rows for arrays come as a pair (x_{what}, y_{what})")
    return arrays_made(given, f"{what}_rows", pipeline, network, loss)


def arrays_made(
    given: tuple[Any, Any], where: str, pipeline: Pipeline, network: Network, loss: Loss
) -> ArrayFeed:
    """Arrays given apart as a pair (x, y), made as the training arrays are; a message
    begins with `where` (the argument they came as: "test_rows: ...")."""
    try:  # the same words fit the training arrays
        x, y = _pair(network.named(given[0]), given[1])
        # A DataFrame read by its columns' names, as predict reads it (it was read by their
        # places: reordered columns measured scrambled rows, trial EV).
        features = pipeline.features(given[0] if is_frame(given[0]) else x)
        return ArrayFeed(_shaped(features, pipeline, network), loss.targets(y, network.outputs))
    except (DataError, ShapeError) as error:
        raise type(error)(f"{where}: {error}") from None


def _in_memory(
    pipeline: Pipeline,
    whole: ArrayFeed,
    parts: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]],
    apart: ArrayFeed | None,
    validation_apart: ArrayFeed | None = None,
) -> Feeds:
    """The feeds of rows held in memory: `whole`'s training, validation and test rows (`parts`,
    as `Pipeline.partition` cuts them), or the test (validation) rows given `apart`
    (`validation_apart`)."""
    train, test = whole.take(parts[0]), apart
    validation = whole.take(parts[1]) if validation_apart is None else validation_apart
    if test is None:
        test = whole.take(parts[2])
    if len(validation) == 0:
        raise DataError(
            "no validation rows: a run judges each epoch by its validation loss (early "
            "stopping, the best epoch); "
            + (
                "the validation rows given hold none"
                if validation_apart is not None
                else "split with validation above 0, or give validation rows apart "
                "(validation_rows=...)"
            )
        )
    if len(test) == 0:
        raise DataError(
            "no test rows: give test rows apart, or split with a test fraction (train + validation "
            "below 1)"
        )
    return Feeds(pipeline, train, validation, test)
