"""Every check deepsharp has, as nox sessions. `nox` runs the default matrix; `nox -l` lists it.

Python versions come from pyenv: PYENV_VERSION=3.11.7:3.10.13:3.12.1:3.13.0 makes all four
visible (.ci/run sets it). Where one is missing its sessions are skipped, saying so, except in
CI (the CI variable set), where that is an error. Installs are pinned by ci/constraints.txt, so no session can pull an
unpinned torch.

A run leaves the checkout as it found it (the last session, `clean`, checks): the figures a
session measures go to its temporary folder, and only `-- --publish` writes them into the
published files (`nox -s benchmarks -- --publish`: benchmarks/results and docs/performance.md;
`nox -s tests-3.11 torch -- --publish`: docs/contracts/*.json and docs/contracts.md's tables).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

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
DIST = ROOT / "dist"  # the wheels and sdists `nox -s wheels` builds (git-ignored)
PUBLISH = "--publish"
ONNX = ("onnx", "onnxruntime")  # the extra deepsharp[onnx]: export, and the onnx engine
# Two pytest workers on CI's two cores: one BLAS thread each. At the default (a thread a core
# each) four threads spin over two cores, and a product of 32 rows takes milliseconds, not
# microseconds (a short transformer run took 6x as long).
ONE_THREAD_EACH = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _ci_module(name: str) -> ModuleType:
    """A helper script of ci/ as a module (ci/ is no package)."""
    spec = importlib.util.spec_from_file_location(f"ci_{name}", ROOT / "ci" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TREE = _ci_module("tree")
BEFORE = TREE.snapshot(ROOT)  # the checkout as nox found it; `clean` compares at the end


def _publishing(session: nox.Session) -> tuple[bool, list[str]]:
    """Whether the session was asked to write its figures into the published files
    (`nox -s NAME -- --publish`), and the rest of its arguments (for pytest)."""
    rest = [argument for argument in session.posargs if argument != PUBLISH]
    return len(rest) < len(session.posargs), rest


def _report(session: nox.Session, engine: str, publish: bool) -> str:
    """Where a contract run writes its worst roundings: docs/contracts/ when publishing (on
    3.11, the versions the docs quote), else the session's temporary folder."""
    name = f"{engine.replace(':', '-')}.json"
    if publish and session.python == TORCH_PYTHON:
        REPORTS.mkdir(parents=True, exist_ok=True)
        return str(REPORTS / name)
    return os.path.join(session.create_tmp(), name)


