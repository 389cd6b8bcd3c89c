"""The processes `launch` starts import the tests' workers by name: put this folder on the path
(spawned processes inherit it). Most tests start their processes from a fork server that has
torch and deepsharp loaded already (`workers.START`): a launch then costs a fork, not an import
of torch a process; the default, spawn, has tests of its own."""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

multiprocessing.get_context("forkserver").set_forkserver_preload(
    ["torch", "torch.distributed", "deepsharp.core", "deepsharp.distributed", "distributed_workers"]
)
