"""The layout: one folder a concern, no import cycle, a top level that is the user's API."""

from __future__ import annotations

import ast
from pathlib import Path

import deepsharp.core

SOURCE = Path(deepsharp.core.__file__).resolve().parent


def _imports() -> dict[str, set[str]]:
    """Each core module's imports of other core modules, at import time (not TYPE_CHECKING)."""
    found: dict[str, set[str]] = {}
    for path in SOURCE.rglob("*.py"):
        parts = path.relative_to(SOURCE.parent).with_suffix("").parts
        kept = parts[:-1] if parts[-1] == "__init__" else parts
        name = ".".join(("deepsharp", *kept))
        wanted: set[str] = set()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "deepsharp.core"
            ):
                wanted.add(node.module or "")
                wanted.update(f"{node.module}.{alias.name}" for alias in node.names)
        found[name] = wanted
    return {name: wanted & set(found) for name, wanted in found.items()}


def test_no_core_module_imports_one_that_imports_it_back() -> None:
    graph = _imports()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        for other in graph.get(module, set()):
            if other == module:
                continue  # a package importing its own modules
            assert other not in path, " -> ".join([*path, other])
            if other not in done:
                visit(other, [*path, other])
        done.add(module)

    for module in graph:
        visit(module, [module])


def test_the_folders_are_the_architecture() -> None:
    folders = {p.name for p in SOURCE.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert {"engine", "autodiff", "nn", "data", "training", "samples"} <= folders
    data = {p.stem for p in (SOURCE / "data").glob("*.py")}
    assert {"sources", "values", "columns", "pipeline"} <= data


def test_the_top_level_exports_the_user_s_api_only() -> None:
    exported = set(deepsharp.core.__all__)
    assert not exported & {"Pass", "Counters", "Streams", "heap_policy"}
    assert {"fit", "FitOptions", "Trainer", "Callback", "Pipeline", "Softmax"} <= exported
    from deepsharp.core.engine import Counters  # noqa: F401  (still importable where it lives)
    from deepsharp.core.engine.memory import heap_policy  # noqa: F401
    from deepsharp.core.nn.layers import Pass  # noqa: F401
    from deepsharp.core.random import Streams  # noqa: F401