def _contracts(session: nox.Session, engines: Sequence[str], publish: bool) -> None:
    """The contract suite on the engines, in one run over two workers (a run of several engines
    fills both cores where one engine's run would wait on its longest check); each engine's
    report is then written apart, as a run on that engine alone writes it."""
    combined = Path(session.create_tmp()) / "contracts.json"
    session.run(
        "pytest",
        "--pyargs",
        "deepsharp.contracts",
        *(f"--engine={engine}" for engine in engines),
        "--contracts-report",
        str(combined),
        "-q",
        "-n",
        "2",
        env=ONE_THREAD_EACH,
    )
    if not combined.exists():  # nox --install-only: nothing ran
        return
    report = json.loads(combined.read_text(encoding="utf-8"))
    for engine in engines:
        one = {**report, "engines": {engine: report["engines"][engine]}}
        Path(_report(session, engine, publish)).write_text(
            json.dumps(one, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )


def _contracts_table(session: nox.Session, publish: bool) -> None:
    """docs/contracts.md's tables from the published reports, when publishing."""
    if publish and session.python == TORCH_PYTHON:
        session.run("python", "ci/contracts_table.py")


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The core's tests (light engine) and the test engine's on every Python, with the contracts
    on the light engine: 3.10 under the oldest NumPy deepsharp supports (1.26, pinned there by
    ci/constraints.txt), the others under the newest. On 3.11 also the contract suite's own
    tests (it catches planted faults) and the contracts at every other CPU precision:
    light:float32, the test engine, the mixed ones. The default matrix must stay within 20
    minutes on CI's 2 cores, so what does not change with the Python version runs on one
    (`once`: the samples' runs, the fuzzers' thousands of files, the long memory, crash and
    peak-memory checks). `-- --publish` on 3.11
    writes the contract reports into docs/contracts/ and docs/contracts.md's tables from them."""
    once = session.python == TORCH_PYTHON
    publish, posargs = _publishing(session)
    # The optional companions (pandas rows, plots, other safetensors readers, Parquet files,
    # scikit-learn and its estimator checks, ONNX export and onnxruntime) on one version.
    extras = (
        ["pandas", "matplotlib", "safetensors", "pyarrow", "scikit-learn", *ONNX] if once else []
    )
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
    pytest = ("pytest", "-q")
    session.run(
        *(pytest if once else ("pytest", "-q", "-m", "not once")),
        "-n",
        "2",
        "packages/core/tests",
        "packages/engine-testbuffer/tests",
        *posargs,
        env=ONE_THREAD_EACH,
    )
    if once:
        # Each module's long fixture (the whole suite run on its engines) once, on one worker:
        # modules are dealt out whole (--dist loadfile).
        session.run(
            *pytest,
            "-n",
            "2",
            "--dist",
            "loadfile",
            "contracts/tests",
            *posargs,
            env=ONE_THREAD_EACH,
        )
        session.run(*pytest, "ci/test_tree.py", *posargs)  # the check `clean` makes
    # onnx: every ONNX form the exporter writes, run by onnxruntime (docs/export.md).
    more = ("light:float32", "testbuffer", "light:mixed_bfloat16", "light:mixed_float16", "onnx")
    _contracts(session, ("light", *(more if once else ())), publish)
    _contracts_table(session, publish)


@nox.session(python=TORCH_PYTHON)
def torch(session: nox.Session) -> None:
    """The torch engine's tests, the memory tests on it, data-parallel training on gloo (the
    `distributed` session's tests: one install of torch for both) and the contracts on
    torch:cpu (float32, strict and mixed_bfloat16); `-- --publish` writes their reports into
    docs/contracts/."""
    publish, posargs = _publishing(session)
    # The test engine too: the compiled-step tests borrow the core's harness, which imports it.
    session.install(
        *CONSTRAINTS,
        "torch",
        "pytest",
        "pytest-xdist",
        "hypothesis",
        CORE,
        TORCH,
        TESTBUFFER,
        CONTRACTS,
        DISTRIBUTED,
    )
    session.run(
        "pytest",
        "packages/engine-torch/tests",
        "packages/core/tests/test_memory.py",
        *DISTRIBUTED_TESTS,
        "-q",
        "-n",
        "2",
        *posargs,
        env=ONE_THREAD_EACH,
    )
    _contracts(session, ("torch:cpu", "torch:cpu:strict", "torch:cpu:mixed_bfloat16"), publish)
    _contracts_table(session, publish)


def _nvidia_driver() -> bool:
    """Whether an NVIDIA driver is here to ask (then torch's own probe says whether a card is
    usable): told before installing torch, twenty seconds of CI's 20 minutes where none is."""
    return bool(shutil.which("nvidia-smi")) or any(Path("/dev").glob("nvidia[0-9]*"))


@nox.session(python=TORCH_PYTHON)
def cuda(session: nox.Session) -> None:
    """The contracts and the torch engine's tests on torch:cuda:0, where a card is usable
    (`-- --publish` writes their reports into docs/contracts/)."""
    publish, _ = _publishing(session)
    if not _nvidia_driver():
        session.skip(
            "no NVIDIA driver on this machine (no /dev/nvidia* device, no nvidia-smi): "
            "the CUDA checks did not run"
        )
    session.install(*CONSTRAINTS, "torch")
    probe = "import torch; print('cards=%d' % (torch.cuda.device_count() if torch.cuda.is_available() else 0))"
    said = session.run("python", "-c", probe, silent=True)
    found = re.search(r"cards=(\d+)", said if isinstance(said, str) else "")
    if found is None or int(found.group(1)) == 0:
        session.skip(
            "no NVIDIA card is usable from this session's torch "
            f"(its probe: {found.group(0) if found else repr(said)[-300:]}): the CUDA checks did not run"
        )
    session.install(*CONSTRAINTS, "pytest", "pytest-xdist", "hypothesis", CORE, TORCH, CONTRACTS)
    session.run("pytest", "packages/engine-torch/tests", "-q", env={"DEEPSHARP_TEST_CUDA": "1"})
    _contracts(session, ("torch:cuda:0", "torch:cuda:0:strict"), publish)
    _contracts_table(session, publish)


@nox.session(python=TORCH_PYTHON)
def lint(session: nox.Session) -> None:
    """ruff over everything; mypy --strict over every distribution."""
    session.install(*CONSTRAINTS, "ruff", "mypy", "numpy", "threadpoolctl", "pytest", "hypothesis")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run(
        "mypy",
        "-p",
        "deepsharp.core",
        "-p",
        "deepsharp.engines.light",
        "-p",
        "deepsharp.engines.onnx",
        "-p",
        "deepsharp.engines.testbuffer",
        "-p",
        "deepsharp.engines.torch",
        "-p",
        "deepsharp.contracts",
        "-p",
        "deepsharp.distributed",
        "-p",
        "deepsharp.sklearn",
    )


DISTRIBUTED_TESTS = (
    "packages/distributed/tests",
    "packages/core/tests/test_streaming.py::"
    "test_a_streaming_run_on_several_processes_is_the_one_process_run",
)
"""Data-parallel training's tests: the default matrix runs them in the `torch` session."""


@nox.session(python=TORCH_PYTHON, default=False)
def distributed(session: nox.Session) -> None:
    """Data-parallel training on gloo alone (the default matrix runs these in `torch`): jobs of
    1, 2 and 3 processes through `launch` (the ordered sum bit for bit, the gradient bound,
    failing ranks ending the job; the Titanic sample through fit at 2 and 3 processes, twice,
    resumed and refused), docs/distributed.md's scripts by hand and under `torchrun
    --standalone --nproc-per-node 2`, and a scanned file's run over 2 and 3 processes. Over two
    pytest workers: a job's processes spend much of their time starting and meeting."""
    session.install(
        *CONSTRAINTS,
        "torch",
        "pytest",
        "pytest-xdist",
        "hypothesis",
        CORE,
        TESTBUFFER,
        TORCH,
        DISTRIBUTED,
    )
    session.run("pytest", *DISTRIBUTED_TESTS, "-q", "-n", "2", *session.posargs)


@nox.session(python=TORCH_PYTHON)
def docs(session: nox.Session) -> None:
    """The documentation site: the guides of docs/ and the API reference (mkdocs, the material
    theme, mkdocstrings), built into site/ (git-ignored) with --strict: a broken link or anchor,
    a page left out of the nav, or a public name without a docstring (ci/docs_hooks.py) fails."""
    session.install(
        *CONSTRAINTS,
        "mkdocs",
        "mkdocs-material",
        "mkdocstrings",
        "mkdocstrings-python",
        "griffelib",
        "ruff",  # mkdocstrings formats the signatures with it
    )
    session.run("mkdocs", "build", "--strict", env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session(python=TORCH_PYTHON)
def wheels(session: nox.Session) -> None:
    """The five distributions' wheels and sdists built into dist/ (git-ignored), each wheel from
    its sdist, checked by twine, of one version and pinned to each other (ci/wheels.py): then
    `pip install --find-links dist deepsharp deepsharp-engine-torch` installs by name."""
    session.install(*CONSTRAINTS, "build", "twine")
    session.run("python", "ci/wheels.py", "--out", str(DIST))


@nox.session(python=TORCH_PYTHON, requires=["wheels"])
def smoke(session: nox.Session) -> None:
    """The wheels in dist/ installed by name into fresh environments, without and with torch."""
    session.run(
        "python",
        "ci/smoke.py",
        "--constraints",
        CONSTRAINTS[1],
        "--dist",
        str(DIST),
        external=False,
    )


@nox.session(python=TORCH_PYTHON)
def benchmarks(session: nox.Session) -> None:
    """Seed workloads on every engine beside plain PyTorch, serving, and mixed precision beside
    PyTorch's autocast: the ratios asserted, and the page of figures written from the results
    (into the session's temporary folder; `-- --publish`: benchmarks/results/steps.json and
    docs/performance.md)."""
    _benchmarks(session, "not scaling", "benchmarks")


@nox.session(python=TORCH_PYTHON, default=False)
def scaling(session: nox.Session) -> None:
    """How cost grows with the work, per engine beside PyTorch, and the page of figures written
    from the results (`-- --publish`: benchmarks/results/scaling.json and docs/performance.md)."""
    _benchmarks(session, "scaling", "scaling")


@nox.session(python=TORCH_PYTHON, default=False)
def profiles(session: nox.Session) -> None:
    """Where the time goes for each goal of the benchmarks: the engine's step profiled beside
    PyTorch eager's (Python calls, engine calls, kernels' time and what is outside them, the top
    operations), then the page written (into the session's temporary folder; `-- --publish`:
    benchmarks/results/profiles.json and docs/performance.md). A few minutes on 2 cores."""
    publish, posargs = _publishing(session)
    session.install(
        *CONSTRAINTS, "torch", "pytest", "threadpoolctl", *ONNX, CORE, TESTBUFFER, TORCH
    )
    published = ROOT / "benchmarks" / "results"
    if publish:
        results, page = published, ROOT / "docs" / "performance.md"
    else:
        results = Path(session.create_tmp()) / "results"
        shutil.rmtree(results, ignore_errors=True)
        shutil.copytree(published, results)
        page = results / "performance.md"
    session.run(
        "python", "benchmarks/profile_steps.py", "--out", str(results / "profiles.json"), *posargs
    )
    session.run(
        "python", "benchmarks/performance_doc.py", "--results", str(results), "--out", str(page)
    )


def _benchmarks(session: nox.Session, marks: str, name: str) -> None:
    publish, posargs = _publishing(session)
    # onnxruntime's figures (the onnx engine's steps, serving an exported file) are published,
    # not asserted: the guard run leaves them out, half a minute of CI's 20.
    measured_only = ONNX if publish or name != "benchmarks" else ()
    session.install(
        *CONSTRAINTS, "torch", "pytest", "threadpoolctl", *measured_only, CORE, TESTBUFFER, TORCH
    )
    published = ROOT / "benchmarks" / "results"
    if publish:
        results, page = published, ROOT / "docs" / "performance.md"
    else:  # a copy of the published results, so that the page shows what publishing would
        results = Path(session.create_tmp()) / "results"
        shutil.rmtree(results, ignore_errors=True)
        shutil.copytree(published, results)
        page = results / "performance.md"
    command = f"nox -s {name} -- {PUBLISH}"
    env = {
        "DEEPSHARP_BENCHMARK_COMMAND": command,
        "DEEPSHARP_BENCHMARK_RESULTS": str(results),
        # torch.compile beside PyTorch eager where the page is published (or asked for): its
        # compiles take a minute the default matrix does not have.
        "DEEPSHARP_BENCHMARK_COMPILE": "1"
        if publish
        else os.environ.get("DEEPSHARP_BENCHMARK_COMPILE", "0"),
    }
    if not publish and name == "benchmarks":
        # The guard run: 5 interleaved rounds a comparison (the median still stands past two
        # odd ones) instead of the published 7 to 11, a minute less of CI's 20.
        env["DEEPSHARP_BENCHMARK_ROUNDS"] = os.environ.get("DEEPSHARP_BENCHMARK_ROUNDS", "5")
    session.run("pytest", "benchmarks", "-q", "-rfEx", "-m", marks, *posargs, env=env)
    session.run(
        "python", "benchmarks/performance_doc.py", "--results", str(results), "--out", str(page)
    )
    if not publish:
        session.log(f"figures in {results} (published by `{command}`)")


@nox.session(python=TORCH_PYTHON)
def samples(session: nox.Session) -> None:
    """The README's main job (the Titanic sample), a short Shakespeare run writing its text, and
    the doctor, from the command line as a user runs them."""
    session.install(*CONSTRAINTS, CORE)
    session.run("deepsharp", "sample", "titanic")  # the README's main job
    # (digits, spam and resnet: their commands run in tests-3.11, `once`; their full runs:
    # nox -s figures)
    session.run("deepsharp", "sample", "shakespeare", "--steps", "10", "--engine", "light:float32")
    session.run("deepsharp", "doctor")


@nox.session(python=TORCH_PYTHON, default=False)
def figures(session: nox.Session) -> None:
    """The samples' full runs held to their published figures (ci/sample_figures.py: the
    residual sample and spam on light and torch:cpu, Shakespeare's 3,000 steps on torch:cpu;
    about 20 minutes on 2 cores). `nox -s figures -- resnet:light` runs one."""
    session.install(*CONSTRAINTS, "torch", CORE, TORCH)
    session.run("python", "ci/sample_figures.py", *session.posargs, env=ONE_THREAD_EACH)


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
        "scikit-learn",
        *ONNX,
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


# Keep this session last: nox runs the default sessions in the order they are defined here.
@nox.session(python=False)
def clean(session: nox.Session) -> None:
    """The run left the checkout as it found it: no tracked file rewritten, no new file that git
    does not ignore (ci/tree.py; edits made before the run count only where the run changed
    them again). Published figures have their own command: `-- --publish`."""
    if BEFORE is None:
        session.skip("not a git checkout (or git is missing): nothing to compare")
    after = TREE.snapshot(ROOT)
    changes = TREE.changed(BEFORE, after) if after is not None else ["(git status failed)"]
    if changes:
        session.error(
            f"the run changed {len(changes)} file(s) of the checkout: {', '.join(changes)}. "
            "A test run writes only into .nox/ and the temporary folders; figures are "
            f"published on purpose (`nox -s benchmarks -- {PUBLISH}`, "
            f"`nox -s tests-3.11 torch -- {PUBLISH}`)"
        )
    session.log("the checkout is as nox found it")
