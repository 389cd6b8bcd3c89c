"""Networks as graphs: symbols, residual connections, several inputs, shared layers, names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core import (
    SGD,
    Adam,
    Add,
    BinaryCrossEntropy,
    Concatenate,
    ConfigurationError,
    DataError,
    Dense,
    Embedding,
    FitOptions,
    Flatten,
    Input,
    Layer,
    MeanSquaredError,
    MultiHeadAttention,
    Network,
    Relu,
    ShapeError,
    StateError,
    Tanh,
    TrainedNetwork,
    Trainer,
    fit,
)
from deepsharp.core.random import Generator


def residual() -> Network:
    x = Input(4)
    h = Dense(8, activation="relu")(x)
    h = Dense(4)(h)
    y = Dense(1)(Relu()(Add()([x, h])))
    return Network(inputs=x, outputs=y)


def two_inputs() -> Network:
    numbers, other = Input(3, name="numbers"), Input(2, name="other")
    joined = Concatenate()([Dense(4, activation="tanh")(numbers), other])
    return Network(inputs=[numbers, other], outputs=Dense(1)(joined))


def _xy(seed: int, count: int = 64) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((count, 4)).astype(np.float32)
    return x, (x[:, :1] * 2 - x[:, 1:2] > 0).astype(np.float32)


def test_a_residual_network_trains_and_its_gradient_reaches_both_branches() -> None:
    network = residual()
    x, y = _xy(0)
    with Trainer(network, BinaryCrossEntropy(), Adam(0.05), seed=1) as trainer:
        first = trainer.step(x, y)
        for _ in range(60):
            last = trainer.step(x, y)
        after = network.slots
    assert last < first / 2
    assert set(after) == {
        f"{n}.{s}" for n in ("dense", "dense_1", "dense_2") for s in ("weights", "bias")
    }


def test_layers_are_named_by_kind_in_the_order_met_and_slots_by_layer() -> None:
    network = Network([Dense(4), Relu(), Dense(2, name="head"), Tanh(), Dense(1)], inputs=3)
    assert [layer.name for layer in network.layers] == ["dense", "relu", "head", "tanh", "dense_1"]
    assert list(network.specs) == [
        "dense.weights",
        "dense.bias",
        "head.weights",
        "head.bias",
        "dense_1.weights",
        "dense_1.bias",
    ]


def test_inserting_a_layer_renames_nothing_else() -> None:
    before = Network([Dense(4), Dense(2, name="head")], inputs=3)
    after = Network([Dense(4), Relu(), Tanh(), Dense(2, name="head")], inputs=3)
    assert set(before.specs) == set(after.specs)


def test_two_layers_of_one_given_name_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="two layers are named 'same'"):
        Network([Dense(4, name="same"), Dense(1, name="same")], inputs=3)
    with pytest.raises(ConfigurationError, match=r"must differ$"):  # names given: no more said
        Network([Dense(4, name="same"), Dense(1, name="same")], inputs=3)


def test_layers_named_by_two_networks_alike_are_refused_saying_their_names_were_given() -> None:
    """Failed before (trial G): the layers of two networks joined in one graph (an ensemble)
    were refused as "named alike" though the user named nothing: each network had named its
    layer 'dense'."""
    first, second = Network([Dense(3)], inputs=6), Network([Dense(3)], inputs=6)
    x = Input(6)
    with pytest.raises(ConfigurationError, match=r"two layers are named 'dense'.*both were named "
                       r"so by the network each was first used in.*Dense\(\.\.\., name=\.\.\.\)"):  # fmt: skip
        Network(inputs=x, outputs=Add()([first.layers[0](x), second.layers[0](x)]))
    with pytest.raises(ConfigurationError, match=r"one was named so by the network it was"):
        Network(inputs=x, outputs=Add()([Dense(3, name="dense")(x), second.layers[0](x)]))


def test_an_input_and_a_layer_of_one_name_are_refused_and_automatic_names_avoid_inputs() -> None:
    """Failed before: Input(name='x') and Dense(name='x') were taken, and the summary showed two
    rows named x, both layers reading 'x'."""
    x = Input(3, name="x")
    with pytest.raises(ConfigurationError, match="an input and a layer are both named 'x'"):
        Network(inputs=x, outputs=Dense(2)(Dense(3, name="x")(x)))
    chain = Network([Dense(3, name="input"), Relu(), Dense(1)], inputs=4)  # a chain's input
    assert "input.weights" in chain.specs  # is 'input' by itself: its layers may be named so
    named = Input(3, name="dense")
    network = Network(inputs=named, outputs=Dense(2)(named))
    assert [layer.name for layer in network.layers] == ["dense_1"]
    said: list[str] = []
    network.summary(print_fn=said.append)
    assert said[0].splitlines()[0] == "Network: a graph of 1 layer, on 1 input"


def test_an_input_in_a_chain_and_a_network_sharing_layers_say_what_to_do() -> None:
    """Failed before: an Input in a chain's list was 'not a Layer', no more; the encoder of a
    trained autoencoder said 'train it or load it', not where the values are."""
    with pytest.raises(TypeError, match="a chain's rows are given by inputs="):
        Network([Input(3), Dense(2)])
    x = Input(3)
    code = Dense(2, name="code")(x)
    whole = Network(inputs=x, outputs=Dense(3, name="out")(code))
    encoder = Network(inputs=x, outputs=code)
    whole.initialize(Generator(0))
    with pytest.raises(StateError, match=r"values are a network's, not its layers'"):
        encoder.predict(np.ones((1, 3), np.float32), MeanSquaredError())
    encoder.set_slots({name: whole.slots[name] for name in encoder.specs})  # as the docs say
    assert encoder.predict(np.ones((1, 3), np.float32), MeanSquaredError()).shape == (1, 2)


def test_keras_s_call_arguments_and_init_none_say_what_to_do() -> None:
    """Failed before: a raw TypeError of an unexpected keyword 'training'; Dense(init=None)
    suggested 'ones'."""
    with pytest.raises(
        TypeError, match=r"Dense\(\) is called on symbols alone, not with training="
    ):
        Dense(3)(Input(3), training=True)
    with pytest.raises(ValueError, match=r"leave init out for the layer's own default"):
        Dense(3, init=None)


def test_a_name_with_a_dot_is_refused() -> None:
    with pytest.raises(ValueError, match="no dots"):
        Dense(4, name="a.b")


def test_two_inputs_take_a_dict_by_name_or_a_list_in_order() -> None:
    network = two_inputs()
    rng = np.random.default_rng(2)
    numbers = rng.standard_normal((40, 3)).astype(np.float32)
    other = rng.standard_normal((40, 2)).astype(np.float32)
    y = (numbers[:, :1] + other[:, 1:] > 0).astype(np.float32)
    with Trainer(network, BinaryCrossEntropy(), Adam(0.05), seed=3) as trainer:
        for _ in range(40):
            trainer.step({"numbers": numbers, "other": other}, y)
    by_name = network.predict({"other": other, "numbers": numbers}, BinaryCrossEntropy())
    in_order = network.predict([numbers, other], BinaryCrossEntropy())
    assert by_name.tobytes() == in_order.tobytes()
    assert ((by_name > 0.5) == (y > 0.5)).mean() > 0.85


def test_fit_and_a_trained_network_take_a_list_in_order_as_they_take_a_dict(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(2)
    numbers = rng.standard_normal((60, 3)).astype(np.float32)
    other = rng.standard_normal((60, 2)).astype(np.float32)
    y = (numbers[:, :1] + other[:, 1:] > 0).astype(np.float32)
    options = FitOptions(seed=3, epochs=2, progress=False)
    tested = ([numbers[:8], other[:8]], y[:8])
    in_order = fit(
        None,
        ([numbers, other], y),
        two_inputs(),
        BinaryCrossEntropy(),
        Adam(),
        options,
        test_rows=tested,
    )
    by_name = fit(
        None,
        ({"numbers": numbers, "other": other}, y),
        two_inputs(),
        BinaryCrossEntropy(),
        Adam(),
        options,
        test_rows=tested,
    )
    trained = in_order.trained
    assert (
        trained.predict([numbers, other]).tobytes()
        == by_name.trained.predict({"numbers": numbers, "other": other}).tobytes()
    )
    trained.save(tmp_path / "two.safetensors")
    again = TrainedNetwork.load(tmp_path / "two.safetensors")
    parts = list(again.predict_parts([[numbers[:5], other[:5]], (numbers[5:], other[5:])]))
    assert np.concatenate(parts).tobytes() == trained.predict([numbers, other]).tobytes()


def test_a_dict_missing_or_adding_an_input_is_refused_naming_both() -> None:
    network = two_inputs()
    with Trainer(network, MeanSquaredError(), SGD(0.1)) as trainer:
        with pytest.raises(DataError, match=r"lacks 'other'.*holds 'extra'"):
            trainer.step({"numbers": np.zeros((2, 3)), "extra": np.zeros((2, 2))}, np.zeros((2, 1)))
        with pytest.raises(DataError, match="takes 2 inputs"):
            trainer.step(np.zeros((2, 3)), np.zeros((2, 1)))
        with pytest.raises(DataError, match="same rows"):
            trainer.step({"numbers": np.zeros((2, 3)), "other": np.zeros((3, 2))}, np.zeros((2, 1)))


def test_fit_takes_a_dict_of_arrays_and_the_trained_file_serves_dicts(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    numbers = rng.standard_normal((300, 3)).astype(np.float32)
    other = rng.standard_normal((300, 2)).astype(np.float32)
    y = (numbers[:, 0] - other[:, 1] > 0).astype(np.float32)
    run = fit(
        None,
        ({"numbers": numbers, "other": other}, y),
        two_inputs(),
        BinaryCrossEntropy(),
        Adam(0.02),
        FitOptions(seed=5, epochs=30, progress=False),
    )
    assert run.report.measures["accuracy"] > 0.85
    run.trained.save(tmp_path / "two.safetensors")
    again = TrainedNetwork.load(tmp_path / "two.safetensors")
    rows = {"numbers": numbers[:7], "other": other[:7]}
    assert again.predict(rows).tobytes() == run.trained.predict(rows).tobytes()


def test_a_shared_layer_holds_one_set_of_slots_and_both_calls_send_it_gradient() -> None:
    a, b = Input(3, name="a"), Input(3, name="b")
    shared = Dense(2)
    out = Dense(1)(Concatenate()([shared(a), shared(b)]))
    network = Network(inputs=[a, b], outputs=out)
    assert [layer.name for layer in network.layers] == ["dense", "concatenate", "dense_1"]
    assert sorted(network.specs) == [
        "dense.bias",
        "dense.weights",
        "dense_1.bias",
        "dense_1.weights",
    ]
    with Trainer(network, MeanSquaredError(), SGD(0.1), seed=0) as trainer:
        before = network.slots["dense.weights"]
        trainer.step({"a": np.ones((2, 3)), "b": np.zeros((2, 3))}, np.ones((2, 1)))
        moved = network.slots["dense.weights"] - before
    assert np.abs(moved).sum() > 0


def test_an_output_that_does_not_depend_on_a_listed_input_is_refused() -> None:
    a, b = Input(3, name="a"), Input(3, name="b")
    with pytest.raises(ConfigurationError, match=r"input .*'b'.* is never used"):
        Network(inputs=[a, b], outputs=Dense(1)(a))


def test_an_output_that_depends_on_an_input_not_listed_is_refused() -> None:
    a, b = Input(3, name="a"), Input(3, name="b")
    with pytest.raises(ConfigurationError, match="inputs= does not list"):
        Network(inputs=a, outputs=Add()([Dense(3)(a), b]))


def test_a_layer_given_a_shape_it_cannot_take_is_refused_where_it_is_called() -> None:
    a, b = Input(3), Input(4)
    with pytest.raises(ShapeError, match=r"Add.*one shape"):
        Add()([a, b])
    shared = Dense(2)
    shared(a)
    with pytest.raises(ShapeError, match="shares its slots, so it takes one shape"):
        shared(b)
    with pytest.raises(ShapeError, match="takes a list of two or more inputs"):
        Add()(a)
    # A layer named is named so where it is called (failed before, trial LY: "Dense takes ...",
    # "MultiHeadAttention: its mask ...", where a chain said "layer 'head' (Dense(units=3))").
    with pytest.raises(ShapeError, match=r"^layer 'head' \(Dense\(units=3\)\) takes rows of"):
        Dense(3, name="head")(Input((2, 3, 4)))
    with pytest.raises(
        ShapeError, match=r"^layer 'att' \(MultiHeadAttention\(heads=2\)\): its mask"
    ):
        MultiHeadAttention(2, name="att")([Input((4, 8)), Input(5)])


def test_ids_go_to_an_embedding_not_to_a_dense_layer() -> None:
    ids = Input(5, dtype="int64")
    with pytest.raises(ShapeError, match="int64 ids go to an Embedding first"):
        Dense(3)(ids)


def test_a_graph_network_saves_and_loads_with_its_names(tmp_path: Path) -> None:
    network = residual()
    with Trainer(network, BinaryCrossEntropy(), Adam(0.05), seed=1) as trainer:
        trainer.step(*_xy(6))
    network.save(tmp_path / "residual.safetensors")
    again = Network.load(tmp_path / "residual.safetensors")
    assert again.to_json() == network.to_json()
    x, _ = _xy(7)
    assert (
        again.predict(x, BinaryCrossEntropy()).tobytes()
        == network.predict(x, BinaryCrossEntropy()).tobytes()
    )


def test_summary_lists_each_layer_its_shape_and_its_slots(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert two_inputs().summary() is None  # printed once; a notebook shows no string again
    text = capsys.readouterr().out.strip()
    lines = text.splitlines()
    assert lines[0] == "Network: a graph of 3 layers, on 2 inputs"
    assert any(line.split()[:2] == ["numbers", "(Input)"] for line in lines)
    dense = next(line for line in lines if line.startswith("dense (Dense)"))
    assert "(N, 4)" in dense and " 16 " in dense and dense.endswith("numbers")
    assert lines[-1] == "slots (trained): 23; buffers (not trained): 0"


def test_summary_names_each_call_of_a_shared_layer_and_what_reads_which(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Failed before (trial G): both calls of a shared layer were its name, and a node reading
    one said "bn, bn", whichever call it read."""
    a, b = Input(4, name="a"), Input(4, name="b")
    shared = Dense(5, name="sh")
    first, second = shared(a), shared(b)
    network = Network(inputs=[a, b], outputs=Dense(1)(Add()([first, Relu()(second)])))
    network.summary()
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert rows["sh#1"].endswith(" a") and rows["sh#2"].endswith(" b")
    assert "(shared)" in rows["sh#2"] and rows["relu"].endswith("sh#2")
    assert rows["add"].endswith("sh#1, relu")


