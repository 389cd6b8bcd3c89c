"""Every operation against the float64 reference (totals, value by value) or light (moves), at
each precision the engine offers (totals held to that precision's bound)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from deepsharp.core.engine import PRECISIONS, fused  # noqa: E402
from deepsharp.engines.light import LightEngine, ReferenceEngine  # noqa: E402
from deepsharp.engines.torch import TorchEngine, _groups  # noqa: E402

U = 2.0**-24
Array = Any


@pytest.fixture(scope="module", params=["float32", "strict"])
def engine(request: pytest.FixtureRequest) -> TorchEngine:
    return TorchEngine.on_cpu(request.param)


REF = ReferenceEngine()
LIGHT = LightEngine()


def rand(*shape: int, seed: int = 0, low: float = -2.0, high: float = 2.0) -> Array:
    rng = np.random.default_rng(seed + 7919 * len(shape) + sum(shape))
    return rng.uniform(low, high, size=shape).astype(np.float32)


def check_total(
    engine: TorchEngine, got: Array, ref: Array, magnitude: Array, terms: Array | int
) -> None:
    """|got - ref| <= factor u sum|terms|, elementwise (magnitude: the same total over |terms|;
    factor: 3 for strict, terms + 1 for float32)."""
    assert got.dtype == np.float32 and got.shape == ref.shape
    factor = PRECISIONS[engine.precision].totals_factor(terms)
    excess = np.abs(got.astype(np.float64) - ref) - factor * U * magnitude
    assert excess.max(initial=-1.0) <= 0.0, f"worst excess {excess.max()}"


def terms(op: str, *args: Any, **kw: Any) -> Array:
    """How many terms each element of `op`'s result adds: `op` over ones (a mean as a sum)."""
    ones = [np.ones_like(a) if isinstance(a, np.ndarray) else a for a in args]
    return ref("sum" if op == "mean" else op, *ones, **kw)


def check_value(got: Array, ref: Array) -> None:
    assert got.dtype == np.float32 and got.shape == np.shape(ref)
    ref = np.asarray(ref, np.float64)
    np.testing.assert_array_less(np.abs(got - ref), 1e-5 + 1.3e-6 * np.abs(ref) + 1e-30)


def check_move(got: Array, expected: Array) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.tobytes() == np.ascontiguousarray(expected).tobytes()


def run(engine: TorchEngine, op: str, *args: Any, **kw: Any) -> Array:
    handles = [engine.put(a) if isinstance(a, np.ndarray) else a for a in args]
    out = getattr(engine, op)(*handles, **kw)
    assert not out.requires_grad and out.grad_fn is None
    return engine.get(out)


def ref(op: str, *args: Any, **kw: Any) -> Array:
    handles = [REF.put(a) if isinstance(a, np.ndarray) else a for a in args]
    return np.asarray(getattr(REF, op)(*handles, **kw))


def light(op: str, *args: Any, **kw: Any) -> Array:
    handles = [LIGHT.put(a) if isinstance(a, np.ndarray) else a for a in args]
    return np.asarray(getattr(LIGHT, op)(*handles, **kw))


def absolute(*args: Any) -> list[Any]:
    return [np.abs(a) if isinstance(a, np.ndarray) else a for a in args]


# --- transfers -------------------------------------------------------------------------------


def test_put_get_exact_and_owned(engine: TorchEngine) -> None:
    x = rand(3, 5)
    h = engine.put(x)
    x[0, 0] = 99.0  # the engine holds its own copy
    back = engine.get(h)
    assert back.dtype == np.float32 and back[0, 0] != 99.0
    back[0, 1] = -5.0  # and the caller owns what get returns
    assert engine.get(h)[0, 1] != -5.0
    i = engine.put(np.array([3, 1, 2], np.int32))
    assert i.dtype == torch.int64 and engine.get(i).dtype == np.int64
    d = engine.put(np.arange(6, dtype=np.float64).reshape(2, 3))
    assert d.dtype == torch.float32
    assert engine.shape(d) == (2, 3)
    z = engine.zeros((2, 4))
    assert z.dtype == torch.float32 and engine.get(z).tolist() == [[0.0] * 4] * 2


