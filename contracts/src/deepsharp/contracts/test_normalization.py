"""LayerNorm's fast paths: each position's last axis made mean 0 and variance 1, scaled and
shifted, and the way back (the gradients of x, of the scale and of the shift).

`layer_norm` and `layer_norm_back` (`deepsharp.core.engine.fused`) are taken as the core takes
them: the engine's own where it offers one, else the core's reference in the engine's
primitives. Each is a chain of means, sums and values, so each output is held to the bound the
core's reference propagates when run on the suite's `Propagated` engine from the same float32
inputs: its exact value, and how far an engine that keeps the contract at its precision may
stray — each mean's and sum's totals bound, each operation's tolerance, carried through the
chain (`deepsharp.contracts.propagated`), as the LSTM's are held (`test_recurrent`).

Inputs: one or two leading axes, last axes of 1 (every value its own mean: all zeros out, and
back) to 40 values; each position's values spread by 0.1 to 10 about a mean of 0 or 30 (its
centred values small beside the mean: cancellation), epsilon 10⁻⁵ and 10⁻²; scales, shifts
and gradients of magnitudes 0.1 to 10, some zeros. A position whose values all but agree has a
variance inside the value tolerance's floor (10⁻⁵), where the reference bounds nothing: the
bound propagated through its division is infinite, and a check that passes everything is none;
so a last axis of one value (variance 0) goes with epsilon 10⁻² only.
"""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st

from deepsharp.contracts.data import draw, pinned, seeds
from deepsharp.contracts.measure import Contract
from deepsharp.contracts.propagated import Propagated
from deepsharp.contracts.test_recurrent import held
from deepsharp.core.engine import Engine, fused

CHECKED = {"layer_norm", "layer_norm_back"}
"""The fast paths this module holds (test_fast_paths holds the others)."""

leads = st.lists(st.sampled_from([1, 2, 3, 5]), min_size=1, max_size=2).map(tuple)
widths = st.sampled_from([1, 2, 3, 8, 40])


@pinned
@given(
    lead=leads,
    width=widths,
    seed=seeds,
    offset=st.sampled_from([0.0, 30.0]),
    epsilon=st.sampled_from([1e-5, 1e-2]),
)
def test_layer_norm_and_its_way_back_hold_their_reference_s_bound(
    engine: Engine,
    contract: Contract,
    lead: tuple[int, ...],
    width: int,
    seed: int,
    offset: float,
    epsilon: float,
) -> None:
    assume(width > 1 or epsilon >= 1e-2)  # one value: variance 0, epsilon's root alone
    shape = (*lead, width)
    rng = np.random.default_rng(seed)
    spread = rng.standard_normal(shape)
    if width > 1:  # each position's values of variance 1 exactly, then spread as drawn
        spread -= spread.mean(-1, keepdims=True)
        spread /= spread.std(-1, keepdims=True)
    sizes = 10.0 ** rng.uniform(-1.0, 1.0, (*lead, 1))
    x = (offset + sizes * spread).astype(np.float32)
    scale = draw(seed + 1, (width,), low=-1, high=1)
    shift = draw(seed + 2, (width,), low=-1, high=1)
    grad = draw(seed + 3, shape, low=-1, high=1)
    label = "fast layer_norm" if callable(getattr(engine, "layer_norm", None)) else "layer_norm"
    handles = [engine.put(a) for a in (x, scale, shift, grad)]
    bounded = Propagated(contract.precision.name)
    made = [bounded.put(a) for a in (x, scale, shift, grad)]
    got = fused.layer_norm(engine, handles[0], handles[1], handles[2], epsilon)
    expected = fused.FAST_PATHS["layer_norm"](bounded, *made[:3], epsilon)
    held(engine, contract, label, [("its output", got, expected)])
    own = callable(getattr(engine, "layer_norm_back", None))
    label = "fast layer_norm_back" if own else "layer_norm_back"
    got_back = fused.layer_norm_back(engine, handles[0], handles[1], handles[3], epsilon)
    expected_back = fused.FAST_PATHS["layer_norm_back"](bounded, made[0], made[1], made[3], epsilon)
    outputs = ("x's gradient", "the scale's gradient", "the shift's gradient")
    held(engine, contract, label, zip(outputs, got_back, expected_back, strict=True))


def test_layer_norm_makes_a_row_of_one_value_its_shift(engine: Engine, contract: Contract) -> None:
    """A position whose values are all one value has variance 0: LayerNorm gives the shift,
    exactly (0 times the scale, plus the shift). Its bound propagates to nothing (above), so it
    is held here: a mean taken once at float32 is a unit of the last place off the value where
    its total rounds, and an engine that centred on it made 37 values of 123456.79 into about
    ±1 (light's float32, the test engine's and the onnx engine's did: trial E2)."""
    values = np.array([123456.79, 3.3e7, -1e10, 0.1, -7.0], np.float32)
    for width in (3, 37):
        x = np.repeat(values[:, None], width, axis=1)
        scale = draw(11, (width,), low=-1, high=1)
        shift = draw(12, (width,), low=-1, high=1)
        out = fused.layer_norm(engine, engine.put(x), engine.put(scale), engine.put(shift), 1e-5)
        got = engine.get(out)
        wrong = np.flatnonzero(~(got == shift[None, :]).all(axis=1))
        assert not wrong.size, (
            f"{contract.spec}: LayerNorm of {width} values all {values[wrong[0]]!r} gave "
            f"{got[wrong[0]][:4].tolist()}..., not the shift {shift[:4].tolist()}... (variance 0)"
        )