def test_float_values_are_refused_where_ids_belong() -> None:
    from deepsharp.core import Embedding, Tensor
    from deepsharp.core.autodiff import functions as ops
    from deepsharp.core.engine import make_engine

    engine = make_engine("light")
    values = Tensor.put(engine, np.array([[0.0, 1.0]], np.float32))
    table = Tensor.put(engine, np.ones((3, 2), np.float32))
    with pytest.raises(ShapeError, match="one_hot takes int64 indices"):
        ops.one_hot(values, 3)
    with pytest.raises(ShapeError, match="take_rows takes int64 indices"):
        ops.take_rows(table, values)
    ids = Input(2, dtype="int64", name="tokens")
    network = Network(inputs=ids, outputs=Dense(1)(Flatten()(Embedding(5, 3)(ids))))
    with Trainer(network, MeanSquaredError(), SGD(0.1)) as trainer:
        with pytest.raises(DataError, match=r"input takes int64 ids.*float"):
            trainer.step(np.array([[1.0, 2.0]]), np.zeros((1, 1)))
        with pytest.raises(
            DataError, match=r"row 2, .*id 5, outside layer 'embedding'.*vocabulary of 5"
        ):
            trainer.step(np.array([[1, 2], [5, 0]]), np.zeros((2, 1)))
        # its place counted from 1, as its row is (trial GR5: "row 2 (counting from 1), place [1]")
        with pytest.raises(
            DataError, match=r"row 1, place \[2\] \(each counting from 1\) holds the id 7"
        ):
            trainer.step(np.array([[1, 7]]), np.zeros((1, 1)))


