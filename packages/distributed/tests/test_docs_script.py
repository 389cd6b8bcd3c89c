"""The scripts docs/distributed.md shows run as a user runs them: gradient_sum.py by hand (it
launches its own two processes) gives the whole batch's gradient; titanic_parallel.py (fit with
DataParallel) under `torchrun --standalone --nproc-per-node 2`: rank 0 alone prints the report
and writes the network, of the one-process band. (Each torchrun costs seconds of CI: the
scripts share the `RANK` branch, so one run under torchrun covers both ways in.)"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from deepsharp.core.samples import titanic

pytest.importorskip("torch")

DOC = Path(__file__).resolve().parents[3] / "docs" / "distributed.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
NAME = "gradient_sum.py"
FIT = "titanic_parallel.py"


def write_script(folder: Path, name: str = NAME) -> Path:
    """docs/distributed.md's script `name`, written into `folder`."""
    blocks = [b for b in BLOCK.findall(DOC.read_text(encoding="utf-8")) if f'"""{name}' in b]
    assert len(blocks) == 1, f"docs/distributed.md shows {name} {len(blocks)} times, not once"
    path = folder / name
    path.write_text(blocks[0], encoding="utf-8")
    return path


def _torchrun() -> list[str]:
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    return [torchrun] if torchrun else [sys.executable, "-m", "torch.distributed.run"]


def _batch_gradient() -> np.ndarray:
    rows = np.random.default_rng(0).standard_normal((32, 3)).astype(np.float32)
    targets = rows @ np.array([1.0, -2.0, 0.5], np.float32)
    x, y = rows.astype(np.float64), targets.astype(np.float64)
    return -2.0 * x.T @ y / len(x)  # at zero slots: 2·xᵀ(x·0 - y)/B


def _printed(output: str) -> list[np.ndarray]:
    found = re.findall(r"\[[^\[\]]*\]", output)
    return [np.array(ast.literal_eval(text)) for text in found]


def _run(command: list[str], folder: Path) -> str:
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_script_launches_its_own_job_and_prints_the_batch_gradient(tmp_path: Path) -> None:
    output = _run([sys.executable, str(write_script(tmp_path))], tmp_path)
    (got,) = _printed(output)
    expected = _batch_gradient()
    assert np.allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_the_fit_script_trains_under_torchrun_and_rank_0_alone_reports_and_writes(
    tmp_path: Path,
) -> None:
    script = write_script(tmp_path, FIT)
    output = _run([*_torchrun(), "--standalone", "--nproc-per-node", "2", str(script)], tmp_path)
    assert output.count("deepsharp run on light") == 1 and "on the 135 test rows:" in output
    accuracy = float(re.findall(r"accuracy\s+([0-9.]+)", output)[0])
    alone = titanic.run(progress=False).report.measures["accuracy"]
    assert abs(accuracy - alone) <= 3 / 135  # the one-process run's band (test_fit.py)
    assert [path.name for path in tmp_path.iterdir() if path.suffix == ".safetensors"] == [
        "titanic.safetensors"
    ]


TWO_FITS = """
from deepsharp.core.samples import titanic
from deepsharp.distributed import DataParallel

for seed in (42, 43):
    config = DataParallel(timeout=60)
    run = titanic.run(seed=seed, progress=False, distributed=config, epochs=2)
    if config.writes:
        print(f"fit with seed {seed}: {run.report.measures['accuracy']:.4f}", flush=True)
"""


def test_a_script_under_torchrun_fits_twice_in_one_job(tmp_path: Path) -> None:
    """Failed before (trial DP): the first fit ended the process group it had started from
    torchrun's environment, and the second, starting one again on torchrun's store, met the
    first one's keys: gloo's connections were refused on every rank."""
    script = tmp_path / "two_fits.py"
    script.write_text(TWO_FITS, encoding="utf-8")
    output = _run([*_torchrun(), "--standalone", "--nproc-per-node", "2", str(script)], tmp_path)
    assert output.count("fit with seed") == 2, output
