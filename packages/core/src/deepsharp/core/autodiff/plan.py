"""A plan: the engine calls of a pass, captured once and replayed as one flat function.

`capture(engine, function, inputs, fixed)` runs `function()` — a pass written as usual, with
layers, tensors, the tape and the rulebook — while watching every call it makes on `engine`:
each call's operation, its arguments (the pass's inputs, an earlier call's output, a value it
holds throughout (`fixed`: slots, buffers), or a constant) and its output. The calls become the
source of one Python function (`Plan.source`) that makes the same engine calls in the same
order, with the same arguments, and nothing else: no layers, tensors, tape or rule lookups in
between, each intermediate value let go after its last use. The same calls on inputs of the
same shapes give the same bits, so a replay is the pass itself.

Work a pass does on the host goes through `on_host(engine, function, *args)`: it runs
`function(engine, *args)`, and a plan runs it again at that place on every replay (a dropout
mask drawn from the step's generator and put on the engine; a data-parallel run's sum over its
processes). Anything else that crosses between host and engine during the pass (a `get`, a
`put` no host step makes), or a value from outside the pass that is neither an input nor held
throughout, makes the pass one a plan cannot stand for: `capture` then says why (`Captured.why`)
and the caller runs the pass as recorded each time.

Calls the engine makes on itself (an operation written in its other operations) are the
engine's own: only the pass's calls are captured, and only in the thread that captures.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from deepsharp.core.autodiff.tensor import open_recording
from deepsharp.core.engine import Engine, fused
from deepsharp.core.engine.protocol import Engine as EngineProtocol
from deepsharp.core.random import draws

__all__ = ["DREW", "Captured", "Plan", "capture", "on_host"]

QUERIES = frozenset({"shape", "identity", "counters"})
"""What a pass asks an engine without making a call a plan keeps (shapes are the plan's key)."""

TRANSFERS = frozenset({"get", "put", "put_checked"})
"""Transfers: a pass that makes one outside a host step depends on values a plan cannot know."""

_LITERALS = (bool, int, str, type(None))
_RESERVED = frozenset({"engine", "float", "plan"})
IN_PLACE = frozenset({"assign", "sgd_update", "adam_update", "decay_update"})
"""Operations that change an argument in place (and so are made every time, on what they change)."""


class _Watches(threading.local):
    """The capture running in each thread (one at a time: captures do not nest)."""

    active: _Watch | None = None


_watches = _Watches()


def on_host(engine: Engine, function: Callable[..., Any], *args: Any) -> Any:
    """`function(engine, *args)`: host work inside a pass (its result a handle, or a list of
    them). While a plan is captured, it is kept as a host step the plan runs on every replay,
    with the same arguments (the pass's inputs among them: its generator); its own engine calls
    are its own."""
    watch = _watches.active
    if watch is None or watch.engine is not engine or watch.depth:
        return function(engine, *args)
    return watch.host(function, args)


@dataclass(frozen=True)
class Ref:
    """An argument that is a value of the pass: an input, or an earlier call's output."""

    name: str


class _Watch:
    """What a capture sees: each call of the pass, its arguments as references, its output."""

    def __init__(self, engine: Engine, inputs: Sequence[Any], fixed: Iterable[Any]) -> None:
        self.engine = engine
        self.thread = threading.get_ident()
        self.depth = 0
        self.names: dict[int, str] = {id(value): f"i{i}" for i, value in enumerate(inputs)}
        self.fixed = {id(value): value for value in fixed}
        # The values named by id are alive while they are named: the inputs and constants
        # kept, an output named only while it lives (its name let go as it goes, so an id
        # taken again is never another's), or kept where it cannot be watched so. Outputs
        # are not kept: the pass lets go of each as it would (a traced step held every one,
        # twice a step's memory: trial Q), but those worked out from settings alone, which
        # the plan may keep as they are (`_folded`: `foldable` finds them as they come).
        self.kept: list[Any] = list(inputs)
        self.calls: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]] = []
        self.functions: dict[str, Callable[..., Any]] = {}
        self.why: str | None = None
        self.constants: list[Any] = []
        self.results: list[Any] = []
        self.foldable: set[str] = set()
        self.hosts = 0
        # The thread's draws so far, and those its host steps make: a draw outside a host step
        # (a branch a layer picks on the host, from the pass's generator or a copy of it) is
        # one a replay cannot make.
        self.started = draws()
        self.hosts_drew = 0

    # --- one call -------------------------------------------------------------------------------
    def call(
        self, name: str, own: Callable[..., Any], args: tuple[Any, ...], kw: dict[str, Any]
    ) -> Any:
        if self.depth or threading.get_ident() != self.thread:
            return own(*args, **kw)
        if name in TRANSFERS and self.why is None:
            self.why = (
                f"{_place()} {'brings a value to the host' if name == 'get' else 'puts values on the engine'} "
                f"({name}) during the step, outside a host step: a step whose transfers may depend "
                "on its values cannot be replayed"
            )
        encoded = (self.encoded(args), {key: self.encoded(value) for key, value in kw.items()})
        self.depth += 1
        try:
            result = own(*args, **kw)
        finally:
            self.depth -= 1
        label = name if name.isidentifier() and name not in _RESERVED else f"op_{name}"
        self.functions.setdefault(label, own)
        self.record(label, encoded[0], encoded[1], result)
        return result

    def host(self, function: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        encoded = self.encoded(args)
        self.depth += 1
        before = draws()
        try:
            result = function(self.engine, *args)
        finally:
            self.depth -= 1
        self.hosts_drew += draws() - before
        label = f"host{self.hosts}"
        self.hosts += 1
        self.functions[label] = function
        self.record(label, (Ref("engine"), *encoded), {}, result)
        return result

    def record(self, function: str, args: tuple[Any, ...], kw: dict[str, Any], result: Any) -> None:
        out = f"v{len(self.calls)}"
        self.calls.append((out, function, args, kw))
        roots = {_root(ref.name) for ref in _refs((args, tuple(kw.values())))}
        if function.startswith("host") or function in IN_PLACE:
            self.foldable -= roots
            self.results.append(None)
        elif roots <= self.foldable:  # (as `_folded` finds them, and perhaps more)
            self.foldable.add(out)
            self.results.append(result)
        else:
            self.results.append(None)
        self._name(result, out)

    def _name(self, result: Any, expression: str) -> None:
        if result is None or isinstance(result, (*_LITERALS, float)):
            return
        if isinstance(result, (list, tuple)):  # named by its parts (a list of it written so)
            for index, part in enumerate(result):
                self._name(part, f"{expression}[{index}]")
            return
        key = id(result)
        self.names[key] = expression
        try:
            weakref.finalize(result, self.names.pop, key, None).atexit = False
        except TypeError:  # no weak reference to it: kept, so that its id stays its own
            self.kept.append(result)

    def encoded(self, value: Any) -> Any:
        """An argument as the plan writes it: a reference, a constant, or a list or tuple of
        them."""
        named = self.names.get(id(value))
        if named is not None:
            return Ref(named)
        if isinstance(value, (list, tuple)):
            return type(value)(self.encoded(item) for item in value)
        if isinstance(value, _LITERALS) or type(value) is float:
            return value
        if not _is_handle(value) or id(value) in self.fixed:
            return self.constant(value)
        if self.why is None:
            self.why = (
                f"{_place()} hands the engine a value made outside the step ({type(value).__name__}) "
                "that is neither one of the step's inputs nor held throughout (a slot, a buffer): "
                "a replay could not know it"
            )
        return self.constant(value)

    def constant(self, value: Any) -> Ref:
        self.kept.append(value)
        self.constants.append(value)
        return Ref(f"c{len(self.constants) - 1}")


DREW = (
    "the pass drew from a random generator (a layer's context.generator, or a copy of it) "
    "outside on_host: a replay would take the traced step's draw again (a branch picked at "
    "random, as stochastic depth does, is picked anew each step as recorded)"
)
"""Why a pass that drew outside its host steps is no plan."""


def _is_handle(value: Any) -> bool:
    """Whether an argument may be an engine's value (a handle) rather than a setting: anything
    but numbers (NumPy's scalars among them), text and functions."""
    return not (isinstance(value, (float, complex, np.generic, *_LITERALS)) or callable(value))


def _place() -> str:
    """Where in the pass a call is made: the layer (and the rule), or the loss."""
    recording = open_recording()
    if recording is None:
        return "the step"
    if recording.running is not None:
        node = recording.running
        return (
            f"layer {node.layer!r}'s way back ({node.rule.name})"
            if node.layer
            else "the loss's way back"
        )
    if recording.layer:
        return f"layer {recording.layer!r}"
    return "the loss"


def operations(engine: Engine) -> list[str]:
    """Every operation a pass may call on `engine`: the primitives, the fast paths, and the
    engine's own public methods (transfers included, to be seen)."""
    primitives = {
        name
        for name in vars(EngineProtocol)
        if not name.startswith("_") and callable(vars(EngineProtocol)[name])
    }
    names = (
        primitives
        | set(fused.FAST_PATHS)
        | {name for name in dir(type(engine)) if not name.startswith("_")}
    )
    found = []
    for name in sorted(names - QUERIES):
        own = getattr(engine, name, None)
        if callable(own) and not isinstance(own, type):
            found.append(name)
    return found


@dataclass
class Captured:
    """What a capture gives: the pass's result, and its plan (None where the pass cannot be one,
    `why` saying what in it stops a replay)."""

    result: Any
    plan: Plan | None
    why: str | None


def capture(
    engine: Engine,
    function: Callable[[], Any],
    inputs: Sequence[Any],
    fixed: Iterable[Any],
    outputs: Callable[[Any], Any],
) -> Captured:
    """Run `function()` once, as it is, watching its calls on `engine`; the plan of them.

    `inputs`: what changes from one replay to the next (handles of the batch, the step's
    generator), in the order the plan takes them. `fixed`: the values the pass reads that
    outlive it and keep their identity (slots, buffers). `outputs(result)`: the handles the plan
    gives back, as a nested list or tuple (an output must be made by the pass).
    """
    if _watches.active is not None:
        return Captured(function(), None, "a step is already being captured in this thread")
    watch = _Watch(engine, inputs, fixed)
    watch.why = _install(engine)
    try:
        _watches.active = watch
        try:
            result = function()
        finally:
            _watches.active = None
    finally:
        _uninstall(engine)
    if watch.why is not None:
        return Captured(result, None, watch.why)
    if draws() != watch.started + watch.hosts_drew:
        return Captured(result, None, DREW)
    returned = watch.encoded(outputs(result))
    if any(not ref.name.startswith(("v", "i")) for ref in _refs(returned)):
        return Captured(result, None, "the step gives back a value it did not make")
    return Captured(result, Plan(engine, watch, returned), None)


class _Installed:
    """The watchers set on one engine while captures run on it (in any threads): how many
    captures use them, what the engine held as its own before (put back when the last ends),
    the names set, and why an operation could not be watched."""

    def __init__(self, held: dict[str, Any], names: list[str], why: str | None) -> None:
        self.users = 1
        self.held, self.names, self.why = held, names, why


_installed: dict[int, _Installed] = {}
_installing = threading.Lock()


def _install(engine: Engine) -> str | None:
    """Set a watcher on each of the engine's operations, once for every capture running on it
    (two threads each tracing a step on one engine share them: each call goes to the capture
    of the thread that makes it, or to the operation where that thread captures nothing);
    why an operation could not be watched, where one could not."""
    with _installing:
        found = _installed.get(id(engine))
        if found is not None:
            found.users += 1
            return found.why
        names = operations(engine)
        # What the engine holds as its own (an operation it offers only at some settings, set
        # on it when made): put back as it was once the watchers go.
        own = getattr(engine, "__dict__", {})
        held = {name: value for name, value in own.items() if name in names}
        set_: list[str] = []
        why = None
        for name in names:
            try:
                setattr(engine, name, _watched(engine, name, getattr(engine, name)))
            except (AttributeError, TypeError):
                why = why or (
                    f"the engine {type(engine).__name__}'s operation {name} cannot be watched (its "
                    "methods cannot be set on it)"
                )
                continue
            set_.append(name)
        _installed[id(engine)] = _Installed(held, set_, why)
        return why


def _uninstall(engine: Engine) -> None:
    """One capture on the engine ended: the watchers go with the last."""
    with _installing:
        found = _installed[id(engine)]
        found.users -= 1
        if found.users:
            return
        del _installed[id(engine)]
        for name in found.names:
            try:
                if name in found.held:
                    setattr(engine, name, found.held[name])
                else:
                    delattr(engine, name)
            except AttributeError:
                pass


def _watched(engine: Engine, name: str, own: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kw: Any) -> Any:
        watch = _watches.active
        if watch is None or watch.engine is not engine:
            return own(*args, **kw)
        return watch.call(name, own, args, kw)

    return call


def _refs(value: Any) -> list[Ref]:
    if isinstance(value, Ref):
        return [value]
    if isinstance(value, (list, tuple)):
        return [ref for item in value for ref in _refs(item)]
    return []


def _written(value: Any) -> str:
    """An argument as source: a reference's name, a literal, a list or tuple of them."""
    if isinstance(value, Ref):
        return value.name
    if isinstance(value, list):
        return "[" + ", ".join(_written(item) for item in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(_written(item) for item in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if type(value) is float and not math.isfinite(value):
        return f"float({str(value)!r})"
    return repr(value)


class Plan:
    """A pass's engine calls as one flat function of its inputs (`source` shows it): `plan(*inputs)`
    makes them again and gives back the pass's outputs. `calls`: how many engine calls (and
    host steps) a replay makes; `hosts`: how many of them are host steps."""

    def __init__(self, engine: Engine, watch: _Watch, returned: Any) -> None:
        given = {_root(ref.name) for ref in _refs(returned)}
        folded = _folded(watch.calls, given)
        steps, alias = _shared(watch.calls, folded, _given(watch.calls, given))
        returned = _renamed(returned, alias)
        kept = {_root(ref.name) for ref in _refs(returned)}
        last: dict[str, int] = {}
        for index, (_, _, args, kw) in enumerate(steps):
            for ref in _refs((args, tuple(kw.values()))):
                last[_root(ref.name)] = index
        freed: dict[int, list[str]] = {}
        for name, at in last.items():
            if name.startswith("v") and name not in kept and name not in folded:
                freed.setdefault(at, []).append(name)
        inputs = len([key for key in watch.names.values() if key.startswith("i")])
        lines = [f"def plan({', '.join(f'i{i}' for i in range(inputs))}):"]
        for index, (out, function, args, kw) in enumerate(steps):
            written = [_written(arg) for arg in args]
            written += [f"{key}={_written(value)}" for key, value in kw.items()]
            call = f"{function}({', '.join(written)})"
            used = last.get(out) is not None or out in kept
            lines.append(f"    {out} = {call}" if used else f"    {call}")
            gone = freed.get(index)
            if gone:
                lines.append(f"    del {', '.join(sorted(gone, key=lambda n: int(n[1:])))}")
        lines.append(f"    return {_written(returned)}")
        self.source = "\n".join(lines)
        self.calls = len(steps)
        self.hosts = watch.hosts
        namespace: dict[str, Any] = {"engine": engine, "float": float, **watch.functions}
        namespace.update({f"c{i}": value for i, value in enumerate(watch.constants)})
        namespace.update({f"v{i}": watch.results[i] for i in map(_number, folded)})
        exec(compile(self.source, "<deepsharp plan>", "exec"), namespace)
        # Taken out of its globals: a function its own namespace holds is a reference cycle,
        # which kept the plan's values (and so the engine's memory) until a collection ran.
        self._run: Callable[..., Any] = namespace.pop("plan")

    def __call__(self, *inputs: Any) -> Any:
        return self._run(*inputs)

    def __repr__(self) -> str:
        return f"Plan({self.calls} calls)"


def _folded(
    calls: Sequence[tuple[str, str, tuple[Any, ...], dict[str, Any]]], kept: set[str]
) -> set[str]:
    """The calls whose arguments are settings alone, or such calls' outputs (the way back's
    first gradient, 1.0 over the rows): worked out once, in the capture, and kept. Never a host
    step, an update in place or what one changes, nor what the plan gives back."""
    folded: set[str] = set()
    for out, function, args, kw in calls:
        refs = _refs((args, tuple(kw.values())))
        if function.startswith("host") or function in IN_PLACE:
            folded -= {_root(ref.name) for ref in refs}
            continue
        if all(_root(ref.name) in folded for ref in refs):
            folded.add(out)
    return folded - kept


Call = tuple[str, str, tuple[Any, ...], dict[str, Any]]


def _shared(
    calls: Sequence[Call], folded: set[str], given: set[str]
) -> tuple[list[Call], dict[str, str]]:
    """The calls a replay makes, and which outputs are another's: a call made again on the same
    arguments (the way back of x·x sends x·g twice) gives the same bits, so its first output
    stands for it. Not across an update in place or a host step, which may change what the
    arguments hold; never an update or a host step itself; never an output the plan gives
    back, nor one whose memory such an output may share (`given`, `_given`): two slots'
    gradients made by two calls stay two values, as they were in the pass, for whoever changes
    one in place."""
    made: list[Call] = []
    alias: dict[str, str] = {}
    seen: dict[str, str] = {}
    changed = {  # what an update in place writes into: never shared
        _root(ref.name)
        for _, function, args, kw in calls
        if function in IN_PLACE
        for ref in _refs((args, tuple(kw.values())))
    }
    for out, function, args, kw in calls:
        if out in folded:
            continue
        args = _renamed(args, alias)
        kw = {key: _renamed(value, alias) for key, value in kw.items()}
        if function.startswith("host") or function in IN_PLACE:
            seen.clear()
            made.append((out, function, args, kw))
            continue
        written = f"{function}({_written(args)}, {_written(tuple(kw.items()))})"
        earlier = seen.get(written)
        if earlier is not None and out not in changed and out not in given:
            alias[out] = earlier
            continue
        if out not in changed:
            seen[written] = out
        made.append((out, function, args, kw))
    return made, alias


VIEWS = frozenset({"reshape", "transpose", "slice", "broadcast_to", "split"})
"""Operations whose output may be a view of their input's memory (NumPy's are)."""


def _given(calls: Sequence[Call], given: set[str]) -> set[str]:
    """The outputs a plan gives back and those whose memory they may share: the inputs of a
    view (a reshape, ...) of one, and of a view of those."""
    found = set(given)
    for out, function, args, kw in reversed(calls):
        if out in found and function in VIEWS:
            found |= {_root(ref.name) for ref in _refs((args, tuple(kw.values())))}
    return found


def _renamed(value: Any, alias: dict[str, str]) -> Any:
    """An argument with each reference to a shared output put as the output standing for it."""
    if isinstance(value, Ref):
        root = _root(value.name)
        return Ref(alias[root] + value.name[len(root) :]) if root in alias else value
    if isinstance(value, (list, tuple)):
        return type(value)(_renamed(item, alias) for item in value)
    return value


def _number(name: str) -> int:
    return int(name[1:])


def _root(name: str) -> str:
    """The variable a reference reads (`v3[1]` reads v3)."""
    return name.split("[", 1)[0]
