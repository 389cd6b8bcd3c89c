"""Checking the rulebook: every rule nudged, by central differences on a float64 evaluation.

For a rule and some inputs, the loss is a random projection of its output, L = sum(out * r).
Each input value is nudged up and down by a small step on a float64 engine (the suite's own
reference, `deepsharp.contracts.reference.Float64Engine`, unless another is handed in); the
change in L is compared with what the rule sends back for the grad r. The same cases serve the
contract suite, which also holds each rule's way back on an engine to the reference's, and the
core's tests of its rulebook.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.contracts.reference import Float64Engine
from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Recording, Tensor
from deepsharp.core.engine import Engine

__all__ = [
    "CASES",
    "RuleCase",
    "nudged",
    "nudged_gradients",
    "projection_for",
    "rule_gradients",
    "worst_nudge_error",
]

Array = NDArray[Any]


@dataclass
class RuleCase:
    """Inputs (float arrays are nudged; floats are constants, and so are integer arrays:
    indices, put on the engine as int64) and attributes for one rule."""

    rule: str
    inputs: list[Any]
    attrs: dict[str, Any] = field(default_factory=dict)
    label: str = ""

    @property
    def id(self) -> str:
        return f"{self.rule}-{self.label}" if self.label else self.rule


def _twice(engine: Engine, partial: Any) -> Any:
    """A data-parallel sum over two processes that hold the same partial total (batch_total's
    `reduce`, each process's share of the batch one half)."""
    return engine.add(partial, partial)


def _cases() -> list[RuleCase]:
    rng = np.random.default_rng(20261202)

    def normal(*shape: int) -> Array:
        return rng.standard_normal(shape)

    padding = np.array([[1, 1, 0, 0], [0, 1, 1, 1], [1, 1, 1, 1]], np.int64)

    def positive(*shape: int) -> Array:
        return rng.uniform(0.5, 2.0, shape)

    def apart(*shape: int) -> Array:
        """Values kept away from 0 and from each other (kinks and ties)."""
        count = int(np.prod(shape))
        values = (np.arange(count) - count / 2 + 0.5) * 0.37
        return np.asarray(rng.permutation(values).reshape(shape), dtype=np.float64)

    bits = (rng.random((5, 3)) > 0.5).astype(np.float64)
    cases = [
        RuleCase("add", [normal(3, 4), normal(4)], label="broadcast-row"),
        RuleCase("add", [normal(3, 1), normal(1, 4)], label="broadcast-both"),
        RuleCase("add", [normal(3, 4), 1.5], label="constant"),
        RuleCase("sub", [normal(3, 4), normal(3, 1)]),
        RuleCase("sub", [2.0, normal(3, 4)], label="constant-first"),
        RuleCase("mul", [normal(2, 3, 4), normal(3, 1)]),
        RuleCase("div", [normal(3, 4), positive(4)]),
        RuleCase("maximum", [apart(3, 4), apart(3, 4) + 0.1]),
        RuleCase("greater", [apart(3, 4), apart(3, 4) + 0.05]),
        RuleCase("neg", [normal(3, 4)]),
        RuleCase("exp", [normal(3, 4)]),
        RuleCase("log", [positive(3, 4)]),
        RuleCase("log1p", [positive(3, 4) - 0.4]),
        RuleCase("sqrt", [positive(3, 4)]),
        RuleCase("tanh", [normal(3, 4)]),
        RuleCase("sigmoid", [normal(3, 4)]),
        RuleCase("relu", [apart(3, 4)]),
        RuleCase("abs", [apart(3, 4)]),
        RuleCase("batch_total", [normal(1, 4)], {"reduce": _twice, "weight": 0.5}, "two-processes"),
        RuleCase("matmul", [normal(3, 4), normal(4, 5)]),
        RuleCase("matmul", [normal(4, 3), normal(4, 5)], {"transpose_a": True}, "ta"),
        RuleCase("matmul", [normal(3, 4), normal(5, 4)], {"transpose_b": True}, "tb"),
        RuleCase(
            "matmul",
            [normal(4, 3), normal(5, 4)],
            {"transpose_a": True, "transpose_b": True},
            "tab",
        ),
        RuleCase("affine", [normal(5, 3), normal(3, 4), normal(4)]),
        RuleCase("sum", [normal(3, 4, 2)], {"axes": (0, 2), "keepdims": False}),
        RuleCase("sum", [normal(3, 4)], {"axes": (1,), "keepdims": True}, "keepdims"),
        RuleCase("mean", [normal(3, 4, 2)], {"axes": (1,), "keepdims": False}),
        RuleCase("log_softmax", [normal(4, 5)]),
        RuleCase("binary_cross_entropy_terms", [normal(5, 3) * 3, bits]),
        RuleCase("binary_cross_entropy", [normal(5, 3) * 3, bits]),
        RuleCase("cross_entropy", [normal(4, 5) * 3, np.eye(5)[[0, 3, 3, 1]] * 1.0]),
        RuleCase(
            "conv2d",
            [normal(2, 2, 5, 5), normal(3, 2, 3, 3)],
            {"stride": 1, "padding": ((0, 0), (0, 0))},
            "valid",
        ),
        RuleCase(
            "conv2d",
            [normal(2, 2, 5, 6), normal(3, 2, 3, 3)],
            {"stride": 1, "padding": ((1, 1), (1, 1))},
            "same",
        ),
        RuleCase(
            "conv2d",
            [normal(1, 2, 7, 6), normal(2, 2, 3, 2)],
            {"stride": 2, "padding": ((0, 1), (1, 1))},
            "stride-2",
        ),
        RuleCase(
            "conv2d",
            [normal(2, 2, 5, 6), normal(3, 2, 3, 3), normal(3)],
            {"stride": 1, "padding": ((1, 1), (0, 1))},
            "bias",
        ),
        RuleCase("maxpool2d", [apart(2, 2, 5, 4)], {"pool": 2}),
        RuleCase("reshape", [normal(3, 4)], {"shape": (2, 6)}),
        RuleCase("transpose", [normal(2, 3, 4)], {"axes": (2, 0, 1)}),
        RuleCase("slice", [normal(4, 5)], {"axis": 1, "start": 1, "stop": 4}),
        RuleCase("pad", [normal(3, 4)], {"widths": ((1, 0), (2, 1))}),
        RuleCase("concatenate", [normal(2, 3), normal(4, 3)], {"axis": 0}),
        RuleCase("broadcast_to", [normal(3, 1)], {"shape": (2, 3, 4)}),
    ]

    def away(*shape: int) -> Array:
        """Values of both signs with sizes in [0.5, 2]: safe divisors."""
        signed: Array = rng.uniform(0.5, 2, shape) * rng.choice([-1.0, 1.0], shape)
        return signed

    cases += [
        RuleCase("add", [1.5, normal(2, 3)], label="constant-first"),
        RuleCase("sub", [normal(3, 4), -0.75], label="constant"),
        RuleCase("mul", [normal(3, 4), -0.75], label="constant"),
        RuleCase("mul", [2.5, normal(2, 3)], label="constant-first"),
        RuleCase("div", [normal(2, 3, 4), away(3, 1)], label="broadcast-negative"),
        RuleCase("div", [normal(3, 4), 1.5], label="constant"),
        RuleCase("div", [2.5, away(2, 3)], label="constant-first"),
        RuleCase("maximum", [apart(3, 4), 0.01], label="constant"),
        RuleCase("maximum", [apart(2, 3, 4), apart(3, 1) + 0.0925], label="broadcast"),
        RuleCase("sum", [normal(3, 4, 2)], {"axes": (0, 1, 2), "keepdims": False}, "all"),
        RuleCase("mean", [normal(3, 4, 2)], {"axes": (1, 2), "keepdims": True}, "keepdims"),
        RuleCase("mean", [normal(3, 4, 2)], {"axes": (0, 1, 2), "keepdims": False}, "all"),
        RuleCase("log_softmax", [normal(4, 1)], label="one-class"),
        RuleCase("softmax", [normal(3, 5) * 2]),
        RuleCase("softmax", [normal(2, 3, 4)], label="stacks"),
        RuleCase("binary_cross_entropy", [away(6, 1) * 2, rng.uniform(0, 1, (6, 1))], label="soft"),
        RuleCase(
            "binary_cross_entropy_terms",
            [away(6, 1) * 2, rng.uniform(0, 1, (6, 1))],
            label="soft",
        ),
        RuleCase("affine", [normal(1, 7), normal(7, 1), normal(1)], label="one"),
        RuleCase("concatenate", [normal(2, 3), normal(2, 1), normal(2, 2)], {"axis": 1}, "three"),
        RuleCase("maxpool2d", [apart(2, 1, 7, 6)], {"pool": 3}, "pool-3"),
        RuleCase("slice", [normal(2, 6, 2)], {"axis": 1, "start": 0, "stop": 5}, "middle"),
        RuleCase(
            "pad", [normal(1, 2, 2, 2)], {"widths": ((0, 0), (0, 0), (1, 1), (0, 2))}, "images"
        ),
        RuleCase("broadcast_to", [normal(4)], {"shape": (2, 4)}, "new-axis"),
    ]

    # the operations networks as graphs are built from
    ids = np.array([3, 0, 3, 1], np.int64)  # repeated, and a row no id names
    cases += [
        RuleCase("batch_matmul", [normal(2, 3, 4), normal(2, 4, 5)], label="stacks"),
        RuleCase("batch_matmul", [normal(2, 4, 3), normal(2, 4, 5)], {"transpose_a": True}, "ta"),
        RuleCase(
            "batch_matmul",
            [normal(2, 2, 3, 4), normal(2, 2, 5, 4)],
            {"transpose_b": True},
            "heads-tb",
        ),
        RuleCase(
            "batch_matmul",
            [normal(3, 4, 2), normal(3, 5, 4)],
            {"transpose_a": True, "transpose_b": True},
            "tab",
        ),
        RuleCase("batch_matmul", [normal(2, 3, 4), normal(4, 5)], label="shared"),
        RuleCase(
            "batch_matmul", [normal(2, 3, 4), normal(5, 4)], {"transpose_b": True}, "shared-tb"
        ),
        RuleCase("take_rows", [normal(5, 3), ids]),
        RuleCase(
            "take_rows", [normal(4, 2, 2), np.array([[1, 1, 0], [3, 1, 2]], np.int64)], label="ids"
        ),
        RuleCase("erf", [normal(3, 5) * 1.5]),
        RuleCase("gelu", [normal(3, 5) * 2.0]),
        RuleCase("layer_norm", [normal(3, 5) * 2.0, normal(5), normal(5)], {"epsilon": 1e-5}),
        RuleCase("layer_norm", [normal(2, 3, 4), normal(4), normal(4)], {"epsilon": 1e-2}, "3d"),
        RuleCase("maxpool2d_pair", [apart(2, 2, 5, 7)], {"pool": (2, 3)}),
        RuleCase("maxpool2d_pair", [apart(1, 2, 7, 4)], {"pool": (3, 1)}, "tall"),
        # an LSTM over a sequence: the last state, every state, and one position alone
        RuleCase("lstm", [normal(2, 4, 3), normal(12, 3), normal(12, 3) * 0.7, normal(12)]),
        RuleCase(
            "lstm",
            [normal(3, 3, 2), normal(8, 2), normal(8, 2), normal(8)],
            {"sequences": True},
            "sequences",
        ),
        RuleCase(
            "lstm",
            [normal(2, 1, 2), normal(8, 2), normal(8, 2), normal(8)],
            {"sequences": True},
            "one-position",
        ),
        # an LSTM over padded sequences: a mask (0 at padding, at the end, at the start, none)
        # carries the state and the cell over the places it marks
        RuleCase(
            "lstm",
            [normal(3, 4, 2), normal(8, 2), normal(8, 2), normal(8), padding],
            label="masked",
        ),
        RuleCase(
            "lstm",
            [normal(3, 4, 2), normal(8, 2), normal(8, 2), normal(8), padding],
            {"sequences": True},
            "masked-sequences",
        ),
        # a dense layer whose weights are stored (out, in): attention's projections
        RuleCase("affine", [normal(3, 4), normal(5, 4), normal(5)], {"transpose_b": True}, "tb"),
    ]
    return cases


CASES: list[RuleCase] = _cases()


def nudged(value: Any) -> bool:
    """Whether a case's input is nudged (a float array) rather than a constant."""
    return isinstance(value, np.ndarray) and value.dtype.kind == "f"


def _evaluate(engine: Engine, case: RuleCase, values: Sequence[Any]) -> Tensor:
    inputs = tuple(Tensor.put(engine, v) if isinstance(v, np.ndarray) else v for v in values)
    return ops.apply(ops.RULES[case.rule], inputs, **case.attrs)


def sent_back(engine: Engine, case: RuleCase, projection: Array) -> tuple[Any, list[Any]]:
    """The rule's output and what its way back sends towards each nudged input for the grad
    `projection` (None where it sends nothing), as handles of `engine`."""
    inputs = tuple(Tensor.put(engine, v) if isinstance(v, np.ndarray) else v for v in case.inputs)
    wanted = [v for v, given in zip(inputs, case.inputs) if nudged(given)]
    with Recording(wanted):
        out = ops.apply(ops.RULES[case.rule], inputs, **case.attrs)
        assert out.node is not None, f"{case.id}: nothing was recorded"
        sent = out.node.rule.backward(engine, out.node, engine.put(projection))
    return out.handle, [part for part, given in zip(sent, case.inputs) if nudged(given)]


def rule_gradients(engine: Engine, case: RuleCase, projection: Array) -> list[Array | None]:
    """What the rule sends back towards each nudged input for the grad `projection`, on `engine`."""
    _, sent = sent_back(engine, case, projection)
    return [None if part is None else np.asarray(engine.get(part), np.float64) for part in sent]


def nudged_gradients(
    engine: Engine, case: RuleCase, projection: Array, step: float = 1e-6
) -> list[Array]:
    """Central differences of sum(out * projection) towards each nudged input, on `engine`."""

    def loss(values: Sequence[Any]) -> float:
        out = np.asarray(engine.get(_evaluate(engine, case, values).handle), dtype=np.float64)
        return float(np.sum(out * projection))

    gradients = []
    for index, value in enumerate(case.inputs):
        if not nudged(value):
            continue
        gradient = np.zeros_like(value, dtype=np.float64)
        for place in np.ndindex(value.shape):
            moved = [v.copy() if isinstance(v, np.ndarray) else v for v in case.inputs]
            moved[index][place] += step
            up = loss(moved)
            moved[index][place] -= 2 * step
            down = loss(moved)
            gradient[place] = (up - down) / (2 * step)
        gradients.append(gradient)
    return gradients


def projection_for(engine: Engine, case: RuleCase) -> Array:
    """A fixed random grad for the rule's output."""
    shape = engine.shape(_evaluate(engine, case, case.inputs).handle)
    return np.random.default_rng(len(case.id)).standard_normal(shape)


def worst_nudge_error(
    case: RuleCase, engine_factory: Callable[[], Engine] = Float64Engine
) -> float:
    """The largest |rule - nudged| / (1e-7 + 1e-5 * |nudged|) over every input value, on a
    float64 engine made by `engine_factory` (the suite's reference by default): at most 1 for
    a right rule."""
    engine = engine_factory()
    projection = projection_for(engine, case)
    by_rule = rule_gradients(engine, case, projection)
    by_nudging = nudged_gradients(engine, case, projection)
    worst = 0.0
    for got, expected in zip(by_rule, by_nudging):
        if got is None:
            return float("inf")
        if got.shape != expected.shape:
            return float("inf")
        error = np.abs(got - expected) / (1e-7 + 1e-5 * np.abs(expected))
        worst = max(worst, float(error.max(initial=0.0)))
    return worst
