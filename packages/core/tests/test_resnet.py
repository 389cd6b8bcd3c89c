"""The residual sample (`deepsharp sample resnet`), in short runs: from the command line, the same
run again bit for bit, resumed bit for bit, its file served. Its full run's accuracy (at least
0.985 on the 1,797 test images) is docs/digits.md's, from `deepsharp sample resnet`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from deepsharp.core import TrainedNetwork
from deepsharp.core.cli import main
from deepsharp.core.samples import digits, resnet

pytestmark = pytest.mark.once  # the sample's runs: the same on every Python

EPOCHS = 2


def test_the_sample_is_a_graph_with_two_residual_blocks_and_batchnorm() -> None:
    network = resnet.network()
    kinds = [layer.kind for layer in network.layers]
    assert kinds.count("Add") == 2 and kinds.count("BatchNorm") == 5
    assert network.output_shape == (10,)
    assert len(network.buffer_specs) == 10


def test_a_short_run_from_the_command_line_saves_a_file_that_serves(
    tmp_path: Path, capsys: object
) -> None:
    saved = tmp_path / "resnet.safetensors"
    assert main(["sample", "resnet", "--epochs", "1", "--no-progress", "--save", str(saved)]) == 0
    trained = TrainedNetwork.load(saved)
    assert trained.predict(digits.rows("test")[:4]).shape == (4, 10)


def test_the_run_is_the_same_run_again_and_resumes_bit_for_bit(tmp_path: Path) -> None:
    whole = resnet.run(epochs=EPOCHS, patience=50, progress=False)
    again = resnet.run(epochs=EPOCHS, patience=50, progress=False)
    resnet.run(epochs=1, patience=50, progress=False, checkpoint_dir=tmp_path)
    resumed = resnet.run(epochs=EPOCHS, patience=50, progress=False, resume_from=tmp_path)
    for run in (again, resumed):
        slots, buffers = run.trained.network.values()
        kept_slots, kept_buffers = whole.trained.network.values()
        assert all(slots[n].tobytes() == kept_slots[n].tobytes() for n in slots)
        assert all(buffers[n].tobytes() == kept_buffers[n].tobytes() for n in buffers)
    assert np.isfinite(whole.report.measures["loss"])
