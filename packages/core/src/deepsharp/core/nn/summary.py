"""`network.summary()`: each layer, its output shape and its slot count, as Keras prints it."""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deepsharp.core.nn.network import Network

__all__ = ["summarized"]


def summarized(network: Network) -> str:
    """The table: one line an input and a layer call (a graph's also says what each reads),
    then the counts of trained values and of buffers' values."""
    graph = network.graph
    rows: list[tuple[str, str, str, str]] = []
    names = [spec.name for spec in graph.inputs]
    for spec in graph.inputs:
        shape = "?" if spec.shape is None else _shape(spec.shape)
        rows.append(
            (f"{spec.name} (Input)", shape + ("" if spec.dtype == "float32" else " int64"), "", "")
        )
    # A layer called more than once: each call named by its place among them, "bn#2", so that
    # what a node reads says which call's output (trial G: "bn, bn" told them apart not at all).
    calls = Counter(node.layer for node in graph.nodes)
    seen: dict[int, int] = {}
    counted: set[int] = set()
    for node in graph.nodes:
        layer = network.layers[node.layer]
        seen[node.layer] = seen.get(node.layer, 0) + 1
        called = layer.name or ""
        if calls[node.layer] > 1:
            called += f"#{seen[node.layer]}"
        shape = (
            "?" if layer.output_shape is None or not network.built else _shape(layer.output_shape)
        )
        count = ""
        if node.layer not in counted:  # a shared layer's slots counted at its first call
            counted.add(node.layer)
            count = f"{sum(math.prod(s.shape) for s in layer.specs.values()):,}"
        else:
            count = "(shared)"
        reads = ", ".join(names[source] for source in node.sources)
        rows.append((f"{called} ({layer.kind})", shape, count, reads))
        names.append(called)
    heads = ("layer (kind)", "output shape", "slots", "reads")
    shown = 3 if network.chained else 4
    widths = [max(len(row[i]) for row in [heads, *rows]) for i in range(shown)]
    lines = [
        f"Network: {'a chain' if network.chained else 'a graph'} of {len(network.layers)} "
        f"layer{'' if len(network.layers) == 1 else 's'}"
        # the inputs too, which the rows below list (trial FR4: 'of N layers' above N+1 rows)
        + f", on {len(graph.inputs)} input{'s' * (len(graph.inputs) > 1)}"
    ]
    lines.append("  ".join(h.ljust(w) for h, w in zip(heads, widths)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    trained = sum(math.prod(spec.shape) for spec in network.specs.values())
    kept = sum(math.prod(spec.shape) for spec in network.buffer_specs.values())
    lines.append(f"slots (trained): {trained:,}; buffers (not trained): {kept:,}")
    if not network.built:  # (trial X3: "?" shapes and 0 slots, with no word of why)
        lines.append(
            "not built yet: its shapes and slots follow from its rows' shape; give "
            "Network(..., inputs=shape) or call network.build(shape), or train it first"
        )
    return "\n".join(lines)


def _shape(shape: tuple[int, ...]) -> str:
    return "(N, " + ", ".join(str(size) for size in shape) + ")"
