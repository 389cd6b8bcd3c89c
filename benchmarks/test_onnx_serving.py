"""Serving an exported file: onnxruntime beside deepsharp's light engine and torch:cpu.

The Titanic and digits networks (their samples', briefly trained: the weights do not change the
time) serve a batch of feature rows — Titanic's 891 passengers, the digits' 1,797 test images —
and one row alone. deepsharp serves through `Predictor` (the slots put on the engine once, as
`TrainedNetwork.predict` does, 32 rows a pass); onnxruntime runs the file `export_onnx` wrote
for the network (its session made once, its default options and threads). Nothing is asserted
of the times (the figures go to the results and docs/performance.md); onnxruntime's predictions
are held to deepsharp's in the export tests, not here.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from bench_support import engine_specs, interleaved, record
from deepsharp.core.nn.predicting import Predictor
from deepsharp.core.samples import digits, titanic

onnxruntime = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

ROUNDS = 7


def _workload(name: str) -> tuple[Any, np.ndarray]:
    if name == "titanic":
        trained = titanic.run(epochs=2, progress=False).trained
        return trained, trained.pipeline.features(titanic.rows())
    trained = digits.run(epochs=1, progress=False).trained
    features = trained.pipeline.features(digits.rows("test"))
    return trained, features.reshape(len(features), 1, 8, 8)


@pytest.mark.parametrize("name", ["titanic", "digits"])
def test_serving_an_exported_network_in_onnxruntime_beside_deepsharp_s_engines(name: str) -> None:
    trained, features = _workload(name)
    network, loss = trained.network, trained.loss
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, f"{name}.onnx")
        network.export_onnx(path, loss)
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name
    sides: dict[str, Callable[[], object]] = {}
    one: dict[str, Callable[[], object]] = {}
    for spec in ("light", "torch:cpu"):
        if spec not in engine_specs():
            continue
        predictor = Predictor(network, loss, spec)
        sides[spec] = lambda p=predictor: p.predict(features.copy())
        one[spec] = lambda p=predictor: p.predict(features[:1].copy())
    sides["onnxruntime"] = lambda: session.run(None, {input_name: features.copy()})
    one["onnxruntime"] = lambda: session.run(None, {input_name: features[:1].copy()})
    batch = interleaved(sides, ROUNDS)
    alone = interleaved(one, ROUNDS)
    rows = len(features)
    figures: dict[str, Any] = {"rows": rows, "rounds": batch.count, "sides": {}, **batch.load()}
    for side in sides:
        figures["sides"][side] = {
            "rows_per_second": round(rows / batch.median(side)),
            "batch_us": round(batch.median(side) * 1e6, 1),
            "one_row_us": round(alone.median(side) * 1e6, 1),
            "to_light": round(batch.median(side) / batch.median("light"), 3),
        }
    record("steps", ("onnx", name), figures)
