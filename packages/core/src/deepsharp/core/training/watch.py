"""What a compiled step's trace watches: the state of the layers and the loss, read before and
after the traced pass, so that a pass that changes it is never replayed.

A replay runs no forward pass and no loss, so it stands for the traced pass only where that pass
changed nothing a later pass reads. The layers (those of the network, their parts, and layers
held in attributes, in lists, dicts and objects of one's own within them) and the loss are read
whole, six levels deep: each attribute's value; what a list, tuple, deque, dict, set,
bytearray, memoryview or array holds; the attributes (in `__dict__` and `__slots__`) of an
object of one's own, callable or not; what a function of one's own holds (its closure's cells,
its defaults, the globals its code loads: a class used as a namespace, a module's values); a
bound method's object, a partial's arguments;
what a random generator (Python's, NumPy's, deepsharp's) would draw next; where a file stands;
a weak reference's object; the values classes of one's own hold (`calls = [0]` in a class
body); and what the layer's `forward` (the loss's `value`) reads beyond it: its defaults and
the globals its code loads. Python's and NumPy's global random generators are read too: a pass
that draws from them is not replayed either.

What is read is held while the snapshot is, so no object read can be freed and another take its
id. Numbers and text (and tuples of them) are compared by value, the rest by identity and
what they hold. An object
met twice (a table several layers share) is read once. An array of up to 10,000 values is
copied; a larger one is kept by its digest (a file mapped to read, by identity). A snapshot
reads a million values in all; state larger than that, and an iterator of another's (whose
place no one can read: a generator, `itertools.cycle`, `csv.reader`), cannot be watched, and
the step says so and runs as recorded.

Read by identity alone: objects and functions of deepsharp's own (but its random generators),
of Python's library and of installed packages other than the watched layers' (a logger's
cache, the pattern cache `re.sub` fills, a pandas frame, a torch tensor: keep a layer's state in
objects of one's own, arrays or buffers); a script's or a notebook's (`__main__`) and the
layers' own package's are one's own wherever they are installed. Not read: what lies deeper
than six levels, inside a set's members, or in the globals of a method other than `forward`
(`value`). Read at a trace alone: a global assigned between steps is not seen (a layer's
settings are: `Edited`).
"""

from __future__ import annotations

import array
import collections
import dis
import functools
import hashlib
import io
import itertools
import os
import random
import sys
import sysconfig
import types
import weakref
from collections.abc import Iterable, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from deepsharp.core.edits import Edited
from deepsharp.core.nn.layer import Layer
from deepsharp.core.random import Generator

__all__ = ["Snapshot", "class_settings", "every_edited", "every_layer"]

DEPTH = 6
"""How many levels into what an attribute holds a snapshot reads (deeper, identity alone)."""
VALUES = 1_000_000
"""Values a snapshot reads in all (items of containers, attributes of objects, arrays)."""
EXACT = 10_000
"""Values of an array kept as they are; a larger array is kept by its digest."""

_SCALARS = (type(None), bool, int, float, complex, str, bytes, Decimal, Fraction, np.generic)
_SEQUENCES = (list, tuple, collections.deque)
_NOT_STATE = (
    property,
    staticmethod,
    classmethod,
    types.MemberDescriptorType,
    types.GetSetDescriptorType,
)


class _Unwatchable(Exception):
    """State a snapshot cannot read: more than a million values, or an iterator."""


class Snapshot:
    """The state of `roots` (layers and the loss) as it stands; `changed()` reads it again
    and says what changed, or None; `too_much` says why it could not be read, where it could
    not (more than a million values)."""

    def __init__(self, roots: Sequence[Any]) -> None:
        self.roots = list(roots)
        _homes(self.roots)
        self.too_much: str | None = None
        self._reader = _Reader()
        self._draws = _global_draws()
        try:
            self._read = self._reader.roots(self.roots)
        except _Unwatchable as where:
            self.too_much = str(where)
            self._read = []

    def changed(self) -> str | None:
        """Why the pass since the snapshot cannot be replayed, or None where it changed
        nothing: an attribute of a layer (or the loss) set, or what one holds changed; a draw
        from a global random generator."""
        if _global_draws() != self._draws:
            return (
                "a pass drew from Python's or NumPy's global random generator (random, "
                "np.random): a replay draws nothing, so its steps ran as recorded (draw from "
                "the pass's generator, context.generator, through on_host)"
            )
        reader = _Reader()
        try:
            now = reader.roots(self.roots)
        except _Unwatchable as where:
            return f"in a pass, {where}"
        roots = {id(root): read for root, read in zip(self._reader.found, self._read)}
        for root, attributes in zip(reader.found, now):
            was = roots.get(id(root))
            if was is None:
                continue  # a layer put in during the pass: its holder's attribute says so
            names = [*was, *(n for n in attributes if n not in was)]
            for name in sorted(names, key=lambda n: n == "_edits"):  # one it names, first
                if not _same(was.get(name, _GONE), attributes.get(name, _GONE)):
                    return _why(root, name, attributes.get(name, was.get(name)))
        return None


