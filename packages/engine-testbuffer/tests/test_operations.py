"""Every operation agrees with the light engine: totals and values within float32's rounding,
moves bit for bit; and every result lives in a malloc'd buffer of the test engine."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from deepsharp.engines.light import LightEngine
from deepsharp.engines.testbuffer import TestBuffer, TestBufferEngine

RNG = np.random.default_rng(1234)


def rand(*shape: int) -> np.ndarray[Any, Any]:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.fixture
def engines() -> tuple[TestBufferEngine, LightEngine]:
    return TestBufferEngine(), LightEngine()


def both(
    engines: tuple[TestBufferEngine, LightEngine], name: str, *args: Any, **kwargs: Any
) -> tuple[Any, Any]:
    """Run one operation on both engines with the same host inputs; return both host results."""
    test, light = engines

    def on(engine: Any) -> Any:
        moved = [engine.put(a) if isinstance(a, np.ndarray) else a for a in args]
        moved = [
            [engine.put(b) for b in a]
            if isinstance(a, list) and a and isinstance(a[0], np.ndarray)
            else a
            for a in moved
        ]
        result = getattr(engine, name)(*moved, **kwargs)
        if isinstance(result, (list, tuple)):
            for r in result:
                if engine is test:
                    assert isinstance(r, TestBuffer)
            return [engine.get(r) for r in result]
        if engine is test:
            assert isinstance(result, TestBuffer)
        return engine.get(result)

    return on(test), on(light)


def close(got: Any, want: Any, rtol: float = 2e-5, atol: float = 1e-5) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def same(got: Any, want: Any) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


# --- transfers ---------------------------------------------------------------------------------
def test_put_get_roundtrip_exact() -> None:
    engine = TestBufferEngine()
    for array in [rand(3, 4), rand(0, 5), np.arange(7, dtype=np.int32), np.float32(2.5), rand(1)]:
        back = engine.get(engine.put(array))
        kind = np.int64 if np.asarray(array).dtype.kind in "iub" else np.float32
        same(back, np.asarray(array).astype(kind))
    back = engine.get(engine.put(np.array([1.5, -2.25], np.float64)))
    assert back.dtype == np.float32


def test_get_returns_an_owned_copy() -> None:
    engine = TestBufferEngine()
    handle = engine.put(np.ones(4, np.float32))
    host = engine.get(handle)
    host[:] = 7
    assert host.flags.owndata
    same(engine.get(handle), np.ones(4, np.float32))


def test_zeros_and_shape() -> None:
    engine = TestBufferEngine()
    for shape in [(2, 3), (0,), (), (4, 0, 2)]:
        handle = engine.zeros(shape)
        assert engine.shape(handle) == shape
        same(engine.get(handle), np.zeros(shape, np.float32))


def test_identity_and_option() -> None:
    from deepsharp.core import EngineUnavailableError
    from deepsharp.engines.testbuffer import from_spec

    engine = from_spec("")
    assert engine.name == "testbuffer"
    assert engine.identity.name == "testbuffer"
    assert engine.identity.version == "0.1.0"
    assert engine.identity.device == "cpu"
    assert engine.identity.precision == "strict"
    assert from_spec("strict").identity == engine.identity
    for option in ("cuda", "float32"):
        with pytest.raises(EngineUnavailableError, match="'strict'"):
            from_spec(option)


# --- totals ------------------------------------------------------------------------------------
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("m,k,n", [(3, 4, 5), (1, 1, 1), (32, 14, 16), (0, 3, 2), (2, 0, 3)])
def test_matmul(engines: Any, ta: bool, tb: bool, m: int, k: int, n: int) -> None:
    a = rand(k, m) if ta else rand(m, k)
    b = rand(n, k) if tb else rand(k, n)
    close(*both(engines, "matmul", a, b, ta, tb))


@pytest.mark.parametrize(
    "shape,axes,keepdims",
    [
        ((5, 3), (0,), False),
        ((5, 3), (1,), True),
        ((4, 3, 2), (0, 2), False),
        ((4, 3, 2), (0, 1, 2), False),
        ((4, 3, 2), (0, 1, 2), True),
        ((1000, 3), (0,), False),
        ((3,), (), False),
        ((2, 3), (-1,), False),
    ],
)
@pytest.mark.parametrize("name", ["sum", "mean"])
def test_sum_mean(engines: Any, shape: Any, axes: Any, keepdims: bool, name: str) -> None:
    close(*both(engines, name, rand(*shape), axes, keepdims), rtol=1e-5, atol=1e-5)


def test_single_precision_totals_carry_their_roundings() -> None:
    """The test engine adds in float32 and carries each addition's rounding (also float32):
    (2**24 + 1) + 1 rounds twice when simply added, but the carried roundings restore it."""
    engine = TestBufferEngine()
    values = np.array([2.0**24, 1.0, 1.0], np.float32)
    total = engine.get(engine.sum(engine.put(values), (0,)))
    assert total.dtype == np.float32
    assert float(total) == 2.0**24 + 2


def test_totals_that_overflow_on_their_way_but_lie_in_range_come_out_in_range() -> None:
    """Before: the mean of [3e38, 3e38, 0, 0] was inf (3e38 + 3e38 overflows float32), where
    light and torch:cpu:strict give 1.5e38; a product of factors of 2e19 was inf."""
    engine = TestBufferEngine()
    rows = np.array([[3e38, 3e38, 0, 0], [3e38, 3e38, -3e38, -3e38], [1, 2, 3, 4]], np.float32)
    mean = engine.get(engine.mean(engine.put(rows), (1,)))
    assert mean.tobytes() == np.array([1.5e38, 0.0, 2.5], np.float32).tobytes()
    assert engine.get(engine.sum(engine.put(rows[:2]), (1,))).tolist() == [np.inf, 0.0]
    a = np.array([[2e19, 2e19, -2e19]], np.float32)
    b = np.array([[1e19], [1e19], [1e19]], np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    got = engine.get(engine.matmul(engine.put(a), engine.put(b)))
    terms = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert np.all(np.abs(got - exact) <= 3 * 2.0**-24 * terms)


def test_long_one_sign_totals_stay_within_three_roundings() -> None:
    """4,096 positive terms spread over ten decades: within 3u of the total (u = 2**-24)."""
    engine = TestBufferEngine()
    rng = np.random.default_rng(7)
    a = (10.0 ** rng.uniform(-6, 4, (5, 4096))).astype(np.float32)
    b = (10.0 ** rng.uniform(-6, 4, (4096, 3))).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    got = engine.get(engine.matmul(engine.put(a), engine.put(b)))
    assert np.all(np.abs(got - exact) <= 3 * 2.0**-24 * exact)
    exact_sum = a.astype(np.float64).sum(axis=1)
    got_sum = engine.get(engine.sum(engine.put(a), (1,)))
    assert np.all(np.abs(got_sum - exact_sum) <= 3 * 2.0**-24 * exact_sum)


def test_a_row_gets_the_same_bits_alone_and_among_others() -> None:
    engine = TestBufferEngine()
    a, b = rand(32, 300), rand(300, 7)
    x = rand(32, 1, 9, 9)
    w = rand(4, 1, 3, 3)
    chunk = engine.get(engine.matmul(engine.put(a), engine.put(b)))
    sums = engine.get(engine.sum(engine.put(a), (1,)))
    conv = engine.get(engine.conv2d(engine.put(x), engine.put(w), 1, ((1, 1), (1, 1))))
    for row in [0, 5, 31]:
        alone = engine.get(engine.matmul(engine.put(a[row : row + 1]), engine.put(b)))
        same(alone[0], chunk[row])
        same(engine.get(engine.sum(engine.put(a[row : row + 1]), (1,)))[0], sums[row])
        image = engine.get(
            engine.conv2d(engine.put(x[row : row + 1]), engine.put(w), 1, ((1, 1), (1, 1)))
        )
        same(image[0], conv[row])


CONV_CASES = [
    # (x shape, w shape, stride, padding)
    ((2, 3, 7, 7), (4, 3, 3, 3), 1, ((0, 0), (0, 0))),  # valid
    ((2, 3, 7, 7), (4, 3, 3, 3), 1, ((1, 1), (1, 1))),  # same
    ((2, 3, 8, 8), (4, 3, 3, 3), 2, ((0, 0), (0, 0))),  # valid, stride 2
    ((2, 3, 8, 8), (4, 3, 3, 3), 2, ((0, 1), (0, 1))),  # same, stride 2 (TF's asymmetric)
    ((1, 1, 5, 6), (2, 1, 2, 3), 1, ((1, 0), (2, 1))),
    ((3, 2, 9, 7), (5, 2, 4, 4), 3, ((1, 2), (1, 2))),
]


@pytest.mark.parametrize("xs,ws,stride,padding", CONV_CASES)
def test_conv2d(engines: Any, xs: Any, ws: Any, stride: int, padding: Any) -> None:
    close(*both(engines, "conv2d", rand(*xs), rand(*ws), stride, padding), atol=2e-5)


@pytest.mark.parametrize("xs,ws,stride,padding", CONV_CASES)
def test_conv2d_weight_grad_and_fold(
    engines: Any, xs: Any, ws: Any, stride: int, padding: Any
) -> None:
    light = LightEngine()
    x, w = rand(*xs), rand(*ws)
    y = light.conv2d(x, w, stride, padding)
    gy = rand(*y.shape)
    kernel = (ws[2], ws[3])
    close(*both(engines, "conv2d_weight_grad", x, gy, kernel, stride, padding), atol=3e-5)
    image = (xs[2], xs[3])
    close(*both(engines, "conv2d_fold", gy, w, image, stride, padding), atol=3e-5)


# --- fast paths ----------------------------------------------------------------------------------
def test_the_fast_paths_work_as_their_references() -> None:
    """conv2d_bias, conv2d_weight_bias_grad, parts and decay_update, beside what they stand for
    in primitives: the biases' gradient is the same total as `sum` (the same bits), the filters'
    the same as without it, and today's core's bias argument and flag give the same answers."""
    engine = TestBufferEngine()
    x, w, b = engine.put(rand(3, 2, 7, 6)), engine.put(rand(4, 2, 3, 3)), engine.put(rand(4))
    padding = ((1, 1), (0, 1))
    with_bias = engine.get(engine.conv2d_bias(x, w, b, 2, padding))
    same(engine.get(engine.conv2d(x, w, 2, padding, b)), with_bias)
    plain = engine.get(engine.conv2d(x, w, 2, padding))
    close(with_bias, plain + engine.get(b)[None, :, None, None])
    gy = engine.put(rand(*with_bias.shape))
    weights, biases = engine.conv2d_weight_bias_grad(x, gy, (3, 3), 2, padding)
    same(engine.get(weights), engine.get(engine.conv2d_weight_grad(x, gy, (3, 3), 2, padding)))
    same(engine.get(biases), engine.get(engine.sum(gy, (0, 2, 3))))
    old_weights, old_biases = engine.conv2d_weight_grad(x, gy, (3, 3), 2, padding, True)
    same(engine.get(old_weights), engine.get(weights))
    same(engine.get(old_biases), engine.get(biases))

    flat = rand(2 * 3 + 4 + 1)
    held = engine.counters.live_buffers
    parts = engine.parts(engine.put(flat), [(2, 3), (4,), (1, 1)])
    assert engine.counters.live_buffers == held + 3  # each part its own buffer (the flat freed)
    assert [engine.shape(part) for part in parts] == [(2, 3), (4,), (1, 1)]
    same(engine.get(parts[0]), flat[:6].reshape(2, 3))
    same(engine.get(parts[1]), flat[6:10])
    same(engine.get(parts[2]), flat[10:].reshape(1, 1))
    with pytest.raises(ValueError, match="12 values asked of a tensor of 11"):
        engine.parts(engine.put(flat), [(2, 3), (6,)])

    slots = [engine.put(rand(2, 3)), engine.put(rand(5))]
    before = [engine.get(slot) for slot in slots]
    engine.decay_update(slots, factor=0.99)
    for slot, was in zip(slots, before, strict=True):
        same(engine.get(slot), was * np.float32(0.99))


# --- value by value ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "greater"])
@pytest.mark.parametrize(
    "a,b",
    [
        ((3, 4), (3, 4)),
        ((3, 4), (4,)),
        ((3, 1), (1, 4)),
        ((3, 4), None),
        (None, (3, 4)),
        ((0, 4), (4,)),
    ],
)
def test_binary(engines: Any, name: str, a: Any, b: Any) -> None:
    left = rand(*a) if a is not None else 0.75
    right = rand(*b) if b is not None else 1.5
    close(*both(engines, name, left, right), rtol=1.3e-6, atol=1e-5)


@pytest.mark.parametrize(
    "name", ["neg", "abs", "exp", "log", "log1p", "sqrt", "tanh", "sigmoid", "relu"]
)
@pytest.mark.parametrize("shape", [(5, 6), (0,), (), (2, 3, 4)])
def test_unary(engines: Any, name: str, shape: Any) -> None:
    x = rand(*shape)
    if name in ("log", "sqrt", "log1p"):
        x = np.asarray(np.abs(x) + np.float32(0.1))
    close(*both(engines, name, x), rtol=1.3e-6, atol=1e-5)


def test_sigmoid_extremes(engines: Any) -> None:
    x = np.array([-1e30, -100.0, -5.0, 0.0, 5.0, 100.0, 1e30], np.float32)
    close(*both(engines, "sigmoid", x), rtol=1.3e-6, atol=1e-5)


@pytest.mark.parametrize("name", ["sigmoid", "exp", "softplus", "log1p"])
def test_tails_keep_their_relative_accuracy(name: str) -> None:
    """Where float32 holds values down to 1e-35, so do these: sigmoid(-80) = 1.8e-35, not the 0
    of 0.5·(1 + tanh(x/2)) below -17.3 (44 % off at -17); log1p near 0 in both signs."""
    engine = TestBufferEngine()
    x = np.linspace(-80.0, 16.0, 4001, dtype=np.float32)
    if name == "log1p":
        x = np.concatenate(
            [10.0 ** np.linspace(-30, -3, 200), -(10.0 ** np.linspace(-30, -3, 200))]
        )
    x = x.astype(np.float32)
    exact = {
        "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
        "exp": np.exp,
        "softplus": lambda v: np.logaddexp(0.0, v),
        "log1p": np.log1p,
    }[name](x.astype(np.float64))
    got = engine.get(getattr(engine, name)(engine.put(x)))
    np.testing.assert_allclose(got, exact, rtol=1.3e-6, atol=0)


@pytest.mark.parametrize("a,b", [((3, 4), (3, 4)), ((3, 4), None), (None, (4,)), (None, None)])
def test_where(engines: Any, a: Any, b: Any) -> None:
    condition = (rand(3, 4) > 0).astype(np.float32)
    left = rand(*a) if a is not None else 2.0
    right = rand(*b) if b is not None else -3.0
    same(*both(engines, "where", condition, left, right))


def test_sgd_update_in_place(engines: Any) -> None:
    results = []
    for engine in engines:
        slots = [engine.put(a) for a in (np.ones((3, 2), np.float32), np.arange(4.0))]
        grads = [engine.put(a) for a in (np.full((3, 2), 0.5, np.float32), np.ones(4))]
        velocities = [engine.put(a) for a in (np.full((3, 2), 0.1, np.float32), np.zeros(4))]
        engine.sgd_update(slots, grads, velocities, learning_rate=0.1, momentum=0.9)
        results.append([engine.get(h) for h in slots + velocities])
    for got, want in zip(*results, strict=True):
        close(got, want, rtol=1.3e-6, atol=1e-5)


def test_adam_update_in_place(engines: Any) -> None:
    shapes = [(4, 3), (3,), (0, 2)]
    hosts = [(rand(*s), rand(*s), rand(*s) * 0.1, np.abs(rand(*s)) * 0.01) for s in shapes]
    results = []
    for engine in engines:
        slots = [engine.put(h[0]) for h in hosts]
        grads = [engine.put(h[1]) for h in hosts]
        firsts = [engine.put(h[2]) for h in hosts]
        seconds = [engine.put(h[3]) for h in hosts]
        for _ in range(3):
            engine.adam_update(
                slots,
                grads,
                firsts,
                seconds,
                step_size=0.001 * np.sqrt(1 - 0.999) / (1 - 0.9),
                beta1=0.9,
                beta2=0.999,
                epsilon=1e-7,
            )
        results.append([engine.get(h) for h in slots + firsts + seconds])
    for got, want in zip(*results, strict=True):
        close(got, want, rtol=1.3e-6, atol=1e-5)


# --- moves -------------------------------------------------------------------------------------
def test_copy_and_assign() -> None:
    engine = TestBufferEngine()
    a = engine.put(rand(3, 4))
    b = engine.copy(a)
    assert b.address != a.address
    same(engine.get(b), engine.get(a))
    c = engine.zeros((3, 4))
    address = c.address
    engine.assign(c, a)
    assert c.address == address
    same(engine.get(c), engine.get(a))
    with pytest.raises(ValueError):
        engine.assign(c, engine.zeros((4, 3)))


@pytest.mark.parametrize("shape,new", [((3, 4), (4, 3)), ((2, 3, 4), (6, -1)), ((0, 3), (3, 0))])
def test_reshape(engines: Any, shape: Any, new: Any) -> None:
    same(*both(engines, "reshape", rand(*shape), new))


def test_reshape_refuses_a_wrong_size() -> None:
    engine = TestBufferEngine()
    with pytest.raises(ValueError):
        engine.reshape(engine.zeros((3, 4)), (5, -1))
    with pytest.raises(ValueError):
        engine.reshape(engine.zeros((3, 4)), (5, 2))


@pytest.mark.parametrize("axes", [(1, 0, 2), (2, 0, 1), (0, 1, 2)])
def test_transpose(engines: Any, axes: Any) -> None:
    same(*both(engines, "transpose", rand(2, 3, 4), axes))


@pytest.mark.parametrize("axis,start,stop", [(0, 1, 3), (1, 0, 2), (2, 3, 4), (1, 2, 2)])
def test_slice(engines: Any, axis: int, start: int, stop: int) -> None:
    same(*both(engines, "slice", rand(4, 3, 5), axis, start, stop))


def test_take_rows(engines: Any) -> None:
    same(*both(engines, "take_rows", rand(5, 3), np.array([4, 0, 0, 2], np.int64)))
    same(*both(engines, "take_rows", rand(5, 3), np.array([], np.int64)))


def test_concatenate_and_split(engines: Any) -> None:
    parts = [rand(2, 3), rand(4, 3), rand(0, 3)]
    same(*both(engines, "concatenate", parts, 0))
    same(*both(engines, "concatenate", [rand(2, 1), rand(2, 3)], 1))
    got, want = both(engines, "split", rand(7, 3), [2, 0, 5], 0)
    assert isinstance(got, list) and len(got) == 3
    for g, w in zip(got, want, strict=True):
        same(g, w)
    got, want = both(engines, "split", rand(2, 6), [1, 5], 1)
    for g, w in zip(got, want, strict=True):
        same(g, w)


def test_split_returns_a_list_of_handles() -> None:
    engine = TestBufferEngine()
    parts = engine.split(engine.put(rand(4, 2)), [1, 3], 0)
    assert isinstance(parts, list)
    assert all(isinstance(p, TestBuffer) for p in parts)


def test_pad_broadcast_max(engines: Any) -> None:
    same(*both(engines, "pad", rand(2, 3), [(1, 0), (2, 3)]))
    same(*both(engines, "pad", rand(1, 2, 3, 3), [(0, 0), (0, 0), (1, 1), (0, 2)]))
    same(*both(engines, "broadcast_to", rand(3, 1), (2, 3, 4)))
    same(*both(engines, "broadcast_to", rand(4), (3, 4)))
    same(*both(engines, "max", rand(3, 4, 5), (2,), True))
    same(*both(engines, "max", rand(3, 4, 5), (0, 2), False))
    same(*both(engines, "max", rand(3, 4), (0, 1), False))


def test_one_hot(engines: Any) -> None:
    same(*both(engines, "one_hot", np.array([2, 0, 1, 2], np.int64), 3))
    same(*both(engines, "one_hot", np.array([], np.int64), 4))


@pytest.mark.parametrize("shape,pool", [((2, 3, 4, 4), 2), ((1, 2, 7, 5), 2), ((2, 1, 6, 6), 3)])
def test_maxpool2d_and_back(engines: Any, shape: Any, pool: int) -> None:
    x = rand(*shape)
    x[0, 0, 0, 1] = x[0, 0, 0, 0] = 9.0  # a tie: the first maximum is the one selected
    (maxima, selection), (light_maxima, light_selection) = both(engines, "maxpool2d", x, pool)
    same(maxima, light_maxima)
    same(selection, light_selection)
    assert selection.dtype == np.int64
    gy = rand(*maxima.shape)
    image = (shape[2], shape[3])
    same(*both(engines, "maxpool2d_back", gy, selection, image, pool))


def test_operands_must_be_handles_or_numbers() -> None:
    engine = TestBufferEngine()
    with pytest.raises(TypeError):
        engine.add(engine.zeros((2,)), np.zeros(2, np.float32))


# --- the layer operations, its own -------------------------------------------------------------
U = 2.0**-24


def test_it_offers_the_layer_operations_as_fast_paths_of_its_own() -> None:
    engine = TestBufferEngine()
    for name in ("batch_matmul", "add_rows", "erf", "maxpool2d_pair", "maxpool2d_pair_back"):
        assert callable(getattr(engine, name, None)), name


@pytest.mark.parametrize(
    "a,b,ta,tb", [((2, 3, 4), (2, 4, 5), False, False), ((2, 2, 4, 3), (2, 2, 5, 4), True, True)]
)
def test_batch_matmul_within_three_roundings(a: Any, b: Any, ta: bool, tb: bool) -> None:
    left, right = rand(*a), rand(*b)
    engine = TestBufferEngine()
    got = engine.get(engine.batch_matmul(engine.put(left), engine.put(right), ta, tb))
    l64 = np.swapaxes(left, -1, -2) if ta else left
    r64 = np.swapaxes(right, -1, -2) if tb else right
    exact = np.matmul(l64.astype(np.float64), r64.astype(np.float64))
    magnitude = np.matmul(np.abs(l64).astype(np.float64), np.abs(r64).astype(np.float64))
    assert got.dtype == np.float32 and got.shape == exact.shape
    assert (np.abs(got - exact) <= 3 * U * magnitude).all()


def _added(values: Any, ids: Any, rows: int) -> tuple[Any, Any]:
    flat = values.reshape(ids.size, -1).astype(np.float64)
    exact, magnitude = np.zeros((rows, flat.shape[1])), np.zeros((rows, flat.shape[1]))
    np.add.at(exact, ids.reshape(-1), flat)
    np.add.at(magnitude, ids.reshape(-1), np.abs(flat))
    shape = (rows, *values.shape[ids.ndim :])
    return exact.reshape(shape), magnitude.reshape(shape)


@pytest.mark.parametrize("ids_shape,row_shape", [((40,), (3,)), ((6, 7), (2, 2)), ((5,), ())])
def test_add_rows_within_three_roundings_and_the_same_bits_every_time(
    ids_shape: Any, row_shape: Any
) -> None:
    engine = TestBufferEngine()
    ids = RNG.integers(0, 9, ids_shape).astype(np.int64)
    values = rand(*ids_shape, *row_shape)
    got = engine.get(engine.add_rows(engine.put(values), engine.put(ids), 11))
    exact, magnitude = _added(values, ids, 11)
    assert got.dtype == np.float32 and got.shape == (11, *row_shape)
    assert (np.abs(got - exact) <= 3 * U * magnitude).all()
    again = engine.get(engine.add_rows(engine.put(values), engine.put(ids), 11))
    assert again.tobytes() == got.tobytes()


def test_add_rows_keeps_a_long_one_sign_total_within_one_rounding() -> None:
    engine = TestBufferEngine()
    values = np.full((5000, 2), np.float32(2.0**-24 * (1.0 + 2.0**-10)), np.float32)
    values[0] = 1.0
    ids = np.zeros(5000, np.int64)
    got = engine.get(engine.add_rows(engine.put(values), engine.put(ids), 2))
    exact, magnitude = _added(values, ids, 2)
    assert (np.abs(got - exact) <= 1.001 * U * magnitude).all()


def test_a_rows_total_gets_the_same_bits_whatever_the_other_rows_get() -> None:
    """Each row's total is added by a tree that depends on how many values it gets alone."""
    engine = TestBufferEngine()
    values = rand(30, 4)
    ids = np.array([0] * 10 + [1] * 20, np.int64)
    together = engine.get(engine.add_rows(engine.put(values), engine.put(ids), 2))
    alone = engine.get(engine.add_rows(engine.put(values[:10]), engine.put(ids[:10]), 2))
    assert together[0].tobytes() == alone[0].tobytes()


