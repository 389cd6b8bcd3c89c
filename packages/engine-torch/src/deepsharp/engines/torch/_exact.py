"""The torch engine's guard on a card: TF32 off and deterministic algorithms around its own
products and convolutions, the application's settings put back after (`Exact`); at a mixed
precision also cuBLAS's half products added in float32 throughout (`HalfExact`).

torch is bound (`bind`) when the first engine is made, never when this module is imported.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Exact", "HalfExact", "bind"]

# Filled by bind() when the first engine is made.
torch: Any = None


def bind(module: Any) -> None:
    """Use `module` (torch, loaded when the first engine is made) from now on."""
    global torch
    torch = module


def _attempt(read: Any) -> Any:
    """A setting's value, or None where torch refuses to say (settings mixed by the caller)."""
    try:
        return read()
    except (RuntimeError, AttributeError):
        return None


class Exact:
    """On a card: TF32 off and deterministic algorithms for the engine's own calls only.

    Entered around products and convolutions on CUDA (value-by-value kernels, sums and moves
    are not affected by these settings). Since torch 2.9 TF32 has two APIs (the legacy flags
    and `fp32_precision`) that must agree or libtorch refuses to read them: the legacy setters
    keep both in step, so those are what is set; on the way out both are put back exactly as
    the application had them, whichever API it used.
    """

    __slots__ = ("_saved",)

    def __init__(self) -> None:
        self._saved: tuple[Any, ...] = ()

    def __enter__(self) -> None:
        backends, c = torch.backends, torch._C
        cudnn = backends.cudnn
        self._saved = (
            _attempt(torch.get_float32_matmul_precision),
            _attempt(lambda: backends.cuda.matmul.fp32_precision),
            _attempt(lambda: cudnn.allow_tf32),
            _attempt(lambda: cudnn.conv.fp32_precision),
            _attempt(lambda: cudnn.rnn.fp32_precision),
            c._get_deterministic_algorithms(),
            c._get_deterministic_algorithms_warn_only(),
            c._get_cudnn_benchmark(),
            c._get_cudnn_deterministic(),
        )
        torch.set_float32_matmul_precision("highest")
        cudnn.allow_tf32 = False
        for part in ("conv", "rnn"):  # explicit, should the application's 'all' say tf32
            owner = getattr(cudnn, part, None)
            if owner is not None and hasattr(owner, "fp32_precision"):
                owner.fp32_precision = "ieee"
        det, warn_only, benchmark, cudnn_det = self._saved[5:]
        if not det or warn_only:
            c._set_deterministic_algorithms(True, warn_only=False)
        if benchmark:
            c._set_cudnn_benchmark(False)
        if not cudnn_det:
            c._set_cudnn_deterministic(True)

    def __exit__(self, *exc: object) -> None:
        matmul, matmul_new, dnn, conv_new, rnn_new, det, warn_only, benchmark, cudnn_det = (
            self._saved
        )
        backends, c = torch.backends, torch._C
        if matmul is not None:
            torch.set_float32_matmul_precision(matmul)
        if dnn is not None:
            backends.cudnn.allow_tf32 = dnn
        for owner, value in (
            (backends.cuda.matmul, matmul_new),
            (getattr(backends.cudnn, "conv", None), conv_new),
            (getattr(backends.cudnn, "rnn", None), rnn_new),
        ):
            if owner is None or value is None:
                continue
            if _attempt(lambda o=owner: o.fp32_precision) != value:
                owner.fp32_precision = value
        if not det or warn_only:
            c._set_deterministic_algorithms(det, warn_only=warn_only)
        if benchmark:
            c._set_cudnn_benchmark(True)
        if not cudnn_det:
            c._set_cudnn_deterministic(False)


class HalfExact(Exact):
    """On a card at a mixed precision: `Exact`, and cuBLAS's half products add in float32
    throughout (its default lets a split product add its parts in the half format)."""

    __slots__ = ("_reductions",)

    def __enter__(self) -> None:
        super().__enter__()
        matmul = torch.backends.cuda.matmul
        names = ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction")
        self._reductions = {name: _attempt(lambda n=name: getattr(matmul, n)) for name in names}
        for name, value in self._reductions.items():
            if value is not None and value is not False:
                setattr(matmul, name, False)

    def __exit__(self, *exc: object) -> None:
        matmul = torch.backends.cuda.matmul
        for name, value in self._reductions.items():
            if value is not None and value is not False:
                setattr(matmul, name, value)
        super().__exit__(*exc)
