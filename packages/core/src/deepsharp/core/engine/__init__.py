"""The engine layer: the protocol every engine follows, precisions, the registry of installed
engines, and helpers for engine authors.

An engine owns float32 tensors (and int64 index tensors) in its own memory and performs
operations on opaque handles; the core knows shapes, the engine knows where values live.

- `protocol`: `Engine` (the primitives), `EngineIdentity`, `Counters`.
- `fused`: the fast paths, each with its reference in primitives (`FAST_PATHS`).
- `precision`: the precisions and the bound each holds totals to.
- `totals`: one strategy a precision (`Totals`, `choose_totals`).
- `registry`: engines describing themselves (`EngineDescription`), specs, `make_engine`.
- `blocks`, `memory`: helpers for engines that widen their totals, and the process's heap.
"""

from deepsharp.core.engine import fused
from deepsharp.core.engine.blocks import images_a_block, product_blocks
from deepsharp.core.engine.precision import (
    FLOAT32,
    MIXED_BFLOAT16,
    MIXED_FLOAT16,
    PRECISIONS,
    STRICT,
    Precision,
    precision_named,
)
from deepsharp.core.engine.protocol import (
    Counters,
    Engine,
    EngineIdentity,
    Handle,
    Operand,
    Padding,
    int64_put,
)
from deepsharp.core.engine.registry import (
    EngineDescription,
    available_engines,
    default_engine,
    describe_engine,
    make_engine,
    rescan_engines,
    split_precision,
)
from deepsharp.core.engine.totals import TOTALS_OPERATIONS, Totals, choose_totals

__all__ = [
    "FLOAT32",
    "MIXED_BFLOAT16",
    "MIXED_FLOAT16",
    "PRECISIONS",
    "STRICT",
    "TOTALS_OPERATIONS",
    "Counters",
    "Engine",
    "EngineDescription",
    "EngineIdentity",
    "Handle",
    "Operand",
    "Padding",
    "Precision",
    "Totals",
    "available_engines",
    "choose_totals",
    "default_engine",
    "describe_engine",
    "fused",
    "images_a_block",
    "int64_put",
    "make_engine",
    "precision_named",
    "product_blocks",
    "rescan_engines",
    "split_precision",
]
