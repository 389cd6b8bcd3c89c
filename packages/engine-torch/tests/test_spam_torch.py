"""The spam sample on torch:cpu reaches its figure, as on the light engine (test_spam)."""

from __future__ import annotations

import re

import pytest

from deepsharp.core.samples import spam

pytest.importorskip("torch")


def test_spam_reaches_98_percent_on_torch_cpu_with_the_confusion_counts() -> None:
    run = spam.run(engine="torch:cpu", progress=False)
    assert run.report.engine.name == "torch" and run.report.test_rows == 837
    assert run.report.measures["accuracy"] >= 0.98
    assert any(
        re.match(r"test messages: \d+ spam called spam, ", note) for note in run.report.notes
    )
