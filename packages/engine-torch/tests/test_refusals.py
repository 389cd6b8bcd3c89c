"""Refusals and the doctor's report: these run with or without torch installed."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from deepsharp.core import EngineUnavailableError, available_engines, make_engine
from deepsharp.core.cli import main
from deepsharp.core.engine import describe_engine
from deepsharp.engines.torch import DESCRIPTION, TorchEngine, describe_torch, from_spec
from deepsharp.engines.torch._probe import CPU_BUILD, CUDA_BUILDS, cuda_refusal

HAS_TORCH = importlib.util.find_spec("torch") is not None


@pytest.fixture
def no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process in which `import torch` fails as it does where torch is not installed."""
    monkeypatch.setitem(sys.modules, "torch", None)


def _names_both_builds(message: str) -> None:
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in message
    assert "pip install torch==2.13.0 (on Linux" in message
    assert "https://download.pytorch.org/whl/cu126" in message
    assert "CPU-only" in message and "CUDA" in message


def test_every_install_command_advised_pins_the_tested_torch() -> None:
    constraints = Path(__file__).resolve().parents[3] / "ci" / "constraints.txt"
    tested = re.search(r"^torch==(\S+)$", constraints.read_text(), re.MULTILINE)
    assert tested is not None
    commands = re.findall(r"pip install \S+", f"{CPU_BUILD} {CUDA_BUILDS} {DESCRIPTION.install}")
    assert commands and set(commands) == {f"pip install torch=={tested.group(1)}"}, commands


def test_registered_as_an_entry_point() -> None:
    assert "torch" in available_engines()


@pytest.mark.usefixtures("no_torch")
@pytest.mark.parametrize("make", [TorchEngine.on_cpu, TorchEngine.on_gpu, lambda: from_spec("")])
def test_refused_without_torch_naming_packages(make: Any) -> None:
    with pytest.raises(EngineUnavailableError) as caught:
        make()
    message = str(caught.value)
    assert "not installed" in message
    _names_both_builds(message)


@pytest.mark.usefixtures("no_torch")
def test_make_engine_spec_refused_without_torch() -> None:
    with pytest.raises(EngineUnavailableError, match=r"download\.pytorch\.org/whl/cpu"):
        make_engine("torch:cpu")


@pytest.mark.usefixtures("no_torch")
def test_describe_without_torch() -> None:
    report = describe_torch()
    assert report["installed"] is False
    assert report["version"] is None and report["build"] is None
    assert report["cards"] == [] and report["devices"] == []
    assert report["problems"] == ["torch is not installed"]
    assert any("whl/cpu" in line for line in report["advice"])
    assert any("whl/cu126" in line for line in report["advice"])


def test_bad_option_refused() -> None:
    with pytest.raises(EngineUnavailableError, match="cuda:N"):
        from_spec("tpu")


def _fake_torch(cuda: str | None, available: bool, count: int) -> Any:
    return SimpleNamespace(
        __version__="9.9.9",
        version=SimpleNamespace(cuda=cuda),
        cuda=SimpleNamespace(
            is_available=lambda: available,
            device_count=lambda: count,
            get_device_name=lambda i: f"Card {i}",
        ),
    )


def test_gpu_refusal_cpu_only_build_names_cuda_builds() -> None:
    why = cuda_refusal(_fake_torch(None, False, 0), 0)
    assert why is not None and "CPU-only build" in why
    assert "whl/cu126" in why and "pip install torch" in why


def test_gpu_refusal_no_card_or_driver() -> None:
    why = cuda_refusal(_fake_torch("12.6", False, 0), 0)
    assert why is not None and "no NVIDIA card or no working driver" in why


def test_gpu_refusal_no_card_of_that_index() -> None:
    why = cuda_refusal(_fake_torch("12.6", True, 2), 3)
    assert why is not None and "no card of index 3" in why and "2 cards" in why
    assert cuda_refusal(_fake_torch("12.6", True, 2), 1) is None


