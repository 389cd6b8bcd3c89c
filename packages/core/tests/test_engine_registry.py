"""Engines from specs: each engine describes itself through its entry point; specs name a
precision; old names, unknown precisions and factories that give no engine are refused."""

from __future__ import annotations

import importlib.metadata
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core import (
    BinaryCrossEntropy,
    Dense,
    EngineUnavailableError,
    FitOptions,
    MeanSquaredError,
    Network,
    compare,
    make_engine,
)
from deepsharp.core.cli import main
from deepsharp.core.engine import (
    PRECISIONS,
    EngineDescription,
    available_engines,
    describe_engine,
    registry,
    rescan_engines,
    split_precision,
)
from deepsharp.core.random import Streams
from deepsharp.engines.light import DESCRIPTION, LightEngine


@pytest.fixture
def fresh_scan() -> Iterator[None]:
    """The installed engines read afresh before and after the test."""
    rescan_engines()
    yield
    rescan_engines()


@pytest.mark.parametrize(
    ("spec", "precision"),
    [("light", "strict"), ("light:strict", "strict"), ("light:float32", "float32")],
)
def test_light_specs_name_its_precision(spec: str, precision: str) -> None:
    engine = make_engine(spec)
    assert isinstance(engine, LightEngine)
    assert engine.identity.precision == precision
    assert engine.identity.precision in PRECISIONS


def test_no_spec_gives_the_light_engine_and_an_engine_passes_through() -> None:
    assert make_engine(None).identity == LightEngine().identity
    engine = LightEngine("float32")
    assert make_engine(engine) is engine


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("light:float32-totals", "now the precision 'float32': use light:float32"),
        (
            "light:float16",
            "'float16', which is no precision: did you mean 'float32' or 'mixed_float16'",
        ),
        ("light:strict:float32", "takes only a precision"),
        # Before: an empty part was read as the parts around it ("light:" as light, strict).
        ("light:", "'light:' has a colon too many (a part of it is empty): write 'light'"),
        ("light::float32", "write 'light:float32'"),
    ],
)
def test_light_refuses_what_it_does_not_offer(spec: str, said: str) -> None:
    with pytest.raises(EngineUnavailableError) as refused:
        make_engine(spec)
    assert said in str(refused.value)


@pytest.mark.parametrize("spec", ["light:", ":light", "light::float32", "torch:cuda:0:"])
def test_fit_options_refuse_a_spec_with_an_empty_part_before_making_anything(spec: str) -> None:
    with pytest.raises(EngineUnavailableError, match="a colon too many"):
        FitOptions(seed=0, engine=spec)


def test_an_engine_not_installed_names_those_that_are_and_the_package_convention() -> None:
    for spec in ("nosuch", "nosuch:cpu:strict"):
        with pytest.raises(EngineUnavailableError) as refused:
            make_engine(spec)
        message = str(refused.value)
        assert "no engine named 'nosuch' is installed" in message
        assert f"installed: {', '.join(available_engines())}" in message
        assert "deepsharp-engine-nosuch" not in message  # no package of a made-up name
        assert "pip install ./packages/engine-torch" in message  # from a checkout, no index
        assert "did you mean" not in message  # nothing installed is close


@pytest.mark.parametrize("typo", ["ligth", "Light", "lihgt"])
def test_a_misspelt_engine_is_refused_with_the_installed_engines_close_to_it(typo: str) -> None:
    with pytest.raises(EngineUnavailableError) as refused:
        make_engine(typo)
    message = str(refused.value)
    assert f"no engine named {typo!r} is installed" in message
    assert "did you mean 'light'?" in message
    assert f"deepsharp-engine-{typo}" not in message


