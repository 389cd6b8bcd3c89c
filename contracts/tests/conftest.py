"""The contract suite's own tests: the engines beside them (example_engine, broken_engines,
mixed_broken_engines) importable by the tests that run in this process too."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
