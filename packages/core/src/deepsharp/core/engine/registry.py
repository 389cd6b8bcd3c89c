"""The engines installed here, each describing itself through its entry point; engines from specs.

An installed engine registers an `EngineDescription` under the entry-point group
`deepsharp.engines` (its name -> the description), so the core, its command line and the
contract suite know what it offers without naming it:

```toml
[project.entry-points."deepsharp.engines"]
mine = "my_package.engine:DESCRIPTION"
```

A spec names an engine: `NAME` or `NAME:OPTION` for an installed one (the description's `make`
gets OPTION, '' when there is none; by convention the last part of OPTION may be a precision:
`torch:cuda:0:strict`), or `module:factory` for any importable factory that returns an engine.
The installed engines are read once a process (`rescan_engines()` reads them again).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from deepsharp.core.engine.precision import PRECISIONS
from deepsharp.core.engine.protocol import Engine
from deepsharp.core.errors import EngineUnavailableError

__all__ = [
    "default_engine",
    "EngineDescription",
    "available_engines",
    "check_spec",
    "describe_engine",
    "make_engine",
    "rescan_engines",
    "split_precision",
]

DEFAULT_SPEC = "light"
"""What `make_engine(None)` makes: the engine that ships with the core."""

RENAMED = {"float32-totals": "float32"}
"""Old spec parts and the precision that took their place."""


@dataclass(frozen=True)
class EngineDescription:
    """What an engine says of itself through its entry point (group `deepsharp.engines`).

    - `name`: the spec's first part (`torch`), the entry point's name.
    - `make(option) -> Engine`: an engine from what follows `name:` in a spec ('' when nothing
      does). It raises `EngineUnavailableError` saying why and what to install where it cannot.
    - `default_spec`: the spec to make when none is named (doctor, the contract suite, the
      benchmarks): one that works wherever the engine is usable (`torch:cpu`, not a card).
    - `precisions`: the precisions it offers (names from `deepsharp.core.engine.precision`),
      its default first; `spec_with(precision)` gives the default spec at another. Empty when
      not stated (an entry point that names only a factory): its engines' identities say.
    - `specs`: the spec strings it takes, as examples for messages and help.
    - `install`: what to install when it is installed but cannot be made (a library build).
    - `doctor`: lines `deepsharp doctor` prints about what the engine runs on (a library's
      version and build, cards found); called only by doctor, and never expected to raise.
    """

    name: str
    make: Callable[[str], Engine]
    default_spec: str
    precisions: tuple[str, ...] = ()
    specs: tuple[str, ...] = ()
    install: str = ""
    doctor: Callable[[], Sequence[str]] | None = None

    def spec_with(self, precision: str) -> str:
        """The default spec at `precision` (by convention the spec's last part)."""
        if precision not in self.precisions:
            raise EngineUnavailableError(
                f"the {self.name} engine does not offer the precision {precision!r}: it offers "
                f"{', '.join(self.precisions)}"
            )
        if precision == self.precisions[0]:
            return self.default_spec
        return f"{self.default_spec}:{precision}"


_scanned: dict[str, EntryPoint] | None = None
_ENGINE_TYPES: set[type] = set()
_described: dict[str, EngineDescription] = {}


def _registered() -> dict[str, EntryPoint]:
    global _scanned
    if _scanned is None:
        _scanned = {point.name: point for point in entry_points(group="deepsharp.engines")}
    return _scanned


def rescan_engines() -> None:
    """Read the installed engines again (after installing or removing one in this process)."""
    global _scanned
    _scanned = None
    _described.clear()


def available_engines() -> list[str]:
    """The names of the engines installed here (their `deepsharp.engines` entry points)."""
    return sorted(_registered())


ENGINE_PACKAGES = (
    "the engines other than light and onnx (the core's, with deepsharp[onnx]) come in their "
    "own packages, not published on a package index: in a checkout of deepsharp, nox -s wheels builds them into dist/, then pip install "
    "--find-links dist deepsharp-engine-torch (the torch engine) or deepsharp-engine-testbuffer "
    "(the test engine); or from the folders, pip install ./packages/engine-torch or "
    "./packages/engine-testbuffer; docs/install.md lists them"
)
"""Where engines come from, for messages (`deepsharp doctor`'s last line too)."""


CARD_NAMES = frozenset({"cuda", "gpu", "cuda:0", "nvidia"})
"""Names PyTorch's users give a card (`device="cuda"`): the torch engine's spec is offered."""


def _not_installed(name: str) -> str:
    installed = available_engines()
    close = difflib.get_close_matches(name, installed, n=3, cutoff=0.6)
    lowered = [known for known in installed if known == name.strip().lower() and known != name]
    card = ["torch:cuda:0"] if name.strip().lower() in CARD_NAMES else []  # PyTorch's habit
    close = list(dict.fromkeys([*card, *lowered, *close]))
    guess = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else "."
    return (
        f"no engine named {name!r} is installed here (installed: "
        f"{', '.join(installed) or 'none'}){guess} For another engine: {ENGINE_PACKAGES}"
    )


def describe_engine(name: str) -> EngineDescription:
    """The description the installed engine `name` gives of itself; `EngineUnavailableError`
    where none is installed by that name or its entry point cannot be loaded."""
    found = _described.get(name)
    if found is not None:
        return found
    point = _registered().get(name)
    if point is None:
        raise EngineUnavailableError(_not_installed(name))
    try:
        loaded = point.load()
    except Exception as error:  # a broken install: say which, never fail the caller's import
        raise EngineUnavailableError(
            f"the {name} engine is installed but its entry point {point.value!r} cannot be "
            f"loaded: {type(error).__name__}: {error}"
        ) from error
    if isinstance(loaded, EngineDescription):
        description = loaded
    elif callable(loaded):  # an entry point naming only a factory of specs: from_spec(option)
        description = EngineDescription(name, loaded, name)
    else:
        raise EngineUnavailableError(
            f"the {name} engine's entry point {point.value!r} gives {type(loaded).__name__}, "
            "not an EngineDescription (deepsharp.core.engine.registry)"
        )
    _described[name] = description
    return description


def split_precision(name: str, option: str, offered: Sequence[str]) -> tuple[str, str]:
    """A spec's option split into what precedes its precision and the precision, for the
    engine `name` that offers `offered` (its default first): `cuda:0:strict` -> (`cuda:0`,
    `strict`); `cpu` -> (`cpu`, the default). A precision the engine does not offer, an old
    name (`float32-totals`), or a last part close to a precision's name (`strcit`), is refused
    with EngineUnavailableError naming what to write."""
    head, _, last = option.rpartition(":")
    word = last.strip().lower()
    place = f"{name}:{head}:" if head else f"{name}:"
    if word in RENAMED:
        new = RENAMED[word]
        default = f" (or {place.rstrip(':')}, its default)" if offered and offered[0] == new else ""
        raise EngineUnavailableError(
            f"the spec {name}:{option} names {word!r}, which is now the precision {new!r}: "
            f"use {place}{new}{default}"
        )
    if word not in PRECISIONS:
        close = difflib.get_close_matches(word, list(offered), n=2, cutoff=0.6) or (
            difflib.get_close_matches(word, list(PRECISIONS), n=2, cutoff=0.6)
        )  # what this engine offers first
        if close:  # a precision mistyped would else be read as a device, at the default
            raise EngineUnavailableError(
                f"the spec {name}:{option} ends in {last!r}, which is no precision: did you mean "
                + " or ".join(repr(c) for c in close)
                + f"? The {name} engine offers "
                + ", ".join(f"{precision} ({place}{precision})" for precision in offered)
            )
        return option, offered[0]
    if word not in offered:
        raise EngineUnavailableError(
            f"the {name} engine does not offer the precision {word!r}: it offers "
            + ", ".join(f"{precision} ({place}{precision})" for precision in offered)
        )
    return head, word


def check_spec(spec: object, where: str = "engine") -> None:
    """Refuse, without making anything, what `make_engine` would surely refuse: a spec string
    naming no installed engine (nor a `module:factory`), or an object that is not an engine.
    EngineUnavailableError naming `where`, what was given, and what to give."""
    if spec is None or (not isinstance(spec, str) and type(spec) in _ENGINE_TYPES):
        return
    if isinstance(spec, str):
        _refuse_empty_parts(spec, where)
        name, _, option = spec.partition(":")
        if name in _registered():
            return  # an installed engine: its option is checked when it is made
        if option.isidentifier() and _module_exists(name):
            return  # module:factory, its module found (not imported)
        raise EngineUnavailableError(f"{where} {spec!r}: {_not_installed(name)}")
    try:
        missing = _lacking(spec)
    except EngineUnavailableError as error:  # a stand-in's own reason
        raise EngineUnavailableError(f"{where}: {error}") from None
    if not missing:
        return
    shown = _shown(spec)
    if len(missing) < len(_MEMBERS):  # an engine of one's own, with something missing
        raise EngineUnavailableError(f"{where} {shown} is not an engine: {_lacks(missing)}")
    raise EngineUnavailableError(
        f"{where} is a spec string such as 'light', 'light:float32', 'torch:cpu' or "
        f"'torch:cuda:0', or an engine (such as LightEngine()), not {shown} "
        f"({type(spec).__name__}); None means the light engine"
    )


def _refuse_empty_parts(spec: str, where: str = "engine") -> None:
    """A spec with an empty part ("light:", "torch::strict") would be read as the parts around
    it, a typo taken silently: refused, naming what to write."""
    parts = spec.split(":")
    if len(parts) > 1 and not all(part.strip() for part in parts):
        said = ":".join(part for part in parts if part.strip())
        raise EngineUnavailableError(
            f"{where} spec {spec!r} has a colon too many (a part of it is empty): write "
            f"{said or 'light'!r} (a precision left out is the engine's default)"
        )


def _shown(made: object) -> str:
    shown = repr(made)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _lacking(made: object) -> list[str]:
    """What of an engine's members `made` lacks, asked as the core asks (getattr: an engine that
    hands its operations on through __getattr__, as compare's witness does, has them; Python
    3.12's isinstance against the protocol looks only at the class)."""
    lacking = []
    for member in _MEMBERS:
        try:
            getattr(made, member)
        except EngineUnavailableError:  # a stand-in that says why it cannot be used (a torch
            raise  # engine pickled on a card, loaded without one): its reason (trial PK)
        except AttributeError:
            lacking.append(member)
    return lacking


def _lacks(missing: list[str]) -> str:
    return (
        f"it lacks {', '.join(missing[:8])}{', ...' if len(missing) > 8 else ''} "
        "(an engine performs the operations of deepsharp.core.Engine)"
    )


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def make_engine(spec: str | Engine | None = None) -> Engine:
    """An engine from a spec: `light`, `light:float32`, `torch:cpu`, `torch:cuda:0:strict`,
    `testbuffer`, ... (an installed engine and its option), or `module:factory`.

    None gives the light engine; an engine passes through unchanged. What is made is checked to
    be an engine; a factory that fails or gives something else is refused with
    `EngineUnavailableError` saying what it did.
    """
    if spec is None:
        spec = DEFAULT_SPEC
    if not isinstance(spec, str):
        if type(spec) in _ENGINE_TYPES:  # checked once a class, as _checked does
            return spec
        if not _lacking(spec):
            _ENGINE_TYPES.add(type(spec))
            return spec
        raise EngineUnavailableError(
            f"engine {_shown(spec)} is not an engine: {_lacks(_lacking(spec))}"
        )
    _refuse_empty_parts(spec)
    name, _, option = spec.partition(":")
    if name in _registered():
        return _checked(spec, describe_engine(name).make(option), "its entry point's make")
    if not option.isidentifier():
        raise EngineUnavailableError(f"engine spec {spec!r}: {_not_installed(name)}")
    return _from_factory(spec, name, option)


_DEFAULT: list[Engine] = []
_DEFAULT_LOCK = threading.Lock()


def default_engine() -> Engine:
    """The light engine, made once for every call that names no engine (serving rows without
    one does not look for installed engines on each call)."""
    with _DEFAULT_LOCK:
        if not _DEFAULT:
            _DEFAULT.append(make_engine(DEFAULT_SPEC))
        return _DEFAULT[0]


def _from_factory(spec: str, module_name: str, attribute: str) -> Engine:
    """`module:factory`: factory() from module, checked to be an engine."""
    if not module_name or not all(module_name.split(".")):
        raise EngineUnavailableError(
            f"engine spec {spec!r}: {module_name!r} is no module name (a module:factory spec "
            "names a module such as myengines, or package.module)"
        )
    try:
        module = importlib.import_module(module_name)
    except SyntaxError as error:
        raise EngineUnavailableError(
            f"engine spec {spec!r}: module {module_name!r} cannot be imported: "
            f"{error.filename}, line {error.lineno}: {error.msg}"
        ) from None
    except ImportError as error:
        missing = error.name
        if missing is not None and not (module_name + ".").startswith(missing + "."):
            # the module is there, and something it imports is not: that is the news
            raise EngineUnavailableError(
                f"engine spec {spec!r}: module {module_name!r} cannot be imported: {error} "
                "(install what it imports, or put it on the path)"
            ) from error
        raise EngineUnavailableError(
            f"engine spec {spec!r}: {_not_installed(module_name)}; read as module:factory, "
            f"module {module_name!r} cannot be imported ({error}: put its folder on the path, "
            "PYTHONPATH)"
        ) from error
    except Exception as error:  # the module's own code failed: said, as a factory's failure is
        raise EngineUnavailableError(
            f"engine spec {spec!r}: module {module_name!r} raised {error!r} as it was imported"
        ) from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        offered = sorted(
            name for name, value in vars(module).items() if callable(value) and name.islower()
        )
        raise EngineUnavailableError(
            f"engine spec {spec!r}: module {module_name!r} has no callable {attribute!r} "
            f"(a module:factory spec names a function that makes the engine; its functions: "
            f"{', '.join(offered[:8]) or 'none'})"
        )
    try:
        made = factory()
    except (Exception, SystemExit) as error:  # SystemExit too: a factory must not end the caller
        raise EngineUnavailableError(
            f"engine spec {spec!r}: {module_name}.{attribute}() raised {error!r}"
        ) from error
    return _checked(spec, made, f"{module_name}.{attribute}()")


def _checked(spec: str, made: Any, maker: str) -> Engine:
    """`made` if it is an engine (it has every primitive, name, identity and counters)."""
    kind = type(made)
    if kind in _ENGINE_TYPES:  # checked once a class: the check costs 35 us, a predict 90
        return made  # type: ignore[no-any-return]
    if not _lacking(made):
        _ENGINE_TYPES.add(kind)
        return made  # type: ignore[no-any-return]
    raise EngineUnavailableError(
        f"engine spec {spec!r}: {maker} gave {_shown(made)} ({type(made).__name__}), not an "
        f"engine: {_lacks(_lacking(made))}"
    )


_MEMBERS = list(
    dict.fromkeys([*Engine.__annotations__, *(m for m in vars(Engine) if not m.startswith("_"))])
)
"""What an engine has: every primitive, `name`, `identity` and `counters`."""
