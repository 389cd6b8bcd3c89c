"""Fixtures of the core's tests; their helpers live in core_helpers.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def titanic_rows() -> list[dict[str, str | None]]:
    from deepsharp.core.samples import titanic

    return titanic.rows()
