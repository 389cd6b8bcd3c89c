"""Finding torch without needing it: the lazy import, the refusals and `describe_torch`.

Nothing here imports torch at module level: `import deepsharp.engines.torch` works where
there is no torch, and only making an engine (or asking `describe_torch`) looks for it.
"""

from __future__ import annotations

import importlib
from typing import Any, TypedDict

from deepsharp.core.errors import EngineUnavailableError

__all__ = [
    "checked_device",
    "CPU_BUILD",
    "CUDA_BUILDS",
    "TESTED_TORCH",
    "TorchReport",
    "cuda_refusal",
    "describe_torch",
    "doctor_lines",
    "load_torch",
]

TESTED_TORCH = "2.13.0"
"""The torch version deepsharp-engine-torch is tested with (ci/constraints.txt pins the same):
every install command advised pins it, since an unpinned `pip install torch` on Linux pulls
whatever CUDA build is newest, of several GB."""

CPU_BUILD = f"pip install torch=={TESTED_TORCH} --index-url https://download.pytorch.org/whl/cpu"
"""The command that brings PyTorch's CPU-only build (small; no card needed)."""

CUDA_BUILDS = (
    f"pip install torch=={TESTED_TORCH} (on Linux the build from PyPI is a CUDA one), or a "
    "build for your CUDA from PyTorch's own index, e.g. "
    f"pip install torch=={TESTED_TORCH} --index-url https://download.pytorch.org/whl/cu126 "
    "(cu118, cu128, ...)"
)
"""The commands that bring a CUDA build of PyTorch (for NVIDIA cards), pinned likewise."""

NO_TORCH = (
    "the torch engine needs PyTorch (the `torch` package), which {why}. Install the build you "
    f"run on: for the processor only, the CPU-only build: {CPU_BUILD} ; for NVIDIA cards, a "
    f"CUDA build: {CUDA_BUILDS}"
)


def load_torch() -> Any:
    """The torch module, or `EngineUnavailableError` naming the packages that bring one.

    Imported afresh through `sys.modules` on every call (cheap once imported), so a process
    that hides torch (`sys.modules["torch"] = None`) is refused as one without it.
    """
    try:
        return importlib.import_module("torch")
    except ImportError as error:
        if _missing(error):
            why = "is not installed here"
        else:
            why = f"is installed but cannot be imported: {error}"
        raise EngineUnavailableError(NO_TORCH.format(why=why)) from error
    except OSError as error:  # a broken install: a shared library that cannot be loaded
        raise EngineUnavailableError(
            NO_TORCH.format(why=f"is installed but cannot be loaded: {error}")
        ) from error


def _missing(error: BaseException | None) -> bool:
    """True when the import failed because torch itself is absent (not a broken install)."""
    return isinstance(error, ModuleNotFoundError) and error.name in (None, "torch")


def _build(torch: Any) -> str:
    cuda = getattr(torch.version, "cuda", None)
    return "CPU-only" if cuda is None else f"CUDA {cuda}"


def cuda_refusal(torch: Any, index: int) -> str | None:
    """Why `torch:cuda:<index>` cannot be made here, or None when it can."""
    if index < 0:
        return f"there is no card of index {index}: card indices count from 0"
    if getattr(torch.version, "cuda", None) is None:
        return (
            f"the torch installed here ({torch.__version__}) is a CPU-only build, which cannot "
            f"use a card. For an NVIDIA card install a CUDA build instead: {CUDA_BUILDS}"
        )
    if not torch.cuda.is_available():
        return (
            f"torch {torch.__version__} is a CUDA {torch.version.cuda} build, but it finds no "
            "NVIDIA card or no working driver here (torch.cuda.is_available() is False): check "
            "`nvidia-smi`, the driver version against CUDA "
            f"{torch.version.cuda}, and CUDA_VISIBLE_DEVICES; or use the processor (torch:cpu)"
        )
    count = int(torch.cuda.device_count())
    if index >= count:
        cards = "1 card (cuda:0)" if count == 1 else f"{count} cards (cuda:0 to cuda:{count - 1})"
        return f"there is no card of index {index}: torch finds {cards}"
    return None


class TorchReport(TypedDict):
    """What `describe_torch` finds (see there)."""

    installed: bool
    version: str | None
    build: str | None
    cuda: str | None
    cards: list[str]
    devices: list[str]
    problems: list[str]
    advice: list[str]