class _WrappedEmbedding(Layer):
    """A layer of one's own around an Embedding, as docs/layers.md builds parts."""

    takes = ("int64",)

    def build(self, shape: Any) -> Any:
        return self.sublayer("emb", Embedding(10, 3), shape)

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        return self.call("emb", x, slots, context)


@pytest.mark.parametrize("engine", ["light", "testbuffer"])
def test_an_embedding_inside_a_layer_of_one_s_own_checks_its_ids(engine: str) -> None:
    """Failed before: only layers reading an input directly checked it, so an Embedding built as
    a part took id -1 as id 9 (NumPy's negative indexing), silently, in serving and training,
    and id 10 raised NumPy's raw IndexError from inside the engine."""
    network = Network([_WrappedEmbedding(), Flatten(), Dense(1)], inputs=4)
    with Trainer(network, MeanSquaredError(), Adam(0.1), engine=engine, seed=0) as trainer:
        trainer.step(np.array([[1, 2, 3, 4]] * 2), np.ones((2, 1)))
        table = next(name for name in network.slots if name.endswith(".emb.table"))
        before = network.slots[table].copy()
        with pytest.raises(DataError, match=r"row 2, .*id -1, outside .*'s emb's vocabulary of 10"):
            trainer.step(np.array([[1, 2, 3, 4], [-1, 0, 0, 0]]), np.ones((2, 1)))
    assert np.array_equal(network.slots[table], before)
    for bad in (-1, 10):
        with pytest.raises(DataError, match=rf"id {bad}, outside"):
            network.predict(np.array([[1, bad, 3, 4]]), MeanSquaredError(), engine)


