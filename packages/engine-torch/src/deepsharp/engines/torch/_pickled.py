"""A torch engine pickled (a fitted estimator, a worker process of `n_jobs`, `copy.deepcopy`)
and loaded again: made anew, as `on_cpu` or `on_gpu` make it, where it can be; else a stand-in
that loads, so that what holds it loads too, and refuses every use saying why."""

from __future__ import annotations

from typing import Any, NoReturn

from deepsharp.core.errors import EngineUnavailableError

__all__ = ["EngineUnavailableHere", "UnavailableEngine", "remade"]


def remade(kind: Any, device: str, precision: str) -> Any:
    """The engine a pickle recorded (`TorchEngine.__reduce__`): torch bound, its checks run;
    an `UnavailableEngine` where this process cannot make it (no torch, no card)."""
    try:
        if device.startswith("cuda"):
            return kind.on_gpu(int(device.partition(":")[2] or 0), precision)
        return kind.on_cpu(precision)
    except EngineUnavailableError as error:
        return UnavailableEngine(kind, device, precision, str(error))


class EngineUnavailableHere(EngineUnavailableError, AttributeError):
    """A stand-in's refusal: an `EngineUnavailableError` to whoever uses it, and an
    `AttributeError` to whoever only asks whether it has a name (`hasattr`, scikit-learn's
    clone, a runtime-checked protocol), which it has not."""


class UnavailableEngine:
    """A torch engine loaded where it cannot be made: a fitted estimator trained on a card,
    loaded on a machine without one, loads, and its `trained_` serves on another engine
    (`estimator.trained_.predict(x, "light")`); any use of this one raises
    `EngineUnavailableError` saying why."""

    def __init__(self, kind: Any, device: str, precision: str, why: str) -> None:
        self._made = (kind, device, precision)
        self._why = why

    def __getattr__(self, name: str) -> NoReturn:
        if name.startswith("__") or name in ("_made", "_why"):
            raise AttributeError(name)  # pickle's and copy's look-ups: none here
        _, device, precision = self._made
        raise EngineUnavailableHere(
            f"this torch engine ({device}, {precision}) was pickled where it ran and loaded "
            f"where it cannot be made: {self._why}. Serve on an engine this machine has "
            "(trained.predict(rows, 'light'), or an estimator's trained_.predict(x, 'light'))"
        )

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return remade, self._made  # pickled again, made again where it can be

    def __repr__(self) -> str:
        kind, device, precision = self._made
        return f"<{kind.__name__} on {device} ({precision}), unavailable here>"
