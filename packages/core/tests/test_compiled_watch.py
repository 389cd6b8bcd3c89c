"""What a compiled step's trace reads of the layers' and the loss's state (training/watch.py):
wherever a pass changes it — a list, an object of one's own, a callable, a closure, a class, a
global its forward names, a random generator, an array's every value — the run's steps run as
recorded, saying why, and give the bits of compile=False; settings that no pass changes are
replayed; state too large or unreadable (an iterator) is named."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from test_compiled_state import Counts, _alike

from deepsharp.core import SGD, Dense, Layer, MeanSquaredError, Network, Trainer
from deepsharp.core.autodiff import functions as ops


class _Scaled(Layer):
    """Scales its input by what `amount()` reads, after `change()` changed it."""

    def change(self) -> None:
        raise NotImplementedError

    def amount(self) -> float:
        raise NotImplementedError

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        self.change()
        return ops.mul(x, 1.0 + 0.1 * self.amount())


class _MixedList(_Scaled):
    def __init__(self) -> None:
        super().__init__("m")
        self.heads = [None, Counts()]  # a list whose first item is no layer

    def change(self) -> None:
        self.heads[1].seen[0] += 1

    def amount(self) -> float:
        return self.heads[1].seen[0]


class _Config:
    def __init__(self) -> None:
        self.head = Counts()


class _LayerInObject(_MixedList):
    def __init__(self) -> None:
        super().__init__()
        self.holder = _Config()
        self.heads = []

    def change(self) -> None:
        self.holder.head.seen[0] += 1

    def amount(self) -> float:
        return self.holder.head.seen[0]


class _TwiceInPass(_Scaled):
    def __init__(self) -> None:
        super().__init__("m")
        self.stats = [float(int("0"))]  # no constant of the code: freed once replaced

    def change(self) -> None:  # the second float takes the freed first's id (CPython)
        self.stats[0] += 1.0
        self.stats[0] += 1.0

    def amount(self) -> float:
        return self.stats[0]


class _HeldGenerator(_Scaled):
    def __init__(self, rng: Any) -> None:
        super().__init__("m")
        self.rng = rng

    def change(self) -> None:
        pass  # the draw alone, in amount()

    def amount(self) -> float:
        return float(self.rng.random() < 0.5)


class _GlobalDraw(_Scaled):
    def change(self) -> None:
        pass

    def amount(self) -> float:
        return float(np.random.random() < 0.5)


class _ClassCount(_Scaled):
    calls = [0]  # noqa: RUF012 (the state a trace must read)

    def change(self) -> None:
        type(self).calls[0] += 1

    def amount(self) -> float:
        return type(self).calls[0]


class _LargeArray(_Scaled):
    def __init__(self) -> None:
        super().__init__("m")
        self.hist = np.zeros(2_000_001)

    def change(self) -> None:
        self.hist[1] += 1

    def amount(self) -> float:
        return float(self.hist[1])


class _Cells(_Scaled):
    def __init__(self) -> None:
        super().__init__("m")
        self.cells = np.empty(1, dtype=object)
        self.cells[0] = [0]

    def change(self) -> None:
        self.cells[0][0] += 1

    def amount(self) -> float:
        return self.cells[0][0]


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (_MixedList, "layer 'Counts' (Counts) sets (or changes what holds) its attribute 'seen'"),
        (_LayerInObject, "layer 'Counts' (Counts) sets (or changes what holds) its attribute"),
        (_TwiceInPass, "layer 'm' (_TwiceInPass) sets (or changes what holds) its attribute 'stats'"),
        (lambda: _HeldGenerator(__import__("random").Random(0)), "draws from the random "
         "generator in its attribute 'rng' in its forward pass"),
        (lambda: _HeldGenerator(np.random.default_rng(0)), "its attribute 'rng'"),
        (lambda: _GlobalDraw("m"), "drew from Python's or NumPy's global random generator"),
        (lambda: _ClassCount("m"), "changes what its class's attribute 'calls' holds"),
        (_LargeArray, "its attribute 'hist'"),
        (_Cells, "its attribute 'cells'"),
    ],
)  # fmt: skip
def test_state_a_pass_changes_wherever_it_is_held_is_read(make: Any, named: str) -> None:
    """Failed before (trial CC), each replaying the first pass's state silently: a list of
    layers whose first item is none, a layer in an object of one's own; a value replaced twice
    in a pass (its id the freed first's); a random generator held or global; a class's
    attribute; one value of an array of two million; a list in an object array."""

    def start(step: int, trainer: Trainer) -> None:
        if step == 0:  # each run from the same global state
            np.random.seed(0)
            _ClassCount.calls[0] = 0

    made, why = _alike(lambda: Network([Dense(4), make(), Dense(1)], inputs=14), start)
    assert made == 0 and named in why[0]


class _Table(Layer):
    def __init__(self, table: list[int], count: bool = False) -> None:
        super().__init__()
        self.table, self.count = table, count
        self.stats = {"n": 0}

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        if self.count:
            self.stats["n"] += 1
        return ops.mul(x, 1.0 + 0.1 * self.stats["n"])


def test_a_table_layers_share_is_read_once_and_state_too_large_to_read_is_named() -> None:
    """Twelve layers sharing one table of 200,000 values are read once (a plan is made: 2.4
    million were read before, and a cost of seconds a trace); a count held beside a table of
    1.2 million values is past what a trace reads: the steps run as recorded, saying so
    (failed before, trial CC: past a budget a change went unseen)."""
    table = list(range(200_000))
    shared = lambda: Network([Dense(4), *(_Table(table) for _ in range(12)), Dense(1)], inputs=14)  # noqa: E731
    assert _alike(shared) == (1, ())
    large = lambda: Network([Dense(4), _Table(list(range(1_200_000)), True), Dense(1)], inputs=14)  # noqa: E731
    made, why = _alike(large)
    assert made == 0 and "hold more than 1,000,000 values (the last read: the attribute " in why[0]


class _Warmup:
    """A schedule of one's own, called: its count in an attribute of a callable object."""

    def __init__(self) -> None:
        self.t = 0

    def __call__(self) -> float:
        self.t += 1
        return float(self.t)


def _counter() -> Any:
    n = 0

    def step() -> float:
        nonlocal n
        n += 1
        return float(n)

    return step


class _Slotted:
    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0.0


_PASSES = [0.0]


class _Called(_Scaled):
    """Scales by what `self.source()` gives: a callable object, a closure, a partial."""

    def __init__(self, source: Any) -> None:
        super().__init__("m")
        self.source = source
        self.last = 0.0

    def change(self) -> None:
        object.__setattr__(self, "last", self.source())

    def amount(self) -> float:
        return self.last


class _SlotsHeld(_Scaled):
    def __init__(self) -> None:
        super().__init__("m")
        self.state = _Slotted()

    def change(self) -> None:
        self.state.n += 1

    def amount(self) -> float:
        return self.state.n


class _GlobalCount(_Scaled):
    def change(self) -> None:
        pass

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        _PASSES[0] += 1
        return ops.mul(x, 1.0 + 0.1 * _PASSES[0])


class _Draws(_Scaled):
    def __init__(self, held: Any) -> None:
        super().__init__("m")
        self.held = held

    def change(self) -> None:
        pass

    def amount(self) -> float:
        return float(next(self.held))


class _DeepsharpDraws(_Scaled):
    def __init__(self) -> None:
        super().__init__("m")
        from deepsharp.core import Generator

        self.generator = Generator(0)

    def change(self) -> None:
        pass

    def amount(self) -> float:
        return float(self.generator.uniform(1)[0])


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: _Called(_Warmup()), "its attribute 'source'"),
        (lambda: _Called(_counter()), "its attribute 'source'"),
        (lambda: _Called(__import__("functools").partial(_Warmup.__call__, _Warmup())),
         "its attribute 'source'"),
        (_SlotsHeld, "its attribute 'state'"),
        (lambda: _GlobalCount("m"), "changes the global '_PASSES' its forward names"),
        (_DeepsharpDraws, "draws from the random generator in its attribute 'generator'"),
        (lambda: _Draws(iter([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])), "holds an iterator (list_iterator)"),
        (lambda: _Draws(x * 0.5 for x in range(9)), "holds an iterator (generator)"),
    ],
)  # fmt: skip
def test_state_in_callables_slots_globals_and_iterators_is_read(make: Any, named: str) -> None:
    """Failed before (trial CE), each replaying the first pass silently: a callable object of
    one's own, a closure and a partial counting their calls; an object with slots; a global
    the forward names; deepsharp's own Generator; an iterator (now named: no trace can read
    its place)."""

    def start(step: int, trainer: Trainer) -> None:
        if step == 0:
            _PASSES[0] = 0.0

    made, why = _alike(lambda: Network([Dense(4), make(), Dense(1)], inputs=14), start)
    assert made == 0 and named in why[0]


