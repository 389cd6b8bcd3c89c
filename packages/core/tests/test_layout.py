"""The layout: one folder a concern, no import cycle, a top level that is the user's API.

The import graph is read from the sources of every distribution in the checkout (parsed, not
imported: torch need not be installed), and counts every import a module makes — at its top
and inside its functions alike: an import moved into a function still runs, so a circle it
closes is a circle. Only imports for the type checker (`if TYPE_CHECKING:`) are left out.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

import deepsharp.core

SOURCE = Path(deepsharp.core.__file__).resolve().parent
ROOT = Path(__file__).resolve().parents[3]  # the checkout (the core may be installed elsewhere)
SOURCES = tuple(
    sorted(
        [*(ROOT / "packages").glob("*/src/deepsharp"), *(ROOT / "contracts").glob("src/deepsharp")]
    )
)


def _module_name(path: Path) -> str:
    top = next(parent for parent in path.parents if parent.name == "deepsharp")
    parts = path.relative_to(top.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _typing_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imported(tree: ast.Module) -> set[str]:
    """Every module name an import in `tree` may load (a name imported from a package may be
    one of its modules), wherever the import stands, except under `if TYPE_CHECKING:`."""
    found: set[str] = set()
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if _typing_only(node):
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        pending.extend(ast.iter_child_nodes(node))
    return found


@functools.cache
def import_graph(folders: tuple[Path, ...]) -> dict[str, set[str]]:
    """Each deepsharp module of `folders` -> the deepsharp modules it imports (any of them)."""
    found = {
        _module_name(path): _imported(ast.parse(path.read_text(encoding="utf-8")))
        for folder in folders
        for path in folder.rglob("*.py")
    }
    return {name: {other for other in wanted if other in found} for name, wanted in found.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of `graph`, each as a path that comes back to where it started. A
    package importing its own modules is no circle (its `__init__` gathers them)."""

    def inside(module: str, package: str) -> bool:
        return module.startswith(f"{package}.")

    found: list[list[str]] = []
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        for other in sorted(graph.get(module, set())):
            if other == module or inside(other, module):
                continue
            if other in path:
                found.append([*path[path.index(other) :], other])
                continue
            if other not in done:
                visit(other, [*path, other])
        done.add(module)

    for module in sorted(graph):
        visit(module, [module])
    return found


def test_the_sources_of_every_distribution_are_read() -> None:
    names = {folder.parents[1].name for folder in SOURCES}
    assert {"core", "distributed", "engine-torch", "engine-testbuffer", "contracts"} <= names
    graph = import_graph(SOURCES)
    assert "deepsharp.distributed.job" in graph and "deepsharp.core.training.loop" in graph


def test_imports_inside_functions_count() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from a import typed\n"
        "def f():\n    from b import later\n    import c.d\n"
    )
    assert _imported(tree) == {"typing", "typing.TYPE_CHECKING", "b", "b.later", "c.d"}


def test_a_circle_closed_inside_a_function_is_found() -> None:
    graph = {"x.a": {"x.b"}, "x.b": {"x.c"}, "x.c": {"x.a"}, "x": {"x.a"}}
    assert circles(graph) == [["x.a", "x.b", "x.c", "x.a"]]


@pytest.mark.parametrize("folder", SOURCES, ids=lambda folder: folder.parents[1].name)
def test_no_module_imports_one_that_imports_it_back(folder: Path) -> None:
    """Within a distribution and across them (each graph holds every distribution's modules)."""
    graph = import_graph(SOURCES)
    ours = {_module_name(path) for path in folder.rglob("*.py")}
    found = [circle for circle in circles(graph) if circle[0] in ours]
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


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
