"""What a run reads its batches from: the data handed to `fit`, split and made into feeds.

`fit(pipeline, data, ...)` takes rows (a list of mappings, a DataFrame: `Rows`), arrays
(`(x, y)`: `Arrays`) or any `Source` — an object that makes its own feeds, as a source that
streams rows from a file does. A source splits its rows (from the run's generator), learns the
pipeline on the training rows, builds the network for their shape, and gives three feeds
(training, validation, test). A feed gives batches: this process's share of each batch of rows,
its features shaped for the network and its targets as the loss takes them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.data.pipeline import Pipeline, array_features
from deepsharp.core.data.sources import is_frame, row_count, rows_of, take
from deepsharp.core.errors import DataError, ShapeError
from deepsharp.core.nn.losses import Loss
from deepsharp.core.nn.network import Network
from deepsharp.core.random import Generator, Streams

__all__ = ["ArrayFeed", "Arrays", "Batch", "Feed", "Feeds", "Rows", "Source", "feeds_for"]

ShareOf = Callable[[int], tuple[int, int]]
"""This process's rows [start, stop) of a batch of so many rows (`Distribution.share`)."""


@dataclass
class Batch:
    """This process's rows of one batch: features, targets, and `share` — where they lie in the
    whole batch: (start, stop, total), its rows the batch's start .. stop - 1 of total."""

    features: NDArray[np.float32]
    targets: NDArray[Any]
    share: tuple[int, int, int]

    def __len__(self) -> int:
        return int(self.features.shape[0])


class Feed:
    """A part of the data (training, validation or test rows), read in batches."""

    def batches(self, size: int, order: Generator | None, share: ShareOf) -> Iterator[Batch]:
        """Batches of `size` rows (the last may be smaller), in a fresh order drawn from `order`
        (the training rows, each epoch) or in their own order (None)."""
        raise NotImplementedError


class ArrayFeed(Feed):
    """Features and targets held in memory."""

    def __init__(self, features: NDArray[np.float32], targets: NDArray[Any]) -> None:
        self.features = features
        self.targets = targets

    def __len__(self) -> int:
        return int(self.features.shape[0])

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
            yield Batch(self.features[picked], self.targets[picked], (first, last, stop - start))


@dataclass
class Feeds:
    """A run's data: the learned pipeline, and its three parts as feeds."""

    pipeline: Pipeline
    train: Feed
    validation: Feed
    test: Feed


class Source:
    """Data that makes its own feeds (a source streaming rows from a file, say)."""

    def feeds(
        self,
        pipeline: Pipeline | None,
        network: Network,
        loss: Loss,
        streams: Streams,
        test: object | None,
    ) -> Feeds:
        """Split the rows (from `streams.split`), learn `pipeline` on the training rows, build
        `network` for their row shape (`network.build`), and give the three parts as feeds
        (their targets as `loss.targets` gives them). `test`: test rows given apart, or None."""
        raise NotImplementedError


class Rows(Source):
    """Rows of named columns (a list of mappings, a DataFrame, what read_csv gives)."""

    def __init__(self, rows: object) -> None:
        if isinstance(rows, tuple):
            raise DataError(
                "rows come as one list or DataFrame; (x, y) arrays go to fit as they are"
            )
        self.rows = rows_of(rows)

    def feeds(
        self,
        pipeline: Pipeline | None,
        network: Network,
        loss: Loss,
        streams: Streams,
        test: object | None,
    ) -> Feeds:
        if pipeline is None or pipeline.takes_arrays:
            raise DataError(
                "rows of named columns need a pipeline that declares them (for a DataFrame of "
                "numbers: Pipeline().numbers().target(name)); fit(None, (x, y), ...) takes arrays"
            )
        count = row_count(self.rows)
        if count == 0:
            raise DataError(
                "no rows: fit needs rows to learn from (a list of mappings, a DataFrame, or "
                "read_csv's rows)"
            )
        train, validation, held = pipeline.partition(
            count, streams.split.permutation(count), test=test is None
        )
        pipeline.learn(take(self.rows, train))
        features = _shaped(pipeline.features(self.rows), pipeline, network)
        targets = loss.targets(pipeline.targets(self.rows), network.outputs)
        loss.check_training_targets(targets[train])
        if test is None:
            test_feed = ArrayFeed(features[held], targets[held])
        else:
            test_rows = rows_of(test)
            test_feed = ArrayFeed(
                _shaped(pipeline.features(test_rows), pipeline, network),
                loss.targets(pipeline.targets(test_rows), network.outputs),
            )
        return _feeds(
            pipeline,
            ArrayFeed(features[train], targets[train]),
            ArrayFeed(features[validation], targets[validation]),
            test_feed,
        )