class _Settings:
    """A configuration of one's own: defaults in its class body, an Enum, a logger."""

    scale = 1.5
    names = ("a", "b")


class _Configured(Layer):
    def __init__(self) -> None:
        super().__init__("c")
        import enum
        import logging

        self.settings = _Settings()
        self.mode = enum.Enum("Mode", "FAST SLOW").FAST
        self.log = logging.getLogger("deepsharp.tests")
        self.table = np.zeros(3, [("when", "M8[s]"), ("what", object)])
        self.table["when"] = np.datetime64("NaT")

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        return ops.mul(x, self.settings.scale)


def test_a_layer_holding_settings_of_its_own_that_no_pass_changes_is_replayed() -> None:
    """Failed before (trial CE): an object whose class body holds a value (a dataclass's
    defaults, an Enum member, a logger) was taken for changed state at every trace, and a
    structured array with an object field and NaT raised or fell back."""
    made, why = _alike(lambda: Network([Dense(4), _Configured(), Dense(1)], inputs=14))
    assert (made, why) == (1, ())


_LOG = __import__("logging").getLogger("deepsharp.tests.watch")
table = list(range(1_200_000))  # a global named as the attribute below: not what forward loads


class _Everyday(Layer):
    """Logs, substitutes text and reads `self.table`, beside a global of that name: nothing it
    holds changes."""

    def __init__(self) -> None:
        super().__init__("e")
        self.table = [1.0]

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        from re import sub

        _LOG.debug("a pass %s", sub("a", "b", "aa"))
        return ops.mul(x, self.table[0])


