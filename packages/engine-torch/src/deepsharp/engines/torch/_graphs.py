"""A compiled step's plan captured as one CUDA graph (`TorchEngine.graph_plan`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["cuda_graph"]


def cuda_graph(torch: Any, device: Any, plan: Any, inputs: Sequence[Any]) -> Callable[..., Any]:
    """`plan` (a compiled step's pass on `inputs`, already run once as it is) captured as one
    CUDA graph on `device`. The function returned copies its inputs into the graph's own and
    replays it — every kernel of the pass in one launch, the same kernels on the same values,
    so the same bits — and gives back the graph's outputs (rewritten by its next replay)."""
    static = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.device(device):
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):  # captured on a side stream: nothing runs yet
            outputs = plan(*static)

    def replay(*given: Any) -> Any:
        for mine, theirs in zip(static, given):
            if isinstance(mine, torch.Tensor):
                mine.copy_(theirs)
        graph.replay()
        return outputs

    return replay
