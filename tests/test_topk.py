"""TopK (polyc/frontend/ops/topk.py) against onnxruntime on seeded inputs with ties:
largest and smallest, every axis, k from 0 to the row's length, integer and float64
data, the opset 1 and 10 forms; NaN against the documented order; the errors."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import polyc
from polyc.errors import ShapeError

from onnx_helpers import make_model, run_onnxruntime, run_polyc

T = TensorProto
KINDS = {"float32": T.FLOAT, "float64": T.DOUBLE, "int32": T.INT32, "int64": T.INT64}


def topk_model(shape, k, dtype="float32", opset=11, check=True, **attrs):
    """TopK with ``k`` a constant input (from opset 10; an attribute before)."""
    inputs = [("x", shape, KINDS[dtype])]
    inits = [] if opset < 10 else [("k", np.array([k], np.int64))]
    node = helper.make_node("TopK", ["x"] + ([] if opset < 10 else ["k"]), ["v", "i"],
                            **({"k": k} if opset < 10 else {}), **attrs)
    outputs = [("v", shape[:-1] + (k,), KINDS[dtype]), ("i", shape[:-1] + (k,), T.INT64)]
    return make_model([node], inputs, outputs if not check else
                      [("v", None, KINDS[dtype]), ("i", None, T.INT64)],
                      initializers=inits, opset=opset, check=check)


def data(shape, dtype, seed):
    """Values with many ties (a few levels)."""
    return np.random.default_rng(seed).integers(-4, 5, shape).astype(dtype)


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("axis,k", [(-1, 3), (0, 2), (1, 5), (1, 0), (2, 4)])
def test_topk_matches_onnxruntime(largest, axis, k):
    halves = np.random.default_rng(9).integers(0, 2, (4, 5, 4)) * 0.5
    x = (data((4, 5, 4), "float32", k + axis) + halves).astype(np.float32)
    model = topk_model(x.shape, k, axis=axis, largest=largest, sorted=1)
    want, got = run_onnxruntime(model, {"x": x}), run_polyc(model, {"x": x})
    np.testing.assert_array_equal(got["v"], want["v"])
    np.testing.assert_array_equal(got["i"], want["i"])


@pytest.mark.parametrize("dtype", ["int32", "int64", "float64"])
def test_topk_of_other_types_and_old_opsets(dtype):
    """Integers from opset 11 on (TopK-1 and -10 take floats)."""
    x = data((3, 9), dtype, 2)
    old = [] if dtype.startswith("int") else [topk_model(x.shape, 9, dtype, opset=10),
                                              topk_model(x.shape, 2, dtype, opset=9)]
    for model in [topk_model(x.shape, 4, dtype), *old]:
        want, got = run_onnxruntime(model, {"x": x}), run_polyc(model, {"x": x})
        np.testing.assert_array_equal(got["v"], want["v"])
        np.testing.assert_array_equal(got["i"], want["i"])


def test_nan_counts_as_the_largest_value():
    x = np.array([[1.0, np.nan, 3.0, np.nan, -2.0]], np.float32)
    largest = run_polyc(topk_model(x.shape, 3), {"x": x})
    np.testing.assert_array_equal(largest["i"], [[1, 3, 2]])
    smallest = run_polyc(topk_model(x.shape, 4, largest=0), {"x": x})
    np.testing.assert_array_equal(smallest["i"], [[4, 0, 2, 1]])
    np.testing.assert_array_equal(smallest["v"], [[-2.0, 1.0, 3.0, np.nan]])


def test_k_past_the_row_is_refused():
    model = topk_model((2, 3), 4, check=False)
    with pytest.raises(ShapeError, match="TopK.*requested k elements"):
        polyc.compile(model)
