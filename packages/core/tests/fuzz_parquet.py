"""A fuzzer of scan_parquet: damaged copies of Parquet files, each scanned whole and its rows
turned into features.

It writes a few Parquet files (the passengers' columns, and columns of every kind a scan
converts, under several compressions), then scans mutated copies of them: cut short, bytes and
bits changed, runs of bytes zeroed or made random, the footer's length lying, bytes deleted,
appended or repeated. Every copy must be read whole (its rows, the pipeline's features), or
refused with FileFormatError (a damaged file) or DataError (rows the pipeline cannot take);
any other exception is a failure. Each copy is read in a child process that a watchdog ends
when one copy takes longer than `--seconds` (a hang), under a memory limit (a MemoryError is
a failure too), and the peak memory is reported.

    python packages/core/tests/fuzz_parquet.py --files 20000 --seed 1 --json parquet.json

test_scan.py runs a CI-sized share; `nox -s fuzz` the long run (docs/reliability.md).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import select
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

FAMILIES = {
    "truncate": 8,
    "flip byte": 12,
    "flip bit": 12,
    "zero run": 6,
    "random run": 6,
    "footer length": 4,
    "footer byte": 12,
    "delete byte": 4,
    "append": 2,
    "repeat run": 3,
}


# --- the originals -------------------------------------------------------------------------


def make_originals(folder: Path) -> dict[str, bytes]:
    """Parquet files to damage: the passengers (dictionary-encoded text, several row groups,
    snappy), and columns of every kind a scan converts under gzip, zstd and no compression."""
    import pyarrow as arrow
    import pyarrow.parquet as parquet

    from deepsharp.core.samples import passengers

    made: dict[str, bytes] = {}
    passengers.write_parquet(folder / "passengers.parquet", 300, seed=1, row_group_rows=100)
    made["passengers"] = (folder / "passengers.parquet").read_bytes()
    table = arrow.table(
        {
            "whole": arrow.array([1, None, 3, 4, -5, 6] * 10, arrow.int64()),
            "small": arrow.array([1, 2, None, 4, 5, 6] * 10, arrow.int8()),
            "real": arrow.array([0.5, 1.5, None, 2.5, -1.0, 1e30] * 10),
            "text": arrow.array(["a", None, "c", "dé", "e", "f"] * 10).dictionary_encode(),
            "plain": arrow.array(["x", "y", None, "z", "ü", "w"] * 10),
            "yes": arrow.array([True, None, False, True, False, True] * 10),
            "money": arrow.array([1, 2, 3, None, 5, 6] * 10, arrow.decimal128(5, 2)),
        }
    )
    for compression in ("gzip", "zstd", "none"):
        path = folder / f"kinds-{compression}.parquet"
        parquet.write_table(table, path, row_group_size=25, compression=compression)
        made[f"kinds ({compression})"] = path.read_bytes()
    return made


# --- mutations -----------------------------------------------------------------------------


def mutate(rng: random.Random, data: bytes) -> tuple[str, str, bytes]:
    """One damaged copy of `data`: (its family, what was done, the bytes)."""
    family = rng.choices(list(FAMILIES), weights=list(FAMILIES.values()))[0]
    size = len(data)
    footer = int.from_bytes(data[-8:-4], "little")  # the footer's length, before "PAR1"
    footer_start = max(4, size - 8 - footer)
    if family == "truncate":
        at = rng.choice([rng.randrange(size), rng.randrange(max(1, size - 64), size)])
        return family, f"truncate at {at}", data[:at]
    if family == "flip byte":
        at = rng.randrange(size)
        value = (data[at] + rng.randrange(1, 256)) % 256
        return family, f"byte {at} = {value}", data[:at] + bytes([value]) + data[at + 1 :]
    if family == "flip bit":
        at, bit = rng.randrange(size), rng.randrange(8)
        changed = data[:at] + bytes([data[at] ^ (1 << bit)]) + data[at + 1 :]
        return family, f"bit {bit} of byte {at}", changed
    if family in ("zero run", "random run"):
        at = rng.randrange(size)
        length = min(size - at, rng.choice([2, 8, 64, 512]))
        filler = bytes(length) if family == "zero run" else rng.randbytes(length)
        return family, f"{family} of {length} at {at}", data[:at] + filler + data[at + length :]
    if family == "footer length":
        value = rng.choice([0, 1, footer - 1, footer + 1, size, size + 100, 2**31, 2**32 - 1])
        value %= 2**32
        changed = data[:-8] + value.to_bytes(4, "little") + data[-4:]
        return family, f"footer length = {value}", changed
    if family == "footer byte":
        at = rng.randrange(footer_start, size - 8)
        value = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        return family, f"footer byte {at} = {value}", data[:at] + bytes([value]) + data[at + 1 :]
    if family == "delete byte":
        at = rng.randrange(size)
        return family, f"delete byte {at}", data[:at] + data[at + 1 :]
    if family == "append":
        extra = rng.randbytes(rng.randrange(1, 65))
        return family, f"append {len(extra)} bytes", data + extra
    at = rng.randrange(size)
    length = min(size - at, rng.choice([4, 16, 128]))
    return family, f"repeat {length} at {at}", data[: at + length] + data[at:]


# --- one child process: copies read one after another, each reported as it ends -----------


def _where(error: BaseException) -> str:
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if "deepsharp" in frame.filename and "/tests/" not in frame.filename
    ]
    if not frames:
        return "?"
    frame = frames[-1]
    return f"{frame.filename.split('deepsharp/core/')[-1]}:{frame.lineno} in {frame.name}"


def _status(field: str) -> float:
    try:
        with open("/proc/self/status") as lines:
            return next(int(line.split()[1]) / 1024 for line in lines if line.startswith(field))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def read_copy(path: Path, passengers: bool) -> str:
    """Scan the copy whole and make its features: what happened (raises what is not ours)."""
    from deepsharp.core import DataError, FileFormatError, scan_parquet
    from deepsharp.core.samples import titanic

    try:
        scan = scan_parquet(path, read_rows=37)
        parts = list(scan.parts())
        if passengers:
            pipeline = titanic.pipeline()
            learning = pipeline.learning(scan.names)
            for part in parts:
                learning.add(part)
            learning.finish()
            for part in parts:
                pipeline.features(part)
    except FileFormatError:
        return "refused (FileFormatError)"
    except DataError:
        return "read, then its rows refused (DataError)"
    return "read whole"


def child(folder: Path, seed: int, start: int, stop: int, memory_mib: int) -> None:
    """Read copies `start` to `stop` of the run of `seed`, one JSON line each on stdout."""
    warnings.simplefilter("ignore")  # what pyarrow or NumPy says of damaged values
    originals = make_originals(folder)
    rng = random.Random(seed)
    names = list(originals)
    target = folder / "damaged.parquet"
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (mapped + (memory_mib << 20), resource.RLIM_INFINITY))
    read_copy(folder / "passengers.parquet", True)  # imports and first calls are not a copy's
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        pass
    baseline = _status("VmRSS:")
    for index in range(stop):
        name = rng.choice(names)
        family, what, data = mutate(rng, originals[name])
        if index < start:
            continue
        target.write_bytes(data)
        record: dict[str, Any] = {"index": index, "file": name, "family": family, "what": what}
        began = time.perf_counter()
        try:
            record["outcome"] = read_copy(target, name == "passengers")
        except Exception as error:  # any other exception is what this hunts
            record["outcome"] = "failed"
            record["error"] = type(error).__name__
            record["message"] = str(error)[:200]
            record["where"] = _where(error)
        record["seconds"] = round(time.perf_counter() - began, 4)
        record["growth_mib"] = round(_status("VmHWM:") - baseline, 1)
        print(json.dumps(record), flush=True)


# --- the run: children, a watchdog, a census ------------------------------------------------


def run(files: int, seed: int, seconds: float, memory_mib: int) -> dict[str, Any]:
    """Read `files` damaged copies in child processes; a copy that takes longer than
    `seconds` is a hang (its child is ended and the next one goes on after it)."""
    outcomes: Counter[str] = Counter()
    families: Counter[str] = Counter()
    failures: list[dict[str, Any]] = []
    slowest, growth, started = 0.0, 0.0, time.perf_counter()
    index = 0
    with tempfile.TemporaryDirectory() as folder:
        while index < files:
            command = [
                sys.executable,
                __file__,
                "--child",
                folder,
                str(seed),
                str(index),
                str(files),
                str(memory_mib),
            ]
            process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
            assert process.stdout is not None
            deadline = time.monotonic() + seconds + 60  # the child's start: originals, imports
            while index < files:
                ready, _, _ = select.select(
                    [process.stdout], [], [], max(0.0, deadline - time.monotonic())
                )
                line = process.stdout.readline() if ready else ""
                if not line:
                    break
                record = json.loads(line)
                index = record["index"] + 1
                deadline = time.monotonic() + seconds
                families[record["family"]] += 1
                outcomes[record["outcome"]] += 1
                slowest = max(slowest, record["seconds"])
                growth = max(growth, record["growth_mib"])
                if record["outcome"] == "failed":
                    failures.append(record)
            if index < files:  # the child stopped answering or died: that copy is a failure
                process.kill()
                process.wait()
                hung = time.monotonic() >= deadline
                failures.append(
                    {
                        "index": index,
                        "outcome": "failed",
                        "error": "hang" if hung else f"child exited {process.returncode}",
                        "message": f"copy {index} of seed {seed}",
                        "where": "?",
                    }
                )
                outcomes["failed"] += 1
                index += 1
            else:
                process.wait()
    return {
        "files": files,
        "seed": seed,
        "seconds": round(time.perf_counter() - started, 1),
        "slowest_copy_seconds": slowest,
        "peak_rss_growth_mib": growth,
        "outcomes": dict(outcomes),
        "mutations": dict(sorted(families.items())),
        "failures": failures,
    }


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        folder, seed, start, stop, memory = sys.argv[2:7]
        child(Path(folder), int(seed), int(start), int(stop), int(memory))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=30, help="a copy slower is a hang")
    parser.add_argument("--memory-limit", type=int, default=1024, metavar="MIB")
    parser.add_argument("--json", metavar="FILE", help="write the summary as JSON to FILE")
    arguments = parser.parse_args()
    summary = run(arguments.files, arguments.seed, arguments.seconds, arguments.memory_limit)
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(summary, indent=1))
    failures = summary.pop("failures")
    print(json.dumps(summary, indent=1))
    kinds = Counter(f"{f['error']} at {f['where']}" for f in failures)
    for kind, count in kinds.most_common():
        print(f"{count:>7}  {kind}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
