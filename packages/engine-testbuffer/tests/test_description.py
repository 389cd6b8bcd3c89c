"""The test engine describes itself through its entry point: its precision, its specs."""

from __future__ import annotations

import pytest

from deepsharp.core.cli import main
from deepsharp.core.engine import describe_engine
from deepsharp.core.engine.registry import make_engine


def test_the_entry_point_states_its_one_precision() -> None:
    description = describe_engine("testbuffer")
    assert description.precisions == ("strict",)
    assert description.default_spec == "testbuffer"
    assert make_engine(description.spec_with("strict")).identity.precision == "strict"


def test_doctor_lists_its_precision(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "precisions: strict (testbuffer, default)" in out
