"""The test engine: every value in memory from the C library's allocator, totals in float32.

Each handle (`TestBuffer`) owns one buffer from `malloc`, freed when the handle is collected.
Operations compute with NumPy views over those buffers and write their results into newly
allocated buffers, so no tensor's values live on Python's heap. Its totals are added in float32
arithmetic alone, each within 3u·Σ|terms| at any size (precision `strict`; the argument is in
`deepsharp.engines.testbuffer._totals`). Its counters add live buffers, live bytes and the most
buffers alive at once to the transfers every engine counts, so memory and transfer promises are
tested without a card.

- `DESCRIPTION`: what the `deepsharp.engines` entry point gives (`testbuffer`,
  `testbuffer:strict`; its one precision, strict).
"""

from deepsharp.core.engine import EngineDescription
from deepsharp.engines.testbuffer._engine import (
    PRECISION,
    TestBufferEngine,
    __version__,
    from_spec,
)
from deepsharp.engines.testbuffer._memory import BufferCounters, TestBuffer

__all__ = [
    "DESCRIPTION",
    "BufferCounters",
    "TestBuffer",
    "TestBufferEngine",
    "__version__",
    "from_spec",
]

DESCRIPTION = EngineDescription(
    name="testbuffer",
    make=from_spec,
    default_spec="testbuffer",
    precisions=(PRECISION,),
    specs=("testbuffer", f"testbuffer:{PRECISION}"),
)
"""The test engine as it describes itself through its entry point."""