def _whose(held: Any) -> str:
    if isinstance(held, Layer):
        try:
            return f"layer {held.name or held.label!r} ({type(held).__name__})"
        except Exception:  # (a mock passing for a layer)
            return f"a layer ({type(held).__name__})"
    return f"the loss ({type(held).__name__})"


def _why(held: Any, name: Any, node: Any) -> str:
    whose = _whose(held)
    where = "its forward pass" if isinstance(held, Layer) else "its value"
    if name == "_edits":
        what = "sets its attributes"
    elif isinstance(name, tuple) and name[0] == "class":
        what = f"changes what its class's attribute {name[1]!r} holds"
    elif isinstance(name, tuple):
        what = f"changes {name[1]}"
    elif isinstance(node, tuple) and node and node[0] == "rng":
        what = f"draws from the random generator in its attribute {name!r}"
    else:
        what = f"sets (or changes what holds) its attribute {name!r}"
    return (
        f"{whose} {what} in {where} (or another's that shares it): a replay runs no "
        "forward, so its steps ran as recorded (a layer's forward reads its inputs, slots and "
        "buffers, and draws through on_host; a loss's value reads its outputs and targets; "
        "what is filled once, at a first pass, fill in build() or __init__)"
    )


class _Reader:
    """Reads objects into comparable nodes, each object once, holding each it read."""

    def __init__(self) -> None:
        self.left = VALUES
        self.order: dict[int, int] = {}
        self.held: list[Any] = []  # alive while the snapshot is: no id read is reused
        self.found: list[Any] = []
        self.layers_met: list[Layer] = []
        self._where = ""

    def roots(self, roots: Sequence[Any]) -> list[dict[Any, Any]]:
        queue, read = list(roots), []
        known = {id(root) for root in queue}
        while queue:
            root = queue.pop(0)
            self.found.append(root)
            self.order[id(root)] = len(self.order)
            self.held.append(root)
            whose = _whose(root)
            attributes: dict[Any, Any] = {}
            for name, value in [*_slots(root), *vars(root).items()]:
                self._where = f"the attribute {name!r} of {whose}"
                attributes[name] = self.read(value, 0)
            for _, name, value in _class_attributes(type(root)):
                self._where = f"the class attribute {name!r} of {whose}"
                attributes[("class", name)] = self.read(value, 0)
            for method in ("forward", "value"):  # what its code reads beyond it: globals, ...
                function = getattr(type(root), method, None)
                if not (isinstance(function, types.FunctionType) and _ones_own(function)):
                    continue
                for key, value in _function_state(function):
                    what = _code_part(key, method)
                    self._where = f"{what} of {whose}"
                    attributes[("code", what)] = self.read(value, 1)
            read.append(attributes)
            for layer in self.layers_met:
                if id(layer) not in known:  # a layer held where every_layer does not look
                    known.add(id(layer))
                    queue.append(layer)
            self.layers_met = []
        return read

    def _spend(self, count: int) -> None:  # a million values read: too many to watch
        self.left -= count
        if self.left < 0:
            raise _Unwatchable(
                f"the layers and the loss hold more than {VALUES:,} values (the last read: "
                f"{self._where}): too many for a compiled step to watch for a change in a pass, "
                "so its steps ran as recorded (keep a large table in a NumPy array, read as "
                "one value, or in a buffer)"
            )

    def read(self, value: Any, depth: int) -> Any:
        try:
            return self._read(value, depth)
        except _Unwatchable:
            raise
        except Exception:  # an object that will not be read (a proxy raising on any look)
            return ("is", value)

    def _read(self, value: Any, depth: int) -> Any:
        if isinstance(value, _SCALARS):
            return ("=", value)
        if type(value) is tuple and all(isinstance(item, _SCALARS) for item in value):
            return ("=", value)  # by value, as a setting set again is (`Edited`)
        if isinstance(value, Layer):
            self.layers_met.append(value)
            return ("is", value)
        if depth >= DEPTH:  # (not kept as read: met again nearer, it is read there)
            return ("is", value)
        key = id(value)
        if key in self.order:  # met before (shared, or a cycle): read once
            return ("seen", self.order[key])
        self.order[key] = len(self.order)
        self.held.append(value)
        self._spend(1)
        if isinstance(value, np.ndarray):
            return self._array(value, depth)
        state = _generator_state(value)
        if state is not None:
            return ("rng", value, state)
        if isinstance(value, type) and _ones_own(value) and depth < DEPTH:  # a namespace
            found = [(n, v) for _, n, v in _class_attributes(value)]
            return ("[]", value, [(n, self.read(v, depth + 1)) for n, v in found])
        if isinstance(value, types.ModuleType) and _ones_own(value, "__name__"):
            return ("[]", value, [(n, self.read(v, depth + 1)) for n, v in _module_data(value)])
        if isinstance(value, (type, types.ModuleType)):
            return ("is", value)  # a class or a module of another's: itself
        if isinstance(value, (set, frozenset)):
            self._spend(len(value))
            return ("set", value, frozenset(value))
        if isinstance(value, (bytearray, array.array)):
            return ("set", value, bytes(value))
        if isinstance(value, itertools.count):  # its next number, in its text
            return ("set", value, repr(value))
        if isinstance(value, weakref.ref):
            return ("()", None, [("referent", self.read(value(), depth + 1))])
        if isinstance(value, io.IOBase):  # a file: where it stands in it
            return ("set", value, (value.closed, _position(value)))
        if isinstance(value, memoryview):
            return ("set", value, None if value.obj is None else value.tobytes())
        if hasattr(type(value), "__next__") and _own_attributes(value) is None:
            raise _Unwatchable(
                f"{self._where} holds an iterator ({type(value).__name__}), whose place no "
                "trace can read: a pass that draws from it would be replayed with its first "
                "draw, so its steps ran as recorded (hold a list and an index instead)"
            )

        pairs = self._pairs(value)
        if pairs is None:
            return ("is", value)
        made = []
        for name, held in pairs:
            self._spend(1)
            made.append((name, self.read(held, depth + 1)))
        return ("[]", value, made)

    def _pairs(self, value: Any) -> list[tuple[Any, Any]] | None:
        """What a container, a function or an object of one's own holds, by name or place; None
        where it is read by identity alone."""
        if isinstance(value, _SEQUENCES):
            return list(enumerate(value))
        if isinstance(value, dict):
            return list(value.items())
        if isinstance(value, (types.MethodType, functools.partial)) or (
            isinstance(value, types.FunctionType) and _ones_own(value)
        ):
            return _function_state(value)
        own = _own_attributes(value)
        if own is None:
            return None
        return [
            *own,
            *((("class", k.__qualname__, n), v) for k, n, v in _class_attributes(type(value))),
        ]

    def _item(self, value: Any, depth: int) -> Any:
        if type(value) is tuple:  # made by tolist: compared by what it holds alone
            return ("()", None, [(i, self.read(v, depth + 1)) for i, v in enumerate(value)])
        return self.read(value, depth)

    def _array(self, value: np.ndarray, depth: int) -> Any:
        if value.dtype.hasobject:  # its items (a structured row's fields as a tuple made now)
            items = value.ravel().tolist()
            self._spend(len(items))
            return ("[]", value, [(i, self._item(v, depth + 1)) for i, v in enumerate(items)])
        if isinstance(value, np.memmap) and not value.flags.writeable:
            return ("is", value)  # a file mapped to read: no pass writes it
        if value.size <= EXACT:
            return ("array", value, (value.shape, value.dtype.str, value.tobytes()))
        data = np.ascontiguousarray(value).reshape(-1).view(np.uint8).data
        digest = hashlib.sha1(data, usedforsecurity=False)
        return ("array", value, (value.shape, value.dtype.str, digest.digest()))


