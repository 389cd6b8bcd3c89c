"""This distribution's dependencies, its siblings among them pinned to its own version.

A hatch metadata hook (`[tool.hatch.metadata.hooks.custom]` in pyproject.toml): the version is
the core's, read from packages/core/src/deepsharp/core/version.py, the one place it is written
(from an sdist, from its PKG-INFO); each sibling named in `siblings` is required at a compatible
release of it (`deepsharp~=0.1.0`: 0.1.0 or any later 0.1.x), after the `dependencies` listed.
The same file in every distribution but the core (ci/wheels.py checks they agree).
"""

from __future__ import annotations

from typing import Any

from hatchling.metadata.plugin.interface import MetadataHookInterface


class SiblingPins(MetadataHookInterface):
    """The dependencies listed in the hook's settings, then `sibling~=version` for each sibling."""

    def update(self, metadata: dict[str, Any]) -> None:
        version = metadata["version"]
        listed = list(self.config.get("dependencies", []))
        siblings = [f"{name}~={version}" for name in self.config.get("siblings", [])]
        metadata["dependencies"] = [*listed, *siblings]
