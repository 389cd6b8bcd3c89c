"""The engine layer: the protocol every engine follows, precisions, the registry of installed
engines, and helpers for engine authors.

An engine owns float32 tensors (and int64 index tensors) in its own memory and performs
operations on opaque handles; the core knows shapes, the engine knows where values live.
"""

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
)
from deepsharp.core.engine.registry import available_engines, make_engine
from deepsharp.core.engine.totals import TOTALS, TOTALS_OPERATIONS, use_totals

__all__ = [
    "FLOAT32",
    "MIXED_BFLOAT16",
    "MIXED_FLOAT16",
    "PRECISIONS",
    "STRICT",
    "TOTALS",
    "TOTALS_OPERATIONS",
    "Counters",
    "Engine",
    "EngineIdentity",
    "Handle",
    "Operand",
    "Padding",
    "Precision",
    "available_engines",
    "images_a_block",
    "make_engine",
    "precision_named",
    "product_blocks",
    "use_totals",
]