def test_the_light_engine_describes_itself_through_its_entry_point() -> None:
    assert "light" in available_engines()
    description = describe_engine("light")
    assert description is DESCRIPTION
    assert description.name == "light" and description.default_spec == "light"
    assert description.precisions == ("strict", "float32", "mixed_bfloat16", "mixed_float16")
    assert description.spec_with("strict") == "light"
    assert description.spec_with("float32") == "light:float32"
    assert make_engine(description.spec_with("float32")).identity.precision == "float32"
    assert description.make("").identity == LightEngine().identity
    assert description.spec_with("mixed_float16") == "light:mixed_float16"


def test_split_precision_takes_the_last_part_when_it_is_one() -> None:
    offered = ("float32", "strict")
    assert split_precision("x", "cuda:0:strict", offered) == ("cuda:0", "strict")
    assert split_precision("x", "cuda:0", offered) == ("cuda:0", "float32")
    assert split_precision("x", "", offered) == ("", "float32")
    assert split_precision("x", "STRICT", offered) == ("", "strict")
    with pytest.raises(
        EngineUnavailableError, match=r"use x:cpu:float32 \(or x:cpu, its default\)"
    ):
        split_precision("x", "cpu:float32-totals", offered)


@pytest.mark.parametrize(
    ("option", "meant"),
    [("cpu:strcit", "'strict'"), ("cuda:0:flaot32", "'float32'"), ("stric", "'strict'")],
)
def test_split_precision_refuses_a_mistyped_precision_naming_the_one_meant(
    option: str, meant: str
) -> None:
    """Failed before: 'cpu:strcit' came back as the device 'cpu:strcit' at the default
    precision, so an engine built on the documented template ran float32 where strict was
    asked for, silently."""
    with pytest.raises(
        EngineUnavailableError, match=f"which is no precision: did you mean {meant}"
    ):
        split_precision("x", option, ("float32", "strict"))
    assert split_precision("x", "cuda:1", ("float32",)) == ("cuda:1", "float32")


def _module(name: str, monkeypatch: pytest.MonkeyPatch, **attributes: Any) -> None:
    module = types.ModuleType(name)
    for key, value in attributes.items():
        setattr(module, key, value)
    monkeypatch.setitem(sys.modules, name, module)


def test_a_factory_that_gives_no_engine_is_refused_naming_what_it_gave() -> None:
    with pytest.raises(EngineUnavailableError) as refused:
        make_engine("os:getpid")  # gave an int before
    message = str(refused.value)
    assert "os.getpid() gave" in message and "(int), not an engine" in message
    assert "put" in message  # what it lacks


