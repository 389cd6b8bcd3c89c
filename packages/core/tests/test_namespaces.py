"""The top levels a user browses hold their public API and nothing else: no submodules in
dir(), no `annotations` from a `from __future__` import, every name of __all__ there."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

PACKAGES = [
    "deepsharp.core",
    "deepsharp.distributed",
    "deepsharp.engines.light",
    "deepsharp.engines.onnx",
    "deepsharp.engines.torch",
    "deepsharp.engines.testbuffer",
    "deepsharp.sklearn",
]


def _package(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError:  # pragma: no cover - a package not installed here
        pytest.skip(f"{name} is not installed")


@pytest.mark.parametrize("name", PACKAGES)
def test_no_future_import_leaks_into_a_top_level(name: str) -> None:
    package = _package(name)
    assert "annotations" not in dir(package)
    assert "annotations" not in getattr(package, "__all__", [])
    assert all(hasattr(package, public) for public in package.__all__)


@pytest.mark.parametrize("name", ["deepsharp.core", "deepsharp.distributed", "deepsharp.sklearn"])
def test_dir_of_a_top_level_is_its_public_api(name: str) -> None:
    package = _package(name)
    public = [n for n in dir(package) if not n.startswith("_")]
    assert public == sorted(n for n in package.__all__ if not n.startswith("_"))
    assert not any(isinstance(getattr(package, n), ModuleType) for n in public)


def test_the_submodules_stay_importable() -> None:
    import deepsharp.core

    assert deepsharp.core.engine.make_engine is deepsharp.core.make_engine
    from deepsharp.core.training.trainer import Trainer

    assert Trainer is deepsharp.core.Trainer