class _OnePartTwice(Layer):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Dense(4)

    def build(self, shape: Any) -> Any:
        self.sublayer("first", self.inner, shape)
        return self.sublayer("second", self.inner, (4,))

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        return self.call("second", self.call("first", x, slots, context), slots, context)


def test_one_layer_object_as_two_parts_or_a_network_called_is_refused_saying_what_to_do() -> None:
    """Before: one Dense given as two parts trained two sets of slots, silently (sharing was
    meant); a Network called on a symbol raised "'Network' object is not callable"."""
    with pytest.raises(ValueError, match=r"is already its part 'first'.*self.call\('first'"):
        Network([_OnePartTwice()], inputs=4)
    inner = Network([Dense(2)], inputs=3)
    with pytest.raises(TypeError, match=r"a Network is not a layer.*\*network.layers"):
        inner(Input(3))


def test_a_sequence_longer_than_the_positional_table_is_refused() -> None:
    from deepsharp.core import PositionalEmbedding

    with pytest.raises(ShapeError, match=r"sequences of 9 positions, longer than its table of 8"):
        PositionalEmbedding(8, 4)(Input((9, 4)))


@pytest.mark.parametrize("merge", [Add(), Concatenate()])
def test_a_merge_layer_in_a_chain_is_refused_saying_to_build_a_graph(merge: Any) -> None:
    """Failed before: TypeErrors from inside ('int' object is not iterable; object of type 'int'
    has no len()) when the chain was built."""
    with pytest.raises(ConfigurationError, match=r"layer 1, .* takes a list of two or more inputs"):
        Network([Dense(4), merge], inputs=4)


