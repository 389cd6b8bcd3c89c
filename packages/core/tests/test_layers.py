"""Layers: their arguments checked where they are made, and the kinds a file may name."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import deepsharp.core as ds
from deepsharp.core import (
    Conv2D,
    Dropout,
    FileFormatError,
    Flatten,
    Layer,
    MaxPool2D,
    Network,
    Tensor,
)
from deepsharp.core.nn.layers import LAYERS, Pass
from deepsharp.core.random import Generator


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: ds.Dense(True), "Dense: units must be a positive whole number, not True"),
        (lambda: ds.Dense(2.0), "units must be a positive whole number, not 2.0"),
        (lambda: Conv2D(8, 3, stride=1.5), "stride must be a positive whole number, not 1.5"),
        (lambda: Conv2D(8, 3, stride=True), "stride must be a positive whole number, not True"),
        (lambda: Conv2D(True, 3), "filters must be a positive whole number"),
        (lambda: Conv2D(8, (3, 2.5)), "kernel_size must be a positive whole number, not 2.5"),
        (lambda: Conv2D(8, 1.5), "kernel_size must be a positive whole number, not 1.5"),
        (lambda: MaxPool2D(True), "pool_size must be a positive whole number, not True"),
        (lambda: Dropout(True), r"rate must be a number in \[0, 1\), not True"),
        (lambda: Network([ds.Dense(2)], inputs=True), "inputs is a feature count"),
        (lambda: Network([ds.Dense(2)], inputs=(1, 2**40)), "inputs is a feature count"),
    ],
)
def test_arguments_are_checked_where_a_layer_is_made(make: Any, says: str) -> None:
    """Before: Dense(True) gave one unit, Conv2D(stride=1.5) a stride of 1."""
    with pytest.raises(ValueError, match=says):
        make()


class Dense(Layer):
    """A user's layer that happens to share a name with deepsharp's: it doubles its rows."""

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return x * 2.0


def test_a_user_s_layer_named_like_one_of_deepsharp_s_never_stands_in_for_it(
    tmp_path: Path,
) -> None:
    """Before: every Layer subclass registered under its class name, so this Dense replaced
    deepsharp's when a file was read."""
    assert LAYERS.get("Dense") is ds.Dense
    assert Dense.key == f"{__name__}.Dense" and LAYERS.get(Dense.key) is Dense
    network = Network([ds.Dense(3), Dense(), Flatten()], inputs=2)
    network.initialize(Generator(1))
    network.save(tmp_path / "n.safetensors")
    loaded = Network.load(tmp_path / "n.safetensors")
    assert [type(layer) for layer in loaded.layers] == [ds.Dense, Dense, Flatten]
    rows = np.ones((1, 2), np.float32)
    assert (
        loaded.predict(rows, ds.MeanSquaredError()).tolist()
        == network.predict(rows, ds.MeanSquaredError()).tolist()
    )


def test_a_file_naming_a_layer_no_one_imported_is_refused(tmp_path: Path) -> None:
    from deepsharp.core.files import encode_safetensors, read_safetensors

    network = Network([ds.Dense(1), Dense()], inputs=2)
    network.initialize(Generator(1))
    network.save(tmp_path / "n.safetensors")
    tensors, metadata = read_safetensors(tmp_path / "n.safetensors")
    metadata["network"] = metadata["network"].replace(Dense.key, "elsewhere.Dense")
    (tmp_path / "bad.safetensors").write_bytes(encode_safetensors(tensors, metadata))
    with pytest.raises(FileFormatError, match=r"unknown layer kind 'elsewhere\.Dense'.*imported"):
        Network.load(tmp_path / "bad.safetensors")