def test_ids_beyond_int64_s_range_are_refused_by_put_not_wrapped(engine: TorchEngine) -> None:
    """Failed before: 2**63 + 5 as uint64 was put as a negative int64."""
    with pytest.raises(ValueError, match=r"9223372036854775813 at \[1\] is beyond int64's"):
        engine.put(np.array([3, 2**63 + 5], np.uint64))


def test_get_of_a_view_is_contiguous(engine: TorchEngine) -> None:
    x = rand(4, 6)
    got = engine.get(engine.transpose(engine.put(x), (1, 0)))
    assert got.flags.c_contiguous
    check_move(got, x.T)


# --- totals ----------------------------------------------------------------------------------


# (256, 700, 10) and (32, 4100, 3): a narrow right-hand side padded to sgemm's 16 columns at
# float32; transposed on the left, (2048, 64, 10) and (1300, 32, 5) tall, narrow weight
# gradients formed wide, (5000, 32, 10) one padded and (1300, 32, 10) one as it stands.
@pytest.mark.parametrize(
    "m,k,n",
    [
        (32, 14, 16),
        (1, 1, 1),
        (7, 300, 5),
        (64, 1024, 33),
        (256, 700, 10),
        (32, 4100, 3),
        (1300, 32, 10),
        (1300, 32, 5),
        (2048, 64, 10),
        (5000, 32, 10),
    ],
)
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul(engine: TorchEngine, m: int, k: int, n: int, ta: bool, tb: bool) -> None:
    a = rand(*((k, m) if ta else (m, k)), seed=1)
    b = rand(*((n, k) if tb else (k, n)), seed=2)
    kw = {"transpose_a": ta, "transpose_b": tb}
    product = engine.matmul(engine.put(a), engine.put(b), ta, tb)
    assert tuple(product.shape) == (m, n) and product.is_contiguous()
    check_total(
        engine,
        run(engine, "matmul", a, b, **kw),
        ref("matmul", a, b, **kw),
        ref("matmul", *absolute(a, b), **kw),
        k,
    )


@pytest.mark.parametrize(
    "shape,axes",
    [
        ((32, 16), (0,)),
        ((32, 1), (0, 1)),
        ((4, 5, 6), (1,)),
        ((4, 5, 6), (0, 2)),
        ((300_000,), (0,)),
        ((8, 3, 9, 9), (0, 2, 3)),
    ],
)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("op", ["sum", "mean"])
def test_sum_mean(
    engine: TorchEngine, op: str, shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool
) -> None:
    x = rand(*shape, seed=3)
    check_total(
        engine,
        run(engine, op, x, axes, keepdims),
        ref(op, x, axes, keepdims),
        ref(op, np.abs(x), axes, keepdims),
        terms(op, x, axes, keepdims),
    )


CONVS = [
    # (N, C, H, W), (F, kh, kw), stride, padding
    ((2, 1, 8, 8), (3, 3, 3), 1, ((0, 0), (0, 0))),  # valid
    ((2, 3, 9, 7), (4, 3, 3), 1, ((1, 1), (1, 1))),  # same, odd kernel
    ((2, 2, 8, 8), (3, 2, 2), 1, ((0, 1), (0, 1))),  # same, even kernel: asymmetric
    ((3, 2, 9, 9), (5, 3, 3), 2, ((0, 0), (0, 0))),  # stride 2, valid
    ((2, 2, 10, 11), (3, 3, 3), 2, ((1, 1), (1, 1))),  # stride 2, same
    ((2, 1, 8, 8), (2, 4, 4), 2, ((1, 2), (1, 2))),  # stride 2, asymmetric
    ((1, 4, 6, 6), (2, 1, 1), 1, ((0, 0), (0, 0))),  # 1x1
]