def test_a_layer_built_in_one_network_is_refused_by_another_of_other_shapes() -> None:
    """Failed before: the second network rebuilt the layer for its rows, and the first's
    summary then counted the second's slots for it (12 where the first holds 10); a layer of the
    same shapes may still sit in two networks (each keeps its own slots)."""
    shared = Dense(2)
    first = Network([shared], inputs=4)
    with pytest.raises(ShapeError, match=r"built for rows of shape \(4,\) \(in another network\)"):
        Network([shared], inputs=5)
    said: list[str] = []
    first.summary(print_fn=said.append)
    assert "dense (Dense)  (N, 2)        10" in said[0]
    Network([shared], inputs=4)


@pytest.mark.parametrize(
    ("causal", "keep"),
    [(True, [0, 0, 1, 1, 1]), (False, [0, 0, 0, 0, 0]), (True, [0, 0, 0, 0, 0])],
    ids=["causal-padding-first", "no-token", "causal-no-token"],
)
def test_a_query_no_key_is_allowed_to_reads_nothing_not_later_tokens(
    causal: bool, keep: list[int]
) -> None:
    """Failed before (trial BD): under causal attention, the padding before a text's first token
    (padding="start") attended to the tokens after it: its keys, padding, took -10⁹ twice and the
    later tokens once. A row of no tokens spread its weights over what its padding held."""
    from deepsharp.core import MultiHeadAttention
    from deepsharp.core.random import Generator

    length, width = 5, 4
    x, mask = Input((length, width), name="x"), Input(length, name="mask")
    attention = MultiHeadAttention(2, causal=causal)
    network = Network(inputs=[x, mask], outputs=attention([x, mask]))
    network.initialize(Generator(0))
    rows = np.random.default_rng(0).standard_normal((1, length, width)).astype(np.float32)
    given = np.array([keep], np.float32)
    first = network.predict({"x": rows, "mask": given}, MeanSquaredError()).reshape(length, width)
    changed = rows.copy()
    changed[0, -1] += 5.0  # the last token, or the last padding
    second = network.predict({"x": changed, "mask": given}, MeanSquaredError())
    second = second.reshape(length, width)
    unread = [t for t in range(length) if not any(keep[: t + 1] if causal else keep)]
    np.testing.assert_array_equal(first[unread], second[unread])
    bias = network.slots["multiheadattention.out_bias"]
    np.testing.assert_allclose(first[unread], np.broadcast_to(bias, (len(unread), width)))
    if causal and any(keep):  # a token's place reads only itself and the tokens before it
        np.testing.assert_array_equal(first[2:4], second[2:4])


