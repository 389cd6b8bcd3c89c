"""The engine: where values live and arithmetic happens.

An engine owns float32 tensors (and int64 index tensors) in its own memory and performs
operations on opaque handles. The core knows shapes; the engine knows where values live.
Every operation here is held to a contract by `deepsharp-contracts` (see docs/contracts.md):

- transfers (`put`, `get`): exact, each one counted;
- totals (`matmul`, `sum`, `mean`, `conv2d`, `conv2d_weight_grad`, `conv2d_fold`):
  |got - ref| <= 3 * 2**-24 * sum(|terms|) for every element;
- value by value (arithmetic, functions such as `exp`, `softplus`, `tanh`, `adam_update`, `sgd_update`):
  |got - ref| <= 1e-5 + 1.3e-6 * |ref|;
- moves (`reshape`, `transpose`, `slice`, `take_rows`, `concatenate`, `split`, `pad`,
  `broadcast_to`, `max`, `maxpool2d`, `maxpool2d_back`, `one_hot`, `copy`): bit for bit.

Handles are immutable for every operation but the fused optimizer updates and `assign`, which
update their first arguments in place. Binary value-by-value operations take a handle or a
Python float (a constant: not a transfer) on either side and broadcast as NumPy does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from numpy.typing import NDArray

from deepsharp.core.errors import EngineUnavailableError

__all__ = [
    "FLOAT32_TOTALS",
    "TOTALS",
    "Counters",
    "Engine",
    "EngineIdentity",
    "Handle",
    "Operand",
    "available_engines",
    "images_a_block",
    "make_engine",
    "product_blocks",
    "use_totals",
]

Handle = Any
"""An engine's opaque reference to one tensor."""

Operand = Any
"""A handle, or a Python float used as a constant."""

Padding = tuple[int, int]
"""Zeros added before and after one spatial axis."""


TOTALS = ("float64", "float32")
"""How an engine that offers a choice adds its totals: in float64, each rounded once to float32
(the default: the contract's 3u bound, the same bits on any thread count and for a row in any
company), or in its library's own float32 kernels (`totals="float32"`)."""

FLOAT32_TOTALS = "float32 totals"
"""The precision in the identity of an engine that adds its totals in float32."""

TOTALS_OPERATIONS = ("matmul", "sum", "mean", "conv2d", "conv2d_weight_grad", "conv2d_fold")
"""The operations whose totals `totals` chooses; every other operation is the same either way."""


def use_totals(engine: Any, name: str, totals: str) -> str | None:
    """Check `totals` for the engine called `name`; for "float32", put the engine's
    `_<operation>_float32` methods in place of the six totals. Gives the identity's precision."""
    if totals not in TOTALS:
        raise ValueError(
            f"the {name} engine adds its totals in {' or '.join(map(repr, TOTALS))}, not {totals!r}"
        )
    if totals == "float64":
        return None
    for operation in TOTALS_OPERATIONS:
        setattr(engine, operation, getattr(engine, f"_{operation}_float32"))
    return FLOAT32_TOTALS


@dataclass(frozen=True)
class EngineIdentity:
    """What a checkpoint records of the engine it was taken on.

    `precision` is set by an engine that can add in more than one way (the light and torch
    engines' float32 totals, `FLOAT32_TOTALS`): a run goes on only with the same precision.
    None is the engine's default.
    """

    name: str
    version: str | None = None
    device: str | None = None
    precision: str | None = None

    def __str__(self) -> str:
        parts = [self.name]
        if self.version is not None:
            parts.append(self.version)
        if self.device is not None:
            parts.append(f"on {self.device}")
        if self.precision is not None:
            parts.append(f"with {self.precision}")
        return " ".join(parts)

    def to_json(self) -> dict[str, str | None]:
        data = {"name": self.name, "version": self.version, "device": self.device}
        if self.precision is not None:
            data["precision"] = self.precision
        return data

    @classmethod
    def from_json(cls, data: Any) -> EngineIdentity:
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            raise ValueError(f"an engine identity must be a mapping with a 'name', not {data!r}")
        version, device, precision = data.get("version"), data.get("device"), data.get("precision")
        if not all(
            value is None or isinstance(value, str) for value in (version, device, precision)
        ):
            raise ValueError(
                f"an engine identity's version, device and precision must be text, not {data!r}"
            )
        return cls(data["name"], version, device, precision)


@dataclass
class Counters:
    """What an engine counts. Every engine counts transfers; some count more."""

    transfers_in: int = 0
    transfers_out: int = 0