def test_describe_with_fake_cards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", _fake_torch("12.6", True, 2))
    report = describe_torch()
    assert report["installed"] and report["build"] == "CUDA 12.6"
    assert report["cards"] == ["Card 0", "Card 1"]
    assert report["devices"] == ["torch:cpu", "torch:cuda:0", "torch:cuda:1"]
    assert report["problems"] == [] and report["advice"] == []


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_on_gpu_refused_on_this_machine_when_torch_cannot_use_a_card() -> None:
    import torch

    if torch.version.cuda is not None and torch.cuda.is_available():
        pytest.skip("this machine has a usable card")
    with pytest.raises(EngineUnavailableError) as caught:
        TorchEngine.on_gpu(0)
    message = str(caught.value)
    if torch.version.cuda is None:
        assert "CPU-only build" in message and "whl/cu126" in message
    else:
        assert "no NVIDIA card" in message


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_describe_with_real_torch() -> None:
    import torch

    report = describe_torch()
    assert report["installed"] and report["version"] == torch.__version__
    assert "torch:cpu" in report["devices"]
    if torch.version.cuda is None:
        assert report["build"] == "CPU-only" and report["cards"] == []
        assert any("cu126" in line for line in report["advice"])


def test_it_describes_itself_through_its_entry_point() -> None:
    description = describe_engine("torch")
    assert description is DESCRIPTION
    assert description.default_spec == "torch:cpu"  # the one that needs no card
    assert description.precisions == ("float32", "strict", "mixed_bfloat16", "mixed_float16")
    assert description.spec_with("strict") == "torch:cpu:strict"
    assert "torch:cuda:0:strict" in description.specs
    assert "download.pytorch.org/whl/cpu" in description.install
    assert description.doctor is not None


@pytest.mark.usefixtures("no_torch")
def test_without_torch_the_description_loads_and_its_doctor_lines_name_packages() -> None:
    lines = DESCRIPTION.doctor() if DESCRIPTION.doctor is not None else []
    assert "torch: none" in lines
    assert any("torch problem: torch is not installed" in line for line in lines)
    assert any("whl/cpu" in line for line in lines)
    with pytest.raises(EngineUnavailableError, match=r"whl/cpu"):
        DESCRIPTION.make("cpu:strict")


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_doctor_lists_the_torch_engines_precisions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "torch:cpu    usable: torch" in out and "(float32)" in out
    assert "precisions: float32 (torch:cpu, default), strict (torch:cpu:strict)" in out
    assert "precisions: strict (light, default), float32 (light:float32)" in out


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_every_spec_the_doctor_lists_as_a_precision_can_be_made(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: it listed torch:cpu:mixed_float16, which make_engine refuses (float16 products
    are for cards); now that one is listed apart, with why."""
    import re

    from deepsharp.core.engine import make_engine

    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    listed = [line for line in out.splitlines() if line.strip().startswith("precisions:")]
    specs = [
        spec for line in listed for spec in re.findall(r"\(([a-z0-9_:]+)(?:, default)?\)", line)
    ]
    assert "torch:cpu:mixed_bfloat16" in specs and "light:mixed_float16" in specs
    for spec in specs:
        make_engine(spec)  # none refused
    assert "torch:cpu:mixed_float16" not in specs
    assert "not here: mixed_float16 (torch:cpu:mixed_float16: " in out


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
def test_the_constructor_refuses_a_device_it_would_name_but_never_use() -> None:
    """Before (trial TE): TorchEngine("mps") named mps in its identity (so in reports and
    checkpoints) while its tensors stayed on the processor; TorchEngine("cuda:0") on a CPU
    build failed at its first put with a raw AssertionError."""
    for device in ("mps", "meta"):
        with pytest.raises(EngineUnavailableError, match=rf"not on '{device}': TorchEngine.on_cpu"):
            TorchEngine(device)
    with pytest.raises(EngineUnavailableError, match=r"'nowhere' is no device"):
        TorchEngine("nowhere")
    import torch

    if torch.version.cuda is None:
        with pytest.raises(EngineUnavailableError, match=r"cannot run on cuda:0: .*CPU-only"):
            TorchEngine("cuda:0")
    assert TorchEngine("cpu").identity.device == "cpu"


def test_a_near_precision_name_on_the_processor_lists_what_the_processor_offers() -> None:
    """Before (trial TE): torch:cpu:float16 was told to try torch:cpu:mixed_float16, which is
    refused (a card's)."""
    with pytest.raises(EngineUnavailableError) as refused:
        make_engine("torch:cpu:float16")
    said = str(refused.value)
    assert "did you mean 'float32' or 'mixed_bfloat16'?" in said and "mixed_float16" not in said
    with pytest.raises(EngineUnavailableError, match="runs mixed_float16 on NVIDIA cards only"):
        make_engine("torch:cpu:mixed_float16")
