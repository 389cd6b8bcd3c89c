"""`deepsharp doctor`: the engines installed, and for each whether it can be made here, what it
says of itself, and the precisions it offers."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from deepsharp.core.engine import (
    EngineDescription,
    available_engines,
    describe_engine,
    make_engine,
)
from deepsharp.core.engine.registry import ENGINE_PACKAGES
from deepsharp.core.errors import DeepSharpError
from deepsharp.core.version import __version__

__all__ = ["doctor"]


def doctor() -> int:
    """Print what each installed engine says and can do here; 0 if one is usable, else 1."""
    print(f"deepsharp {__version__} on Python {sys.version.split()[0]}")
    names = available_engines()
    print(f"engines installed: {', '.join(names) or 'none'}")
    usable = 0
    for name in names:
        try:
            description = describe_engine(name)
        except DeepSharpError as error:
            print(f"  {name:<12} not usable: {error}")
            continue
        usable += _engine(description)
    lacking = [name for name in SHIPPED if name not in names]
    if lacking:  # (said where every engine was installed too: trial D)
        print(f"  not installed: {', '.join(lacking)}; {ENGINE_PACKAGES}")
    return 0 if usable else 1


SHIPPED = ("light", "onnx", "torch", "testbuffer")
"""The engines deepsharp ships (the core's two, and the two of their own packages)."""


def _engine(description: EngineDescription) -> int:
    """Print what one engine says of itself and whether it can be made here: 1 if it can."""
    spec = description.default_spec
    stated = "not stated by its entry point"
    try:
        engine = make_engine(spec)
    except DeepSharpError as error:
        made = 0
        print(f"  {spec:<12} not usable: {error}")
        if description.install and description.doctor is None:  # else its lines advise
            print(f"  {'':<12} to use it, install {description.install}")
    else:
        made = 1
        stated += f" (its identity says {engine.identity.precision})"
        print(f"  {spec:<12} usable: {engine.identity}")
    precisions, refused = [], []
    for i, precision in enumerate(description.precisions):
        spec_at = description.spec_with(precision)
        if not made and description.specs and spec_at not in description.specs:
            # a precision the default device does not offer: the spec the engine gives for it
            spec_at = next((s for s in description.specs if s.endswith(f":{precision}")), spec_at)
        if made and i:  # where the engine is usable, only the precisions it makes here are listed
            try:
                make_engine(spec_at)
            except DeepSharpError as error:
                refused.append(f"{precision} ({spec_at}: {error})")
                continue
        precisions.append(f"{precision} ({spec_at}{', default' if i == 0 else ''})")
    # An engine that cannot be made here offers none of them yet: said apart, so that no one
    # reads them as specs to use.
    label = "precisions:" if made else "precisions once usable:"
    print(f"  {'':<12} {label} {', '.join(precisions) or stated}")
    for line in refused:
        print(f"  {'':<12} not here: {line}")
    lines: Sequence[str] = []
    if description.doctor is not None:
        try:
            lines = description.doctor()
        except Exception as error:  # what an engine says of itself never stops the doctor
            lines = [f"{description.name}: asking what it runs on failed: {error!r}"]
    for line in lines:
        print(f"  {'':<12} {line}")
    return made
