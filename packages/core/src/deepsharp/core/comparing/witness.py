"""The witness: an engine that takes a step as another engine, and has each of its operations
done again by a reference engine on the very same inputs.

A `Witness` stands where the step's engine would: the trainer, the layers and the rulebook call
it as they call any engine. It hands each call to the engine (its handles kept as they are, in
whatever format the engine keeps them: a product's output in bfloat16 stays so), then brings the
operation's inputs to the host, puts them on the reference engine, has the reference do the
same operation (a fast path the reference lacks: its reference in primitives) and judges the
two outputs by the operation's bound (`deepsharp.core.comparing.bounds`). Each operation is thus
judged on its own inputs: differences never compound along the step. It also checks what the
contract asks of every operation beyond its values: that it leaves its inputs unchanged and
makes no transfer (a put makes one in).

Where the call comes from is read off the recording (`Recording.layer`, `.rule`, `.running`):
the layer, the rule, and whether it is the forward pass or the way back.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from deepsharp.core.autodiff.tensor import open_recording
from deepsharp.core.comparing.bounds import FAMILIES, IN_PLACE, Judged, judge
from deepsharp.core.comparing.comparison import Difference
from deepsharp.core.comparing.terms import PRODUCTS
from deepsharp.core.engine import Engine, Precision, fused
from deepsharp.core.engine.protocol import Engine as EngineProtocol
from deepsharp.core.errors import ConfigurationError, DeepSharpError

__all__ = ["Held", "Witness"]

PASSED = {"get", "shape"}
"""Calls handed to the engine without a judgment: reading values and shapes."""

PUTS = {"put", "put_checked"}
"""The transfers in: one each, and not run twice (`put_checked` also says whether the values it
put are all finite, held to the host's answer)."""

PRIMITIVES = {
    name
    for name in vars(EngineProtocol)
    if not name.startswith("_") and callable(vars(EngineProtocol)[name])
} - {"counters", "identity"}
"""The operations every engine performs: a missing one is an engine that cannot take the step."""


def _finite_said(said: bool, array: Any) -> list[str]:
    """What a checked put said of its values' being finite, where it is not so."""
    finite = fused.all_finite(array)
    if said == finite:
        return []
    return [
        f"said its values were {'all finite' if said else 'not all finite'} where they "
        f"{'are not' if said else 'are'} (a checked put says whether every value is finite)"
    ]


class Held:
    """One of the engine's handles, as the witness hands it to the core, and whether it is a
    product's output (`product`: made by one, or moved from one by a reshape, ...)."""

    __slots__ = ("__weakref__", "handle", "product")

    def __init__(self, handle: Any, product: bool = False) -> None:
        self.handle = handle
        self.product = product


PASSED_ON = frozenset(
    {
        *("reshape", "transpose", "slice", "broadcast_to", "copy", "concatenate", "split", "pad"),
        *("take_rows", "max", "relu", "relu_back", "maxpool2d", "maxpool2d_pair"),
    }
)
"""What passes a product's output on as it is, in its half format where a mixed precision's
engine keeps it so (the torch engine's keep it through moves, ReLU each way, max and
max-pooling: a review found a bias added after a ReLU judged past its bound), and a bias
added onto one (`_onto_product`)."""


def _onto_product(name: str, args: Sequence[Any], engine: Engine) -> bool:
    """Whether an `add` puts a smaller operand onto a product's output (a bias: the one add a
    mixed precision's half format may round, `bounds._values`). Before, every add of operands of
    two sizes was taken so (trial CP4: a BatchNorm's shift 0.2 % off passed at mixed_bfloat16)."""
    if name != "add" or len(args) != 2 or not all(isinstance(a, Held) for a in args):
        return False
    sizes = [math.prod(engine.shape(a.handle)) for a in args]
    if sizes[0] == sizes[1]:
        return False
    return bool(args[0 if sizes[0] > sizes[1] else 1].product)


def _unwrapped(value: Any) -> Any:
    if isinstance(value, Held):
        return value.handle
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrapped(item) for item in value)
    return value