def _same(was: Any, now: Any) -> bool:
    if was is _GONE or now is _GONE:
        return was is now
    kind = was[0]
    if kind != now[0]:
        return False
    if kind == "=":
        return _equal(was[1], now[1])
    if kind == "seen":
        return bool(was[1] == now[1])
    if was[1] is not now[1]:
        return False
    if kind in ("[]", "()"):
        return len(was[2]) == len(now[2]) and all(
            _equal(a[0], b[0]) and _same(a[1], b[1]) for a, b in zip(was[2], now[2])
        )
    return bool(kind == "is" or was[2] == now[2])  # a set's items, an array's bytes, a state


def _equal(was: Any, now: Any) -> bool:
    """Numbers and text by value (NaN equal to NaN), anything else by identity."""
    if was is now:
        return True
    if type(was) is tuple and type(now) is tuple:  # a class attribute's key, a dict's key
        return len(was) == len(now) and all(map(_equal, was, now))
    if type(was) is not type(now) or not isinstance(was, _SCALARS):
        return False
    try:
        return bool(was == now) or bool(was != was and now != now)
    except Exception:  # a comparison that raises (a signalling NaN): a change
        return False


_GONE = ("gone",)


def _generator_state(value: Any) -> Any:
    """What a random generator would draw next (its state, as a value), or None where `value`
    is no random generator."""
    if isinstance(value, Generator):  # deepsharp's own: its place in its stream
        return (value.seed, value.stream, value.counter)
    if isinstance(value, random.Random):
        try:
            return value.getstate()
        except NotImplementedError:  # SystemRandom: no state to read
            return None
    if isinstance(value, np.random.Generator):
        return _frozen(value.bit_generator.state)
    if isinstance(value, np.random.BitGenerator):
        return _frozen(value.state)
    if isinstance(value, np.random.RandomState):
        return _frozen(value.get_state(legacy=False))
    return None


