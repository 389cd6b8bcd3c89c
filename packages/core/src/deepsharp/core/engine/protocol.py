"""The engine: where values live and arithmetic happens.

An engine owns float32 tensors (and int64 index tensors) in its own memory and performs
operations on opaque handles. The core knows shapes; the engine knows where values live.
`Engine` lists the PRIMITIVES, what every engine must perform; the fused operations (a
convolution with its bias, ReLU's way back, the optimizer updates, one flat tensor's parts, and
what networks as graphs added: products of stacks, rows added into places, erf, max-pooling over
a pair) are fast paths with references written in these primitives
(`deepsharp.core.engine.fused`), which an engine may offer faster versions of. Every operation is held to a contract by
`deepsharp-contracts` (docs/contracts.md), by family:

- transfers (`put`, `get`): exact, each one counted;
- totals (`matmul`, `sum`, `mean`, `conv2d`, `conv2d_weight_grad`, `conv2d_fold`): the bound of
  the engine's precision (`deepsharp.core.engine.precision`): 3u·Σ|terms| for `strict`,
  (n + 1)u·Σ|terms| for `float32`, u = 2**-24, n the number of terms of one total;
- value by value (arithmetic, `exp`, `softplus`, `tanh`, `sigmoid`, ...):
  |got - ref| <= 1e-5 + 1.3e-6 * |ref|;
- moves (`reshape`, `transpose`, `slice`, `take_rows`, `concatenate`, `split`, `pad`,
  `broadcast_to`, `max`, `maxpool2d`, `maxpool2d_back`, `one_hot`, `copy`): bit for bit.

Every operation leaves its inputs unchanged; only `assign` (and the optimizer updates among
the fast paths) change their first argument in place. A handle may share memory with another
(a reshape or a slice may be a view), so nothing but those in-place operations may write into
a handle. Binary value-by-value operations take a handle or a Python float (a constant: not a
transfer) on either side and broadcast as NumPy does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.errors import DataError

__all__ = [
    "Counters",
    "Engine",
    "EngineIdentity",
    "Handle",
    "Operand",
    "Padding",
    "int64_put",
    "own_name",
]

Handle = Any
"""An engine's opaque reference to one tensor."""

Operand = Any
"""A handle, or a Python float used as a constant."""

Padding = tuple[int, int]
"""Zeros added before and after one spatial axis."""


def own_name(engine: Any, base: type) -> str:
    """The name an engine's identity records: `name`, where the engine's own class (or `base`,
    the engine's package's class) sets it; else, for a subclass, the class's name. A subclass
    changes what the engine does (its sigmoid, its products): under the name it inherits, a
    checkpoint of its parent would go on with it and `compare` take the two for one engine."""
    kind = type(engine)
    if kind is base or "name" in vars(kind):
        return str(engine.name)
    return kind.__name__


@dataclass(frozen=True)
class EngineIdentity:
    """What a checkpoint and a report record of the engine: its name, version, device and
    precision (`strict`, `float32`, `mixed_bfloat16`, `mixed_float16`: the names of
    `deepsharp.core.engine.precision`; always set). Every engine has one; a run goes on only on
    an engine of the same identity. An engine of your own without a version or device is
    recorded by its name and precision."""

    name: str
    version: str | None = None
    device: str | None = None
    precision: str = "strict"

    def __str__(self) -> str:
        parts = [self.name]
        if self.version is not None:
            parts.append(self.version)
        if self.device is not None:
            parts.append(f"on {self.device}")
        parts.append(f"({self.precision})")
        return " ".join(parts)

    def to_json(self) -> dict[str, str | None]:
        return {
            "name": self.name,
            "version": self.version,
            "device": self.device,
            "precision": self.precision,
        }

    @classmethod
    def from_json(cls, data: Any) -> EngineIdentity:
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            raise ValueError(f"an engine identity must be a mapping with a 'name', not {data!r}")
        version, device = data.get("version"), data.get("device")
        precision = data.get("precision")
        if not all(value is None or isinstance(value, str) for value in (version, device)) or (
            not isinstance(precision, str)
        ):
            raise ValueError(
                f"an engine identity's version and device must be text or null and its "
                f"precision text, not {data!r}"
            )
        for field, value in (("name", data["name"]), ("version", version), ("device", device),
                             ("precision", precision)):  # fmt: skip
            if value is not None and not (value.isprintable() and len(value) <= IDENTITY_TEXT):
                raise ValueError(  # (printed as it was: escapes cleared a terminal, trial H)
                    f"an engine identity's {field} is printable text of at most {IDENTITY_TEXT} "
                    f"characters, not {value[:IDENTITY_TEXT]!r}"
                )
        return cls(data["name"], version, device, precision)


