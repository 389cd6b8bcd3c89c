"""The check that a test run leaves the checkout as it found it (ci/tree.py), on real checkouts."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from types import ModuleType

import pytest


def _tree() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tree", Path(__file__).with_name("tree.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tree = _tree()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git checkout with two committed files and an ignored folder."""

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "performance.md").write_text("figures\n")
    (tmp_path / "README.md").write_text("readme\n")
    (tmp_path / ".gitignore").write_text("dist/\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start")
    return tmp_path


def test_a_run_that_writes_nothing_changes_nothing(checkout: Path) -> None:
    before = tree.snapshot(checkout)
    assert before == {}
    assert tree.changed(before, tree.snapshot(checkout)) == []


def test_a_rewritten_tracked_file_is_named(checkout: Path) -> None:
    before = tree.snapshot(checkout)
    (checkout / "docs" / "performance.md").write_text("the machine's figures\n")
    assert tree.changed(before, tree.snapshot(checkout)) == ["docs/performance.md"]


def test_a_new_file_git_does_not_ignore_is_named_and_an_ignored_one_is_not(
    checkout: Path,
) -> None:
    before = tree.snapshot(checkout)
    (checkout / "dist").mkdir()
    (checkout / "dist" / "deepsharp-0.1.0.whl").write_bytes(b"wheel")
    (checkout / "docs" / "contracts").mkdir()
    (checkout / "docs" / "contracts" / "light.json").write_text("{}")
    assert tree.changed(before, tree.snapshot(checkout)) == ["docs/contracts/light.json"]


def test_an_edit_made_before_the_run_counts_only_when_the_run_changes_it_again(
    checkout: Path,
) -> None:
    (checkout / "README.md").write_text("a developer's edit\n")
    before = tree.snapshot(checkout)
    assert list(before) == ["README.md"]
    assert tree.changed(before, tree.snapshot(checkout)) == []
    (checkout / "README.md").write_text("rewritten by the run\n")
    assert tree.changed(before, tree.snapshot(checkout)) == ["README.md"]


def test_a_deleted_tracked_file_is_named(checkout: Path) -> None:
    before = tree.snapshot(checkout)
    (checkout / "README.md").unlink()
    assert tree.changed(before, tree.snapshot(checkout)) == ["README.md"]


def test_a_folder_that_is_no_checkout_gives_no_snapshot(tmp_path: Path) -> None:
    assert tree.snapshot(tmp_path / "nowhere") is None
