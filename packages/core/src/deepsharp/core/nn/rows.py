"""A batch's rows as a network's inputs take them, checked: ids as int64 and features as
float32 (finite, within float32's range, of the input's row shape), each refusal naming where
it was given and what to do (a channels-last image, a row without its batch axis)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.engine.fused import all_finite
from deepsharp.core.errors import DataError, ShapeError
from deepsharp.core.nn.graph import InputSpec
from deepsharp.core.reals import refuse_masked

if TYPE_CHECKING:
    from deepsharp.core.data.pipeline import Pipeline
    from deepsharp.core.nn.network import Network

__all__ = [
    "channels_last_hint",
    "checked_features",
    "checked_ids",
    "image_layout_refusal",
    "reshaped",
    "without_ones",
]


def checked_ids(value: Any, where: str) -> NDArray[np.int64]:
    """Ids as int64, or a DataError naming what was given (floats, flags) and what to do."""
    array = np.asarray(value)
    if array.dtype.kind not in "iu":
        raise DataError(
            f"{where}: this input takes int64 ids, and is given {array.dtype} values: give whole "
            "numbers as integers (ids.astype('int64'))"
            + (
                " (a float array is not ids, even of whole numbers)"
                if array.dtype.kind == "f"
                else ""
            )
        )
    if array.ndim < 2 or array.shape[0] == 0:
        raise DataError(
            f"{where}: a batch is (rows, ...) with at least one row, not of shape {array.shape}"
        )
    if array.dtype.kind == "u" and array.size and int(array.max()) > np.iinfo(np.int64).max:
        raise DataError(f"{where}: an id beyond int64's range")
    return np.asarray(array, np.int64)


def checked_features(
    features: Any, where: str = "the features", may_be_empty: bool = False, finite: bool = True
) -> NDArray[np.float32]:
    """A batch's float features in float32: refused (DataError) when empty (unless it may be), or
    where a value is NaN, infinite or beyond float32's range (it would poison every slot;
    `finite=False` leaves that to the caller)."""
    refuse_masked(features, where)
    if isinstance(features, np.ndarray) and features.dtype == np.float32:
        rows = features
    else:
        try:
            complex_ = np.iscomplexobj(features)
        except (TypeError, ValueError):
            complex_ = False  # not an array of numbers: said below
        if complex_:  # a cast to float32 would drop every imaginary part, warning at most
            raise DataError(
                f"{where}: complex numbers; a network takes real ones: give their real and "
                "imaginary parts as features of their own, np.stack([x.real, x.imag], axis=-1), "
                "or their magnitudes, np.abs(x)"
            )
        try:
            with np.errstate(over="ignore"):  # a value beyond float32 becomes inf: refused below
                rows = np.asarray(features, dtype=np.float32)
        except (TypeError, ValueError) as error:
            raise DataError(f"{where}: not an array of numbers ({error})") from None
    if rows.ndim < 2 or (rows.shape[0] == 0 and not may_be_empty):
        raise DataError(
            f"{where}: a batch is (rows, ...) with at least one row, not of shape {rows.shape}"
        )
    if finite and not all_finite(rows):
        place = tuple(int(v) for v in np.argwhere(~np.isfinite(rows))[0])
        raise DataError(
            f"row {place[0] + 1}, feature {[i + 1 for i in place[1:]]} (each counting from 1) "
            f"of {where} is "
            f"{float(np.asarray(features)[place])!r}: every feature must be a finite float32 "
            "number (fill or drop such rows first)"
        )
    return rows


def reshaped(spec: InputSpec, array: NDArray[Any]) -> NDArray[Any]:
    """Flat rows of as many values as the input's rows hold, reshaped to them, as are rows that
    differ from them only by axes of length 1 ((28, 28) for (1, 28, 28): no value moves);
    refused where they look like channels-last images (a reshape would scramble every image).
    Rows of another shape are left as they are, for check_rows to name (a reshape of (L, D)
    rows into (D, L) would scramble them too)."""
    shape = spec.shape
    rows = tuple(array.shape[1:])
    if shape is None or rows == shape:
        return array
    turned = channels_last_hint(rows, shape)
    if turned:
        raise ShapeError(
            f"the network takes rows of shape {shape}; the features' rows have shape {rows}{turned}"
        )
    if math.prod(rows) != math.prod(shape):
        return array  # not a reshape: check_rows names what the network takes
    if len(rows) > 1 and without_ones(rows) != without_ones(shape):
        return array  # values would move: check_rows names what the network takes
    return array.reshape(array.shape[0], *shape)


def without_ones(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(side for side in shape if side != 1)


def channels_last_hint(rows: tuple[int, ...], inputs: tuple[int, ...]) -> str:
    """What to do where rows look like channels-last images of the images a network takes."""
    if len(rows) == 3 and len(inputs) == 3 and rows == (inputs[1], inputs[2], inputs[0]):
        return (
            f": these look like channels-last images (N, H, W, C); deepsharp takes (N, C, H, W), "
            f"so give x.transpose(0, 3, 1, 2) (rows of shape {inputs})"
        )
    return ""


def image_layout_refusal(pipeline: Pipeline, network: Network) -> str | None:
    """Where an input is fed by one image column alone whose shape lays its values out
    otherwise than the input's rows (8 x 2 into 4 x 4: the same count, other places), what is
    wrong; None where every such input fits (up to axes of length 1, or a flat image). Sizes
    alone were compared: such a file predicted, silently (trial HG)."""
    if pipeline.takes_arrays:
        return None
    specs = network.input_specs
    for input_name, group in pipeline.column_groups().items():
        if len(group) != 1 or group[0].kind != "image":
            continue
        spec = (
            specs[0]
            if input_name is None
            else next((s for s in specs if s.name == input_name), None)
        )
        shape = tuple(getattr(group[0], "shape", ()))
        if spec is None or spec.shape is None or len(without_ones(shape)) <= 1:
            continue
        if without_ones(shape) != without_ones(spec.shape):
            return (
                f"the pipeline's image column {group[0].name!r} holds images of shape {shape}, "
                f"and the network's input {spec.name!r} takes rows of shape {spec.shape}: the "
                "same count of values, laid out otherwise"
            )
    return None