def test_a_factory_that_raises_is_refused_naming_the_exception(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken() -> None:
        raise RuntimeError("no card here")

    _module("engine_that_breaks", monkeypatch, make=broken)
    with pytest.raises(EngineUnavailableError, match=r"raised RuntimeError\('no card here'\)"):
        make_engine("engine_that_breaks:make")
    with pytest.raises(EngineUnavailableError, match=r"sys\.exit\(\) raised SystemExit"):
        make_engine("sys:exit")  # ended the process before


def test_the_command_line_refuses_a_factory_that_exits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `sys:exit` ended the command with status 0, as if it had worked.
    assert main(["sample", "titanic", "--engine", "sys:exit", "--no-progress"]) == 1
    assert "SystemExit" in capsys.readouterr().err


def test_a_module_factory_that_is_an_engine_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    _module("engine_of_mine", monkeypatch, make=lambda: LightEngine("float32"))
    made = make_engine("engine_of_mine:make")
    assert isinstance(made, LightEngine) and made.precision == "float32"
    with pytest.raises(EngineUnavailableError, match="has no callable 'missing'"):
        make_engine("engine_of_mine:missing")


def test_a_module_that_imports_what_is_missing_says_so_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failed before: 'no engine named ... is installed here' and the wheels' advice came
    first, the missing import last (cut off in a terminal line)."""
    (tmp_path / "engine_importing_a_missing_one.py").write_text(
        "import a_missing_blas_library\n\ndef make():\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(EngineUnavailableError) as refused:
        make_engine("engine_importing_a_missing_one:make")
    said = str(refused.value)
    assert said.startswith(
        "engine spec 'engine_importing_a_missing_one:make': module "
        "'engine_importing_a_missing_one' cannot be imported: No module named "
        "'a_missing_blas_library'"
    )
    assert "installed here" not in said
    for missing in ("json.not_a_module_of_json", "no_package_of_that_name.module"):  # the module
        with pytest.raises(EngineUnavailableError, match="no engine named"):  # itself: not news
            make_engine(f"{missing}:make")  # of something it imports (trial AW)


def _point(name: str, value: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name=name, value=value, group="deepsharp.engines")


@pytest.mark.usefixtures("fresh_scan")
def test_an_entry_point_may_name_a_description_or_a_factory_of_specs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    described = EngineDescription("described", lambda option: LightEngine(), "described")
    _module("entry_points_of_mine", monkeypatch, DESCRIBED=described, make=lambda option: 3)
    points = {
        "described": _point("described", "entry_points_of_mine:DESCRIBED"),
        "factory": _point("factory", "entry_points_of_mine:make"),
        "broken": _point("broken", "no_such_module_here:DESCRIPTION"),
    }
    monkeypatch.setattr(registry, "_scanned", points)
    assert describe_engine("described") is described
    assert isinstance(make_engine("described"), LightEngine)
    bare = describe_engine("factory")  # the old form: from_spec(option) alone
    assert (bare.name, bare.default_spec, bare.precisions) == ("factory", "factory", ())
    with pytest.raises(EngineUnavailableError, match=r"its entry point's make gave 3 \(int\)"):
        make_engine("factory")
    with pytest.raises(EngineUnavailableError, match="cannot be loaded: ModuleNotFoundError"):
        describe_engine("broken")


@pytest.mark.usefixtures("fresh_scan")
def test_the_installed_engines_are_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    scans = []

    def counted(**selection: Any) -> Any:
        scans.append(selection)
        return importlib.metadata.entry_points(**selection)

    monkeypatch.setattr(registry, "entry_points", counted)
    network = Network([Dense(2)], inputs=3)
    network.initialize(Streams(0).slots)
    rows = np.ones((4, 3), np.float32)
    for _ in range(3):  # each predict without an engine made one from its spec, scanning again
        network.predict(rows, MeanSquaredError())
    make_engine("light:float32")
    assert len(scans) == 1
    rescan_engines()
    make_engine("light")
    assert len(scans) == 2


def test_doctor_lists_each_engines_precisions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "light        usable: light numpy" in out
    assert "precisions: strict (light, default), float32 (light:float32)" in out
    assert "deepsharp-engine-NAME" not in out  # no such packages on an index
    from deepsharp.core.engine import available_engines

    lacking = {"torch", "testbuffer"} - set(available_engines())  # said only then (trial D)
    assert ("pip install ./packages/engine-torch" in out.splitlines()[-1]) == bool(lacking)


def test_the_doctor_lists_no_precision_of_an_engine_it_cannot_make(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the onnx engine without onnxruntime was 'not usable' yet its line read
    'precisions: float32 (onnx, default)', and a user (or a test) making every listed spec
    was refused."""
    # None in sys.modules: importing it raises ImportError, whether or not it was imported.
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    main(["doctor"])
    out = capsys.readouterr().out
    onnx = out[out.index("  onnx ") :].splitlines()
    assert "not usable" in onnx[0]
    assert onnx[1].strip().startswith("precisions once usable: float32 (onnx, default)")


def test_the_doctor_names_a_card_only_precision_by_its_card_s_spec(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failed before: without torch the torch engine's line offered
    'mixed_float16 (torch:cpu:mixed_float16)', a spec the engine refuses on the processor."""
    pytest.importorskip("deepsharp.engines.torch")
    monkeypatch.setitem(sys.modules, "torch", None)
    rescan_engines()
    main(["doctor"])
    rescan_engines()
    out = capsys.readouterr().out
    torch_lines = out[out.index("  torch:cpu ") :].splitlines()
    assert "not usable" in torch_lines[0]
    assert "mixed_float16 (torch:cuda:0:mixed_float16)" in torch_lines[1]
    assert "torch:cpu:mixed_float16" not in out


@pytest.mark.parametrize(
    "statement",
    [
        "from deepsharp.engines.light import LightEngine",
        "from deepsharp.engines.onnx import OnnxEngine",
        "import deepsharp.core.nn.testing",
        "import deepsharp.core.export",
        "import deepsharp.sklearn",
    ],
)
def test_each_public_module_imports_first_in_a_fresh_process(statement: str) -> None:
    """Before: `from deepsharp.engines.light import LightEngine` as a program's first import
    failed with a circular ImportError (the package imports the core, whose exporter imported
    the package back while it was half made)."""
    import importlib.util
    import subprocess

    if "sklearn" in statement and importlib.util.find_spec("sklearn") is None:
        pytest.skip("scikit-learn is not installed here (deepsharp.sklearn needs it)")
    done = subprocess.run(
        [sys.executable, "-c", statement], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]


class _ShiftedSigmoid(LightEngine):
    """A light engine of its own arithmetic, its author forgetting to name it."""

    def sigmoid(self, x: Any) -> Any:
        return (super().sigmoid(x) + np.float32(1e-3)).astype(np.float32)


class _Named(_ShiftedSigmoid):
    name = "shifted"


def test_a_subclass_of_light_without_a_name_of_its_own_is_recorded_by_its_class() -> None:
    """Failed before: it kept light's identity, so a light checkpoint went on with it and
    compare refused the pair as 'one engine named twice'."""
    assert _ShiftedSigmoid().identity.name == "_ShiftedSigmoid"
    assert _ShiftedSigmoid().identity != LightEngine().identity
    assert repr(_ShiftedSigmoid()).startswith("_ShiftedSigmoid(numpy ")
    assert _Named().identity.name == "shifted"
    assert LightEngine().identity.name == "light"
    assert make_engine("light:float32").identity.name == "light"
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 4)).astype(np.float32)
    y = (rng.random((8, 1)) > 0.5).astype(np.float32)
    found = compare(Network([Dense(4), Dense(1)]), BinaryCrossEntropy(), (x, y),
                    engines=("light", _ShiftedSigmoid()))  # fmt: skip
    assert "_ShiftedSigmoid" in str(found)


def test_an_engine_object_missing_a_primitive_is_refused_naming_it_everywhere() -> None:
    """Failed before: FitOptions and compare refused it without saying what it lacked, and
    Trainer took it, its first step failing with an AttributeError from inside the core."""
    from deepsharp.core import Adam, CrossEntropy, Dense, FitOptions, Network, Trainer, compare

    class NoFold:
        def __init__(self) -> None:
            self.inner = LightEngine()

        def __getattr__(self, name: str) -> Any:
            if name == "conv2d_fold":
                raise AttributeError(name)
            return getattr(self.inner, name)

    said = r"is not an engine: it lacks conv2d_fold \(an engine performs the operations"
    with pytest.raises(EngineUnavailableError, match=said):
        make_engine(NoFold())  # type: ignore[arg-type]
    with pytest.raises(EngineUnavailableError, match="FitOptions: engine .*" + said):
        FitOptions(seed=0, engine=NoFold())  # type: ignore[arg-type]
    with pytest.raises(EngineUnavailableError, match=said):
        Trainer(Network([Dense(2)], inputs=3), CrossEntropy(), Adam(), engine=NoFold(), seed=0)  # type: ignore[arg-type]
    with pytest.raises(EngineUnavailableError, match="compare: engine 2 .*" + said):
        compare(
            Network([Dense(2)], inputs=3),
            CrossEntropy(),
            (np.ones((4, 3)), np.zeros(4, np.int64)),
            engines=("light", NoFold()),  # type: ignore[arg-type]
        )