IDENTITY_TEXT = 200
"""The most characters each field of an engine identity read from a file may hold."""


@dataclass
class Counters:
    """What an engine counts. Every engine counts transfers; some count more."""

    transfers_in: int = 0
    transfers_out: int = 0


@runtime_checkable
class Engine(Protocol):
    """The primitive operations every engine performs, with `name`, `identity` and `counters`.
    Names and signatures are the contract's. The fast paths an engine may add are listed in
    `deepsharp.core.engine.fused.FAST_PATHS`."""

    name: str

    @property
    def counters(self) -> Counters:
        """Transfers in and out at least (an engine may count more: live buffers, bytes)."""
        ...

    @property
    def identity(self) -> EngineIdentity: ...

    # --- transfers -------------------------------------------------------------------------
    def put(self, array: NDArray[Any]) -> Handle:
        """Host to engine: float arrays become float32, integer (and boolean) arrays int64,
        every bit of int64's range kept. Counted."""
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
    ) -> Handle:
        """Cross-correlation of images x (N, C, H, W) with filters w (F, C, kh, kw) -> (N, F, oh, ow).

        `padding` is ((top, bottom), (left, right)) zeros around each image.
        """
        ...

    def conv2d_weight_grad(
        self,
        x: Handle,
        gy: Handle,
        kernel: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
    ) -> Handle:
        """The filters' gradient (F, C, kh, kw) from images x and the outputs' gradient gy."""
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

    # --- moves -----------------------------------------------------------------------------
    def copy(self, x: Handle) -> Handle: ...
    def assign(self, target: Handle, source: Handle) -> None:
        """In place: target's values become source's (same shape)."""
        ...

    def reshape(self, x: Handle, shape: tuple[int, ...]) -> Handle: ...
    def transpose(self, x: Handle, axes: tuple[int, ...]) -> Handle: ...
    def slice(self, x: Handle, axis: int, start: int, stop: int) -> Handle: ...
    def take_rows(self, x: Handle, rows: Handle) -> Handle:
        """x[rows] along the first axis; rows is an int64 handle of any shape: (N, L) ids of a
        table (V, D) give (N, L, D)."""
        ...

    def concatenate(self, xs: Sequence[Handle], axis: int) -> Handle: ...
    def split(self, x: Handle, sizes: Sequence[int], axis: int) -> list[Handle]: ...
    def pad(self, x: Handle, widths: Sequence[Padding]) -> Handle:
        """Zeros around x: one (before, after) pair per axis."""
        ...

    def broadcast_to(self, x: Handle, shape: tuple[int, ...]) -> Handle: ...
    def max(self, x: Handle, axes: tuple[int, ...], keepdims: bool = False) -> Handle: ...
    def one_hot(self, indices: Handle, classes: int) -> Handle:
        """float32 (*indices.shape, classes) from int64 indices of any shape: 1.0 at each
        index's class."""
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


def int64_put(source: NDArray[Any]) -> bool:
    """Whether `put` holds `source` as int64 (integers and booleans; the rest is float32), after
    refusing unsigned integers beyond int64's range, which a cast would wrap to negative values
    (hashed ids kept as uint64 read as other rows): DataError naming the first."""
    if source.dtype.kind == "u" and source.itemsize == 8 and source.size:
        beyond = source > np.uint64(np.iinfo(np.int64).max)
        if beyond.any():
            place = tuple(int(i) for i in np.argwhere(beyond)[0])
            raise DataError(
                f"put: the integer {int(source[place])} at {list(place)} is beyond int64's "
                "range, which an engine holds integers in: give ids below 2**63 (ids % "
                "vocabulary, for hashed ones)"
            )
    return source.dtype.kind in "iub"