def _frozen(state: Any) -> Any:
    if isinstance(state, dict):
        return tuple((k, _frozen(v)) for k, v in state.items())
    if isinstance(state, np.ndarray):
        return state.tobytes()
    return state


def _global_draws() -> tuple[Any, Any]:
    return random.getstate(), _frozen(np.random.get_state(legacy=False))


def _own_attributes(value: Any) -> list[tuple[Any, Any]] | None:
    """An object of one's own's attributes, in its `__dict__` and its `__slots__` (not
    deepsharp's own: the network, the trainer, an engine), or None where it has none to read
    (or will not say)."""
    try:
        if not (_ones_own(type(value)) or isinstance(value, types.SimpleNamespace)):
            return None
        found: list[tuple[Any, Any]] = _slots(value)
        try:
            held = object.__getattribute__(value, "__dict__")
        except AttributeError:
            held = None
    except Exception:  # a __dict__ that raises, ...: nothing of it is read
        return None
    if isinstance(held, dict):
        found += held.items()
    elif not found:
        return None
    return found


def _function_state(value: Any) -> list[tuple[Any, Any]]:
    """What a function reads besides its arguments: the cells it closes over, its defaults (a
    list as a default is a function's own state), the globals its code names; a bound
    method's object; a partial's function and arguments."""
    if isinstance(value, functools.partial):
        return [("func", value.func), ("args", value.args), ("keywords", value.keywords)]
    if isinstance(value, types.MethodType):
        return [("self", value.__self__), ("func", value.__func__)]
    found: list[tuple[Any, Any]] = [
        ("defaults", value.__defaults__),
        ("kwdefaults", value.__kwdefaults__),
    ]
    for name, cell in zip(value.__code__.co_freevars, value.__closure__ or ()):
        try:
            found.append((("cell", name), cell.cell_contents))
        except ValueError:  # a cell not yet filled
            continue
    named = value.__globals__
    for name in _global_names(value.__code__):
        held = named.get(name, _GONE)
        if held is not _GONE:  # (a module or class of another's: by identity)
            found.append((("global", name), held))
    return found


@functools.lru_cache(maxsize=1024)
def _global_names(code: types.CodeType) -> tuple[str, ...]:
    """The globals a function's code (and the code within it: a comprehension's, a lambda's)
    names: loaded or stored as globals, not an attribute of the same name (`self.data`)."""
    names = {
        instruction.argval
        for instruction in dis.get_instructions(code)
        if instruction.opname in ("LOAD_GLOBAL", "STORE_GLOBAL", "LOAD_NAME")
    }
    for inner in code.co_consts:
        if isinstance(inner, types.CodeType):
            names.update(_global_names(inner))
    return tuple(sorted(names))


