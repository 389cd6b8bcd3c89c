"""The benchmarks' pytest hooks; their helpers live in bench_support.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from bench_support import write_results


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    write_results()
