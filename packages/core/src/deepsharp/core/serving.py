"""A trained network: the pipeline and the network together, predicting raw rows.

Rows go through the pipeline, then through the network 32 rows at a time (Keras's default
batch), the last chunk padded with zero rows, so that no prediction depends on which rows share
its pass: a row's prediction is the same bits alone, in any order, in any company. On an engine
whose precision promises that of its own (`Precision.batch_invariant`: strict), many chunks go
in one pass, which gives the same bits with fewer calls. A network trained on arrays has a
pipeline of arrays: it predicts arrays.

Rows too many for memory are predicted part by part: `predict_parts` takes a scanned file
(`scan_csv`, `scan_parquet`) or any iterable of row batches and yields each part's predictions,
with the slots put on the engine once; memory is bounded by a part, whatever the rows' count.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.autodiff.replay import Replay
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.data.pipeline import Pipeline
from deepsharp.core.data.scan import Scan
from deepsharp.core.engine import PRECISIONS, Engine, Handle
from deepsharp.core.errors import DataError, FileFormatError
from deepsharp.core.files import read_safetensors, write_safetensors
from deepsharp.core.nn.layers import Pass
from deepsharp.core.nn.losses import Loss, loss_from_json, loss_to_json
from deepsharp.core.nn.network import Network, Served, own_engine

__all__ = ["CHUNK", "TrainedNetwork"]

CHUNK = 32
TRAINED_FORMAT = "deepsharp.trained"


class TrainedNetwork:
    """What a run gives: `predict(rows, engine=None)`, `save(path)`, `TrainedNetwork.load(path)`.

    `rows` are what the pipeline reads: rows of named columns, or (for a network trained on
    arrays) an array of features."""

    def __init__(self, network: Network, loss: Loss, pipeline: Pipeline) -> None:
        self.network = network
        self.loss = loss
        self.pipeline = pipeline

    @property
    def outputs(self) -> int:
        return self.network.outputs

    def predict(self, rows: Any, engine: Engine | str | None = None) -> NDArray[np.float32]:
        """Predictions (rows, outputs) for raw rows: the pipeline, then the network on `engine`
        (a light engine of its own when none is given). A scanned file is read part by part,
        its predictions gathered into one array (`predict_parts` yields them part by part)."""
        if isinstance(rows, Scan):
            parts = list(self.predict_parts(rows, engine))
            return np.concatenate(parts) if parts else np.zeros((0, self.outputs), np.float32)
        return self.predict_features(self.pipeline.features(rows), engine)

    def predict_parts(
        self, rows: Scan | Iterable[Any], engine: Engine | str | None = None
    ) -> Iterator[NDArray[np.float32]]:
        """The predictions of each part of the rows in turn: a scanned file's parts, or each
        batch of an iterable of row batches (lists of mappings, DataFrames, or arrays for a
        network trained on arrays). The slots go to the engine once; each part's predictions
        are the same bits as `predict` gives its rows."""
        if isinstance(rows, Scan) and self.pipeline.takes_arrays:
            raise DataError(
                f"{rows.path}: this network was trained on arrays (fit(None, (x, y), ...)), so "
                "it has no recipe for a file's named columns and cannot read its rows; predict "
                "with an array of its features: TrainedNetwork.load(path).predict(x)"
            )
        parts = (
            rows.parts(self.pipeline.reads(rows.names, target=False))
            if isinstance(rows, Scan)
            else rows
        )
        made = own_engine(engine)
        count = 0
        with self.network.served(self.loss, made) as served:
            for part in parts:
                count += len(part)
                yield self._predict_served(self.pipeline.features(part), made, served)
        if count == 0 and isinstance(rows, Scan):  # as rows read whole are refused: no rows
            raise DataError(
                f"{rows.path}: no rows: the file holds its header and no row; give at least one row"
            )

    def predict_features(
        self, features: NDArray[np.float32], engine: Engine | str | None = None
    ) -> NDArray[np.float32]:
        """Predictions for rows already through the pipeline, 32 at a time."""
        if features.shape[0] == 0:
            return np.zeros((0, self.outputs), np.float32)
        made = own_engine(engine)
        with self.network.served(self.loss, made) as served:
            return self._predict_served(features, made, served)

    def _predict_served(
        self, features: NDArray[np.float32], made: Engine, served: Served
    ) -> NDArray[np.float32]:
        count = features.shape[0]
        if count == 0:
            return np.zeros((0, self.outputs), np.float32)
        inputs = self.network.inputs
        if (
            inputs is not None
            and features.shape[1:] != inputs
            and features[0].size == math.prod(inputs)
        ):
            features = features.reshape(count, *inputs)  # flat pipeline columns to images
        self.network.check_rows(features)
        padded = -(-count // CHUNK) * CHUNK
        if padded != count:
            filler = np.zeros((padded - count, *features.shape[1:]), np.float32)
            features = np.concatenate([features, filler])
        # The rows cross once; each chunk is a slice on the engine; the predictions cross once.
        # The first chunk goes through the layers and is traced; the others replay the trace:
        # the same engine calls in the same order, without the layers' Python.
        rows = Tensor.put(made, features)
        row = tuple(rows.shape[1:])
        context = Pass(made, False, None)
        network, bound = self.network, served.bound

        def forward(chunk: Tensor) -> Tensor:
            return network.forward(chunk, bound, context)

        def link(out: Handle, size: int) -> Handle:
            return self.loss.link(made, made.reshape(out, (size, self.outputs)))

        def rows_at(start: int, size: int) -> Tensor:
            return Tensor(made.slice(rows.handle, 0, start, start + size), (size, *row), made)

        replay, traced = Replay.trace(forward, rows_at(0, CHUNK))
        chunks = [link(traced.handle, CHUNK)]
        span = done = CHUNK
        if replay is not None and padded > CHUNK and _batch_invariant(made):
            # This engine's precision promises a row's prediction the same bits in any company:
            # many chunks then go in one pass, with the bits of one chunk at a time.
            span = min(padded - CHUNK, _rows_a_pass(row))
            replay, traced = Replay.trace(forward, rows_at(CHUNK, span))
            chunks.append(link(traced.handle, span))
            done += span
        for start in range(done, padded, span):
            size = min(span, padded - start)
            if replay is None or size != span:  # moves values, or the last, shorter pass
                chunks.append(link(forward(rows_at(start, size)).handle, size))
            else:
                chunk = made.slice(rows.handle, 0, start, start + size)
                chunks.append(link(replay.replay(made, chunk), size))
        every = chunks[0] if len(chunks) == 1 else made.concatenate(chunks, 0)
        result: NDArray[np.float32] = made.get(every)
        return result[:count]

    # --- files -----------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """One safetensors file: the slots; in its metadata the format version, the
        architecture, the loss, the pipeline's recipe and statistics — and no engine."""
        slots = self.network.saved_slots()
        metadata = self.network.metadata()
        metadata["format"] = TRAINED_FORMAT
        metadata["loss"] = json.dumps(loss_to_json(self.loss))
        metadata["pipeline"] = json.dumps(self.pipeline.to_json())
        write_safetensors(path, slots, metadata)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TrainedNetwork:
        """A trained network from its file; never runs code from it. FileFormatError if bad."""
        where = f"trained-network file {os.fspath(path)!r}"
        expect = Network.expectation(where, TRAINED_FORMAT)
        tensors, metadata = read_safetensors(path, "trained-network file", expect=expect)
        network = Network.from_file(tensors, metadata, where, TRAINED_FORMAT)
        try:
            loss = loss_from_json(json.loads(metadata["loss"]))
            pipeline_data = json.loads(metadata["pipeline"])
        except (KeyError, ValueError, RecursionError) as error:
            raise FileFormatError(
                f"{where}: its loss or pipeline cannot be read ({error})"
            ) from None
        pipeline = Pipeline.from_json(pipeline_data)
        if not pipeline.is_learned:
            raise FileFormatError(f"{where}: its pipeline has learned no statistics")
        inputs = network.inputs or ()
        if pipeline.is_learned and math.prod(inputs) != pipeline.feature_count:
            raise FileFormatError(
                f"{where}: its pipeline makes {pipeline.feature_count} features, its network "
                f"takes rows of shape {network.inputs}"
            )
        return cls(network, loss, pipeline)

    def __repr__(self) -> str:
        return f"TrainedNetwork({self.network!r}, {self.loss!r})"


PASS_VALUES = 1 << 14
"""About how many input values one pass of many chunks takes (on a batch-invariant engine): few
enough that its products stay one thread's work, as chunk by chunk. On a busy 2-core machine,
1,152 Titanic rows a pass served 100,000 rows' network part in 8-10 ms; 4,672 rows a pass in
7-64 ms (OpenBLAS's two threads waiting on each other); 32 rows a pass in 52-56 ms."""


def _rows_a_pass(row: tuple[int, ...]) -> int:
    """Rows a pass takes on a batch-invariant engine: whole chunks, about PASS_VALUES values."""
    return max(1, PASS_VALUES // (math.prod(row) * CHUNK)) * CHUNK


def _batch_invariant(engine: Engine) -> bool:
    """Whether the engine's precision promises a row's prediction the same bits in any company."""
    precision = PRECISIONS.get(engine.identity.precision or "")
    return precision is not None and precision.batch_invariant
