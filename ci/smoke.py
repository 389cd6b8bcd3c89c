"""The smoke check of built wheels: what a user installs, by name, in environments with nothing else.

1. The wheels `nox -s wheels` (ci/wheels.py) built into dist/ (`--dist` elsewhere).
2. A fresh virtual environment and `pip install --find-links DIST deepsharp
   deepsharp-engine-torch deepsharp-distributed`, as the README says (NumPy from the index):
   the versions installed are the checkout's, from DIST. Making `TorchEngine.on_cpu()` must be
   refused naming the packages that bring torch, and `deepsharp doctor` must say so;
   `deepsharp.distributed` must import, and starting a job must be refused naming them too.
3. Then the tested CPU torch (ci/constraints.txt): a Titanic step must fit on torch:cpu, and a
   job of 2 processes must give the sum of their shares' gradients.

Nothing from the source tree is on the path: every command runs in a scratch folder.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BY_NAME = ["deepsharp", "deepsharp-engine-torch", "deepsharp-distributed"]

REFUSED = """
from deepsharp.core import EngineUnavailableError
from deepsharp.engines.torch import TorchEngine
try:
    TorchEngine.on_cpu()
except EngineUnavailableError as error:
    message = str(error)
    print("refused:", message)
    assert "torch" in message and "pip install" in message, message
else:
    raise SystemExit("TorchEngine.on_cpu() was made without torch installed")
"""

DISTRIBUTED_REFUSED = """
from deepsharp.distributed import DataParallel, DistributedError, launch
DataParallel()  # the configuration needs no torch
try:
    launch(print, 2)
except DistributedError as error:
    print("refused:", error)
    assert "torch" in str(error) and "pip install" in str(error), error
else:
    raise SystemExit("a job was launched without torch installed")
"""

DISTRIBUTED_JOB = """
import numpy as np
from deepsharp.core import make_engine
from deepsharp.distributed import DataParallel, launch

def step():
    job = DataParallel().join()
    engine = make_engine("light")
    share = job.share(3)
    values = np.arange(3, dtype=np.float32)[share.rows]
    (total,) = job.reduce_gradients(engine, [engine.put(values.sum(keepdims=True))])
    return float(engine.get(total)[0])

if __name__ == "__main__":
    total = launch(step, 2)
    print("2 processes:", total)
    assert total == 3.0, total
"""

TITANIC_STEP = """
import deepsharp.core, deepsharp.engines.torch as engine_module
from deepsharp.core import FitOptions, fit, BinaryCrossEntropy, Adam
from deepsharp.core.samples import titanic
assert "site-packages" in deepsharp.core.__file__, deepsharp.core.__file__
run = fit(titanic.pipeline(), titanic.rows(), titanic.network(), BinaryCrossEntropy(),
          Adam(0.001), FitOptions(seed=42, engine="torch:cpu", epochs=1, progress=False))
print(run.report)
assert run.report.engine.name == "torch", run.report.engine
"""


VERSIONS = """
import importlib.metadata as metadata, sys
import deepsharp.core
assert "site-packages" in deepsharp.core.__file__, deepsharp.core.__file__
for name in sys.argv[2:]:
    print(name, metadata.version(name))
    assert metadata.version(name) == sys.argv[1], (name, metadata.version(name), sys.argv[1])
"""


def run(command: list[str], cwd: Path, expect: int | None = 0) -> str:
    print("$", " ".join(command), flush=True)
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    print(done.stdout + done.stderr, flush=True)
    if expect is not None and done.returncode != expect:
        raise SystemExit(f"exit code {done.returncode} (expected {expect}): {' '.join(command)}")
    return done.stdout + done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--constraints", default=str(ROOT / "ci" / "constraints.txt"))
    parser.add_argument("--dist", default=str(ROOT / "dist"), help="where the wheels are")
    arguments = parser.parse_args()
    constraints = ["-c", str(Path(arguments.constraints).resolve())]
    dist = Path(arguments.dist).resolve()
    if not sorted(dist.glob("deepsharp-*.whl")):
        raise SystemExit(f"no deepsharp wheel in {dist}: build them first (nox -s wheels)")
    written = (ROOT / "packages/core/src/deepsharp/core/version.py").read_text()
    version = re.search(r'^__version__ = "([^"]+)"$', written, re.MULTILINE)
    assert version is not None, written
    scratch = Path(tempfile.mkdtemp(prefix="deepsharp-smoke-"))
    environment = scratch / "env"
    venv.create(environment, with_pip=True)
    python = str(environment / "bin" / "python")
    pip = [python, "-m", "pip", "install", "--quiet", *constraints]
    run([*pip, "--find-links", str(dist), *BY_NAME], cwd=scratch)
    run([python, "-c", VERSIONS, version.group(1), *BY_NAME], cwd=scratch)
    run([python, "-c", "import importlib.util as u; assert u.find_spec('torch') is None"], scratch)
    run([python, "-c", REFUSED], cwd=scratch)
    run([python, "-c", DISTRIBUTED_REFUSED], cwd=scratch)
    doctor = run([str(environment / "bin" / "deepsharp"), "doctor"], cwd=scratch)
    assert "torch" in doctor and "pip install" in doctor, doctor

    run([*pip, "torch"], cwd=scratch)
    run([python, "-c", TITANIC_STEP], cwd=scratch)
    job = scratch / "two_processes.py"  # a file: spawned processes import the function from it
    job.write_text(DISTRIBUTED_JOB, encoding="utf-8")
    run([python, str(job)], cwd=scratch)
    print("smoke check passed", flush=True)
    if os.environ.get("CI"):
        print("(scratch folder:", scratch, ")")


if __name__ == "__main__":
    sys.exit(main())