def describe_torch() -> TorchReport:
    """What `deepsharp doctor` says about torch here. Never raises; imports torch if present.

    Returns a dict (`TorchReport`) with:

    - ``installed`` (bool): torch can be imported.
    - ``version`` (str | None): ``torch.__version__``, e.g. ``"2.13.0+cpu"``.
    - ``build`` (str | None): ``"CPU-only"`` or ``"CUDA 12.6"``.
    - ``cuda`` (str | None): ``torch.version.cuda`` (None on a CPU-only build).
    - ``cards`` (list[str]): the names of the NVIDIA cards torch finds, by index
      (``cards[i]`` is ``cuda:i``); empty when none.
    - ``devices`` (list[str]): the engine specs usable here, e.g.
      ``["torch:cpu", "torch:cuda:0"]``; empty without torch.
    - ``problems`` (list[str]): what is missing or broken, in words (empty when nothing is).
    - ``advice`` (list[str]): what to install for what is missing (pip commands), one
      entry per missing thing; empty when nothing is missing.
    """
    report: TorchReport = {
        "installed": False,
        "version": None,
        "build": None,
        "cuda": None,
        "cards": [],
        "devices": [],
        "problems": [],
        "advice": [],
    }
    try:
        torch = load_torch()
    except EngineUnavailableError as error:
        cause = error.__cause__
        report["problems"].append(
            "torch is not installed" if _missing(cause) else f"torch cannot be imported: {cause}"
        )
        report["advice"].append(f"for the processor: {CPU_BUILD}")
        report["advice"].append(f"for NVIDIA cards: {CUDA_BUILDS}")
        return report
    report["installed"] = True
    report["version"] = str(torch.__version__)
    report["build"] = _build(torch)
    report["cuda"] = getattr(torch.version, "cuda", None)
    report["devices"].append("torch:cpu")
    if report["cuda"] is None:
        report["problems"].append("torch is a CPU-only build: it cannot use NVIDIA cards")
        report["advice"].append(f"for NVIDIA cards, a CUDA build instead: {CUDA_BUILDS}")
        return report
    try:
        available = bool(torch.cuda.is_available())
        count = int(torch.cuda.device_count()) if available else 0
        report["cards"] = [str(torch.cuda.get_device_name(i)) for i in range(count)]
    except Exception as error:  # a driver that fails while asked: report, never raise
        report["problems"].append(f"asking torch for cards failed: {error}")
        return report
    if not report["cards"]:
        report["problems"].append(
            f"torch is a CUDA {report['cuda']} build but finds no NVIDIA card or working driver"
        )
        report["advice"].append(
            f"an NVIDIA driver that supports CUDA {report['cuda']} (check `nvidia-smi`), "
            "and CUDA_VISIBLE_DEVICES"
        )
    report["devices"].extend(f"torch:cuda:{i}" for i in range(len(report["cards"])))
    return report


def doctor_lines() -> list[str]:
    """What `deepsharp doctor` prints about torch: version, build, cards, problems, advice."""
    report = describe_torch()
    lines = [
        f"torch {report['version']} ({report['build']})" if report["installed"] else "torch: none",
        f"torch devices: {', '.join(report['devices']) or 'none'}",
    ]
    if report["cards"]:
        lines.append(
            "torch cards: "
            + ", ".join(f"cuda:{i} {name}" for i, name in enumerate(report["cards"]))
        )
    lines += [f"torch problem: {problem}" for problem in report["problems"]]
    lines += [f"torch advice: {advice}" for advice in report["advice"]]
    return lines


def checked_device(module: Any, device: str) -> Any:
    """The processor, or a card torch can use: a device the engine would name in its identity
    but never use ('mps', 'meta': its tensors stayed on the processor), or a card a CPU build
    cannot reach (a raw AssertionError at the first put), is refused saying why (trial TE)."""
    try:
        made = module.device(device)
    except (RuntimeError, TypeError) as error:
        raise EngineUnavailableError(
            f"the torch engine: {device!r} is no device ({error})"
        ) from None
    if made.type == "cuda":
        why = cuda_refusal(module, 0 if made.index is None else made.index)
        if why is not None:
            raise EngineUnavailableError(f"the torch engine cannot run on {device}: {why}")
    elif made.type != "cpu":
        raise EngineUnavailableError(
            f"the torch engine runs on the processor (cpu) or an NVIDIA card (cuda:N), not on "
            f"{device!r}: TorchEngine.on_cpu() or TorchEngine.on_gpu(index)"
        )
    return made