class _ReadsFile(_Scaled):
    def __init__(self) -> None:
        import io

        super().__init__("f")
        self.lines = io.StringIO("".join(f"{i}\n" for i in range(20)))
        self.last = 0.0

    def change(self) -> None:
        object.__setattr__(self, "last", float(self.lines.readline()))

    def amount(self) -> float:
        return self.last


def test_a_logger_a_library_cache_and_a_global_named_as_an_attribute_are_no_change() -> None:
    """Failed before (trial CG): a logger used in forward (its cache filled), `re.sub` (the
    pattern cache), and a global named as an attribute `self.table` reads (1.2 million values:
    past what a trace reads) made every run uncompiled; a file a forward reads a line of a pass
    from was replayed at its first line (its place unread)."""
    assert _alike(lambda: Network([Dense(4), _Everyday(), Dense(1)], inputs=14)) == (1, ())
    made, why = _alike(lambda: Network([Dense(4), _ReadsFile(), Dense(1)], inputs=14))
    assert made == 0 and "its attribute 'lines'" in why[0]
    from unittest import mock

    holds_mock = _Configured()
    holds_mock.stand_in = mock.MagicMock(spec=Dense)  # passes for a layer: no crash
    network = Network([Dense(4), holds_mock, Dense(1)], inputs=14)
    with Trainer(network, MeanSquaredError(), SGD(0.1), seed=0) as trainer:
        trainer.step(np.ones((8, 14), np.float32), np.ones((8, 1), np.float32))


_SCRIPT = """
import dataclasses, numpy as np
from deepsharp.core import Adam, BinaryCrossEntropy, Dense, Layer, Network, Trainer
from deepsharp.core.autodiff import functions as ops

@dataclasses.dataclass
class Warm:
    step: int = 0

class Warming(Layer):
    def __init__(self):
        super().__init__("w")
        self.state = Warm()
    def forward(self, x, slots, context):
        self.state.step += 1
        return ops.mul(x, 1.0 + 0.1 * self.state.step)

x = np.ones((16, 3), np.float32)
y = np.ones((16, 1), np.float32)
with Trainer(Network([Dense(2), Warming(), Dense(1)], inputs=3), BinaryCrossEntropy(),
             Adam(0.01), seed=0) as trainer:
    for _ in range(3):
        trainer.step(x, y)
    print(trainer.compiled.summary())
"""


