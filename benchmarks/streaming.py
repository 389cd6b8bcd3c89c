"""Figures for data larger than memory (docs/streaming.md quotes them), each measured in a fresh
process so that one measurement's memory never counts in another's:

    python benchmarks/streaming.py memory   # peak memory: fit on 5,000,000 Parquet rows vs 100,000
    python benchmarks/streaming.py serving  # peak memory: deepsharp predict on 10,000,000 CSV rows vs 100,000
    python benchmarks/streaming.py speed    # rows a second: fit streaming vs in memory, the same rows

`--rows`, `--small`, `--epochs`, `--rounds` and `--folder` change the sizes and where the
generated files go (they are deleted afterwards); `--out FILE` writes the figures as JSON. Every
file is made by deepsharp.core.samples.passengers (Titanic-shaped rows), and every run trains
titanic.pipeline() and titanic.network() with Adam(0.001) on the light engine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from deepsharp.core.cli_arguments import at_least_one

MIB = 1 << 20

_PEAK = """
def peak():  # this process's own peak (getrusage's ru_maxrss keeps the parent's across exec)
    status = open("/proc/self/status").read()
    return int(status.split("VmHWM:")[1].split()[0]) * 1024
"""

_FIT = (
    _PEAK
    + """
import json, sys, time
from deepsharp.core import *
from deepsharp.core.samples import titanic
how, path, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
began = time.perf_counter()
if how == "memory":
    data = read_csv(path)
elif path.endswith(".parquet"):
    data = scan_parquet(path)
else:
    data = scan_csv(path)
run = fit(titanic.pipeline(), data, titanic.network(), BinaryCrossEntropy(), Adam(0.001),
          FitOptions(seed=1, epochs=epochs, patience=epochs, progress=False))
history = run.report.history
print(json.dumps({
    "seconds": time.perf_counter() - began,
    "epoch_seconds": [r.seconds for r in history],
    "test_rows": run.report.test_rows,
    "accuracy": run.report.measures["accuracy"],
    "peak": peak(),
}))
"""
)

_PREDICT = (
    _PEAK
    + """
import json, sys, time
from deepsharp.core.cli import main
began = time.perf_counter()
code = main(["predict", *sys.argv[1:]])
print(json.dumps({"code": code, "seconds": time.perf_counter() - began, "peak": peak()}))
"""
)


def _python(code: str, *arguments: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", code, *arguments], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _generate(path: Path, rows: int) -> float:
    from deepsharp.core.samples import passengers

    began = time.perf_counter()
    if path.suffix == ".parquet":
        passengers.write_parquet(path, rows)
    else:
        passengers.write_csv(path, rows)
    return time.perf_counter() - began


def memory(folder: Path, rows: int, small: int, epochs: int) -> dict[str, Any]:
    """Peak memory of fit on `rows` Parquet rows against `small` rows."""
    out: dict[str, Any] = {}
    for name, count in (("small", small), ("large", rows)):
        path = folder / f"{name}.parquet"
        _generate(path, count)
        out[name] = {"rows": count, **_python(_FIT, "stream", str(path), str(epochs))}
        path.unlink()
    out["ratio"] = out["large"]["peak"] / out["small"]["peak"]
    return out


def serving(folder: Path, rows: int, small: int) -> dict[str, Any]:
    """Peak memory of `deepsharp predict FILE ROWS.csv --output OUT` at two sizes (the
    command's main, run in a fresh process)."""
    trained = folder / "titanic.safetensors"
    _python(
        "import sys, json\nfrom deepsharp.core.samples import titanic\n"
        "titanic.run(progress=False).trained.save(sys.argv[1]); print('{}')",
        str(trained),
    )
    out: dict[str, Any] = {}
    for name, count in (("small", small), ("large", rows)):
        path, answers = folder / f"{name}.csv", folder / f"{name}-answers.csv"
        _generate(path, count)
        out[name] = {
            "rows": count,
            **_python(_PREDICT, str(trained), str(path), "--output", str(answers)),
        }
        path.unlink()
        answers.unlink()
    out["ratio"] = out["large"]["peak"] / out["small"]["peak"]
    return out


def speed(folder: Path, rows: int, epochs: int, rounds: int) -> dict[str, Any]:
    """Training rows a second of the epochs, and whole runs' seconds (reading included):
    streaming from CSV and from Parquet against read_csv's rows in memory, interleaved round
    by round, the best round of each."""
    files = {"csv": folder / "rows.csv", "parquet": folder / "rows.parquet"}
    _generate(files["csv"], rows)
    try:
        _generate(files["parquet"], rows)
    except ImportError:
        del files["parquet"]
    ways = [("memory", files["csv"]), ("stream csv", files["csv"])]
    if "parquet" in files:
        ways.append(("stream parquet", files["parquet"]))
    best: dict[str, dict[str, Any]] = {}
    for _ in range(rounds):
        for name, path in ways:
            how = "memory" if name == "memory" else "stream"
            got = _python(_FIT, how, str(path), str(epochs))
            training = round(rows * 0.70)  # in memory, exactly; streaming, in expectation
            got["epoch_rows_per_second"] = training * epochs / sum(got.pop("epoch_seconds"))
            kept = best.get(name)
            if kept is None or got["epoch_rows_per_second"] > kept["epoch_rows_per_second"]:
                best[name] = got
    for path in files.values():
        path.unlink()
    memory_rate = best["memory"]["epoch_rows_per_second"]
    for name in best:
        best[name]["slower_than_memory"] = memory_rate / best[name]["epoch_rows_per_second"]
    return {"rows": rows, "epochs": epochs, "rounds": rounds, **best}


def _machine() -> dict[str, Any]:
    import numpy

    return {
        "machine": platform.machine(),
        "processors": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "date": time.strftime("%Y-%m-%d"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["memory", "serving", "speed", "all"])
    parser.add_argument("--rows", type=at_least_one, help="the large file's rows")
    parser.add_argument("--small", type=at_least_one, default=100_000, help="the small file's rows")
    parser.add_argument("--epochs", type=at_least_one, default=2)
    parser.add_argument("--rounds", type=at_least_one, default=3)
    parser.add_argument("--folder", default=None, help="where the generated files go")
    parser.add_argument("--out", default=None, help="write the figures as JSON to this file")
    arguments = parser.parse_args()
    figures: dict[str, Any] = {"machine": _machine()}
    with tempfile.TemporaryDirectory(dir=arguments.folder) as name:
        folder = Path(name)
        if arguments.what in ("memory", "all"):
            figures["memory"] = memory(
                folder, arguments.rows or 5_000_000, arguments.small, arguments.epochs
            )
        if arguments.what in ("serving", "all"):
            figures["serving"] = serving(folder, arguments.rows or 10_000_000, arguments.small)
        if arguments.what in ("speed", "all"):
            figures["speed"] = speed(
                folder, arguments.rows or 200_000, arguments.epochs, arguments.rounds
            )
    text = json.dumps(figures, indent=2)
    print(text)
    if arguments.out:
        Path(arguments.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
