"""Engines broken on purpose, each held to the check meant for it by calling the check itself:
a `shape` that gives a list fails most other checks too (so it is no broken engine of the runs
that must fail exactly the checks meant for them), and a module named like one of deepsharp's
engines is made here, not installed. Each fails saying what it got wrong."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from example_engine import ExampleEngine

from deepsharp.contracts import test_identity, test_transfers
from deepsharp.core.engine import EngineIdentity

# (the modules, not their functions: pytest collects a test_ function imported by its name)
check = test_transfers.test_shape_is_a_tuple_of_whole_numbers
holds = test_identity.test_the_engine_s_identity_holds_still_and_is_its_own


class _ShapeAsList(ExampleEngine):
    def shape(self, handle: Any) -> Any:
        return list(np.shape(handle))


def test_a_shape_given_as_a_list_is_caught_saying_so() -> None:
    with pytest.raises(AssertionError, match=r"a tuple of Python ints, not \[5, 3\] \(list\)"):
        check(_ShapeAsList())
    check(ExampleEngine())


def test_an_identity_borrowed_by_a_module_named_like_the_engine_s_is_caught() -> None:
    """Failed before (a review): the module was matched by a bare prefix, so an engine of
    `deepsharp.engines.lightning` naming itself light passed as the light engine."""
    borrowed = type(
        "Lightning",
        (ExampleEngine,),
        {
            "__module__": "deepsharp.engines.lightning",
            "identity": property(
                lambda self: EngineIdentity("light", f"numpy {np.__version__}", "cpu", "strict")
            ),
        },
    )
    with pytest.raises(AssertionError, match=r"names deepsharp's 'light' engine.*Lightning"):
        holds(borrowed)
    holds(ExampleEngine)