@pytest.mark.parametrize("xs,ws,stride,padding", CONVS)
def test_conv2d_and_its_gradients(
    engine: TorchEngine, xs: tuple[int, ...], ws: tuple[int, int, int], stride: int, padding: Any
) -> None:
    x = rand(*xs, seed=4)
    w = rand(ws[0], xs[1], ws[1], ws[2], seed=5)
    y_ref = ref("conv2d", x, w, stride, padding)
    check_total(
        engine,
        run(engine, "conv2d", x, w, stride, padding),
        y_ref,
        ref("conv2d", *absolute(x, w), stride, padding),
        terms("conv2d", x, w, stride, padding),
    )
    gy = rand(*y_ref.shape, seed=6)
    kernel = (ws[1], ws[2])
    check_total(
        engine,
        run(engine, "conv2d_weight_grad", x, gy, kernel, stride, padding),
        ref("conv2d_weight_grad", x, gy, kernel, stride, padding),
        ref("conv2d_weight_grad", *absolute(x, gy), kernel, stride, padding),
        terms("conv2d_weight_grad", x, gy, kernel, stride, padding),
    )
    image = (xs[2], xs[3])
    check_total(
        engine,
        run(engine, "conv2d_fold", gy, w, image, stride, padding),
        ref("conv2d_fold", gy, w, image, stride, padding),
        ref("conv2d_fold", *absolute(gy, w), image, stride, padding),
        terms("conv2d_fold", gy, w, image, stride, padding),
    )


# --- value by value --------------------------------------------------------------------------

SHAPES = [(5,), (32, 16), (3, 4, 5), (70_000,)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "op", ["neg", "abs", "exp", "log", "log1p", "sqrt", "tanh", "sigmoid", "relu"]
)
def test_unary(engine: TorchEngine, op: str, shape: tuple[int, ...]) -> None:
    positive = op in ("log", "sqrt")
    x = rand(*shape, seed=8, low=0.01 if positive else -8.0, high=8.0)
    if op == "log1p":
        x = rand(*shape, seed=8, low=-0.9, high=8.0)
    check_value(run(engine, op, x), ref(op, x))


def test_sigmoid_extremes(engine: TorchEngine) -> None:
    x = np.array([-1e30, -100.0, -20.0, 0.0, 20.0, 100.0, 1e30], np.float32)
    got = run(engine, "sigmoid", x)
    assert np.isfinite(got).all()
    check_value(got, ref("sigmoid", x))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "greater"])
@pytest.mark.parametrize(
    "sa,sb",
    [
        ((32, 16), (32, 16)),
        ((32, 16), (16,)),
        ((4, 1, 5), (3, 1)),
        ((32, 1), None),
        (None, (32, 1)),
    ],
)
def test_binary(engine: TorchEngine, op: str, sa: Any, sb: Any) -> None:
    a: Any = rand(*sa, seed=9) if sa is not None else 0.75
    b: Any = rand(*sb, seed=10) if sb is not None else -0.5
    if op == "div" and isinstance(b, np.ndarray):
        b = np.where(np.abs(b) < 0.1, np.float32(0.5), b).astype(np.float32)
    check_value(run(engine, op, a, b), ref(op, a, b))


@pytest.mark.parametrize("a,b", [("t", "t"), ("t", 2.5), (-1.0, "t"), (1.0, 0.0)])
def test_where(engine: TorchEngine, a: Any, b: Any) -> None:
    condition = (rand(6, 7, seed=11) > 0).astype(np.float32)
    a = rand(6, 7, seed=12) if a == "t" else a
    b = rand(6, 7, seed=13) if b == "t" else b
    check_value(run(engine, "where", condition, a, b), ref("where", condition, a, b))


def _optimizer_inputs(seed: int) -> tuple[list[Array], ...]:
    shapes = [(14, 16), (16,), (16, 1), (1,), (300, 200)]
    slots = [rand(*s, seed=seed + i) for i, s in enumerate(shapes)]
    grads = [rand(*s, seed=seed + 10 + i) for i, s in enumerate(shapes)]
    firsts = [rand(*s, seed=seed + 20 + i) * 0.1 for i, s in enumerate(shapes)]
    seconds = [np.abs(rand(*s, seed=seed + 30 + i)) * 0.01 for i, s in enumerate(shapes)]
    return slots, grads, firsts, seconds


