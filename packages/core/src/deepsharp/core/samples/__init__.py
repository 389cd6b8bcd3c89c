"""Samples that ship with deepsharp, data included (nothing is downloaded): `titanic`, `digits`,
`resnet` (the digits through a residual network), `spam` and `shakespeare`."""

from importlib.resources import files
from pathlib import Path

__all__ = ["data_path"]


def data_path(name: str) -> Path:
    """Where a shipped data file lies inside the installed package."""
    return Path(str(files("deepsharp.core.samples") / "data" / name))
