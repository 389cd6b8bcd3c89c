"""The docs' example engine is the one the tests run, and the table script fills its markers."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from deepsharp.contracts.measure import Contract, Measurements

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent


def test_the_guide_shows_the_example_engine_the_tests_run() -> None:
    guide = (ROOT / "docs" / "writing-an-engine.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", guide, re.DOTALL)
    assert blocks[0] == (HERE / "example_engine.py").read_text(encoding="utf-8")


def test_the_table_script_fills_the_markers(tmp_path: Path) -> None:
    measurements = Measurements()
    contract = Contract("light", measurements, "strict")
    measurements.identities["light"] = {"name": "light", "version": "numpy 2", "device": "cpu"}
    # a total of 2 terms, 1 + 1, off by half a unit of u·Σ|terms|: 2u·0.5 over a bound of 3u·2
    got, ref = np.float32([2.0]), np.float64([2.0 + 2.0**-24])
    contract.totals("matmul", got, ref, np.float64([2.0]), np.float64([2.0]), product=True)
    contract.moves("reshape", np.zeros(3, np.float32), np.zeros(3, np.float32))
    (tmp_path / "light.json").write_text(json.dumps(measurements.to_json()), encoding="utf-8")
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
    text = doc.read_text(encoding="utf-8")
    assert "old" not in text and text.endswith("after\n")
    assert "| `light` | light · numpy 2 · cpu | strict: 3u·Σ\\|terms\\| | - | 0.5 (0.167) |" in text
    assert "| `light` | strict | 0.5 (0.167) | - | - | - |" in text
    assert "| matmul | totals | 0.5 (0.167) |" in text
    assert "| reshape | moves | 0 |" in text
    assert "`torch:cpu` | not measured yet" in text
