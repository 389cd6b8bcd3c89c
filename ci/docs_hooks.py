"""mkdocs hooks of the documentation site (mkdocs.yml): every public name has a docstring.

A public name is one a distribution's top-level package lists in `__all__`. Each one without a
docstring is a warning, which `mkdocs build --strict` (`nox -s docs`) turns into a failure: the
API reference never shows a bare signature where a user looks for what a name is.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import griffe

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "deepsharp.core": "packages/core/src",
    "deepsharp.engines.light": "packages/core/src",
    "deepsharp.engines.onnx": "packages/core/src",
    "deepsharp.sklearn": "packages/core/src",
    "deepsharp.engines.torch": "packages/engine-torch/src",
    "deepsharp.engines.testbuffer": "packages/engine-testbuffer/src",
    "deepsharp.distributed": "packages/distributed/src",
    "deepsharp.contracts": "contracts/src",
}
"""Each distribution's public packages, and the source folder each lies in."""

log = logging.getLogger("mkdocs.plugins.deepsharp")


def undocumented() -> list[str]:
    """The public names (and public packages) that have no docstring, by their full name."""
    paths = sorted({ROOT / folder for folder in PACKAGES.values()})
    loader = griffe.GriffeLoader(search_paths=paths)
    modules = {name: loader.load(name) for name in PACKAGES}
    loader.resolve_aliases(implicit=False, external=False)
    missing: list[str] = []
    for package, module in modules.items():
        if not module.docstring:
            missing.append(package)
        for name in sorted(str(export) for export in module.exports or ()):
            member = module[name]
            target = member.final_target if member.is_alias else member
            if not target.docstring and not target.is_attribute:
                missing.append(f"{package}.{name}")
    return missing


def on_pre_build(config: Any) -> None:
    for name in undocumented():
        log.warning(
            f"{name} is public (in its package's __all__) but has no docstring: say "
            "what it is in the user's words"
        )