def test_state_of_a_script_s_own_classes_is_read() -> None:
    """Failed before (trial CK): a script's (a notebook's) module, `__main__`, was taken for a
    library's: the dataclass a layer of it held was read by identity, its count replayed."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "0 replayed" in done.stdout and "its attribute 'state'" in done.stdout


class _Schedule:
    step = 0  # a class at module level, used as a namespace


_CONFIG = __import__("types").ModuleType("deepsharp_tests_watch_config")  # a config module
_CONFIG.STEP = 0


class _Namespaced(Layer):
    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        _Schedule.step += 1
        return ops.mul(x, 1.0 + 0.1 * _Schedule.step)


class _Configured2(Layer):
    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        _CONFIG.STEP += 1
        return ops.mul(x, 1.0 + 0.1 * _CONFIG.STEP)


class _SlottedLayer(_Scaled):
    __slots__ = ("hist",)

    def __init__(self) -> None:
        super().__init__("s")
        self.hist: list[int] = []

    def change(self) -> None:
        self.hist.append(1)

    def amount(self) -> float:
        return len(self.hist)


class _Shape(_Scaled):
    def __init__(self) -> None:
        super().__init__("t")
        self.seen = (3, 4)

    def change(self) -> None:
        self.seen = (3, 4)  # an equal tuple set again: no change

    def amount(self) -> float:
        return 1.0


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: _Namespaced("n"), "changes the global '_Schedule'"),
        (lambda: _Configured2("c"), "changes the global '_CONFIG'"),
        (_SlottedLayer, "its attribute 'hist'"),
    ],
)
def test_namespaces_config_modules_and_a_layer_s_slots_are_read(make: Any, named: str) -> None:
    """Failed before (trial CK): a class used as a namespace and a module of one's own that
    forward names, and a list in the layer's own slots, were read by identity: replayed."""
    import sys

    sys.modules[_CONFIG.__name__] = _CONFIG  # as an imported module is

    def start(step: int, trainer: Trainer) -> None:
        if step == 0:
            _Schedule.step, _CONFIG.STEP = 0, 0

    made, why = _alike(lambda: Network([Dense(4), make(), Dense(1)], inputs=14), start)
    assert made == 0 and named in why[0]


def test_an_equal_tuple_set_again_and_more_kinds_of_batch_than_plans_are_said() -> None:
    """Failed before (trial CK): a shape noted as an equal tuple at every pass made the run
    uncompiled; seventeen batch sizes in turn made a plan at every step, saying nothing."""
    assert _alike(lambda: Network([Dense(4), _Shape(), Dense(1)], inputs=14)) == (1, ())
    network = Network([Dense(4), Dense(1)], inputs=14)
    with Trainer(network, MeanSquaredError(), SGD(0.01), seed=0) as trainer:
        for size in [*range(1, 18)] * 2:
            trainer.step(np.ones((size, 14), np.float32), np.ones((size, 1), np.float32))
        assert "more kinds of batch came in turn than the 16 plans" in trainer.compiled.why[0]
        # a loss scale's values are kinds too (trial M3: the note said batch sizes alone)
        assert "each value a loss scale takes" in trainer.compiled.why[0]


_EXECUTED = """
from deepsharp.core import Layer
from deepsharp.core.autodiff import functions as ops

STATS = {"n": 0}

class Counted(Layer):
    def forward(self, x, slots, context):
        STATS["n"] += 1
        return ops.mul(x, 1.0 + 0.1 * STATS["n"])

class Warm:
    __slots__ = ("__n",)
    def __init__(self):
        self.__n = 0
    def bump(self):
        self.__n += 1
        return self.__n

class Warming(Layer):
    def __init__(self):
        super().__init__("w")
        self.warm = Warm()
    def forward(self, x, slots, context):
        return ops.mul(x, 1.0 + 0.1 * self.warm.bump())
"""


@pytest.mark.parametrize(
    ("name", "named"), [("Counted", "the global 'STATS'"), ("Warming", "'warm'")]
)
def test_classes_exec_makes_and_private_slots_are_read(name: str, named: str) -> None:
    """Failed before (trial CM): classes made by exec(source, {}) (a runner's, a notebook
    tool's) are 'builtins' to Python and were read as a library's; a private slot (`__n`) of a
    helper was looked for unmangled: both replayed the first pass."""
    made: dict[str, Any] = {}
    exec(_EXECUTED, made)

    def start(step: int, trainer: Trainer) -> None:
        if step == 0:
            made["STATS"]["n"] = 0

    result, why = _alike(lambda: Network([Dense(4), made[name](), Dense(1)], inputs=14), start)
    assert result == 0 and named in why[0]
