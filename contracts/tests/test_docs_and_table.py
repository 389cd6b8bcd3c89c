"""The docs' example engine is the one the tests run, and the table script fills its markers."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent


def test_the_guide_shows_the_example_engine_the_tests_run() -> None:
    guide = (ROOT / "docs" / "writing-an-engine.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", guide, re.DOTALL)
    assert blocks[0] == (HERE / "example_engine.py").read_text(encoding="utf-8")


def test_the_table_script_fills_the_markers(tmp_path: Path) -> None:
    report = {
        "engines": {
            "light": {
                "identity": {"name": "light", "version": "numpy 2", "device": "cpu"},
                "families": {"totals": 0.5, "moves": 0.0},
                "operations": {"matmul": {"family": "totals", "worst": 0.5, "checks": 3}},
            }
        }
    }
    (tmp_path / "light.json").write_text(json.dumps(report))
    doc = tmp_path / "contracts.md"
    doc.write_text(
        "# x\n<!-- contracts-table:start -->\nold\n<!-- contracts-table:end -->\nafter\n"
    )
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "ci" / "contracts_table.py"),
            str(tmp_path / "light.json"),
            "--doc",
            str(doc),
        ],
        check=True,
    )
    text = doc.read_text()
    assert "old" not in text and text.endswith("after\n")
    assert "| `light` | light · numpy 2 · cpu | - | 0.5 |" in text
    assert "| matmul | totals | 0.5 |" in text
    assert "`torch:cpu` | not measured yet" in text
