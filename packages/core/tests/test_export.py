"""ONNX export: every sample's trained file and random graphs of every layer kind, served by
onnxruntime from raw rows within the float32 family's bound propagated through the network;
the pipeline's features as deepsharp makes them; planted exporter faults caught; bad input
refused, naming what and why, and nothing half-written."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from export_helpers import (
    EVERY_KIND,
    FEATURE_ROUNDING,
    Graphs,
    feeds,
    layered,
    layers_within_bound,
    metadata,
    session,
    within_bound,
)

from deepsharp.core import (
    SGD,
    Adam,
    BinaryCrossEntropy,
    Checkpoint,
    Concatenate,
    Conv2D,
    CrossEntropy,
    Dense,
    Embedding,
    ExportError,
    FitOptions,
    Flatten,
    Generator,
    GlobalAvgPool,
    Input,
    Layer,
    MeanSquaredError,
    MultiHeadAttention,
    Network,
    Pipeline,
    PositionalEmbedding,
    Relu,
    Softmax,
    StateError,
    TrainedNetwork,
    TransformerBlock,
    __version__,
    fit,
)
from deepsharp.core.cli import main
from deepsharp.core.data.columns import COLUMN_KINDS
from deepsharp.core.export import forms
from deepsharp.core.export.columns import COLUMN_EXPORTS, Inputs, write_columns
from deepsharp.core.export.graph import OnnxGraph
from deepsharp.core.export.layers import LAYER_EXPORTS
from deepsharp.core.export.writer import OFFERED
from deepsharp.core.nn.layer import LAYERS
from deepsharp.core.samples import digits, resnet, titanic
from deepsharp.engines.onnx import OnnxEngine

# --- every sample ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def titanic_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("titanic") / "titanic.safetensors"
    titanic.run(epochs=4).trained.save(path)
    return path


@pytest.fixture(scope="module")
def digits_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("digits") / "digits.safetensors"
    digits.run(epochs=1).trained.save(path)
    return path


@pytest.fixture(scope="module")
def resnet_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("resnet") / "resnet.safetensors"
    resnet.run(epochs=1).trained.save(path)
    return path


SAMPLES = {
    "titanic": (titanic.rows, "titanic_file"),
    "digits": (lambda: digits.rows("test"), "digits_file"),
    "resnet": (lambda: digits.rows("test")[:96], "resnet_file"),  # its bound is slow to work out
}


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_every_sample_s_trained_file_serves_raw_rows_in_onnxruntime_within_the_bound(
    sample: str, request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file `deepsharp export` writes, from raw rows: its predictions within the bound
    propagated through the network (where the contract bounds them: not through the resnet's
    ten layers, whose bound grows past any use), and each of its layers within the bound
    propagated through that layer from the inputs onnxruntime gave it."""
    rows_of, fixture = SAMPLES[sample]
    trained_file: Path = request.getfixturevalue(fixture)
    out = tmp_path / f"{sample}.onnx"
    assert main(["export", str(trained_file), str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    trained = TrainedNetwork.load(trained_file)
    rows = rows_of()
    served = session(out)
    got = served.run(None, feeds(served, rows))[0]
    features = trained.pipeline.features(rows)
    shape = trained.network.input_specs[0].shape
    assert shape is not None
    unbounded: list[float] = []
    used = within_bound(
        got,
        trained.network,
        trained.loss,
        [features.reshape(len(rows), *shape)],
        FEATURE_ROUNDING,
        unbounded,
    )
    assert used < 1.0 and unbounded == [1.0 if sample == "resnet" else 0.0]
    assert np.abs(got - trained.predict(rows)).max() < 1e-5
    layers = layered(trained.network, trained.loss, tmp_path / "layers.onnx", trained)
    names = [entry.name for entry in layers.get_outputs()]
    outputs = dict(zip(names, layers.run(None, feeds(layers, rows))))
    np.testing.assert_array_equal(outputs["predictions"], got)
    worst, loose = layers_within_bound(trained.network, outputs)
    assert worst < 1.0 and loose == 0


def test_the_file_records_deepsharp_s_version_and_the_digest_of_the_file_it_came_from(
    titanic_file: Path, tmp_path: Path
) -> None:
    digest = "sha256:" + hashlib.sha256(titanic_file.read_bytes()).hexdigest()
    assert main(["export", str(titanic_file), str(tmp_path / "cli.onnx")]) == 0
    TrainedNetwork.load(titanic_file).export_onnx(tmp_path / "api.onnx")
    for made in ("cli.onnx", "api.onnx"):
        found = metadata(tmp_path / made)
        assert found["deepsharp.version"] == __version__
        assert found["deepsharp.source"] == digest  # saving is deterministic: the same bytes
        assert json.loads(found["deepsharp.classes"]) == ["0", "1"]
        assert json.loads(found["deepsharp.loss"])["kind"] == "BinaryCrossEntropy"


@pytest.mark.once  # (three processes: on one Python)
def test_one_trained_file_exports_to_the_same_bytes_in_every_process(tmp_path: Path) -> None:
    """Failed before (trial O): a category column that saw missing fields wrote pandas' missing
    texts in a set's order, which Python's string hashing draws anew in each process."""
    import subprocess

    rows = [{"port": ["S", "C", None][i % 3], "x": str(i), "y": str(i % 2)} for i in range(30)]
    pipeline = Pipeline().category("port").number("x").target("y")
    trained = fit(pipeline, rows, Network([Dense(1)]), BinaryCrossEntropy(), Adam(0.01),
                  FitOptions(seed=0, epochs=1, progress=False)).trained  # fmt: skip
    trained.save(tmp_path / "t.safetensors")
    made = set()
    for seed in ("1", "2", "3"):
        out = tmp_path / f"{seed}.onnx"
        code = "from deepsharp.core import TrainedNetwork as T; import sys; "
        code += "T.load(sys.argv[1]).export_onnx(sys.argv[2])"
        environment = {**os.environ, "PYTHONHASHSEED": seed}
        command = [sys.executable, "-c", code, str(tmp_path / "t.safetensors"), str(out)]
        subprocess.run(command, check=True, env=environment)
        made.add(hashlib.sha256(out.read_bytes()).hexdigest())
    assert len(made) == 1


def test_any_count_of_rows_is_served_and_each_row_alone_gets_its_prediction(
    titanic_file: Path, tmp_path: Path
) -> None:
    trained = TrainedNetwork.load(titanic_file)
    trained.export_onnx(tmp_path / "t.onnx")
    served = session(tmp_path / "t.onnx")
    rows = titanic.rows()[:40]
    together = served.run(None, feeds(served, rows))[0]
    for count in (1, 17, 33):
        part = served.run(None, feeds(served, rows[:count]))[0]
        assert part.shape == (count, 1)
        np.testing.assert_allclose(part, together[:count], rtol=0, atol=1e-6)


def test_the_exported_pipeline_makes_deepsharp_s_features(titanic_file: Path) -> None:
    """Each number, category and flag feature the same bits; where log1p is taken, at most one
    unit in float32's last place (ONNX has no log1p: it is written in Kahan's form)."""
    import onnxruntime

    pipeline = TrainedNetwork.load(titanic_file).pipeline
    graph = OnnxGraph()
    made = write_columns(graph, pipeline.columns, Inputs(graph))
    graph.output(made, np.float32, ["N", pipeline.feature_count])
    model = graph.model()
    served = onnxruntime.InferenceSession(model.SerializeToString())
    rows = titanic.rows()
    for at, written in ((1, "NA"), (3, "NULL"), (6, "<NA>")):  # cabins known, written missing
        assert rows[at]["Cabin"]
        rows[at] = {**rows[at], "Cabin": written}
    got = served.run(None, feeds(served, rows))[0]
    want = pipeline.features(rows)
    logged = [i for i, name in enumerate(pipeline.feature_names) if name == "Fare"]
    others = [i for i in range(want.shape[1]) if i not in logged]
    np.testing.assert_array_equal(got[:, others], want[:, others])
    apart = np.abs(got[:, logged].view(np.int32).astype(np.int64) - want[:, logged].view(np.int32))
    assert apart.max() <= 1


def test_a_network_trained_on_arrays_of_several_inputs_serves_them_by_name(
    tmp_path: Path,
) -> None:
    a, b = Input(3, name="a"), Input((2, 4), name="b")
    joined = Concatenate()([Dense(4)(a), Flatten()(b)])
    network = Network(inputs=[a, b], outputs=Dense(1)(joined))
    rng = np.random.default_rng(0)
    xa = rng.normal(size=(60, 3)).astype(np.float32)
    xb = rng.normal(size=(60, 2, 4)).astype(np.float32)
    y = (xa[:, :1] > 0).astype(np.float32)
    options = FitOptions(epochs=2, seed=0)
    trained = fit(
        None, ({"a": xa, "b": xb}, y), network, BinaryCrossEntropy(), Adam(0.01), options
    ).trained
    trained.export_onnx(tmp_path / "arrays.onnx")
    served = session(tmp_path / "arrays.onnx")
    assert [(e.name, e.shape) for e in served.get_inputs()] == [("a", ["N", 3]), ("b", ["N", 2, 4])]
    got = served.run(None, {"a": xa, "b": xb})[0]
    assert within_bound(got, trained.network, trained.loss, [xa, xb]) < 1.0


# --- random graphs of every layer kind ----------------------------------------------------------

SEEDS = range(40)


@pytest.mark.filterwarnings("ignore:.*takes channels first:deepsharp.core.DeepSharpWarning")
def test_random_graphs_of_every_layer_kind_serve_within_the_bound(tmp_path: Path) -> None:
    # (a random graph may put BatchNorm over an Embedding's positions: warned of, and served)
    seen: set[str] = set()
    worst = 0.0
    unbounded: list[float] = []
    for seed in SEEDS:
        graphs = Graphs(seed)
        network, loss, inputs = graphs.make()
        seen |= graphs.kinds
        path = tmp_path / f"graph-{seed}.onnx"
        network.export_onnx(path, loss)
        served = session(path)
        names = [entry.name for entry in served.get_inputs()]
        assert names == network.input_names
        got = served.run(None, dict(zip(names, inputs)))[0]
        layers = layered(network, loss, tmp_path / f"layers-{seed}.onnx")
        every = [entry.name for entry in layers.get_outputs()]
        outputs = dict(zip(every, layers.run(None, dict(zip(names, inputs)))))
        try:
            worst = max(worst, within_bound(got, network, loss, inputs, unbounded=unbounded))
            worst = max(worst, layers_within_bound(network, outputs)[0])
        except AssertionError as error:
            raise AssertionError(f"seed {seed}: {network!r}: {error}") from None
    missing = EVERY_KIND - seen
    assert not missing, f"the random graphs never held {sorted(missing)}: add seeds"
    assert worst < 1.0
    assert np.mean(unbounded) < 0.25, "the contract bounds too few of the random graphs' rows"


def test_attention_through_padding_and_causal_masks_serves_light_s_predictions(
    tmp_path: Path,
) -> None:
    """A mask scales its 0s and 1s by float32's lowest, and the contract's 1e-5 on each
    value-by-value operation then bounds nothing (1e-5 times 3.4e38): the propagated bound is infinite on every
    row here, as docs/export.md says, and the predictions are held to light's within the value
    tolerance."""
    ids = Input(6, dtype="int64", name="ids")
    h = PositionalEmbedding(8, 6)(Embedding(11, 6)(ids))
    h = TransformerBlock(2, 8, causal=True)(h)
    h = MultiHeadAttention(3)(h)
    network = Network(inputs=ids, outputs=Dense(3)(Flatten()(h)))
    network.initialize(Generator(5))
    tokens = np.random.default_rng(5).integers(0, 11, (31, 6))
    tokens[:4, 3:] = 0  # padding at the end of some rows
    network.export_onnx(tmp_path / "masked.onnx", CrossEntropy())
    got = session(tmp_path / "masked.onnx").run(None, {"ids": tokens})[0]
    unbounded: list[float] = []
    within_bound(got, network, CrossEntropy(), [tokens], unbounded=unbounded)
    assert unbounded == [1.0]


# --- planted exporter faults ----------------------------------------------------------------------


def _transposed_gemm(g: OnnxGraph, xs: list[str], shapes: Any, **flags: bool) -> list[str]:
    return [g.one("Gemm", xs[0], xs[1], transA=int(flags.get("transpose_a", False)), transB=1)]


def _pads_before_not_after(
    g: OnnxGraph, xs: list[str], shapes: Any, stride: int, padding: Any
) -> list[str]:
    """'same' padding's odd zero put before the image, not after (PyTorch's way, not
    TensorFlow's that deepsharp keeps): the shapes fit, the values shift."""
    (top, bottom), (left, right) = padding
    return [g.one("Conv", *xs, strides=[stride, stride], pads=[bottom, right, top, left])]


def _sum_over_the_wrong_axis(
    g: OnnxGraph, xs: list[str], shapes: Any, axes: Any, keepdims: bool = False
) -> list[str]:
    wrong = tuple(0 if keepdims else axis for axis in axes)
    return [g.one("ReduceSum", xs[0], g.ints(wrong), keepdims=int(keepdims))]


PLANTED = {
    "a transposed Gemm": ("matmul", _transposed_gemm),
    "a wrong pad": ("conv2d_bias", _pads_before_not_after),
    "a softmax over the wrong axis": ("sum", _sum_over_the_wrong_axis),
}


def _planted_network() -> Network:
    """Convolutions of 'same' padding with an odd zero (kernels 4 and 2), square weights
    (transposed, they still fit), a softmax."""
    x = Input((3, 6, 6))
    h = Conv2D(3, 4, padding="same")(x)
    h = Conv2D(3, 2, padding="same")(Relu()(h))
    h = Dense(3)(GlobalAvgPool()(h))
    h = Dense(3)(Relu()(h))
    network = Network(inputs=x, outputs=Softmax()(Dense(3)(h)))
    network.initialize(Generator(3))
    return network


@pytest.mark.parametrize("fault", sorted(PLANTED))
def test_a_planted_exporter_fault_is_caught(
    fault: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    network = _planted_network()
    inputs = [np.random.default_rng(0).normal(size=(9, 3, 6, 6)).astype(np.float32)]
    loss = CrossEntropy(from_logits=False)
    network.export_onnx(tmp_path / "sound.onnx", loss)
    sound = session(tmp_path / "sound.onnx").run(None, {"input": inputs[0]})[0]
    assert within_bound(sound, network, loss, inputs) < 1.0
    operation, broken = PLANTED[fault]
    monkeypatch.setitem(forms.FORMS, operation, broken)
    network.export_onnx(tmp_path / "broken.onnx", loss)
    got = session(tmp_path / "broken.onnx").run(None, {"input": inputs[0]})[0]
    with pytest.raises(AssertionError, match="beyond the bound"):
        within_bound(got, network, loss, inputs)
    layers = layered(network, loss, tmp_path / "layers.onnx")
    names = [entry.name for entry in layers.get_outputs()]
    outputs = dict(zip(names, layers.run(None, {"input": inputs[0]})))
    with pytest.raises(AssertionError, match="beyond the bound"):
        layers_within_bound(network, outputs)


# --- what every kind states ------------------------------------------------------------------------


def test_every_layer_kind_deepsharp_ships_states_its_export() -> None:
    own = {key for key in LAYERS if "." not in key and not key.startswith("_") and key != "Layer"}
    assert own <= set(LAYER_EXPORTS), f"no export stated for {sorted(own - set(LAYER_EXPORTS))}"


def test_every_column_kind_deepsharp_ships_states_its_export() -> None:
    own = {key for key in COLUMN_KINDS if "." not in key and key not in ("", "numbers")}
    assert own <= set(COLUMN_EXPORTS), f"no export stated for {sorted(own - set(COLUMN_EXPORTS))}"


def test_the_exporter_writes_only_fast_paths_the_onnx_engine_is_held_to() -> None:
    held = {name for name in OFFERED if callable(getattr(OnnxEngine, name, None))}
    assert held == set(OFFERED) and "conv2d_bias" in OFFERED


# --- bad input ------------------------------------------------------------------------------------


class HostRound(Layer):
    """Rounds its rows on the host: a layer that brings values back during its pass."""

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        from deepsharp.core.autodiff.tensor import Tensor

        return Tensor.put(context.engine, np.round(x.numpy()))


def _small() -> Network:
    network = Network([Dense(4), Relu(), Dense(1)], inputs=3)
    network.initialize(Generator(0))
    return network


def test_a_layer_that_reads_values_back_is_refused_naming_it_and_why(tmp_path: Path) -> None:
    network = Network([Dense(4), HostRound(name="rounding"), Dense(1)], inputs=3)
    network.initialize(Generator(0))
    with pytest.raises(ExportError, match=r"layer 'rounding' \(HostRound\(\)\).*back to the host"):
        network.export_onnx(tmp_path / "x.onnx")
    assert not (tmp_path / "x.onnx").exists()


def test_a_layer_kind_stated_unexportable_is_refused_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(LAYER_EXPORTS, "Relu", "no reason but this test's")
    with pytest.raises(ExportError, match=r"layer 'relu' \(Relu\(\)\) cannot .*this test's"):
        _small().export_onnx(tmp_path / "x.onnx")


def test_a_bytes_path_is_written_as_open_takes_it(tmp_path: Path) -> None:
    """Failed before: a raw TypeError from a regular expression of text."""
    path = tmp_path / "x.onnx"
    _small().export_onnx(os.fsencode(path))
    assert session(path).run(None, {"input": np.ones((1, 3), np.float32)})[0].shape == (1, 1)


def test_an_opset_below_what_an_operator_needs_is_refused_naming_both(tmp_path: Path) -> None:
    with pytest.raises(
        ExportError, match=r"layer 'dense' .*Gemm is written in its opset-13 form.*opset 12"
    ):
        _small().export_onnx(tmp_path / "x.onnx", opset=12)
    with pytest.raises(
        ExportError, match=r"beyond \d+, the highest the installed onnx package knows"
    ):
        _small().export_onnx(tmp_path / "x.onnx", opset=99)
    with pytest.raises(ExportError, match="opset is a whole number"):
        _small().export_onnx(tmp_path / "x.onnx", opset=True)
    assert not (tmp_path / "x.onnx").exists()


@pytest.mark.parametrize("opset", [13, 18, 21])
def test_other_opsets_serve_the_same_predictions(opset: int, tmp_path: Path) -> None:
    network = _planted_network()
    inputs = [np.random.default_rng(1).normal(size=(5, 3, 6, 6)).astype(np.float32)]
    loss = CrossEntropy(from_logits=False)  # the network ends in its softmax
    network.export_onnx(tmp_path / "x.onnx", loss, opset=opset)
    got = session(tmp_path / "x.onnx").run(None, {"input": inputs[0]})[0]
    assert within_bound(got, network, loss, inputs) < 1.0


def test_an_input_named_as_the_file_s_output_is_refused_naming_both(tmp_path: Path) -> None:
    """Before: the file named two values 'outputs' and the onnx checker's refusal was reported
    as deepsharp's own fault ("please report it")."""
    from deepsharp.core import Dense, Input, MeanSquaredError, Network
    from deepsharp.core.random import Generator

    for name, loss in (("outputs", None), ("predictions", MeanSquaredError())):
        given = Input(3, name=name)
        network = Network(inputs=given, outputs=Dense(1)(given))
        network.initialize(Generator(0))
        with pytest.raises(ExportError, match=f"an input of the network is named '{name}', the"):
            network.export_onnx(tmp_path / "x.onnx", loss)
        assert not (tmp_path / "x.onnx").exists()


def test_the_onnx_engine_refuses_an_opset_onnxruntime_cannot_run_naming_the_highest() -> None:
    """Before: onnx:opset99 was made (its identity said opset 99) and its first operation raised
    onnxruntime's raw Fail ("Unsupported model IR version"), naming neither spec nor fix."""
    pytest.importorskip("onnxruntime")
    from deepsharp.core.engine import make_engine
    from deepsharp.core.errors import EngineUnavailableError

    with pytest.raises(
        EngineUnavailableError, match=r"cannot run opset 99 here .* is the highest it serves; use"
    ):
        make_engine("onnx:opset99")
    assert make_engine("onnx:opset18").identity.version.endswith("opset 18")


def test_a_network_saved_alone_exports_from_the_command_line_as_export_onnx_writes_it(
    tmp_path: Path,
) -> None:
    """Failed before (trial O4): the command refused a file of Network.save, naming a call."""
    network = _small()
    network.save(tmp_path / "network.safetensors")
    digest = "sha256:" + hashlib.sha256((tmp_path / "network.safetensors").read_bytes()).hexdigest()
    assert main(["export", str(tmp_path / "network.safetensors"), str(tmp_path / "cli.onnx")]) == 0
    network.export_onnx(tmp_path / "api.onnx")
    assert (tmp_path / "cli.onnx").read_bytes() == (tmp_path / "api.onnx").read_bytes()
    assert metadata(tmp_path / "cli.onnx")["deepsharp.source"] == digest
    rows = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    served = session(tmp_path / "cli.onnx").run(None, {"input": rows})[0]
    np.testing.assert_allclose(served, network.predict(rows), rtol=1e-6, atol=1e-6)


def test_a_file_that_is_no_trained_network_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = np.linspace(-1, 1, 60, dtype=np.float32).reshape(20, 3)
    options = FitOptions(seed=1, epochs=1, checkpoint_dir=tmp_path / "run")
    fit(None, (rows, rows[:, :1]), _small(), MeanSquaredError(), SGD(0.1), options)
    checkpoint = Checkpoint.path_in(tmp_path / "run", 1)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a file deepsharp wrote")
    for given, said in (
        (checkpoint, "checkpoint of a run"),
        (junk, "not a safetensors file|truncated|garbage"),
        (tmp_path / "missing.safetensors", "no trained-network file"),
    ):
        assert main(["export", str(given), str(tmp_path / "out.onnx")]) == 1
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and re.search(said, error), error
    assert not (tmp_path / "out.onnx").exists()


def test_an_output_that_cannot_be_written_leaves_nothing_half_written(
    titanic_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trained = TrainedNetwork.load(titanic_file)
    with pytest.raises(FileNotFoundError, match="there is no folder"):
        trained.export_onnx(tmp_path / "nowhere" / "x.onnx")
    assert main(["export", str(titanic_file), str(tmp_path / "nowhere" / "x.onnx")]) == 1
    assert "there is no folder" in capsys.readouterr().err
    kept = tmp_path / "kept.onnx"
    kept.write_bytes(b"an earlier file")
    with pytest.raises(ExportError):
        trained.export_onnx(kept, opset=5)
    assert kept.read_bytes() == b"an earlier file"
    if os.name == "posix" and os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
        try:
            with pytest.raises(PermissionError):
                trained.export_onnx(locked / "x.onnx")
            assert list(locked.iterdir()) == []
        finally:
            locked.chmod(stat.S_IRWXU)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.onnx"] + (
        ["locked"] if (tmp_path / "locked").exists() else []
    )


def test_a_network_without_slot_values_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StateError, match="no slot values"):
        Network([Dense(2)], inputs=3).export_onnx(tmp_path / "x.onnx")


def test_without_onnx_installed_export_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ExportError, match=r"pip install 'deepsharp\[onnx\]'"):
        _small().export_onnx(tmp_path / "x.onnx")


def _messages(count: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(12)
    words = ["free", "win", "cash", "hello", "lunch", "meet", "call", "now", "prize", "home"]
    rows = []
    for _ in range(count):
        picked = [words[i] for i in rng.integers(0, len(words), rng.integers(2, 9))]
        spam = sum(word in ("free", "win", "cash", "prize") for word in picked) >= 2
        rows.append(
            {"message": " ".join(picked), "size": float(len(picked)), "label": str(int(spam))}
        )
    return rows


def test_a_text_column_s_ids_and_several_inputs_are_served_by_onnxruntime(tmp_path: Path) -> None:
    """A pipeline feeding two inputs (a text column's ids, a number column): the file takes the
    text's ids (int64, as the pipeline makes them: ONNX cannot cut text as the column does) and
    the number raw, and serves what deepsharp serves."""
    from deepsharp.core import (
        Adam,
        BinaryCrossEntropy,
        Concatenate,
        Dense,
        Embedding,
        FitOptions,
        Flatten,
        Input,
        Network,
        fit,
    )

    pipeline = (
        Pipeline()
        .text("message", length=8, vocabulary=20, input="words")
        .number("size", input="numbers")
        .target("label", kind="binary")
    )
    ids, numbers = Input(8, dtype="int64", name="words"), Input(1, name="numbers")
    joined = Concatenate()([Flatten()(Embedding(20, 3)(ids)), numbers])
    network = Network(inputs=[ids, numbers], outputs=Dense(1)(joined))
    rows = _messages(300)
    run = fit(
        pipeline, rows, network, BinaryCrossEntropy(), Adam(0.05), FitOptions(seed=2, epochs=3)
    )
    out = tmp_path / "messages.onnx"
    run.trained.export_onnx(out)
    served = session(out)
    assert {entry.name: entry.type for entry in served.get_inputs()} == {
        "message": "tensor(int64)",
        "size": "tensor(double)",
    }
    given = {
        "message": run.trained.pipeline.features(rows)["words"],
        "size": np.array([[row["size"]] for row in rows], np.float64),
    }
    got = served.run(None, given)[0]
    assert np.abs(got - run.trained.predict(rows)).max() < 1e-5
    # The file carries the recipe a consumer cuts the text with (before: no vocabulary).
    recipe = json.loads(metadata(out)["deepsharp.pipeline"])
    (text,) = [column for column in recipe["columns"] if column["kind"] == "text"]
    assert (text["tokens"], text["length"], text["padding"]) == ("words", 8, "end")
    tokens = text["learned"]["vocabulary"]
    ids = [tokens.index(w) + 2 if w in tokens else 1 for w in rows[0]["message"].lower().split()]
    assert given["message"][0].tolist() == (ids + [0] * 8)[:8]


def test_the_spam_sample_s_file_serves_its_ids_in_onnxruntime(tmp_path: Path) -> None:
    from deepsharp.core.samples import spam

    trained = spam.run(epochs=1).trained
    out = tmp_path / "spam.onnx"
    trained.export_onnx(out)
    served = session(out)
    rows = spam.rows()[:64]
    (entry,) = served.get_inputs()
    got = served.run(None, {entry.name: trained.pipeline.features(rows)})[0]
    assert np.abs(got - trained.predict(rows)).max() < 1e-5


@pytest.mark.parametrize("padding", ["end", "start"])
def test_recurrent_layers_over_padded_ids_serve_deepsharp_s_predictions(
    padding: str, tmp_path: Path
) -> None:
    """The layers that pass over the padding (both directions of an LSTM, a GRU, the mean over
    the positions) are written as the calls they make: the file gives their predictions."""
    from deepsharp.core import GRU, LSTM, SequencePool
    from deepsharp.core.random import Generator

    ids = Input(6, dtype="int64", name="ids")
    h = LSTM(3, return_sequences=True, bidirectional=True)(Embedding(9, 4)(ids))
    joined = Concatenate()([GRU(2)(h), SequencePool()(h)])
    network = Network(inputs=ids, outputs=Dense(2)(joined))
    network.initialize(Generator(0))
    rows = np.random.default_rng(1).integers(1, 9, (5, 6))
    for n, count in enumerate((6, 3, 1, 0, 4)):
        pad = slice(count, None) if padding == "end" else slice(0, 6 - count)
        rows[n, pad] = 0
    path = tmp_path / "padded.onnx"
    network.export_onnx(path, CrossEntropy())
    served = session(path)
    got = served.run(None, {"ids": rows})[0]
    np.testing.assert_allclose(got, network.predict(rows, CrossEntropy()), rtol=1e-5, atol=1e-6)


def test_an_id_outside_the_vocabulary_is_refused_by_the_file_as_by_deepsharp(
    tmp_path: Path,
) -> None:
    """Failed before: id -1 was served as the table's last row (ONNX's Gather counts a negative
    index from the end), where deepsharp refuses it."""
    import onnxruntime

    network = Network([Embedding(10, 4), Flatten(), Dense(1)], inputs=3)
    network.initialize(Generator(0))
    path = tmp_path / "ids.onnx"
    network.export_onnx(path, loss=BinaryCrossEntropy())
    served = onnxruntime.InferenceSession(str(path))
    name = served.get_inputs()[0].name
    ids = np.array([[2, 3, 9]], np.int64)
    want = network.predict(ids, BinaryCrossEntropy())
    assert np.allclose(served.run(None, {name: ids})[0], want, atol=1e-6)
    for outside in (-1, -10, 10):
        with pytest.raises(Exception, match="out of data bounds"):
            served.run(None, {name: np.array([[2, 3, outside]], np.int64)})
