"""What a run changed in the checkout: a snapshot of `git status` before, compared after.

The README's test command (`nox`) must leave a checkout as it found it: no tracked file
rewritten, no new file that git does not ignore. The noxfile takes a snapshot when nox starts
and its last session (`clean`) compares. A file already changed before the run counts only when
the run changed it again, so a developer's uncommitted edits do not fail the check.

    python ci/tree.py    # the checkout's changed and untracked files now, with their digests
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

__all__ = ["changed", "snapshot"]

Snapshot = dict[str, str]
"""A path (relative to the checkout's root) that git reports, with its content's digest."""


def snapshot(root: Path) -> Snapshot | None:
    """Every path `git status` reports in the checkout at `root` (changed, deleted, untracked and
    not ignored), each with the SHA-256 of its content ("deleted" where it is gone); None where
    `root` is not a git checkout or git is missing (a tarball, an sdist)."""
    try:
        said = subprocess.run(
            ["git", "status", "--porcelain=v1", "-z", "--untracked-files=all"],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    found: Snapshot = {}
    entries = said.split(b"\0")
    index = 0
    while index < len(entries):
        entry = entries[index].decode("utf-8", "surrogateescape")
        index += 1
        if len(entry) < 4:
            continue
        status, path = entry[:2], entry[3:]
        if "R" in status or "C" in status:
            index += 1  # a rename or copy is followed by the path it came from
        found[path] = _digest(root / path)
    return found


def changed(before: Snapshot, after: Snapshot) -> list[str]:
    """The paths whose state the run changed: reported now and not before, or reported both
    times with other contents; and those reported before that the run put back as committed."""
    moved = [path for path, digest in after.items() if before.get(path) != digest]
    restored = [path for path in before if path not in after]
    return sorted(moved + restored)


def _digest(path: Path) -> str:
    if path.is_dir():  # an untracked folder's files are listed one by one; a submodule here
        return "folder"
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return "deleted"


if __name__ == "__main__":
    now = snapshot(Path.cwd())
    if now is None:
        sys.exit("not a git checkout (or git is missing)")
    for path, digest in sorted(now.items()):
        print(digest[:12], path)