def _wrapped(value: Any, product: bool = False) -> Any:
    if value is None or isinstance(value, (int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_wrapped(item, product) for item in value)
    return Held(value, product)


def _holds(value: Any) -> bool:
    """Whether an argument is a handle, or a list or tuple holding one."""
    if isinstance(value, Held):
        return True
    return isinstance(value, (list, tuple)) and any(_holds(item) for item in value)


def _flat(value: Any) -> list[Any]:
    """The handles in a result or an argument (one, or a list or tuple of them), in order; an
    output or an argument that is None (an LSTM's first position has no last cell) is none."""
    if isinstance(value, (list, tuple)):
        return [handle for item in value for handle in _flat(item)]
    return [] if value is None else [value]


class Witness:
    """Takes a step as `engine`, each operation done again by `reference` and judged.

    `rows` gathers a `Difference` an operation. `phase` is "setup" (nothing is judged: the
    slots bound, the optimizer's memory made) until the step begins ("step"); within the step
    the recording says forward or way back, and what follows the way back is the update.
    `names` maps the engine's handles of slots and the optimizer's memory to their names, so
    that an update's row names the slot.
    """

    def __init__(
        self,
        engine: Engine,
        reference: Engine,
        precisions: tuple[Precision, Precision],
        labels: tuple[str, str],
    ) -> None:
        self._engine = engine
        self.name = engine.name
        self._reference = reference
        self._precisions = precisions
        self._labels = labels
        self.rows: list[Difference] = []
        self.phase = "setup"
        self.names: dict[int, str] = {}
        self._recorded = False

    # --- what the core reads of an engine ----------------------------------------------------
    @property
    def identity(self) -> Any:
        return self._engine.identity

    @property
    def counters(self) -> Any:
        return self._engine.counters

    def name_handles(self, names: dict[str, Any]) -> None:
        """Name the engine's handles behind these (the slots, the optimizer's memory)."""
        for name, handle in names.items():
            self.names[id(_unwrapped(handle))] = name

    def get(self, handle: Any) -> Any:
        return self._engine.get(_unwrapped(handle))

    def shape(self, handle: Any) -> tuple[int, ...]:
        return self._engine.shape(_unwrapped(handle))

    def put(self, array: Any) -> Held:
        return self._call("put", self._engine.put, (array,), {})  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            own = getattr(self._engine, name)
        except AttributeError:
            if name in PRIMITIVES:
                raise ConfigurationError(
                    f"compare: {self._labels[1]} cannot run {name}, which {self._place()} asks "
                    f"for (it has no {name!r}): compare engines that both perform every operation "
                    "of the step"
                ) from None
            raise
        if not callable(own):
            return own

        def run(*args: Any, **kwargs: Any) -> Any:
            return self._call(name, own, args, kwargs)

        return run

    # --- one operation ---------------------------------------------------------------------
    def _call(
        self, name: str, own: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        raw, raw_kwargs = _unwrapped(args), _unwrapped(kwargs)
        if self.phase == "setup" or name not in FAMILIES:
            return _wrapped(own(*raw, **raw_kwargs))
        engine = self._engine
        phase, layer, rule = self._where()
        host = [self._host(value) for value in args]
        counters = engine.counters
        before = (counters.transfers_in, counters.transfers_out)
        try:
            result = own(*raw, **raw_kwargs)
        except DeepSharpError:
            raise
        except Exception as error:
            raise ConfigurationError(
                f"compare: {self._labels[1]} could not run {name} for {self._place()}: {error!r}"
            ) from error
        made = (counters.transfers_in - before[0], counters.transfers_out - before[1])
        outputs = self._outputs(name, raw, result)
        got = [engine.get(handle) for handle in outputs]
        notes = self._changed(name, args, host) + self._transfers(name, made)
        if name == "put_checked":
            notes += _finite_said(bool(result[1]), host[0])
        notes += self._repeated(name, own, raw, raw_kwargs, got)
        reference = self._again(name, host, kwargs)
        apart = [
            f"gave {np.shape(mine)} where the reference gives {np.shape(theirs)}"
            for mine, theirs in zip(got, reference)
            if np.shape(mine) != np.shape(theirs)
        ] + [
            f"gave {np.asarray(mine).dtype} values where the reference gives "
            f"{np.asarray(theirs).dtype} (an engine's operations give the protocol's types)"
            for mine, theirs in zip(got, reference)
            if np.shape(mine) == np.shape(theirs)
            and np.asarray(mine).dtype != np.asarray(theirs).dtype
        ]
        if apart or len(got) != len(reference):
            notes += apart or [
                f"gave {len(got)} outputs where the reference gives {len(reference)}"
            ]
            judged = Judged(math.inf, (0.0, 0.0), math.inf, (0, ()))
        else:
            onto = _onto_product(name, args, engine)
            judged = judge(name, host, kwargs, reference, got, self._precisions, onto)
        output, _ = judged.place
        if phase == "update":
            layer = self._named_layer(outputs[output] if outputs else None, raw) or layer
        ratio = judged.ratio if not notes else float("inf")
        vacuous = bool(judged.vacuous) and judged.difference != 0.0 and not ratio > 1.0
        if vacuous:  # the same bits need no bound; one past its bound is past it
            notes.append(judged.vacuous)
        detail = self._detail(name, outputs, output, len(outputs), notes, judged.difference)
        self.rows.append(
            Difference(
                index=len(self.rows) + 1,
                phase=phase,
                layer=layer,
                rule=rule,
                operation=name,
                family=FAMILIES[name],
                inputs=tuple(
                    tuple(np.shape(part))
                    for value, held in zip(args, host)
                    if _holds(value) or name in PUTS
                    for part in _flat(held)
                ),
                outputs=tuple(tuple(np.shape(g)) for g in got),
                difference=judged.difference,
                bounds=judged.bounds,
                ratio=ratio,
                detail=detail,
                vacuous=vacuous,
            )
        )
        product = (
            name in PRODUCTS
            or (
                name in PASSED_ON
                and any(isinstance(held, Held) and held.product for held in _flat(args[:1]))
            )
            or _onto_product(name, args, engine)
        )
        return _wrapped(result, product)

    def _host(self, value: Any) -> Any:
        """An argument with every handle in it brought to the host (a copy)."""
        if isinstance(value, Held):
            return self._engine.get(value.handle)
        if isinstance(value, (list, tuple)) and _holds(value):
            return [self._host(item) for item in value]
        return value

    def _outputs(self, name: str, args: Sequence[Any], result: Any) -> list[Any]:
        if name == "put_checked":  # the handle; whether its values are finite is judged apart
            return [result[0]]
        if name in IN_PLACE:
            return [handle for place in IN_PLACE[name] for handle in _flat(args[place])]
        return _flat(result)

    def _changed(self, name: str, args: Sequence[Any], host: Sequence[Any]) -> list[str]:
        """The inputs the operation changed (only the in-place ones may change)."""
        kept = IN_PLACE.get(name, ())
        for place, (value, before) in enumerate(zip(args, host)):
            if place in kept or not _holds(value):
                continue
            for handle, was in zip(_flat(value), _flat(before)):
                now = self._engine.get(_unwrapped(handle))
                if not _bits_equal(now, was):
                    return [f"changed its input (argument {place + 1})"]
        return []

    def _repeated(
        self,
        name: str,
        own: Callable[..., Any],
        raw: Sequence[Any],
        kwargs: dict[str, Any],
        got: Sequence[Any],
    ) -> list[str]:
        """The operation run again on the same inputs must give the same bits (every precision
        promises it run to run); an in-place one or a put is not run twice."""
        if name in IN_PLACE or name in PUTS:
            return []
        again = [self._engine.get(handle) for handle in _flat(own(*raw, **kwargs))]
        if len(again) == len(got) and all(map(_bits_equal, again, got)):
            return []
        return [
            "gave other bits when run again on the same inputs (an engine gives the same bits "
            "run to run)"
        ]

    def _transfers(self, name: str, made: tuple[int, int]) -> list[str]:
        expected = (1, 0) if name in PUTS else (0, 0)
        if made == expected:
            return []
        return [f"made {made[0]} transfers in and {made[1]} out (an operation makes none)"]

    def _again(self, name: str, host: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
        """The operation done by the reference engine on the same inputs, brought to the host."""
        reference = self._reference
        args = [self._put(value) for value in host]
        try:
            if name == "put":
                result = reference.put(host[0])
            elif name == "put_checked":
                result = fused.put_checked(reference, host[0])
            elif name in fused.FAST_PATHS:
                result = getattr(fused, name)(reference, *args, **kwargs)
            else:
                result = getattr(reference, name)(*args, **kwargs)
        except AttributeError:
            raise ConfigurationError(
                f"compare: the reference engine {self._labels[0]} cannot run {name}, which "
                f"{self._place()} asks for: compare engines that both perform every operation of "
                "the step"
            ) from None
        except DeepSharpError:
            raise
        except Exception as error:
            raise ConfigurationError(
                f"compare: the reference engine {self._labels[0]} could not run {name} for "
                f"{self._place()}: {error!r}"
            ) from error
        return [reference.get(handle) for handle in self._outputs(name, args, result)]

    def _put(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self._put(item) for item in value]
        if isinstance(value, np.ndarray):
            return self._reference.put(value)
        return value

    # --- where the step is ------------------------------------------------------------------
    def _where(self) -> tuple[str, str, str | None]:
        """The phase, the layer and the rule of the call being made."""
        recording = open_recording()
        if recording is not None:
            self._recorded = True
            node = recording.running
            if node is not None:
                return "way back", node.layer or "loss", node.rule.name
            rule = recording.rule
            return "forward", recording.layer or "loss", None if rule is None else rule.name
        return ("update" if self._recorded else "batch"), "", None

    def _place(self) -> str:
        phase, layer, rule = self._where()
        if phase in ("batch", "update"):
            return f"the step's {phase}"
        place = f"layer {layer!r}" if layer != "loss" else "the loss"
        return f"{place} ({phase}{', ' + rule if rule else ''})"

    def _named_layer(self, output: Any, args: Sequence[Any]) -> str | None:
        """The layer of the slot (or the slot's memory) an update's row is about."""
        for handle in [output, *(h for value in args for h in _flat(value))]:
            name = self.names.get(id(handle)) if handle is not None else None
            if name is not None:
                slot = name.split(" of ")[-1]
                return slot.rsplit(".", 1)[0]
        return None

    def _detail(
        self,
        name: str,
        outputs: Sequence[Any],
        output: int,
        count: int,
        notes: list[str],
        difference: float,
    ) -> str:
        said = list(notes)
        if difference == 0.0:  # the same values everywhere: no output is the worst
            return "; ".join(said)
        named = self.names.get(id(outputs[output])) if outputs else None
        if named is not None and name in IN_PLACE:
            said.insert(0, f"worst: {named}")
        elif count > 1:
            said.insert(0, f"worst: output {output + 1} of {count}")
        return "; ".join(said)


def _bits_equal(a: Any, b: Any) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return bool(a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes())
