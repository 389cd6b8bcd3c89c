"""Engines for compare's tests: each the light engine with one thing wrong (a spec
`compare_helpers:drifting` names one for the command line; conftest puts this folder on the path)."""

from __future__ import annotations

from typing import Any

import numpy as np

from deepsharp.core.engine import EngineIdentity, fused_recurrent
from deepsharp.engines.light import LightEngine

Array = Any


class Drifting(LightEngine):
    """The light engine whose products come out 1e-3 too large: far past any bound."""

    name = "drifting"

    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        return super().matmul(a, b, transpose_a, transpose_b) * np.float32(1.001)

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, precision="strict")


class NoPooling(LightEngine):
    """An engine that does not do max-pooling."""

    name = "no-pooling"

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, precision="strict")

    def maxpool2d(self, x: Array, pool: int) -> Any:
        raise NotImplementedError("max-pooling is not written yet")


class FlippedPut(LightEngine):
    """The light engine whose checked put (the batch's features) flips the last bit of the
    first value it puts (in a copy of its own: the array it is given is the caller's)."""

    name = "flipped-put"

    def put_checked(self, array: Array, *, owned: bool = False) -> tuple[Array, bool]:
        handle, finite = super().put_checked(array, owned=owned)
        handle = handle.copy()
        flat = handle.reshape(-1).view(np.uint32)
        flat[0] ^= np.uint32(1)
        return handle, finite

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, precision="strict")


class DoubtingPut(LightEngine):
    """The light engine whose checked put says its values are not all finite, whatever they are."""

    name = "doubting-put"

    def put_checked(self, array: Array, *, owned: bool = False) -> tuple[Array, bool]:
        return super().put_checked(array, owned=owned)[0], False

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, precision="strict")


class ClipsByTheFirst(LightEngine):
    """The light engine whose global clipping takes the norm of the first gradient alone."""

    name = "clips-by-the-first"

    def global_clip_norm(self, grads: Any, *, clip_norm: float) -> list[Array]:
        factor = self._clip_factor(self._squares(grads[0]), clip_norm)
        return [np.multiply(grad, factor) for grad in grads]

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, precision="strict")


def drifting() -> Drifting:
    return Drifting()


class LayerNormOff(LightEngine):
    """The light engine whose LayerNorm comes out 0.3% too large, at its own precision."""

    name = "layernorm-off"

    def layer_norm(self, x: Array, scale: Array, shift: Array, epsilon: float) -> Array:
        made = super().layer_norm(x, scale, shift, epsilon)
        return (made * np.float32(1.003)).astype(np.float32)


class WholeSequences(LightEngine):
    """The light engine at float32 offering an LSTM's whole sequence each way (as the torch
    engine does), its reference's calls: a chain whose bound grows with the sequence."""

    name = "whole-sequences"

    def __init__(self) -> None:
        super().__init__("float32")

    def lstm_sequence(self, x: Array, weight_ih: Array, weight_hh: Array, bias: Array) -> Any:
        return fused_recurrent.lstm_sequence_reference(self, x, weight_ih, weight_hh, bias)

    def lstm_sequence_back(self, *args: Any) -> Any:
        return fused_recurrent.lstm_sequence_back_reference(self, *args)


def whole_sequences() -> WholeSequences:
    return WholeSequences()
