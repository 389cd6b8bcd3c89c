"""Drawing into image files (needs matplotlib: `deepsharp[plot]`), for `Report.plot`,
`Comparison.plot` and the command line's `--plot`.

A figure is drawn on a `matplotlib.figure.Figure` of its own, never through pyplot: the
caller's backend (a notebook's) is left as it was. The file is the path given, checked before
anything is drawn: not a folder, of a kind matplotlib draws (`.png`, `.pdf`, `.svg`, ...), a name
without a kind drawn as PNG under that very name.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["image_kind", "new_figure"]


def image_kind(path: str | os.PathLike[str], where: str) -> str:
    """The format `path` is drawn in (its suffix, or "png" where it has none): IsADirectoryError
    for a folder, FileNotFoundError (NotADirectoryError) where the folder it names is missing
    (a file), ValueError naming the kinds matplotlib draws for another suffix, ImportError
    without matplotlib, each saying `where`."""
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise ImportError(f"{where} needs matplotlib: pip install 'deepsharp[plot]'") from None
    if Path(path).is_dir():
        raise IsADirectoryError(f"{where}: {os.fspath(path)!r} is a folder; give a file name")
    folder = Path(path).parent
    if not folder.exists():
        raise FileNotFoundError(
            f"{where}: {os.fspath(path)!r}: there is no folder {os.fspath(folder)!r}; make it "
            "first (os.makedirs) or name a file in one that is"
        )
    if not folder.is_dir():
        raise NotADirectoryError(
            f"{where}: {os.fspath(path)!r}: {os.fspath(folder)!r} is not a folder"
        )
    kinds = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(path).suffix.lower().lstrip(".")
    if not suffix:
        return "png"
    if suffix not in kinds:
        raise ValueError(
            f"{where}: {os.fspath(path)!r}: matplotlib draws no .{suffix} files; name one of "
            + ", ".join(f".{kind}" for kind in sorted(kinds))
        )
    return suffix


def new_figure(**settings: Any) -> Any:
    """A matplotlib Figure of its own (no pyplot, no backend switched)."""
    from matplotlib.figure import Figure

    return Figure(**settings)