@runtime_checkable
class Engine(Protocol):
    """The operations every engine performs. Names and signatures are the contract's."""

    name: str

    @property
    def counters(self) -> Counters:
        """Transfers in and out at least (an engine may count more: live buffers, bytes)."""
        ...

    @property
    def identity(self) -> EngineIdentity: ...

    # --- transfers -------------------------------------------------------------------------
    def put(self, array: NDArray[Any]) -> Handle:
        """Host to engine: float arrays become float32, integer arrays int64. Counted."""
        ...

    def get(self, handle: Handle) -> NDArray[Any]:
        """Engine to host: a NumPy array the caller owns (float32 or int64). Counted."""
        ...

    def zeros(self, shape: tuple[int, ...]) -> Handle:
        """A new float32 tensor of zeros made on the engine (not a transfer)."""
        ...

    def shape(self, handle: Handle) -> tuple[int, ...]: ...

    # --- totals ----------------------------------------------------------------------------
    def matmul(
        self, a: Handle, b: Handle, transpose_a: bool = False, transpose_b: bool = False
    ) -> Handle:
        """(op(a) @ op(b)) for 2-D a and b, op transposing when asked."""
        ...

    def sum(self, x: Handle, axes: tuple[int, ...], keepdims: bool = False) -> Handle: ...

    def mean(self, x: Handle, axes: tuple[int, ...], keepdims: bool = False) -> Handle: ...

    def conv2d(
        self,
        x: Handle,
        w: Handle,
        stride: int,
        padding: tuple[Padding, Padding],
        bias: Handle | None = None,
    ) -> Handle:
        """Cross-correlation of images x (N, C, H, W) with filters w (F, C, kh, kw) -> (N, F, oh, ow).

        `padding` is ((top, bottom), (left, right)) zeros around each image. With `bias` (F,),
        each filter's bias is one more term of each of its totals, added in the same call.
        """
        ...

    def conv2d_weight_grad(
        self,
        x: Handle,
        gy: Handle,
        kernel: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
        bias: bool = False,
    ) -> Handle:
        """The filters' gradient (F, C, kh, kw) from images x and the outputs' gradient gy.

        With `bias`, a pair: that and the biases' gradient (F,), gy's total over images and
        places, worked out in the same call.
        """
        ...

    def conv2d_fold(
        self,
        gy: Handle,
        w: Handle,
        image: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
    ) -> Handle:
        """The images' gradient (N, C, H, W), H, W = `image`: what folding gy through w adds onto each place."""
        ...

    # --- value by value --------------------------------------------------------------------
    def add(self, a: Operand, b: Operand) -> Handle: ...
    def sub(self, a: Operand, b: Operand) -> Handle: ...
    def mul(self, a: Operand, b: Operand) -> Handle: ...
    def div(self, a: Operand, b: Operand) -> Handle: ...
    def maximum(self, a: Operand, b: Operand) -> Handle: ...
    def greater(self, a: Operand, b: Operand) -> Handle:
        """1.0 where a > b, else 0.0 (float32)."""
        ...

    def where(self, condition: Handle, a: Operand, b: Operand) -> Handle:
        """a where condition is non-zero, else b."""
        ...

    def neg(self, x: Handle) -> Handle: ...
    def abs(self, x: Handle) -> Handle: ...
    def exp(self, x: Handle) -> Handle: ...
    def log(self, x: Handle) -> Handle: ...
    def log1p(self, x: Handle) -> Handle: ...
    def softplus(self, x: Handle) -> Handle:
        """log(1 + exp(x)), without overflow for any x."""
        ...

    def sqrt(self, x: Handle) -> Handle: ...
    def tanh(self, x: Handle) -> Handle: ...
    def sigmoid(self, x: Handle) -> Handle: ...
    def relu(self, x: Handle) -> Handle: ...
    def relu_back(self, x: Handle, grad: Handle) -> Handle:
        """ReLU's way back in one operation: grad where x > 0, else 0 (x and grad of one shape)."""
        ...

    def sgd_update(
        self,
        slots: Sequence[Handle],
        grads: Sequence[Handle],
        velocities: Sequence[Handle],
        *,
        learning_rate: float,
        momentum: float,
    ) -> None:
        """In place, for each slot: v = momentum * v - learning_rate * g; slot += v."""
        ...

    def adam_update(
        self,
        slots: Sequence[Handle],
        grads: Sequence[Handle],
        firsts: Sequence[Handle],
        seconds: Sequence[Handle],
        *,
        step_size: float,
        beta1: float,
        beta2: float,
        epsilon: float,
    ) -> None:
        """In place, for each slot (Keras's Adam; step_size already holds the bias corrections):
        m += (g - m) * (1 - beta1); v += (g * g - v) * (1 - beta2);
        slot -= step_size * m / (sqrt(v) + epsilon)."""
        ...

    # --- moves -----------------------------------------------------------------------------
    def copy(self, x: Handle) -> Handle: ...
    def assign(self, target: Handle, source: Handle) -> None:
        """In place: target's values become source's (same shape)."""
        ...

    def reshape(self, x: Handle, shape: tuple[int, ...]) -> Handle: ...
    def transpose(self, x: Handle, axes: tuple[int, ...]) -> Handle: ...
    def slice(self, x: Handle, axis: int, start: int, stop: int) -> Handle: ...
    def take_rows(self, x: Handle, rows: Handle) -> Handle:
        """x[rows] along the first axis; rows is an int64 handle."""
        ...

    def concatenate(self, xs: Sequence[Handle], axis: int) -> Handle: ...
    def split(self, x: Handle, sizes: Sequence[int], axis: int) -> list[Handle]: ...
    def pad(self, x: Handle, widths: Sequence[Padding]) -> Handle:
        """Zeros around x: one (before, after) pair per axis."""
        ...

    def broadcast_to(self, x: Handle, shape: tuple[int, ...]) -> Handle: ...
    def max(self, x: Handle, axes: tuple[int, ...], keepdims: bool = False) -> Handle: ...
    def one_hot(self, indices: Handle, classes: int) -> Handle:
        """float32 (N, classes) from int64 indices (N,)."""
        ...

    def maxpool2d(self, x: Handle, pool: int) -> tuple[Handle, Handle]:
        """Max over pool x pool windows (stride pool, no padding; trailing rows/columns dropped).

        Returns the maxima (N, C, H//pool, W//pool) and the selection (N, C, H//pool, W//pool),
        int64: the place within each window of its first maximum, counted row by row
        (0 .. pool*pool-1). The contract holds the selection bit for bit.
        """
        ...

    def maxpool2d_back(
        self, gy: Handle, selection: Handle, image: tuple[int, int], pool: int
    ) -> Handle:
        """Sends each window's gradient to the place its selection names; zeros elsewhere."""
        ...