@pytest.mark.parametrize("engine", ["light", "testbuffer"])
def test_a_convolution_s_softmax_is_over_its_filters_at_each_place(engine: str) -> None:
    """Before: Conv2D's and Conv1D's activation="softmax" normalised over the last axis (the
    width, the length), each filter's row summing to 1, silently; Keras's channels-last softmax
    and PyTorch's softmax(dim=1) are over the filters."""
    from deepsharp.core import Conv1D, Conv2D, MeanSquaredError, Network
    from deepsharp.core.random import Generator

    rng = np.random.default_rng(0)
    for layer, shape in (
        (Conv2D(4, 3, activation="softmax"), (2, 6, 7)),
        (Conv1D(3, 2, activation="softmax"), (2, 9)),
    ):
        network = Network([layer], inputs=shape)
        network.initialize(Generator(1))
        x = rng.standard_normal((3, *shape)).astype(np.float32)
        out = network.predict(x, MeanSquaredError(), engine).reshape(3, layer.filters, -1)
        assert np.allclose(out.sum(axis=1), 1.0, atol=1e-6)
        assert not np.allclose(out.sum(axis=2), 1.0, atol=1e-3)


def _predicted_over_ids(tail: Any) -> None:
    """A network of ids through an Embedding (its padding mask), then `tail(embedded)`, a
    Dense: two rows predicted."""
    ids = ds.Input(10, dtype="int64", name="t")
    network = Network(inputs=ids, outputs=ds.Dense(1)(tail(ds.Embedding(50, 8)(ids))))
    network.initialize(Generator(0))
    network.predict(np.arange(20).reshape(2, 10) % 50, ds.MeanSquaredError())


def test_a_layer_of_channels_first_warns_of_a_sequence_of_positions() -> None:
    """Failed before (trial CO): Conv1D and GlobalAvgPool after an Embedding took its 40
    positions for channels and its features for places (a text CNN, mean pooling), silently.
    A warning, not a refusal (trial CP): files trained so before still serve."""
    for layer, advice in ((ds.GlobalAvgPool(), "SequencePool"), (ds.Conv1D(4, 3), "Permute")):
        with pytest.warns(ds.DeepSharpWarning, match=r"takes channels first, \(channels, "
                          r"length\).*a sequence of positions, \(10, 8\).*" + advice
                          + r".*Flatten\(\)\(x\)"):  # fmt: skip
            _predicted_over_ids(lambda embedded, layer=layer: Flatten()(layer(embedded)))


def test_batchnorm_over_an_embedding_s_positions_warns_naming_layernorm() -> None:
    """Before (trial GS): BatchNorm after an Embedding kept statistics of each of its 10
    positions (padding counted among them), silently, where Conv1D and GlobalAvgPool warn."""
    with pytest.warns(ds.DeepSharpWarning, match=r"'batchnorm' .*takes channels first.*a "
                      r"sequence of positions, \(10, 8\).*use LayerNorm"):  # fmt: skip
        _predicted_over_ids(lambda embedded: Flatten()(ds.BatchNorm()(embedded)))


def test_the_route_the_warning_names_lets_go_of_the_mask() -> None:
    """Trial CR: the route first named (keeps_positions = False on a layer before) still warned
    where that layer gave its input back; the one named now, Flatten then Reshape, does not."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _predicted_over_ids(lambda e: ds.GlobalAvgPool()(ds.Reshape((10, 8))(Flatten()(e))))


@pytest.mark.parametrize("engine", ["light", "light:float32", "testbuffer"])
def test_silu_of_a_value_far_below_zero_is_about_zero(engine: str) -> None:
    """Failed before (trial E2): an engine's sigmoid is 6e-39 below -88 (it holds -x at 88),
    which times x made Silu(-3.4e38) -2.06 and Silu(-1e36) -0.006, where it is -0."""
    if engine == "testbuffer":
        pytest.importorskip("deepsharp.engines.testbuffer")
    x = np.array([[-89.0, -1e20, -1e36, -3.4e38, 2.0]], np.float32)
    network = Network([ds.Silu()], inputs=5)
    network.initialize(Generator(0))
    got = network.predict(x, None, engine)
    assert np.all(np.abs(got[0, :4]) < 1e-36), got
    assert abs(got[0, 4] - 2.0 / (1.0 + np.exp(-2.0))) < 1e-6  # (above the floor: as before)
