"""The exceptions of data-parallel training: one class per kind of failure.

Every message says what was wrong, on which rank (process) and what to do.
"""

from __future__ import annotations

from deepsharp.core.errors import CheckpointMismatchError, DeepSharpError

__all__ = [
    "DistributedError",
    "ProcessFailedError",
    "ReplicasDifferError",
    "WorldSizeMismatchError",
]


class DistributedError(DeepSharpError, RuntimeError):
    """A data-parallel job that cannot start or go on: no job to join, a backend that is not
    there, an engine the backend cannot carry. Says why and what to do."""


class ProcessFailedError(DistributedError):
    """A process of a job failed, and the job was ended on every rank.

    `rank` is the process blamed (the one that raised, exited or stopped answering first),
    `exit_code` its exit status where it exited, and `remote_traceback` the text of the
    traceback it raised (None where it raised nothing: it exited or hung)."""

    def __init__(
        self,
        message: str,
        rank: int,
        exit_code: int | None = None,
        remote_traceback: str | None = None,
    ) -> None:
        super().__init__(message)
        self.rank = rank
        self.exit_code = exit_code
        self.remote_traceback = remote_traceback

    def __reduce__(
        self,
    ) -> tuple[type[ProcessFailedError], tuple[str, int, int | None, str | None]]:
        return (type(self), (str(self), self.rank, self.exit_code, self.remote_traceback))


class ReplicasDifferError(DistributedError):
    """The processes of a job hold different slots where they must hold the same bits: names
    the ranks and the slots."""


class WorldSizeMismatchError(DistributedError, CheckpointMismatchError):
    """A checkpoint taken at one world size, handed to a run at another: names both. A
    `CheckpointMismatchError` too, as every checkpoint of another run is."""