def product_blocks(
    rows: int, inner: int, columns: int, transposed_a: bool, budget: int
) -> tuple[str, int]:
    """How an engine that widens its totals may work a product (rows x inner) @ (inner x
    columns) so that the wide copies stay within `budget` values (and so in cache):

    - ``("whole", 0)``: small enough to widen both sides at once;
    - ``("turned", 0)``: a is stored transposed and a block of its rows would be strided: form
      (b.T @ a.T).T instead, which reads a by its rows;
    - ``("rows", step)``: widen b once, a `step` rows at a time;
    - ``("columns", step)``: widen a once, b `step` columns at a time;
    - ``("whole", 0)`` too when neither side is small enough to widen once.
    The light and torch engines use it; each element stays one wide total rounded once.
    """
    if (rows + columns) * inner + rows * columns <= budget:
        return "whole", 0
    if transposed_a and rows > columns and inner * columns <= budget:
        return "turned", 0
    if inner * columns <= budget:
        return "rows", max(1, budget // (inner + columns))
    if rows * inner <= budget:
        return "columns", max(1, budget // (inner + rows))
    return "whole", 0


def images_a_block(filters: int, window: int, places: int, budget: int) -> int:
    """How many images a convolution that widens its totals may take at a time so that its
    wide outputs (`filters` values a place) and windows (`window` = C*kh*kw values a place),
    over `places` places an image, stay within `budget` values: at least one."""
    return max(1, budget // ((filters + window) * places))


def _registered() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group="deepsharp.engines")}


def available_engines() -> list[str]:
    """The names of the engines installed here (found through the `deepsharp.engines` entry points)."""
    return sorted(_registered())


KNOWN_ENGINES = {
    "light": "it ships with deepsharp itself: reinstall deepsharp",
    "torch": "pip install deepsharp-engine-torch, and a torch build (see docs/install.md)",
    "testbuffer": "pip install deepsharp-engine-testbuffer",
}


def make_engine(spec: str | Engine | None = None) -> Engine:
    """An engine from a spec: `light`, `testbuffer`, `torch:cpu`, `torch:cuda:0`, `module:factory`.

    None gives the light engine; an engine passes through unchanged. An installed engine's
    entry point names a function `from_spec(option: str) -> Engine` (option: what follows
    the first colon, '' when nothing does); `module:factory` calls `factory()` from `module`.
    """
    if spec is None:
        spec = "light"
    if not isinstance(spec, str):
        return spec
    name, _, option = spec.partition(":")
    registered = _registered()
    if name in registered:
        from_spec = registered[name].load()
        engine: Engine = from_spec(option)
        return engine
    if name in KNOWN_ENGINES:
        installed = ", ".join(sorted(registered)) or "none"
        raise EngineUnavailableError(
            f"the {name!r} engine is not installed (installed: {installed}); {KNOWN_ENGINES[name]}"
        )
    if not option:
        raise EngineUnavailableError(
            f"no engine named {spec!r}: use light, testbuffer, torch:cpu, torch:cuda:N "
            "or module:factory for an outside engine"
        )
    import importlib

    try:
        module = importlib.import_module(name)
    except ImportError as error:
        raise EngineUnavailableError(
            f"engine spec {spec!r}: cannot import module {name!r} ({error})"
        ) from error
    factory = getattr(module, option, None)
    if not callable(factory):
        raise EngineUnavailableError(
            f"engine spec {spec!r}: module {name!r} has no callable {option!r}"
        )
    made: Engine = factory()
    return made
