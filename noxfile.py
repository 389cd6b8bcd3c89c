"""Every check deepsharp has, as nox sessions. `nox` runs the default matrix; `nox -l` lists it.

Python versions come from pyenv: PYENV_VERSION=3.11.7:3.10.13:3.12.1:3.13.0 makes all four
visible (.ci/run sets it). Where one is missing its sessions are skipped, saying so, except in
CI (the CI variable set), where that is an error. Installs are pinned by ci/constraints.txt, so no session can pull an
unpinned torch.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nox

# A machine without some of these Pythons (a fresh one with one Python) skips their sessions,
# each saying "Skipping ...: python3.X could not be found"; CI (the CI variable set) must have
# them all, so there a missing one is an error.
nox.options.error_on_missing_interpreters = os.environ.get("CI", "").strip().lower() not in {
    "",
    "0",
    "false",
    "no",
}
nox.options.reuse_existing_virtualenvs = False

ROOT = Path(__file__).parent
PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
TORCH_PYTHON = "3.11"  # the tested torch (ci/constraints.txt) is installed for this version
CONSTRAINTS = ("-c", str(ROOT / "ci" / "constraints.txt"))
CORE = "./packages/core"
TORCH = "./packages/engine-torch"
TESTBUFFER = "./packages/engine-testbuffer"
CONTRACTS = "./contracts"
DISTRIBUTED = "./packages/distributed"
REPORTS = ROOT / "docs" / "contracts"


def _report(session: nox.Session, engine: str) -> str:
    """Where a contract run writes its worst roundings (docs/contracts/ on 3.11, else tmp)."""
    name = f"{engine.replace(':', '-')}.json"
    if session.python == TORCH_PYTHON:
        REPORTS.mkdir(parents=True, exist_ok=True)
        return str(REPORTS / name)
    return os.path.join(session.create_tmp(), name)


def _contracts(session: nox.Session, engine: str) -> None:
    session.run(
        "pytest",
        "--pyargs",
        "deepsharp.contracts",
        "--engine",
        engine,
        "--contracts-report",
        _report(session, engine),
        "-q",
    )


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The core's tests (light engine) and the test engine's on every Python, with the contracts
    on the light engine. On 3.11 also the contract suite's own tests (it catches planted faults)
    and the contracts at every other CPU precision: light:float32, the test engine, the mixed
    ones. The default matrix must stay within 20 minutes on CI's 2 cores, so what does not
    change with the Python version runs on one."""
    once = session.python == TORCH_PYTHON
    # The optional companions (pandas rows, plots, other safetensors readers, Parquet files)
    # on one version.
    extras = ["pandas", "matplotlib", "safetensors", "pyarrow"] if once else []
    session.install(
        *CONSTRAINTS,
        "pytest",
        "pytest-xdist",
        "hypothesis",
        "tqdm",
        *extras,
        CORE,
        TESTBUFFER,
        CONTRACTS,
    )
    pytest = ("pytest", "-q", "-m", "not slow")
    session.run(
        *pytest,
        "-n",
        "2",
        "packages/core/tests",
        "packages/engine-testbuffer/tests",
        *session.posargs,
    )
    if once:
        # Not in parallel: its two long fixtures run the whole suite on a sound engine, once.
        session.run(*pytest, "contracts/tests", *session.posargs)
    more = ("light:float32", "testbuffer", "light:mixed_bfloat16", "light:mixed_float16")
    for engine in ("light", *(more if once else ())):
        _contracts(session, engine)


@nox.session(python=TORCH_PYTHON)
def memory(session: nox.Session) -> None:
    """The long memory checks: 2,000 convolution steps on the test engine hold their bytes."""
    session.install(*CONSTRAINTS, "pytest", "hypothesis", CORE, TESTBUFFER, CONTRACTS)
    session.run("pytest", "packages/core/tests", "-q", "-m", "slow", *session.posargs)


@nox.session(python="3.10")
def oldest(session: nox.Session) -> None:
    """The core's tests under the oldest NumPy deepsharp supports (1.26): the same bits."""
    session.install("numpy==1.26.4", "pytest", "pytest-xdist", "hypothesis", CORE, CONTRACTS)
    session.run(
        "pytest",
        "packages/core/tests",
        "-q",
        "-n",
        "2",
        "-m",
        "not slow",
        "-k",
        "not docs",
        *session.posargs,
    )


@nox.session(python=TORCH_PYTHON)
def torch(session: nox.Session) -> None:
    """The torch engine's tests, the memory tests on it, and the contracts on torch:cpu (float32,
    strict and mixed_bfloat16)."""
    session.install(*CONSTRAINTS, "torch", "pytest", "hypothesis", CORE, TORCH, CONTRACTS)
    session.run(
        "pytest",
        "packages/engine-torch/tests",
        "packages/core/tests/test_memory.py",
        "-q",
        *session.posargs,
    )
    _contracts(session, "torch:cpu")
    _contracts(session, "torch:cpu:strict")
    _contracts(session, "torch:cpu:mixed_bfloat16")


@nox.session(python=TORCH_PYTHON)
def cuda(session: nox.Session) -> None:
    """The contracts and the torch engine's tests on torch:cuda:0, where a card is usable."""
    session.install(*CONSTRAINTS, "torch")
    probe = "import torch; print('cards=%d' % (torch.cuda.device_count() if torch.cuda.is_available() else 0))"
    said = session.run("python", "-c", probe, silent=True)
    found = re.search(r"cards=(\d+)", said if isinstance(said, str) else "")
    if found is None or int(found.group(1)) == 0:
        session.skip(
            "no NVIDIA card is usable from this session's torch "
            f"(its probe: {found.group(0) if found else repr(said)[-300:]}): the CUDA checks did not run"
        )
    session.install(*CONSTRAINTS, "pytest", "hypothesis", CORE, TORCH, CONTRACTS)
    session.run("pytest", "packages/engine-torch/tests", "-q", env={"DEEPSHARP_TEST_CUDA": "1"})
    _contracts(session, "torch:cuda:0")
    _contracts(session, "torch:cuda:0:strict")


