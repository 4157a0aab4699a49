"""CumSum and CumProd (polyc/frontend/ops/cumulative.py): every direction, against
onnxruntime (CumSum) and numpy (CumProd, which onnxruntime does not implement)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnx_helpers import make_model, run_onnxruntime, run_polyc

node = helper.make_node


def running(x, axis, combine, exclusive, reverse):
    """The reference: numpy's cumsum/cumprod, flipped and shifted as asked."""
    y = np.flip(x, axis) if reverse else x
    out = combine(y, axis=axis)
    if exclusive:
        first = np.take(np.ones_like(out) if combine is np.cumprod else np.zeros_like(out),
                        [0], axis=axis)
        out = np.concatenate([first, np.take(out, range(out.shape[axis] - 1), axis=axis)],
                             axis=axis)
    return np.flip(out, axis) if reverse else out


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [1, -1, 0])
def test_cumsum_against_onnxruntime(exclusive, reverse, axis):
    x = np.random.default_rng(axis + 3).standard_normal((5, 7, 9)).astype(np.float32)
    model = make_model([node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive,
                             reverse=reverse)], [("x", (5, 7, 9))], [("y", (5, 7, 9))],
                       initializers=[("axis", np.array(axis, np.int32))], opset=14)
    got = run_polyc(model, {"x": x})["y"]
    np.testing.assert_allclose(got, run_onnxruntime(model, {"x": x})["y"], rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(got, running(x, axis, np.cumsum, exclusive, reverse),
                               rtol=1e-5, atol=1e-5)


def test_cumsum_of_integers_is_exact():
    x = np.random.default_rng(1).integers(-1000, 1000, (4, 50)).astype(np.int64)
    model = make_model([node("CumSum", ["x", "axis"], ["y"])], [("x", (4, 50), TensorProto.INT64)],
                       [("y", (4, 50), TensorProto.INT64)],
                       initializers=[("axis", np.array([1], np.int64))], opset=14)
    np.testing.assert_array_equal(run_polyc(model, {"x": x})["y"], np.cumsum(x, axis=1))


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cumprod(exclusive, reverse):
    x = np.random.default_rng(2).uniform(0.5, 1.5, (3, 8)).astype(np.float64)
    model = make_model([node("CumProd", ["x", "axis"], ["y"], exclusive=exclusive,
                             reverse=reverse)], [("x", (3, 8), TensorProto.DOUBLE)],
                       [("y", (3, 8), TensorProto.DOUBLE)],
                       initializers=[("axis", np.array(1, np.int64))], opset=26)
    np.testing.assert_allclose(run_polyc(model, {"x": x})["y"],
                               running(x, 1, np.cumprod, exclusive, reverse), rtol=1e-12)