def test_erf_within_the_value_tolerance() -> None:
    import math

    engine = TestBufferEngine()
    x = np.concatenate([np.linspace(-7, 7, 200_001), [0.0, -0.0, 1e-30, np.inf, -np.inf]])
    x = x.astype(np.float32).reshape(-1, 2)
    got = engine.get(engine.erf(engine.put(x)))
    exact = np.vectorize(math.erf)(x.astype(np.float64))
    assert got.dtype == np.float32
    assert (np.abs(got - exact) <= 1e-5 + 1.3e-6 * np.abs(exact)).all()
    assert (np.abs(got - exact) <= 5e-7).all()  # NR's 1.2e-7, and float32's roundings (3.7e-7)


@pytest.mark.parametrize("pool", [(2, 3), (3, 1), (2, 2)])
def test_maxpool2d_pair_and_back_move_what_light_moves(engines: Any, pool: Any) -> None:
    x = np.round(rand(2, 3, 7, 8) * 2)  # ties: the first maximum is the one selected
    (maxima, selection), (light_maxima, light_selection) = both(engines, "maxpool2d_pair", x, pool)
    same(maxima, light_maxima)
    same(selection, light_selection)
    gy = rand(*maxima.shape)
    same(*both(engines, "maxpool2d_pair_back", gy, selection, (7, 8), pool))


def test_take_rows_and_one_hot_take_indices_of_any_shape(engines: Any) -> None:
    ids = RNG.integers(0, 5, (3, 4)).astype(np.int64)
    same(*both(engines, "take_rows", rand(5, 2), ids))
    same(*both(engines, "one_hot", ids, 5))


def test_ids_beyond_int64_s_range_are_refused_by_put_not_wrapped() -> None:
    """Failed before: 2**63 + 5 as uint64 was put as a negative int64."""
    engine = TestBufferEngine()
    with pytest.raises(ValueError, match=r"9223372036854775813 at \[1\] is beyond int64's range"):
        engine.put(np.array([3, 2**63 + 5], np.uint64))
