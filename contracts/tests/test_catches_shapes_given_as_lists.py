"""An engine whose `shape` gives a list fails the check meant for it, saying what it gives (the
run blamed the network: 'affine: shapes [5, 3] @ [3, 4] + [4] do not fit', trial E). Run as a
function: such an engine fails most other checks too, so it is no broken engine of the runs that
must fail exactly the checks meant for them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from example_engine import ExampleEngine

from deepsharp.contracts.test_transfers import test_shape_is_a_tuple_of_whole_numbers as check


class _ShapeAsList(ExampleEngine):
    def shape(self, handle: Any) -> Any:
        return list(np.shape(handle))


def test_a_shape_given_as_a_list_is_caught_saying_so() -> None:
    with pytest.raises(AssertionError, match=r"a tuple of Python ints, not \[5, 3\] \(list\)"):
        check(_ShapeAsList())
    check(ExampleEngine())
