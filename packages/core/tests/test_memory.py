"""The CPU engines keep a step's freed memory in the heap (`deepsharp.core.engine.memory`).

Each case runs in a fresh interpreter: glibc's limits are the whole process's and move with
what it did before, so only a new process shows what making an engine does to them. The torch
engine's cases run in the nox `torch` session, which runs this file too.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap

import pytest

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# Six steps to settle (the heap reaches its size in one to four: which thread frees what
# first moves it), then the page faults of each of nine more, of which the median is read
# (the benchmarks' large convolution step: 22 MB activations, which glibc otherwise gives
# back to the system at each step's end, so that without the policy every step faults).
# The median, not the mean: on a loaded CI machine one late step still grew an arena of a
# torch thread (a mean of 1,662 pages over three steps, 0 on each step here).
_STEPS = textwrap.dedent(
    """
    import json, resource, sys
    import numpy as np
    from deepsharp.core import Adam, Conv2D, CrossEntropy, Dense, Flatten, Network, Relu, Trainer
    from deepsharp.core import make_engine
    from deepsharp.core.engine.memory import heap_policy

    engine = make_engine(sys.argv[1])
    network = Network([Conv2D(32, 3), Relu(), Flatten(), Dense(10)], inputs=(1, 28, 28))
    trainer = Trainer(network, CrossEntropy(), Adam(0.001), engine=engine, seed=0)
    rng = np.random.default_rng(0)
    images = rng.random((256, 1, 28, 28)).astype(np.float32)
    classes = rng.integers(0, 10, 256)
    for _ in range(6):
        trainer.step(images.copy(), classes.copy())
    faults = []
    for _ in range(9):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        trainer.step(images.copy(), classes.copy())
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    print(json.dumps({"policy": heap_policy(), "faults": sorted(faults)[4], "each": faults}))
    """
)


def _run(spec: str = "light", **environment: str) -> dict[str, object]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("MALLOC_")
        and key not in ("GLIBC_TUNABLES", "DEEPSHARP_KEEP_FREED_MEMORY")
    }
    env.update(environment)
    done = subprocess.run(
        [sys.executable, "-c", _STEPS, spec],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc is what the engines tune")
@pytest.mark.parametrize("spec", ["light", "light:float32", "torch:cpu", "torch:cpu:strict"])
def test_a_step_faults_no_memory_in_once_the_engine_is_made(spec: str) -> None:
    if spec.startswith("torch"):  # run in the nox `torch` session
        pytest.importorskip("torch")
        pytest.importorskip("deepsharp.engines.torch")
    result = _run(spec)
    assert str(result["policy"]).startswith("kept:"), result
    # Without the policy a fresh process faulted, every step, 10,784 pages on torch:cpu
    # (float32), 0 to 16,192 on torch:cpu:strict, 2,503 to 3,014 on light; with it, none,
    # except under NumPy 1.26: its OpenBLAS (0.3.23) maps a buffer of its own for the
    # products each step, outside malloc, 703 faults a step on light:float32 either way.
    assert float(str(result["faults"])) < 1000, result


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc is what the engines tune")
def test_the_application_can_leave_malloc_alone() -> None:
    result = _run(DEEPSHARP_KEEP_FREED_MEMORY="0")
    assert result["policy"] == "left as the process has it: DEEPSHARP_KEEP_FREED_MEMORY=0"
    # What the check above reads is there to read: left alone, glibc gives the step's
    # memory back and takes it again every step (2,173 pages a step here, NumPy 1.26 or 2).
    assert float(str(result["faults"])) > 1000, result


@pytest.mark.once  # the C library's malloc, the same on every Python
@pytest.mark.skipif(not GLIBC, reason="glibc's malloc is what the engines tune")
def test_malloc_limits_the_application_set_are_kept() -> None:
    result = _run(MALLOC_TRIM_THRESHOLD_="1048576")
    assert result["policy"] == "left as the application set it (MALLOC_TRIM_THRESHOLD_)"
    result = _run(GLIBC_TUNABLES="glibc.malloc.trim_threshold=1048576")
    assert result["policy"] == "left as the application set it (GLIBC_TUNABLES)"


def test_nothing_is_changed_before_an_engine_is_made() -> None:
    code = "from deepsharp.core.engine.memory import heap_policy; print(heap_policy())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "None"