@nox.session(python=TORCH_PYTHON)
def lint(session: nox.Session) -> None:
    """ruff over everything; mypy --strict over every distribution."""
    session.install(*CONSTRAINTS, "ruff", "mypy", "numpy", "pytest", "hypothesis")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run(
        "mypy",
        "-p",
        "deepsharp.core",
        "-p",
        "deepsharp.engines.light",
        "-p",
        "deepsharp.engines.testbuffer",
        "-p",
        "deepsharp.engines.torch",
        "-p",
        "deepsharp.contracts",
        "-p",
        "deepsharp.distributed",
    )


@nox.session(python=TORCH_PYTHON)
def distributed(session: nox.Session) -> None:
    """Data-parallel training on gloo: jobs of 1, 2 and 3 processes through `launch` (the ordered
    sum bit for bit, the gradient bound, failing ranks ending the job; the Titanic sample through
    fit at 2 and 3 processes, twice, resumed and refused), and docs/distributed.md's scripts by
    hand and under `torchrun --standalone --nproc-per-node 2`. About 80 s of tests."""
    session.install(
        *CONSTRAINTS, "torch", "pytest", "hypothesis", CORE, TESTBUFFER, TORCH, DISTRIBUTED
    )
    session.run("pytest", "packages/distributed/tests", "-q", *session.posargs)
    # A scanned file's run over 2 and 3 processes (one of the core's streaming tests).
    session.run("pytest", "packages/core/tests/test_streaming.py", "-q", "-k", "several_processes")


@nox.session(python=TORCH_PYTHON)
def smoke(session: nox.Session) -> None:
    """Build every wheel with hatch; install them into fresh environments, without and with torch."""
    session.install("hatch")
    session.run("python", "ci/smoke.py", "--constraints", CONSTRAINTS[1], external=False)


@nox.session(python=TORCH_PYTHON)
def benchmarks(session: nox.Session) -> None:
    """Seed workloads on every engine beside plain PyTorch, serving, and mixed precision beside
    PyTorch's autocast: the ratios asserted (benchmarks/results/steps.json), then
    docs/performance.md written from the results."""
    _benchmarks(session, "not scaling", "nox -s benchmarks")


@nox.session(python=TORCH_PYTHON, default=False)
def scaling(session: nox.Session) -> None:
    """How cost grows with the work, per engine beside PyTorch (benchmarks/results/scaling.json),
    then docs/performance.md written from the results."""
    _benchmarks(session, "scaling", "nox -s scaling")


def _benchmarks(session: nox.Session, marks: str, command: str) -> None:
    session.install(*CONSTRAINTS, "torch", "pytest", "threadpoolctl", CORE, TESTBUFFER, TORCH)
    env = {"DEEPSHARP_BENCHMARK_COMMAND": command}
    session.run("pytest", "benchmarks", "-q", "-rfEx", "-m", marks, *session.posargs, env=env)
    session.run("python", "benchmarks/performance_doc.py")


@nox.session(python=TORCH_PYTHON)
def samples(session: nox.Session) -> None:
    """The samples from the command line, as a user runs them."""
    session.install(*CONSTRAINTS, CORE)
    session.run("deepsharp", "sample", "titanic")
    session.run("deepsharp", "sample", "digits")
    session.run("deepsharp", "doctor")


@nox.session(python=TORCH_PYTHON, default=False)
def fuzz(session: nox.Session) -> None:
    """The long fuzz run (docs/reliability.md): 100,000 mutated files through the three loaders
    (`nox -s fuzz -- 1000000` for more), every bit of a trained file, the paths that are no file,
    every number of the metadata made hostile, and 20,000 damaged Parquet files scanned."""
    session.install(*CONSTRAINTS, "pyarrow", CORE)
    fuzzer = "packages/core/tests/fuzz_files.py"
    files = session.posargs[0] if session.posargs else "100000"
    summary = os.path.join(session.create_tmp(), "fuzz.json")
    session.run("python", fuzzer, "--special")
    session.run("python", fuzzer, "--flips", "--every-bit")
    session.run("python", fuzzer, "--numbers")
    session.run("python", fuzzer, "--files", files, "--seed", "1", "--json", summary)
    parquet = os.path.join(session.create_tmp(), "parquet.json")
    session.run(
        "python",
        "packages/core/tests/fuzz_parquet.py",
        "--files",
        "20000",
        "--seed",
        "1",
        "--json",
        parquet,
    )


@nox.session(python=TORCH_PYTHON, default=False)
def dev(session: nox.Session) -> None:
    """A .venv with every package installed editable, and the tools: `nox -s dev`."""
    session.run("python", "-m", "venv", ".venv")
    pip = str(ROOT / ".venv" / "bin" / "pip")
    session.run(
        pip,
        "install",
        *CONSTRAINTS,
        "torch",
        "pytest",
        "hypothesis",
        "pytest-benchmark",
        "ruff",
        "mypy",
        "nox",
        "tqdm",
        "matplotlib",
        "pyarrow",
        "-e",
        CORE,
        "-e",
        TESTBUFFER,
        "-e",
        TORCH,
        "-e",
        CONTRACTS,
        "-e",
        DISTRIBUTED,
        external=True,
    )
    session.log("ready: source .venv/bin/activate")
