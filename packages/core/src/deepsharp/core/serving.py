"""A trained network: the pipeline and the network together, predicting raw rows.

Rows go through the pipeline, then through the network by the one path every door predicts
through (`deepsharp.core.nn.predicting`): 32 rows at a time, the last chunk padded, so that no
prediction depends on how many rows share its pass (on strict, a row's is the same bits alone, in
any order, in any company). A network trained on arrays has
a pipeline of arrays: it predicts arrays.

Rows too many for memory are predicted part by part: `predict_parts` takes a scanned file
(`scan_csv`, `scan_parquet`) or any iterable of row batches and yields each part's predictions,
with the slots put on the engine once; memory is bounded by a part, whatever the rows' count.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core import generating
from deepsharp.core.data.pipeline import Pipeline
from deepsharp.core.data.scan import Scan
from deepsharp.core.data.sources import Part, is_frame, lacking, row_naming
from deepsharp.core.data.values import ColumnName, rows_named
from deepsharp.core.engine import Engine
from deepsharp.core.errors import DataError, FileFormatError
from deepsharp.core.export.graph import DEFAULT_OPSET
from deepsharp.core.export.model import export_trained
from deepsharp.core.files import read_safetensors, write_safetensors
from deepsharp.core.nn.losses import Loss, loss_from_json, loss_to_json
from deepsharp.core.nn.network import Network
from deepsharp.core.nn.predicting import CHUNK, Predictor
from deepsharp.core.nn.rows import checked_ids, image_layout_refusal
from deepsharp.core.nn.saving import (
    expectation,
    file_tensors,
    network_from_file,
    network_metadata,
    warn_of_scripts,
)
from deepsharp.core.nn.target_hints import classes_refusal

__all__ = ["CHUNK", "TrainedNetwork"]

TRAINED_FORMAT = "deepsharp.trained"


class TrainedNetwork:
    """What a run gives: `predict(rows, engine=None)`, `evaluate(rows, engine=None)`,
    `save(path)`, `TrainedNetwork.load(path)`.

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
        return self.predict_features(self.pipeline.features(self._named(rows)), engine)

    def predict_parts(
        self, rows: Scan | Iterable[Any], engine: Engine | str | None = None
    ) -> Iterator[NDArray[np.float32]]:
        """The predictions of each part of the rows in turn: a scanned file's parts, or each
        batch of an iterable of row batches (lists of mappings, DataFrames, or arrays for a
        network trained on arrays; an empty one gives no predictions). The slots go to the
        engine once; each part's predictions are the same bits as `predict` gives its rows.
        A message names a batch's row by the batch and its place in it, counting from 1."""
        return (predictions for predictions, _ in self._predicted(rows, engine, ()))

    def predict_parts_keeping(
        self, rows: Scan, columns: Sequence[ColumnName], engine: Engine | str | None = None
    ) -> Iterator[tuple[NDArray[np.float32], dict[ColumnName, Any]]]:
        """As `predict_parts` of a scanned file, each part's predictions beside the values of
        `columns` on its rows (an id, to join the predictions back to their rows by: trial
        CL4), read in the same pass; a column the file lacks is refused naming it."""
        if not isinstance(rows, Scan):
            raise DataError(
                "predict_parts_keeping takes a scanned file (scan_csv, scan_parquet); rows in "
                "memory keep their own columns beside predict(rows)"
            )
        missing = [name for name in columns if name not in rows.names]
        if missing:
            raise DataError(f"{rows.path}: {lacking(missing, rows.names)} to keep")
        return self._predicted(rows, engine, tuple(dict.fromkeys(columns)))

    def _predicted(
        self, rows: Scan | Iterable[Any], engine: Engine | str | None, keep: tuple[ColumnName, ...]
    ) -> Iterator[tuple[NDArray[np.float32], dict[ColumnName, Any]]]:
        if isinstance(rows, Scan) and self.pipeline.takes_arrays:
            raise DataError(
                f"{rows.path}: this network was trained on arrays (fit(None, (x, y), ...)), so "
                "it has no recipe for a file's named columns and cannot read its rows; predict "
                "with an array of its features: TrainedNetwork.load(path).predict(x)"
            )
        if is_frame(rows) or (  # (a network trained on arrays takes a dict as one batch)
            isinstance(rows, (list, tuple))
            and bool(rows)
            and isinstance(rows[0], Mapping)
            and not self.pipeline.takes_arrays
        ):
            raise DataError(
                "predict_parts takes its rows in parts: a scan (scan_csv, scan_parquet) or an "
                f"iterable of batches, each rows as predict takes them ([rows], not rows; this is "
                f"{'a DataFrame' if is_frame(rows) else 'a list of rows'}: predict(rows) serves "
                "it whole)"
            )
        if not isinstance(rows, (Scan, Iterable)) or isinstance(rows, (str, bytes)):
            raise DataError(
                "predict_parts takes its rows in parts: a scan (scan_csv, scan_parquet) or an "
                f"iterable of batches, each rows as predict takes them, not {type(rows).__name__}"
            )
        reads = self.pipeline.reads(rows.names, target=False) if isinstance(rows, Scan) else []
        parts = rows.parts(list(dict.fromkeys([*reads, *keep]))) if isinstance(rows, Scan) else rows
        predictor = Predictor(self.network, self.loss, engine)
        count = 0
        for number, part in enumerate(parts, start=1):
            kept = {name: part.columns[name] for name in keep} if keep else {}
            if len(part) == 0:  # a part a filter or a grouping left empty: no predictions
                yield np.zeros((0, self.outputs), np.float32), kept
                continue
            count += len(part)
            # A batch's row is named by its batch and its place in it (a part of a scan: by
            # the file and its line), or the user could not find it among the batches.
            naming: AbstractContextManager[None] = (
                nullcontext()
                if isinstance(part, Part)
                else rows_named(row_naming(part, of=f"batch {number}"))
            )
            with naming, rows.reading() if isinstance(rows, Scan) else nullcontext():
                features = self.pipeline.features(self._named(part))
            yield predictor.predict(features), kept
        if count == 0 and isinstance(rows, Scan):  # as rows read whole are refused: no rows
            raise DataError(
                f"{rows.path}: no rows: the file holds its header and no row; give at least one row"
            )

    def evaluate(
        self,
        rows: Any,
        engine: Engine | str | None = None,
        *,
        metrics: Sequence[str] = (),
        batch_size: int = 32,
    ) -> dict[str, float]:
        """The loss on rows with their targets — rows of named columns with the target column,
        a scanned file (`scan_csv`, `scan_parquet`) read part by part, or for a network trained
        on arrays a pair (x, y) — and the accuracy for losses of classes, then each of
        `metrics` ("auc", "f1", ..., as `FitOptions(metrics=...)` names them): a dict in that
        order. As a run measures its test rows: given the run's engine and its batch size
        (`batch_size`, 32 by default, as a run's is; the file does not record the run's), the
        same bits as its `report.measures` for the same rows. A next-token
        model (one text column in, the next token's logits out) is evaluated on a text, a
        `str`: each token after the first a target (once, but those a last, overlapping window
        shares with the one before), the loss in nats a token
        (`deepsharp.core.evaluating`)."""
        from deepsharp.core.evaluating import evaluate

        return evaluate(self, rows, engine, metrics, batch_size)

    def generate(
        self,
        prompt: str,
        length: int,
        temperature: float = 1.0,
        seed: int = 0,
        engine: Engine | str | None = None,
        top_k: int | None = None,
    ) -> str:
        """For a next-token model (one text column in, each position's next-token logits out,
        CrossEntropy — the Shakespeare sample): `prompt` and `length` tokens drawn after it,
        each from softmax(logits / temperature) (lower: likelier text; 0: the likeliest
        token each time), among the `top_k` likeliest tokens alone where it is given, from
        deepsharp's generator keyed by `seed`. Refused, naming why, for a network that is no
        such model (`deepsharp.core.generating`)."""
        return generating.generate(self, prompt, length, temperature, seed, engine, top_k)

    def _named(self, rows: Any) -> Any:
        """Arrays of several inputs given as a list in their order, keyed by the inputs' names
        as the pipeline of arrays learned them (rows of named columns as they are). An input of
        ids given floats or flags is refused here, naming what was given: the pipeline of
        arrays would read them as float32 first."""
        if not self.pipeline.takes_arrays:
            if isinstance(rows, np.ndarray):  # said as fit's hint before (trial PT)
                raise DataError(
                    f"predict takes the rows the pipeline reads (a list of mappings from column "
                    f"name to value, or a pandas DataFrame), not an array of shape {rows.shape}; "
                    "features already through the pipeline go to predict_features(x)"
                )
            return rows
        named = self.network.named(rows)
        specs = self.network.input_specs
        given = named if isinstance(named, dict) else {specs[0].name: named}
        for spec in specs:
            value = given.get(spec.name)
            if spec.dtype == "int64" and value is not None:
                try:
                    kind = np.asarray(value).dtype.kind
                except (ValueError, TypeError):  # ragged rows: the pipeline says what they are
                    continue
                if kind not in "iu":
                    several = f" (input {spec.name!r})" if len(specs) > 1 else ""
                    checked_ids(value, f"the features{several}")
        return named

    def predict_features(
        self, features: Any, engine: Engine | str | None = None
    ) -> NDArray[np.float32]:
        """Predictions for rows already through the pipeline (the arrays
        `self.pipeline.features(rows)` gives, one an input, or a dict of them by input name),
        32 at a time."""
        return Predictor(self.network, self.loss, engine).predict(features)

    # --- files -----------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """One safetensors file: the slots; in its metadata the format version, the
        architecture, the loss, the pipeline's recipe and statistics — and no engine."""
        write_safetensors(path, *self.contents())
        layers = [layer.key for layer in self.network.graph.layers]
        columns = [column.key for column in self.pipeline.columns]
        warn_of_scripts(path, [*layers, self.loss.key, *columns], depth=3)

    def contents(self) -> tuple[dict[str, NDArray[np.float32]], dict[str, str]]:
        """What its file holds: the slots and buffers, and the metadata (`save` writes them)."""
        tensors = file_tensors(self.network)
        metadata = network_metadata(self.network)
        metadata["format"] = TRAINED_FORMAT
        metadata["loss"] = json.dumps(loss_to_json(self.loss))
        metadata["pipeline"] = json.dumps(self.pipeline.to_json())
        return tensors, metadata

    def export_onnx(self, path: str | os.PathLike[str], opset: int = DEFAULT_OPSET) -> None:
        """One ONNX file that onnxruntime serves raw rows with: the pipeline (numbers' fill and
        scaling, categories' one-hot, flags, images' scale), the network and the loss's link,
        giving what `predict` gives (docs/export.md). Needs `deepsharp[onnx]`; ExportError
        naming what cannot be written; written atomically."""
        export_trained(self, path, opset)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TrainedNetwork:
        """A trained network from its file; never runs code from it. FileFormatError if bad."""
        where = f"trained-network file {os.fspath(path)!r}"
        expect = expectation(Network, where, TRAINED_FORMAT)
        tensors, metadata = read_safetensors(path, "trained-network file", expect=expect)
        network = network_from_file(Network, tensors, metadata, where, TRAINED_FORMAT)
        try:
            loss = loss_from_json(json.loads(metadata["loss"]))
            pipeline_data = json.loads(metadata["pipeline"])
        except (KeyError, ValueError, RecursionError) as error:
            said = f"lacks the entry {error}" if isinstance(error, KeyError) else f"({error})"
            raise FileFormatError(f"{where}: its loss or pipeline cannot be read: {said}") from None
        try:
            pipeline = Pipeline.from_json(pipeline_data)
        except FileFormatError as error:  # it names the entry; the file is named here
            raise FileFormatError(f"{where}: {error}") from None
        if not pipeline.is_learned:
            raise FileFormatError(f"{where}: its pipeline has learned no statistics")
        _check_inputs(where, pipeline, network)
        refused = classes_refusal(network.outputs, loss.task, pipeline.classes)
        if refused is not None:  # (it loaded, and served chances under other labels: trial H)
            raise FileFormatError(f"{where}: {refused}")
        return cls(network, loss, pipeline)

    def __repr__(self) -> str:
        return f"TrainedNetwork({self.network!r}, {self.loss!r})"


