"""Learning in parts: a pipeline learning from training rows that come one part at a time
(`Pipeline.learning`), each column kind keeping bounded statistics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from deepsharp.core.data.columns import Learner
from deepsharp.core.data.sources import columns, named_in_messages
from deepsharp.core.data.target import TargetLearner
from deepsharp.core.data.values import ColumnName
from deepsharp.core.errors import DataError

if TYPE_CHECKING:
    from deepsharp.core.data.pipeline import Pipeline

__all__ = ["Learning"]


class Learning:
    """A pipeline learning from training rows that come in parts (`Pipeline.learning`)."""

    def __init__(self, pipeline: Pipeline, names: Sequence[ColumnName]) -> None:
        pipeline._forget()
        self.pipeline = pipeline
        self.columns = pipeline._resolve_names(names)
        self.reads = pipeline.reads(names)
        self.rows = 0
        self.finished = False
        self.learners: list[tuple[ColumnName, Learner | TargetLearner]] = [
            (column.name, column.learner()) for column in self.columns
        ]
        target = pipeline._target
        if target is not None:
            self.learners.append((target.name, target.learner()))

    def add(self, part: object) -> None:
        """Learn from one part of the training rows (a `Part`, or any rows)."""
        self._not_finished("add")
        try:
            with named_in_messages(part):
                count, taken = columns(part, self.reads)
                for name, learner in self.learners:
                    learner.add(taken[name])
        except BaseException:
            self.pipeline._forget()
            raise
        self.rows += count

    def finish(self) -> Pipeline:
        """Set every column's statistics: the pipeline is learned."""
        self._not_finished("finish")
        pipeline = self.pipeline
        try:
            if self.rows == 0:
                raise DataError("no training rows: a pipeline learns from at least one row")
            for _, learner in self.learners:
                learner.finish()
        except BaseException:
            pipeline._forget()
            raise
        pipeline._columns = self.columns
        pipeline._learned = True
        self.finished = True
        return pipeline

    def _not_finished(self, call: str) -> None:
        """Refuse a part or a finish after the finish (trial ST5: a part added after it was
        taken, and a second finish set the statistics again from the parts since, silently)."""
        if self.finished:
            raise DataError(
                f"learning.{call}(): this learning has finished, and its pipeline is learned; "
                "to learn again from other rows, start another: pipeline.learning(names)"
            )
