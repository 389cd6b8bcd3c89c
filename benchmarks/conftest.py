"""The benchmarks' pytest hooks; their helpers live in bench_support.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from bench_support import summary, write_results


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "scaling: how cost grows with the work (nox -s scaling, not the default run)"
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = summary()
    if lines:
        terminalreporter.section("benchmark figures (median of interleaved rounds)")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for path in write_results():
        print(f"\nbenchmarks: figures written to {path}")