def test_a_transformer_block_drops_its_hidden_values_as_pytorch_s_layer_does() -> None:
    """Failed before (trial BG): PyTorch's TransformerEncoderLayer drops out the GELU's output
    (linear2(dropout(gelu(linear1(x))))), and TransformerBlock(dropout=p) did not: no hidden
    unit's up-projection gradient was ever zeroed (PyTorch's: half of them at p = 0.5)."""
    from deepsharp.core import SGD, StepHook, Trainer, TransformerBlock

    class Grab(StepHook):
        def __init__(self) -> None:
            self.up: list[np.ndarray] = []

        def gradients(self, trainer: Any, grads: Any) -> Any:
            named = dict(zip(trainer.network.specs, grads))
            self.up.append(trainer.engine.get(named["transformerblock.up.weights"]))
            return grads

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 1, 8)).astype(np.float32)
    y = rng.standard_normal((1, 8)).astype(np.float32)
    for rate, low, high in ((0.5, 0.3, 0.7), (0.0, 0.0, 0.0)):
        network = Network([TransformerBlock(heads=2, hidden=64, dropout=rate)], inputs=(1, 8))
        grab = Grab()
        with Trainer(network, MeanSquaredError(), SGD(1e-30), seed=0, hooks=[grab]) as trainer:
            for _ in range(5):
                trainer.step(x, y)
        dropped = np.mean([(np.abs(up).sum(axis=0) == 0).mean() for up in grab.up])
        assert low <= dropped <= high, (rate, dropped)


def test_a_network_without_slots_predicts_without_being_initialized() -> None:
    """Before (trial GS): 'the network has no slot values yet: train it, load it or set them',
    where there is nothing to set; one with slots still says so."""
    from deepsharp.core import Add, MeanSquaredError, Relu, StateError

    rows = np.array([[-1.0, 2.0, 3.0]], np.float32)
    assert Network([Relu()], inputs=3).predict(rows, MeanSquaredError()).tolist() == [[0, 2, 3]]
    a = Input(3, name="a")
    doubled = Network(inputs=a, outputs=Add()([a, a]))
    assert doubled.predict(rows, MeanSquaredError()).tolist() == [[-2, 4, 6]]
    with pytest.raises(StateError, match="the network has no slot values yet"):
        Network([Dense(2)], inputs=3).predict(rows, MeanSquaredError())