def _check_inputs(where: str, pipeline: Pipeline, network: Network) -> None:
    """A FileFormatError where the file's pipeline does not make what its network takes: as many
    values a row for its one input, or (several) the network's inputs by name, each's values."""
    specs = network.input_specs
    several = pipeline.input_shapes
    takes = {spec.name: math.prod(spec.shape or ()) for spec in specs}
    laid_out = image_layout_refusal(pipeline, network)
    if laid_out is not None:
        raise FileFormatError(f"{where}: {laid_out}")
    if several is None:
        if len(specs) > 1:
            raise FileFormatError(
                f"{where}: its pipeline feeds one input ({pipeline.feature_count} values a row), "
                f"its network takes {', '.join(map(repr, takes))}"
            )
        if math.prod(specs[0].shape or ()) != pipeline.feature_count:
            raise FileFormatError(
                f"{where}: its pipeline makes {pipeline.feature_count} features, its network "
                f"takes rows of shape {specs[0].shape}"
            )
        return
    makes = {name: math.prod(shape) for name, shape in several.items()}
    if takes != makes:
        raise FileFormatError(
            f"{where}: its pipeline feeds the inputs {list(makes)} ({makes} values a row), its "
            f"network takes {', '.join(map(repr, takes))} ({takes} values a row)"
        )
