"""What export traces of a pass: a graph written the same for any count of rows, refused where
a layer reads the count (or makes host values for the traced rows), and a size of a layer's own
that happens to be a traced count exported as any other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from export_helpers import (
    session,
)

from deepsharp.core import (
    Dense,
    ExportError,
    Flatten,
    Generator,
    Layer,
    Network,
    Tensor,
)

# --- every sample ------------------------------------------------------------------------------


class PerRow(Layer):
    """Divides by the batch's count of rows, read as a Python number: a graph of the traced count."""

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        return x / float(x.shape[0])


class OddEven(Layer):
    """Doubles its input for an odd count of rows: the count's parity, read as a number."""

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        return x * float(1 + x.shape[0] % 2)


@pytest.mark.parametrize("layer", [PerRow, OddEven])
def test_a_layer_that_reads_the_count_of_rows_as_a_number_is_refused(
    tmp_path: Path, layer: Any
) -> None:
    """Failed before: the file was written, the traced 17 rows a constant in it, and served
    other values than predict gave (0.02 to 0.06 off), whatever the count of rows. Trial CA:
    a forward reading the count's parity was traced alike at 17 rows and at 19."""
    network = Network([Dense(4), layer(name="per_row"), Dense(1)], inputs=3)
    network.initialize(Generator(0))
    with pytest.raises(
        ExportError,
        match=r"the constant 'per_row/constant' written by 'per_row' depends on the count of "
        r"rows .*x\.shape\[0\]",
    ):
        network.export_onnx(tmp_path / "x.onnx")
    assert not (tmp_path / "x.onnx").exists()


class Positions(Layer):
    """Adds a table of its sequence's positions, made on the host: a size of its own."""

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        length, width = x.shape[1], x.shape[2]
        table = np.arange(length * width, dtype=np.float32).reshape(length, width) / 100
        return x + Tensor.put(x.engine, table)


class RowsPut(Layer):
    """Adds ones made on the host for the batch's rows: a graph of the traced count."""

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        return x + Tensor.put(x.engine, np.ones(x.shape, np.float32))


@pytest.mark.parametrize("length", [17, 18, 31, 32])
def test_a_host_table_of_a_size_of_a_layer_s_own_is_exported_whatever_that_size(
    tmp_path: Path, length: int
) -> None:
    """Failed before (trial O): a table of 17 or 18 positions was taken for the batch's rows
    (the pass is traced at 17 and 18 rows) and refused, "made for the batch's rows"."""
    network = Network([Positions(name="positions"), Flatten(), Dense(1)], inputs=(length, 2))
    network.initialize(Generator(0))
    network.export_onnx(tmp_path / "x.onnx")
    rows = np.random.default_rng(0).normal(size=(5, length, 2)).astype(np.float32)
    served = session(tmp_path / "x.onnx")
    got = served.run(None, {served.get_inputs()[0].name: rows})[0]
    expected = network.predict(rows, engine="light:float32")
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    batch = Network([RowsPut(name="rows_put"), Dense(1)], inputs=length)
    batch.initialize(Generator(0))
    with pytest.raises(ExportError, match=r"'rows_put'.*host values made for the batch's rows"):
        batch.export_onnx(tmp_path / "y.onnx")
