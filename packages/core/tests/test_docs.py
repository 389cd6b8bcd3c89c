"""Docs are examples that run: every ```python block of docs/*.md, in order, one namespace a page."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[3] / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
README = DOCS.parent / "README.md"
EVERY_PAGE = ([README] if README.exists() else []) + (
    sorted(DOCS.glob("*.md")) if DOCS.is_dir() else []
)
PAGES = [page for page in EVERY_PAGE if "```python" in page.read_text(encoding="utf-8")]


def _needs(code: str) -> list[str]:
    """A block may start with `# needs: torch, matplotlib` to run only where those are installed."""
    first = code.splitlines()[0] if code.strip() else ""
    match = re.match(r"#\s*needs:\s*(.*)", first)
    return [name.strip() for name in match.group(1).split(",")] if match else []


def _installed(name: str) -> bool:
    """Whether a module (dotted names too: `deepsharp.engines.torch`) can be imported here."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_the_page_s_examples_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = BLOCK.findall(page.read_text(encoding="utf-8"))
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for number, code in enumerate(blocks, start=1):
        if any(not _installed(name) for name in _needs(code)):
            continue  # the blocks after it still run: a block that needs one names nothing later ones use
        try:
            exec(compile(code, f"{page.name} (example {number})", "exec"), namespace)
        except Exception as error:  # name the page and block, keep the cause
            raise AssertionError(f"{page.name}, example {number} failed: {error!r}") from error


def test_the_docs_folder_is_found() -> None:
    assert PAGES, f"no docs at {DOCS} (cwd {os.getcwd()})"