class Arrays(Source):
    """Arrays as they are: features x (N, ...) and targets y (what the loss takes)."""

    def __init__(self, data: object) -> None:
        if not (isinstance(data, tuple) and len(data) == 2):
            raise DataError(f"arrays come as a pair (x, y), not {type(data).__name__}")
        self.x, self.y = data

    def feeds(
        self,
        pipeline: Pipeline | None,
        network: Network,
        loss: Loss,
        streams: Streams,
        test: object | None,
    ) -> Feeds:
        pipeline = Pipeline() if pipeline is None else pipeline
        if not pipeline.takes_arrays:
            raise DataError(
                "this pipeline declares columns, so it reads rows of named columns; give fit "
                "the rows, or arrays (x, y) with a pipeline of no columns (or None)"
            )
        x, y = _pair(self.x, self.y)
        count = x.shape[0]
        train, validation, held = pipeline.partition(
            count, streams.split.permutation(count), test=test is None
        )
        pipeline.learn(x[train])
        features = _shaped(x, pipeline, network)
        targets = loss.targets(y, network.outputs)
        loss.check_training_targets(targets[train])
        if test is None:
            test_feed = ArrayFeed(features[held], targets[held])
        else:
            if not (isinstance(test, tuple) and len(test) == 2):
                raise DataError("test rows for arrays come as a pair (x_test, y_test)")
            test_x, test_y = _pair(*test)
            test_feed = ArrayFeed(
                _shaped(pipeline.features(test_x), pipeline, network),
                loss.targets(test_y, network.outputs),
            )
        return _feeds(
            pipeline,
            ArrayFeed(features[train], targets[train]),
            ArrayFeed(features[validation], targets[validation]),
            test_feed,
        )


def feeds_for(
    pipeline: Pipeline | None,
    data: object,
    network: Network,
    loss: Loss,
    streams: Streams,
    test: object | None = None,
) -> Feeds:
    """The feeds of whatever fit was handed: a Source, arrays (x, y), or rows."""
    if pipeline is not None and not isinstance(pipeline, Pipeline):
        raise TypeError(f"fit: the pipeline must be a Pipeline or None, not {pipeline!r}")
    if isinstance(data, Source):
        source: Source = data
    elif isinstance(data, tuple):
        source = Arrays(data)
    elif pipeline is None and not is_frame(data):
        raise DataError(
            f"with no pipeline, fit takes arrays as a pair (x, y), not {type(data).__name__}"
        )
    else:
        source = Rows(data)
    return source.feeds(pipeline, network, loss, streams, test)


def _pair(x: object, y: object) -> tuple[NDArray[np.float32], NDArray[Any]]:
    features = array_features(x)
    targets = np.asarray(y)
    if targets.ndim == 0 or targets.shape[0] != features.shape[0]:
        raise DataError(
            f"x holds {features.shape[0]} rows but y has shape {targets.shape}: give one target "
            "(or one row of targets) a row"
        )
    return features, targets


def _shaped(
    features: NDArray[np.float32], pipeline: Pipeline, network: Network
) -> NDArray[np.float32]:
    """Features as the network takes its rows: the network built for the pipeline's rows
    where it has no inputs yet; flat pipeline columns reshaped to its images where it has."""
    if network.inputs is None:
        network.build(pipeline.row_shape)
    inputs = network.inputs
    assert inputs is not None
    if features.shape[1:] != inputs:
        if math.prod(features.shape[1:]) != math.prod(inputs):
            raise ShapeError(
                f"the pipeline makes rows of shape {features.shape[1:]}; the network takes rows "
                f"of shape {inputs}"
            )
        features = features.reshape(features.shape[0], *inputs)
    return features


def _feeds(pipeline: Pipeline, train: ArrayFeed, validation: ArrayFeed, test: ArrayFeed) -> Feeds:
    if len(validation) == 0:
        raise DataError(
            "no validation rows: a run judges each epoch by its validation loss (early "
            "stopping, the best epoch); split with validation above 0"
        )
    if len(test) == 0:
        raise DataError("no test rows: give test rows apart, or split with a test share")
    return Feeds(pipeline, train, validation, test)
