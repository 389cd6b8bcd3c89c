"""Embedding: each int64 id replaced by its row of a trained table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.errors import DataError
from deepsharp.core.nn.initializers import check_initializer
from deepsharp.core.nn.layer import Layer, Pass, Shape, whole

__all__ = ["Embedding"]


class Embedding(Layer):
    """int64 ids (N, ...) in 0 .. vocabulary - 1 -> their rows of the table (N, ..., dim); the
    table (slot `table`, (vocabulary, dim), drawn by `init`: a normal of deviation 0.05) is
    trained, each row by the positions that read it. Id 0 is a token like any other here, but
    on sequences (ids (N, L)) it marks padding (as a text column pads with it, 1 being an unknown
    word): the output carries a mask that attention downstream reads, so padding takes none.
    `mask_zero=False` makes no mask: ids of your own where 0 is a token (a label encoder's) are
    then all attended."""

    takes = ("int64",)

    def __init__(
        self,
        vocabulary: int,
        dim: int,
        init: str = "normal",
        name: str | None = None,
        mask_zero: bool = True,
    ) -> None:
        super().__init__(name)
        self.vocabulary = whole("Embedding", "vocabulary", vocabulary)
        self.dim = whole("Embedding", "dim", dim)
        self.init = check_initializer(init, "Embedding")
        if not isinstance(mask_zero, bool):
            raise TypeError(f"Embedding: mask_zero is True or False, not {mask_zero!r}")
        self.mask_zero = mask_zero

    def build(self, shape: Shape) -> Shape:
        self.slot("table", (self.vocabulary, self.dim), self.init, self.vocabulary, self.dim)
        return (*shape, self.dim)

    def check_input(self, values: NDArray[Any], where: str) -> None:
        if values.size == 0:
            return
        low, high = int(values.min()), int(values.max())
        if low >= 0 and high < self.vocabulary:
            return
        bad = values < 0 if low < 0 else values >= self.vocabulary
        place = tuple(int(i) for i in np.argwhere(bad)[0])
        raise DataError(
            f"{where}: row {place[0] + 1}, place {[i + 1 for i in place[1:]]} (each counting "
            f"from 1) holds the id "
            f"{int(values[place])}, outside {self.label}'s vocabulary of {self.vocabulary} (ids "
            f"0 .. {self.vocabulary - 1}): give ids the table has, or a larger vocabulary"
        )

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        out = ops.take_rows(slots["table"], x)
        if x.ndim == 2 and self.mask_zero:  # a sequence: its padding (id 0) takes no attention
            out.mask = ops.greater(x, 0.5)
        return out

    def config(self) -> dict[str, Any]:
        made: dict[str, Any] = {"vocabulary": self.vocabulary, "dim": self.dim}
        if self.init != "normal":
            made["init"] = self.init
        if not self.mask_zero:
            made["mask_zero"] = False
        return made