def _code_part(key: Any, method: str) -> str:
    if isinstance(key, tuple) and key[0] == "global":
        return f"the global {key[1]!r} its {method} names"
    if isinstance(key, tuple):
        return f"the variable {key[1]!r} its {method} closes over"
    return f"its {method}'s {key}"


def _position(stream: Any) -> Any:
    try:
        return stream.tell() if not stream.closed and stream.seekable() else None
    except Exception:  # a stream that will not say
        return None


_OWN: dict[str, bool] = {}
_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by Python code, not a C type
_HOME = {"__main__"}
"""The packages of the layers and losses watched (and a script's, a notebook's): one's own."""
_STDLIB = {
    os.path.normcase(os.path.realpath(sysconfig.get_paths()[key]))
    for key in ("stdlib", "platstdlib")
}


def _ones_own(held: Any, attribute: str = "__module__") -> bool:
    """Whether a class, function or module (`attribute` names its module) is of one's own:
    of a watched layer's package or a script's, or of none of deepsharp, Python's library and
    the installed packages (whose objects are read by identity: a logger's cache, the pattern
    cache `re.sub` fills are no state of a layer's)."""
    module = getattr(held, attribute, None)
    if module is None and isinstance(held, types.FunctionType):
        return True  # Python code made by exec(source, {}): no library's
    if not isinstance(module, str):
        return False
    if module == "builtins" and isinstance(held, type):  # a class exec(source, {}) made
        return bool(held.__flags__ & _HEAP_TYPE)
    top = module.partition(".")[0]
    if top in _HOME:
        return True
    known = _OWN.get(module)
    if known is None:
        found = sys.modules.get(module) or sys.modules.get(top)  # (a compiled part's: its
        path = str(getattr(found, "__file__", "") or "")  # package's file)
        where = os.path.normcase(os.path.realpath(path)) if path else ""
        library = (
            "site-packages" in where
            or "dist-packages" in where
            or any(where.startswith(folder + os.sep) for folder in _STDLIB)
            or (not where and (top in sys.stdlib_module_names or top == "builtins"))
        )
        known = top != "deepsharp" and not library
        _OWN[module] = known
    return known


def _slots(held: Any) -> list[tuple[str, Any]]:
    """The values an object holds in `__slots__` (its classes' of one's own)."""
    found = []
    for klass in type(held).__mro__:
        if not _ones_own(klass):
            continue
        slots = vars(klass).get("__slots__", ())
        for name in [slots] if isinstance(slots, str) else slots:
            if name.startswith("__") and not name.endswith("__"):  # a private one, mangled
                name = f"_{klass.__name__.lstrip('_')}{name}"
            try:
                found.append((name, object.__getattribute__(held, name)))
            except AttributeError:  # a slot not set
                continue
    return found


def _module_data(module: types.ModuleType) -> list[tuple[str, Any]]:
    """What a module of one's own holds that a pass may change: its values, not its
    functions or the modules it imports (its classes, read as namespaces)."""
    return [
        (name, value)
        for name, value in list(vars(module).items())
        if not name.startswith("__")
        and not isinstance(value, types.ModuleType)
        and (isinstance(value, type) or not callable(value))
    ]


def _class_attributes(klass: type) -> list[tuple[type, str, Any]]:
    """The values a class of one's own (and its bases of one's own) holds in its body: not its
    functions, properties or names of Python's own."""
    return [
        (base, name, value)
        for base in klass.__mro__
        if _ones_own(base)
        for name, value in _body(base)
    ]


def _body(klass: type) -> list[tuple[str, Any]]:
    """The values a class holds in its own body: not its functions, properties or names of
    Python's own."""
    found = []
    for name, value in list(vars(klass).items()):
        try:
            if name.startswith("__") or callable(value) or isinstance(value, _NOT_STATE):
                continue
        except Exception:  # a value raising on any look (a lazy proxy): read by identity
            pass
        found.append((name, value))
    return found


def every_layer(layers: Sequence[Layer]) -> list[Layer]:
    """The layers and, within each, the layers it is built of: its parts, and layers it holds
    in an attribute of its own (a Dropout kept as `self.drop`), in a list, tuple, dict or set,
    or in an object of one's own, six levels deep."""
    return _every(layers, Layer)


