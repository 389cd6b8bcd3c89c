"""The rulebook: every rule sends back what nudging its inputs says it should."""

from __future__ import annotations

import re
import weakref
from typing import Any

import numpy as np
import pytest

from deepsharp.contracts.nudging import CASES, RuleCase, worst_nudge_error
from deepsharp.contracts.reference import Float64Engine
from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Node, Recording, Tensor
from deepsharp.core.engine import Engine, fused_recurrent
from deepsharp.core.errors import ShapeError
from deepsharp.engines.light import LightEngine


def test_every_rule_has_a_nudging_case() -> None:
    own = {
        name for name, rule in ops.RULES.items() if type(rule).__module__.startswith("deepsharp.")
    }
    assert own == {case.rule for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_the_rule_agrees_with_nudging(case: RuleCase) -> None:
    """On the contract suite's float64 reference: the core names no engine for its rules."""
    assert worst_nudge_error(case, Float64Engine) <= 1.0


class HalfTanh(ops.Rule):
    """A deliberately wrong rule: tanh's way back, halved."""

    name = "tanh"

    def forward(self, engine: Engine, x: Any) -> tuple[Any, Any]:
        return engine.tanh(x), None

    def backward(self, engine: Engine, node: Node, grad: Any) -> tuple[Any, ...]:
        out = node.saved[0]
        return (engine.mul(engine.mul(grad, engine.sub(1.0, engine.mul(out, out))), 0.5),)


class ForgetsTranspose(ops.Rule):
    """A deliberately wrong rule: matmul's way back that ignores transpose_b."""

    name = "matmul"

    def forward(self, engine: Engine, a: Any, b: Any, **attrs: Any) -> tuple[Any, Any]:
        return engine.matmul(
            a, b, attrs.get("transpose_a", False), attrs.get("transpose_b", False)
        ), None

    def backward(self, engine: Engine, node: Node, grad: Any) -> tuple[Any, ...]:
        a, b = node.inputs
        return (
            engine.matmul(grad, b.handle, False, False),  # type: ignore[union-attr]
            engine.matmul(a.handle, grad, True, False),  # type: ignore[union-attr]
        )


@pytest.mark.parametrize(
    ("wrong", "case_id"), [(HalfTanh(), "tanh"), (ForgetsTranspose(), "matmul-tb")]
)
def test_a_planted_wrong_rule_is_caught(
    monkeypatch: pytest.MonkeyPatch, wrong: ops.Rule, case_id: str
) -> None:
    case = next(case for case in CASES if case.id == case_id)
    assert worst_nudge_error(case, Float64Engine) <= 1.0
    monkeypatch.setitem(ops.RULES, wrong.name, wrong)
    assert worst_nudge_error(case, Float64Engine) > 1.0


def test_a_planted_wrong_lstm_position_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The LSTM's rule goes back through `lstm_cell_back`: one that forgets the cell carried
    from the next position (dc) is caught by nudging, on every position but the last."""
    case = next(case for case in CASES if case.id == "lstm-sequences")
    assert worst_nudge_error(case, Float64Engine) <= 1.0
    right = fused_recurrent.lstm_cell_back_reference

    def forgets(engine: Engine, dh: Any, dc: Any, *rest: Any) -> Any:
        return right(engine, dh, None, *rest)

    monkeypatch.setattr(fused_recurrent, "lstm_cell_back_reference", forgets)
    assert worst_nudge_error(case, Float64Engine) > 1.0


def test_a_node_keeps_only_what_its_way_back_reads() -> None:
    """A convolution's output, once ReLU has read it, is held by nothing on the tape: ReLU's way
    back reads its own output, the convolution's reads its inputs. Its memory goes at once."""
    engine = LightEngine()
    rng = np.random.default_rng(0)
    x = Tensor.put(engine, rng.standard_normal((2, 1, 6, 6)).astype(np.float32))
    w = Tensor.put(engine, rng.standard_normal((3, 1, 3, 3)).astype(np.float32))
    with Recording([w]) as recording:
        convolved = ops.conv2d(x, w)
        gone = weakref.ref(convolved.handle)
        loss = ops.sum(ops.relu(convolved))
        del convolved
        assert gone() is None
        (grad,) = recording.gradients(loss, [w])

    # the same gradient as working it out here: Σ over images and places of x · [conv > 0]
    xs, ws = x.numpy().astype(np.float64), w.numpy().astype(np.float64)
    windows = np.lib.stride_tricks.sliding_window_view(xs, (3, 3), axis=(2, 3))[:, 0]
    positive = np.einsum("nhwij,fij->nfhw", windows, ws[:, 0]) > 0
    expected = np.einsum("nhwij,nfhw->fij", windows, positive)[:, None]
    np.testing.assert_allclose(engine.get(grad), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "rule",
    [
        *(ops.neg, ops.exp, ops.log, ops.log1p, ops.sqrt, ops.tanh, ops.sigmoid, ops.relu),
        *(ops.abs, ops.log_softmax, ops.maxpool2d, ops.erf, ops.gelu),
        lambda x: ops.maxpool2d(x, (2, 1)),
    ],
    ids=lambda rule: rule.__name__,
)
def test_a_rule_goes_back_the_same_from_a_made_input_as_from_a_leaf(rule: Any) -> None:
    """Applied to a tensor made in the same pass, a rule that keeps no inputs keeps a stand-in
    without values; its gradient must be the one it sends back from a leaf, kept whole."""
    engine = LightEngine()
    rng = np.random.default_rng(2)
    x = Tensor.put(engine, rng.random((2, 3, 4, 4)).astype(np.float32) + 0.5)

    def gradient(made: bool) -> np.ndarray:
        with Recording([x]) as recording:
            value = ops.mul(x, 1.0) if made else x
            loss = ops.sum(ops.mul(rule(value), rule(value)))  # a gradient that is not all ones
            (grad,) = recording.gradients(loss, [x])
        return np.asarray(engine.get(grad))

    assert gradient(made=True).tobytes() == gradient(made=False).tobytes()


# --- the operations networks as graphs are built from ----------------------------------------


def _gradients(engine: Engine, function: Any, *values: np.ndarray) -> tuple[np.ndarray, ...]:
    tensors = [Tensor.put(engine, value) for value in values]
    with Recording(tensors) as recording:
        out = function(*tensors)
        grads = recording.gradients(ops.sum(ops.mul(out, out)), tensors)
    return (engine.get(out.handle), *(engine.get(grad) for grad in grads))


def test_at_multiplies_stacks_and_sends_each_its_gradient() -> None:
    """q @ k.T over (N, heads, L, d), as attention takes it, through `@` and `ops.matmul`."""
    rng = np.random.default_rng(3)
    q, k = (rng.standard_normal((2, 3, 5, 4)).astype(np.float32) for _ in range(2))
    engine = LightEngine()
    out, gq, gk = _gradients(engine, lambda a, b: ops.matmul(a, b, transpose_b=True), q, k)
    q64, k64 = q.astype(np.float64), k.astype(np.float64)
    scores = q64 @ np.swapaxes(k64, -1, -2)
    np.testing.assert_allclose(out, scores, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gq, 2 * scores @ k64, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gk, 2 * np.swapaxes(scores, -1, -2) @ q64, rtol=1e-4, atol=1e-4)
    same, *_ = _gradients(engine, lambda a, b: a @ ops.transpose(b, (0, 1, 3, 2)), q, k)
    assert same.tobytes() == out.tobytes()


def test_at_multiplies_a_sequence_by_a_shared_matrix_as_its_rows() -> None:
    """(N, L, D) @ (D, U): a dense layer over a sequence, the same bits as its rows (N·L, D)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)
    w = rng.standard_normal((4, 6)).astype(np.float32)
    engine = LightEngine()
    out, gx, gw = _gradients(engine, lambda a, b: a @ b, x, w)
    rows, grows, gwrows = _gradients(engine, lambda a, b: a @ b, x.reshape(15, 4), w)
    assert out.tobytes() == rows.reshape(3, 5, 6).tobytes()
    assert gx.tobytes() == grows.reshape(3, 5, 4).tobytes() and gw.tobytes() == gwrows.tobytes()


@pytest.mark.parametrize(
    ("a", "b", "transpose_a"),
    [((2, 3, 4), (3, 4, 5), False), ((2, 3, 4), (2, 5, 4), False), ((2, 4, 3), (4, 5), True)],
)
def test_stacks_that_do_not_multiply_are_refused_naming_both_shapes(
    a: tuple[int, ...], b: tuple[int, ...], transpose_a: bool
) -> None:
    engine = LightEngine()
    left, right = (Tensor.put(engine, np.zeros(shape, np.float32)) for shape in (a, b))
    with pytest.raises(ShapeError, match=re.escape(f"shapes {a} and {b} do not multiply")):
        ops.matmul(left, right, transpose_a=transpose_a)


def test_take_rows_sends_the_table_each_rows_gradients_added_and_the_ids_none() -> None:
    """An embedding: ids (N, L) pick rows of a table (V, D); repeated ids add up on the way back."""
    engine = LightEngine()
    table = np.random.default_rng(5).standard_normal((6, 3)).astype(np.float32)
    ids = np.array([[1, 4, 1], [0, 1, 5]], np.int64)
    table_tensor, id_tensor = Tensor.put(engine, table), Tensor.put(engine, ids)
    with Recording([table_tensor]) as recording:
        picked = ops.take_rows(table_tensor, id_tensor)
        assert picked.shape == (2, 3, 3)
        weights = Tensor.put(engine, np.arange(18, dtype=np.float32).reshape(2, 3, 3))
        (grad,) = recording.gradients(ops.sum(ops.mul(picked, weights)), [table_tensor])
    expected = np.zeros((6, 3))
    np.add.at(expected, ids.reshape(-1), np.arange(18).reshape(6, 3))
    assert np.array_equal(engine.get(grad), expected.astype(np.float32))
    assert np.array_equal(engine.get(picked.handle), table[ids])


def test_maxpool2d_takes_a_pair_and_a_square_pair_is_the_square_rule() -> None:
    engine = LightEngine()
    x = Tensor.put(
        engine, np.random.default_rng(6).standard_normal((1, 2, 6, 6)).astype(np.float32)
    )
    with Recording([x]):
        assert ops.maxpool2d(x, (2, 3)).node.rule.name == "maxpool2d_pair"  # type: ignore[union-attr]
        square = ops.maxpool2d(x, (3, 3))
        assert square.node.rule.name == "maxpool2d" and square.node.attrs == {"pool": 3}  # type: ignore[union-attr]
    with pytest.raises(ShapeError, match=r"windows of \(7, 2\)"):
        ops.maxpool2d(x, (7, 2))


class _CountingLight(LightEngine):
    """The light engine, counting the moves a way back makes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = {"pad": 0, "concatenate": 0, "add": 0}

    def pad(self, x: Any, widths: Any) -> Any:
        self.calls["pad"] += 1
        return super().pad(x, widths)

    def concatenate(self, xs: Any, axis: int) -> Any:
        self.calls["concatenate"] += 1
        return super().concatenate(xs, axis)

    def add(self, a: Any, b: Any) -> Any:
        self.calls["add"] += 1
        return super().add(a, b)


@pytest.mark.parametrize(
    ("stretches", "moves"),
    [
        # q, k and v of one projection, met in any order: one concatenation, no zeros
        ([(4, 6), (0, 2), (2, 4)], {"pad": 0, "concatenate": 1, "add": 0}),
        # stretches meeting end to end inside the value: joined, then padded once
        ([(3, 5), (1, 3)], {"pad": 1, "concatenate": 1, "add": 0}),
        # one stretch: its own way back, zeros around it
        ([(2, 5)], {"pad": 1, "concatenate": 0, "add": 0}),
        # a gap between them, or an overlap: each padded, and added
        ([(0, 2), (3, 6)], {"pad": 2, "concatenate": 0, "add": 1}),
        ([(0, 3), (2, 6)], {"pad": 2, "concatenate": 0, "add": 1}),
        ([(0, 3), (0, 3), (3, 6)], {"pad": 3, "concatenate": 0, "add": 2}),
    ],
)
@pytest.mark.parametrize("made", [False, True], ids=["leaf", "made"])
def test_slices_of_one_value_send_their_gradients_joined_end_to_end(
    stretches: list[tuple[int, int]], moves: dict[str, int], made: bool
) -> None:
    """Attention's q, k and v are three slices of one projection, and an RNN's positions L
    slices of one sequence: their gradients are concatenated into the value's, where each slice's
    own way back (zeros around it) and their sum would pass over the whole value once a slice
    (L times, for a sequence). Stretches that do not meet end to end keep that way."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 6)).astype(np.float32)
    weights = [
        rng.standard_normal((3, stop - start)).astype(np.float32) for start, stop in stretches
    ]
    engine = _CountingLight()
    leaf = Tensor.put(engine, x)
    with Recording([leaf]) as recording:
        value = ops.mul(leaf, 2.0) if made else leaf
        parts = [
            ops.sum(ops.mul(ops.slice(value, 1, start, stop), Tensor.put(engine, w)))
            for (start, stop), w in zip(stretches, weights)
        ]
        total = parts[0]
        for part in parts[1:]:
            total = ops.add(total, part)
        engine.calls = dict.fromkeys(engine.calls, 0)
        (grad,) = recording.gradients(total, [leaf])
    expected = np.zeros((3, 6))
    for (start, stop), w in zip(stretches, weights):
        expected[:, start:stop] += w
    np.testing.assert_allclose(engine.get(grad), expected * (2.0 if made else 1.0), rtol=1e-6)
    # besides the loss's seed (zeros + 1), the sums' and products' ways back add, pad and
    # concatenate nothing: what is counted is the slices'
    assert engine.calls == {**moves, "add": moves["add"] + 1}


def test_a_value_sliced_and_used_whole_gets_both_gradients() -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    engine = _CountingLight()
    leaf = Tensor.put(engine, x)
    with Recording([leaf]) as recording:
        total = ops.add(
            ops.add(ops.sum(ops.slice(leaf, 1, 0, 1)), ops.sum(ops.slice(leaf, 1, 1, 4))),
            ops.sum(ops.mul(leaf, 3.0)),
        )
        (grad,) = recording.gradients(total, [leaf])
    np.testing.assert_array_equal(engine.get(grad), np.full((2, 4), 4.0, np.float32))


def test_the_joined_way_back_of_slices_is_named_the_slices_for_whoever_watches() -> None:
    """Failed before (trial BF): compare filed the join of a sliced slot's gradients under the
    forward pass (the recording's `running` was already None), and a made value's under the
    rule that made it (an affine), not under the slices whose way back it is."""
    from deepsharp.core.autodiff.tensor import open_recording

    seen: list[str] = []

    class Watching(_CountingLight):
        def pad(self, x: Any, widths: Any) -> Any:
            self._saw()
            return super().pad(x, widths)

        def concatenate(self, xs: Any, axis: int) -> Any:
            self._saw()
            return super().concatenate(xs, axis)

        def _saw(self) -> None:
            recording = open_recording()
            assert recording is not None
            node = recording.running
            seen.append("the forward pass" if node is None else node.rule.name)

    engine = Watching()
    rng = np.random.default_rng(7)
    leaf = Tensor.put(engine, rng.standard_normal((2, 6)).astype(np.float32))
    with Recording([leaf]) as recording:
        made = ops.mul(leaf, 2.0)
        total = ops.add(
            ops.add(ops.sum(ops.slice(made, 1, 0, 3)), ops.sum(ops.slice(made, 1, 3, 6))),
            ops.add(ops.sum(ops.slice(leaf, 1, 1, 2)), ops.sum(ops.slice(leaf, 1, 2, 5))),
        )
        recording.gradients(total, [leaf])
    # the made value's concatenation; the leaf's, and its zeros around
    assert seen == ["slice"] * 3
