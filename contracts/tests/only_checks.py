"""A pytest plugin for the runs of broken engines (`-p only_checks`): an engine named in the JSON
file that DEEPSHARP_CONTRACTS_ONLY points at runs only the checks listed for it there (as
`module::test`, every case of each, or `module`, every check of it); engines it does not name run
every check collected. A broken
engine then runs the checks of the modules its fault is meant to show in, not the whole suite."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ONLY = "DEEPSHARP_CONTRACTS_ONLY"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    path = os.environ.get(ONLY)
    if not path:
        return
    only: dict[str, list[str]] = json.loads(Path(path).read_text(encoding="utf-8"))
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        spec = callspec.params.get("engine_spec") if callspec is not None else None
        checks = only.get(spec) if isinstance(spec, str) else None
        module = getattr(getattr(item, "module", None), "__name__", "").rsplit(".", 1)[-1]
        check = f"{module}::{item.name.partition('[')[0]}"
        (kept if checks is None or check in checks or module in checks else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