def every_edited(roots: Sequence[Edited]) -> list[Edited]:
    """As `every_layer`, of every object whose settings are counted (`Edited`: layers and
    losses): the layers, the loss, and a loss or layer one of them holds (a loss of one's own
    wrapping a BinaryCrossEntropy, trial C)."""
    return _every(roots, Edited)


def _every(roots: Sequence[Any], kind: type) -> list[Any]:
    found: list[Any] = []
    seen: set[int] = set()
    queue = list(roots)
    while queue:
        layer = queue.pop(0)
        if id(layer) in seen:
            continue
        seen.add(id(layer))
        found.append(layer)
        held: list[Any] = []
        visited: set[int] = set()
        try:  # (a mock passing for a layer has none of its parts)
            parts = layer.parts.values() if isinstance(layer, Layer) else ()
            held += [part for part in parts if isinstance(part, kind)]
            attributes = list(vars(layer).values())
        except Exception:
            attributes = []
        for value in attributes:
            _layers_in(value, 0, held, visited, kind)
        queue[:0] = held  # a layer's own before the next layer's (the order of a walk)
    return found


def _homes(roots: Sequence[Any]) -> None:
    """The packages of these layers' and losses' classes are one's own, wherever they are
    installed (a package of one's own layers under site-packages)."""
    for root in roots:
        top = str(getattr(type(root), "__module__", "")).partition(".")[0]
        if top and top not in ("deepsharp", "builtins"):
            _HOME.add(top)


def own_classes(objects: Sequence[Any]) -> tuple[type, ...]:
    """The classes of one's own among these objects' and their bases (`_ones_own`, their own
    packages among them, wherever installed: a review found a layer package's class left out
    until a snapshot had named its package), once each: none where every class is deepsharp's
    or a library's."""
    _homes(objects)
    found = [base for klass in {type(obj) for obj in objects} for base in klass.__mro__]
    return tuple(base for base in dict.fromkeys(found) if _ones_own(base))


def class_settings(classes: Sequence[type]) -> tuple[Any, ...]:
    """What these classes hold in their bodies (not their functions), as a compiled step's key
    reads it: numbers and text by their text (`repr`: no hash or NaN to trip over), anything
    else by identity (`Scale.factor = 5.0` assigned between steps is read by the next step,
    trial C); a value that will not be looked at (a lazy proxy) by identity."""
    found: list[Any] = []
    for klass in classes:
        for name, value in _body(klass):
            try:
                plain = isinstance(value, _SCALARS) and not isinstance(value, np.generic)
                found.append((id(klass), name, repr(value) if plain else id(value)))
            except Exception:  # a value raising on any look
                found.append((id(klass), name, id(value)))
    return tuple(found)


def _layers_in(
    value: Any, depth: int, out: list[Any], visited: set[int], kind: type = Layer
) -> None:
    try:
        _look_in(value, depth, out, visited, kind)
    except Exception:  # an object that will not be looked into (a proxy raising on any look)
        return


def _look_in(value: Any, depth: int, out: list[Any], visited: set[int], kind: type) -> None:
    if isinstance(value, kind):
        out.append(value)
        return
    if depth >= DEPTH or isinstance(value, _SCALARS) or id(value) in visited:
        return
    visited.add(id(value))
    items: Iterable[Any]
    if isinstance(value, (*_SEQUENCES, set, frozenset, collections.UserList)):
        items = value
    elif isinstance(value, (dict, collections.UserDict, collections.ChainMap)):
        items = value.values()
    elif isinstance(value, np.ndarray):  # an array of objects may hold layers (trial C2)
        if value.dtype != object or value.size > VALUES:
            return
        items = value.ravel().tolist()
    elif isinstance(value, (types.FunctionType, types.MethodType, functools.partial)):
        items = (held for _, held in _function_state(value))  # a layer a callable reaches:
    elif callable(value) and _own_attributes(value) is None:  # its closure, its bound
        return  # object, a partial's arguments, a callable object's attributes (trial C2)
    else:
        own = _own_attributes(value)
        if own is None:
            return
        items = (v for _, v in own)
    held = list(items)
    if set(map(type, held)) <= _PLAIN:  # numbers and text alone: no layer within
        return
    for item in held:
        _layers_in(item, depth + 1, out, visited, kind)


_PLAIN = {type(None), bool, int, float, complex, str, bytes, np.float64, np.float32, np.int64}
