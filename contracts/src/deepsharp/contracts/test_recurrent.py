"""The recurrent layers' fast paths: one position of an LSTM, forward and back.

`lstm_cell` and `lstm_cell_back` (`deepsharp.core.engine.fused`) are taken as the core takes
them: the engine's own where it offers one, else the core's reference in the engine's
primitives. Each is a short chain: the state's product (a total of U terms, added to the
position's share), then sigmoids, tanhs, products and sums value by value. Each output is held
to the bound the core's reference propagates when run on the suite's `Propagated` engine from
the same float32 inputs: its exact value, and how far an engine that keeps the contract at its
precision may stray — the total's bound, then each operation's tolerance, carried through the
chain (`deepsharp.contracts.propagated`; at a mixed precision the product's the half format's).
An engine that offers neither runs the reference in its primitives, held here all the same.

A whole sequence (`lstm_sequence`, `lstm_sequence_back`: an engine with a fused kernel for it
offers the pair) is held likewise: its states, and the gradients its way back gives from the
states its own forward gave, within the bounds the reference propagates through every position;
and so is one with a padding mask (`lstm_masked_sequence` and its way back), its rows padded at
their end, at their start, between their tokens, not at all, or all padding.

Inputs: states, gates and tanh's outputs within (-1, 1) (the sigmoid's within (0, 1)), as a
layer makes them; shares, cells and gradients of magnitudes 10⁻³ to 10; the first position (no
state or cell) and the last (no gradient from a later cell) among them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from deepsharp.contracts.data import draw, pinned, seeds
from deepsharp.contracts.measure import Contract
from deepsharp.contracts.propagated import Propagated
from deepsharp.core.engine import Engine, fused

CHECKED = {
    "lstm_cell",
    "lstm_cell_back",
    "lstm_sequence",
    "lstm_sequence_back",
    "lstm_masked_sequence",
    "lstm_masked_sequence_back",
}
"""The fast paths this module holds (test_fast_paths holds the others)."""

OUTPUTS = {
    "lstm_cell": ("h", "c", "i", "f", "g", "o", "tanh(c)"),
    "lstm_cell_back": ("the gates' gradient", "the last cell's gradient"),
}

widths = st.sampled_from([1, 2, 3, 5, 8])


def held(
    engine: Engine, contract: Contract, label: str, outputs: Iterable[tuple[str, Any, Any]]
) -> None:
    """Each (what, the engine's handle, the reference's Bounded) within its bound; an output
    due from both or from neither."""
    for what, out, ref in outputs:
        assert (out is None) == (ref is None), f"{label}: {what} given where none is due"
        if out is not None:
            contract.within(
                "values",
                f"{label} ({what})",
                np.asarray(engine.get(out)),
                ref.value,
                ref.bound,
                "of the bound its reference propagates",
            )


def check_position(
    engine: Engine, contract: Contract, name: str, args: list[np.ndarray | None]
) -> None:
    """`fused.<name>` on the engine against the bound its reference propagates."""
    handles = [None if a is None else engine.put(a) for a in args]
    got = getattr(fused, name)(engine, *handles)
    assert len(got) == len(OUTPUTS[name]), f"{name} gave {len(got)} outputs"
    # "fast" where the engine's own ran; else the core's reference in its primitives
    label = f"fast {name}" if callable(getattr(engine, name, None)) else name
    bounded = Propagated(contract.precision.name)
    made = [None if a is None else bounded.put(a) for a in args]
    expected = fused.FAST_PATHS[name](bounded, *made)
    held(engine, contract, label, zip(OUTPUTS[name], got, expected, strict=True))


@pinned
@given(rows=widths, units=widths, seed=seeds, first=st.booleans())
def test_an_lstm_position_holds_its_reference_s_bound(
    engine: Engine, contract: Contract, rows: int, units: int, seed: int, first: bool
) -> None:
    share = draw(seed, (rows, 4 * units), low=-3, high=0.7)
    weights = draw(seed + 1, (4 * units, units), low=-3, high=0)
    state = None if first else draw(seed + 2, (rows, units), low=-3, high=-1e-3)
    cell = None if first else draw(seed + 3, (rows, units), low=-3, high=1)
    check_position(engine, contract, "lstm_cell", [share, state, cell, weights])


@pinned
@given(rows=widths, units=widths, seed=seeds, first=st.booleans(), last=st.booleans())
def test_an_lstm_position_s_way_back_holds_its_reference_s_bound(
    engine: Engine,
    contract: Contract,
    rows: int,
    units: int,
    seed: int,
    first: bool,
    last: bool,
) -> None:
    shape = (rows, units)

    def opened(offset: int) -> Any:  # a sigmoid's output, within (0, 1)
        return draw(seed + offset, shape, signs="positive", low=-3, high=-1e-3)

    def squashed(offset: int) -> Any:  # a tanh's output, within (-1, 1)
        return draw(seed + offset, shape, low=-3, high=-1e-3)

    dh = draw(seed, shape, low=-3, high=1)
    dc = None if last else draw(seed + 1, shape, low=-3, high=1)
    cell = None if first else draw(seed + 2, shape, low=-3, high=1)
    gates = [opened(3), opened(4), squashed(5), opened(6), squashed(7)]
    check_position(engine, contract, "lstm_cell_back", [dh, dc, *gates, cell])


def check_sequence(
    engine: Engine,
    contract: Contract,
    arrays: list[np.ndarray],
    grad_states: np.ndarray | None,
    grad_last: np.ndarray | None,
) -> None:
    """`fused.lstm_sequence` and its way back on the engine (its own pair where it offers
    one) against the bounds the reference propagates; `arrays` are x, weight_ih, weight_hh
    and bias — and a padding mask (N, L) where a fifth is given: `fused.lstm_masked_sequence`
    and its way back."""
    name = "lstm_masked_sequence" if len(arrays) == 5 else "lstm_sequence"
    own = callable(getattr(engine, name, None))
    label = f"fast {name}" if own else name
    handles = [engine.put(a) for a in arrays]
    states = getattr(fused, name)(engine, *handles)
    toward_states, toward_last = (
        None if g is None else engine.put(g) for g in (grad_states, grad_last)
    )
    got = getattr(fused, f"{name}_back")(engine, toward_states, toward_last, *handles, states)
    bounded = Propagated(contract.precision.name)
    made = [bounded.put(a) for a in arrays]
    expected_states = fused.FAST_PATHS[name](bounded, *made)
    given = [None if g is None else bounded.put(g) for g in (grad_states, grad_last)]
    expected = fused.FAST_PATHS[f"{name}_back"](bounded, *given, *made, expected_states)
    towards = [f"the gradient towards {what}" for what in ("x", "weight_ih", "weight_hh", "bias")]
    outputs = zip(["states", *towards], [states, *got], [expected_states, *expected], strict=True)
    held(engine, contract, label, outputs)


@pinned
@given(
    rows=widths,
    length=st.sampled_from([1, 2, 3, 6]),
    units=st.sampled_from([1, 2, 3, 5]),
    features=st.sampled_from([1, 2, 4]),
    seed=seeds,
    towards=st.sampled_from(["states", "last", "both"]),
)
def test_an_lstm_sequence_and_its_way_back_hold_their_reference_s_bounds(
    engine: Engine,
    contract: Contract,
    rows: int,
    length: int,
    units: int,
    features: int,
    seed: int,
    towards: str,
) -> None:
    _drawn_sequence(engine, contract, (rows, length, units, features), seed, towards)


def _drawn_sequence(
    engine: Engine,
    contract: Contract,
    sizes: tuple[int, int, int, int],
    seed: int,
    towards: str,
    padding: str | None = None,
) -> None:
    """`check_sequence` on inputs drawn from `seed`: `sizes` are the rows, the length, the
    units and the features; the gradient towards the states, the last or both; a padding mask
    of the kind `padding` names (`_padding`), or none."""
    rows, length, units, features = sizes
    arrays = [
        draw(seed, (rows, length, features), low=-3, high=0.5),
        draw(seed + 1, (4 * units, features), low=-3, high=0),
        draw(seed + 2, (4 * units, units), low=-3, high=0),
        draw(seed + 3, (4 * units,), low=-3, high=0),
    ]
    if padding is not None:
        arrays.append(_padding(padding, rows, length))
    grad_states = draw(seed + 4, (rows, length, units), low=-3, high=0.5)
    grad_last = draw(seed + 5, (rows, units), low=-3, high=0.5)
    check_sequence(
        engine,
        contract,
        arrays,
        None if towards == "last" else grad_states,
        None if towards == "states" else grad_last,
    )


PADDINGS = ["end", "start", "between", "none", "all"]


def _padding(kind: str, rows: int, length: int) -> np.ndarray:
    """A padding mask (rows, length): 1 at a token, 0 at padding; row r's tokens as `kind`
    says, each row of a different count (the first row all padding where `kind` is "all")."""
    mask = np.ones((rows, length))
    for r in range(rows):
        count = (r % length) + 1
        if kind == "end":
            mask[r, count:] = 0
        elif kind == "start":
            mask[r, : length - count] = 0
        elif kind == "between" and length > 2:
            mask[r, 1 + r % (length - 2)] = 0
        elif kind == "all" and r == 0:
            mask[r] = 0
    return mask


@pinned
@given(
    rows=widths,
    length=st.sampled_from([1, 2, 3, 6]),
    units=st.sampled_from([1, 2, 3, 5]),
    features=st.sampled_from([1, 2, 4]),
    seed=seeds,
    towards=st.sampled_from(["states", "last", "both"]),
    padding=st.sampled_from(PADDINGS),
)
def test_a_masked_lstm_sequence_and_its_way_back_hold_their_reference_s_bounds(
    engine: Engine,
    contract: Contract,
    rows: int,
    length: int,
    units: int,
    features: int,
    seed: int,
    towards: str,
    padding: str,
) -> None:
    _drawn_sequence(engine, contract, (rows, length, units, features), seed, towards, padding)