def test_adam_update_in_place(engine: TorchEngine) -> None:
    slots, grads, firsts, seconds = _optimizer_inputs(20)
    kw = {
        "step_size": 0.001 * (1 - 0.999**3) ** 0.5 / (1 - 0.9**3),
        "beta1": 0.9,
        "beta2": 0.999,
        "epsilon": 1e-7,
    }
    hs = [[engine.put(a) for a in group] for group in (slots, grads, firsts, seconds)]
    ids = [id(h) for h in hs[0]]
    engine.adam_update(*hs, **kw)
    rs = [[REF.put(a) for a in group] for group in (slots, grads, firsts, seconds)]
    REF.adam_update(*rs, **kw)
    assert [id(h) for h in hs[0]] == ids
    for group in (0, 2, 3):
        for h, r in zip(hs[group], rs[group], strict=True):
            assert not h.requires_grad
            check_value(engine.get(h), r)


@pytest.mark.parametrize("block", [None, 100])
@pytest.mark.parametrize("kind", ["adam", "sgd"])
def test_an_update_of_a_flat_tensor_s_parts_gives_each_part_s_bits(
    engine: TorchEngine, kind: str, block: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slots laid out in one flat tensor (as the core lays them out) are updated in passes over
    it, a block at a time: the same bits as part by part, where a block ends inside a slot too
    (blocks of 100 values); and a group whose member is replaced (the same list) is looked at
    again, not taken for the flat tensor it was."""
    if block is not None:
        monkeypatch.setattr(_groups, "UPDATE_BLOCK", block)
        monkeypatch.setattr(_groups, "FRESH", 0)
    slots, grads, firsts, seconds = _optimizer_inputs(60)
    shapes = [a.shape for a in slots]

    def parts(arrays: list[Array]) -> list[Any]:
        flat = engine.put(np.concatenate([a.ravel() for a in arrays]))
        return fused.parts(engine, flat, shapes)

    laid = [parts(group) for group in (slots, firsts, seconds)]
    apart = [[engine.put(a) for a in group] for group in (slots, firsts, seconds)]
    gs = [engine.put(g) for g in grads]

    def update(slots_: Any, firsts_: Any, seconds_: Any) -> None:
        if kind == "adam":
            engine.adam_update(
                slots_, gs, firsts_, seconds_, step_size=0.01, beta1=0.9, beta2=0.999, epsilon=1e-7
            )
        else:
            engine.sgd_update(slots_, gs, firsts_, learning_rate=0.01, momentum=0.9)

    for step in range(4):
        if step == 2:
            laid[0][1] = engine.copy(laid[0][1])  # no longer a part of the flat tensor
        update(*laid)
        update(*apart)
    for group in (0, 1, 2) if kind == "adam" else (0, 1):
        for mine, theirs in zip(laid[group], apart[group], strict=True):
            assert torch.equal(mine, theirs)


def test_a_flat_update_s_blocks_cover_the_gradients_in_order_in_kept_scratch() -> None:
    grads = [torch.arange(n, dtype=torch.float32) + 100 * n for n in (5, 1, 12, 3)]
    found = list(_groups.blocks(grads, 4))
    assert [start for start, _ in found] == [0, 4, 8, 12, 16, 20]
    joined = torch.cat([torch.cat(pieces) for _, pieces in found])
    assert torch.equal(joined, torch.cat(grads))
    assert all(sum(p.numel() for p in pieces) == 4 for _, pieces in found[:-1])
    scratch = _groups.Scratch()
    kept = scratch(torch.zeros(50))
    assert [t.numel() for t in kept] == [50, 50] and scratch(torch.zeros(50)) is kept
    smaller = scratch(torch.zeros(30))  # the kept pair's memory, its block's size
    assert [t.numel() for t in smaller] == [30, 30] and scratch(torch.zeros(30)) is smaller
    assert all(a.data_ptr() == b.data_ptr() for a, b in zip(smaller, kept, strict=True))
    assert scratch(torch.zeros(80))[0].data_ptr() != kept[0].data_ptr()
    assert scratch(torch.zeros(80, dtype=torch.float64))[0].dtype == torch.float64


@pytest.mark.parametrize("path", ["blocks", "fresh"])
@pytest.mark.parametrize("change", ["one short", "one more", "float64"])
def test_a_flat_update_refuses_gradients_that_are_not_its_slots_values_before_changing_any(
    engine: TorchEngine, change: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if path == "blocks":
        monkeypatch.setattr(_groups, "FRESH", 0)
        monkeypatch.setattr(_groups, "UPDATE_BLOCK", 100)  # blocks done before the end
    else:
        monkeypatch.setattr(_groups, "FRESH", 1 << 30)  # joined into a fresh tensor
    slots, grads, firsts, seconds = _optimizer_inputs(70)
    shapes = [a.shape for a in slots]
    flats = [engine.put(np.concatenate([a.ravel() for a in group])) for group in (slots, firsts)]
    flats.append(engine.put(np.concatenate([a.ravel() for a in seconds])))
    before = [flat.clone() for flat in flats]
    laid = [fused.parts(engine, flat, shapes) for flat in flats]
    gs = [engine.put(g) for g in grads]
    if change == "one short":
        gs[-1] = gs[-1].reshape(-1)[:-1]
    elif change == "one more":
        gs.append(engine.put(np.ones(1, np.float32)))
    else:
        gs[0] = gs[0].double()
    said = "a gradient of torch.float64" if change == "float64" else "the gradients hold"
    with pytest.raises(ValueError, match=said):
        engine.adam_update(
            laid[0], gs, laid[1], laid[2], step_size=0.01, beta1=0.9, beta2=0.999, epsilon=1e-7
        )
    with pytest.raises(ValueError, match=said):
        engine.sgd_update(laid[0], gs, laid[1], learning_rate=0.01, momentum=0.9)
    for flat, was in zip(flats, before, strict=True):
        assert torch.equal(flat, was)  # nothing changed


def test_trainers_in_several_threads_may_share_one_engine_s_flat_updates(
    engine: TorchEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each thread's update joins its blocks' gradients into scratch of its own: libtorch lets
    go of the interpreter inside each call, and another thread's update would write there."""
    import threading

    monkeypatch.setattr(_groups, "UPDATE_BLOCK", 4096)
    monkeypatch.setattr(_groups, "FRESH", 0)
    size, steps = 200_000, 60

    def halves(flat: Any) -> list[Any]:
        return [flat[: size // 2], flat[size // 2 :]]

    def group(value: float) -> tuple[Any, list[Any]]:
        grads = [torch.full((size // 2,), value), torch.full((size - size // 2,), value)]
        return torch.zeros(size), grads

    def run(slots: Any, grads: list[Any]) -> None:
        parts, velocities = halves(slots), halves(torch.zeros(size))
        for _ in range(steps):  # momentum 0, rate 1: each step takes the gradient off
            engine.sgd_update(parts, grads, velocities, learning_rate=1.0, momentum=0.0)

    groups = [group(1.0), group(2.0)]
    threads = [threading.Thread(target=run, args=laid) for laid in groups]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for (slots, _), value in zip(groups, (1.0, 2.0), strict=True):
        assert int((slots != -steps * value).sum()) == 0


def test_sgd_update_in_place(engine: TorchEngine) -> None:
    slots, grads, velocities, _ = _optimizer_inputs(40)
    hs = [[engine.put(a) for a in group] for group in (slots, grads, velocities)]
    engine.sgd_update(*hs, learning_rate=0.01, momentum=0.9)
    rs = [[REF.put(a) for a in group] for group in (slots, grads, velocities)]
    REF.sgd_update(*rs, learning_rate=0.01, momentum=0.9)
    for group in (0, 2):
        for h, r in zip(hs[group], rs[group], strict=True):
            check_value(engine.get(h), r)


def test_empty_updates(engine: TorchEngine) -> None:
    engine.adam_update([], [], [], [], step_size=0.1, beta1=0.9, beta2=0.999, epsilon=1e-7)
    engine.sgd_update([], [], [], learning_rate=0.1, momentum=0.0)


# --- moves -----------------------------------------------------------------------------------


def _moves() -> list[Any]:
    x = rand(4, 6, 5, seed=14)
    return [
        pytest.param("copy", (x,), {}, id="copy"),
        pytest.param("reshape", (x, (6, 20)), {}, id="reshape"),
        pytest.param("reshape", (x, (-1,)), {}, id="reshape-flat"),
        pytest.param("transpose", (x, (2, 0, 1)), {}, id="transpose"),
        pytest.param("slice", (x, 1, 2, 5), {}, id="slice"),
        pytest.param("slice", (x, 2, 0, 1), {}, id="slice-last"),
        pytest.param("take_rows", (x, np.array([3, 0, 0, 2], np.int64)), {}, id="take-rows"),
        pytest.param("pad", (x, [(0, 0), (1, 2), (3, 0)]), {}, id="pad"),
        pytest.param("broadcast_to", (rand(1, 5, seed=15), (4, 6, 5)), {}, id="broadcast"),
        pytest.param("max", (x, (1,), False), {}, id="max"),
        pytest.param("max", (x, (0, 2), True), {}, id="max-keep"),
        pytest.param("one_hot", (np.array([2, 0, 1, 2, 4], np.int64), 5), {}, id="one-hot"),
    ]


@pytest.mark.parametrize("op,args,kw", _moves())
def test_moves_bit_for_bit(
    engine: TorchEngine, op: str, args: tuple[Any, ...], kw: dict[str, Any]
) -> None:
    check_move(run(engine, op, *args, **kw), light(op, *args, **kw))


def test_concatenate_and_split(engine: TorchEngine) -> None:
    parts = [rand(3, 2, seed=16), rand(3, 5, seed=17), rand(3, 1, seed=18)]
    joined = engine.concatenate([engine.put(p) for p in parts], 1)
    check_move(engine.get(joined), np.concatenate(parts, 1))
    pieces = engine.split(joined, [2, 5, 1], 1)
    assert isinstance(pieces, list) and len(pieces) == 3
    for piece, part in zip(pieces, parts, strict=True):
        check_move(engine.get(piece), part)


def test_assign_in_place(engine: TorchEngine) -> None:
    target = engine.put(rand(3, 4, seed=19))
    before = id(target)
    source = rand(3, 4, seed=20)
    engine.assign(target, engine.put(source))
    assert id(target) == before
    check_move(engine.get(target), source)


@pytest.mark.parametrize(
    "shape,pool", [((2, 3, 8, 8), 2), ((2, 2, 9, 7), 2), ((1, 3, 9, 9), 3), ((4, 8, 26, 26), 2)]
)
@pytest.mark.parametrize("ties", [False, True])
def test_maxpool_bit_for_bit(
    engine: TorchEngine, shape: tuple[int, ...], pool: int, ties: bool
) -> None:
    x = rand(*shape, seed=21)
    if ties:  # few distinct values: many windows hold their maximum more than once
        x = np.round(x).astype(np.float32)
    values, selection = engine.maxpool2d(engine.put(x), pool)
    light_values, light_selection = LIGHT.maxpool2d(x, pool)
    check_move(engine.get(values), light_values)
    assert selection.dtype == torch.int64
    check_move(engine.get(selection), light_selection.astype(np.int64))
    gy = rand(*light_values.shape, seed=22)
    image = (shape[2], shape[3])
    back = engine.maxpool2d_back(engine.put(gy), selection, image, pool)
    check_move(engine.get(back), LIGHT.maxpool2d_back(gy, light_selection, image, pool))


def test_nothing_requires_grad_or_records(engine: TorchEngine) -> None:
    x = engine.put(rand(2, 3, 6, 6, seed=23))
    w = engine.put(rand(4, 3, 3, 3, seed=24))
    outs = [
        engine.conv2d(x, w, 1, ((1, 1), (1, 1))),
        *engine.maxpool2d(x, 2),
        engine.sigmoid(x),
        engine.sum(x, (0, 2)),
        engine.add(x, 1.0),
    ]
    assert torch.is_grad_enabled()  # never switched
    for out in outs:
        assert not out.requires_grad and out.grad_fn is None
