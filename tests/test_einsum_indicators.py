"""Einsum (polyc/frontend/ops/einsum.py), OneHot and EyeLike
(polyc/frontend/ops/indicators.py) against onnxruntime on seeded inputs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import polyc
from polyc.errors import ShapeError

from onnx_helpers import make_model, run_onnxruntime, run_polyc

node = helper.make_node


def einsum_model(equation, shapes):
    names = [f"x{k}" for k in range(len(shapes))]
    model = make_model([node("Einsum", names, ["y"], equation=equation)],
                       list(zip(names, shapes)),
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                       opset=12, check=False)
    return onnx.shape_inference.infer_shapes(model), names


@pytest.mark.parametrize("equation, shapes", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),     # batched product
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),  # attention scores
    ("ii->i", [(4, 4)]),                          # a diagonal
    ("ii", [(4, 4)]),                             # the trace (implicit output)
    ("ij->ji", [(3, 5)]),                         # a transpose: a Map, nothing summed
    ("i,j->ij", [(3,), (4,)]),                    # outer product
    ("ij,ij->", [(3, 4), (3, 4)]),                # full contraction to a scalar
    ("...ij,...jk->...ik", [(2, 3, 4), (1, 4, 6)]),  # ellipsis, broadcast batch
    ("ab...,b->a...", [(3, 4, 2, 2), (4,)]),
])
def test_einsum(equation, shapes):
    model, names = einsum_model(equation, shapes)
    rng = np.random.default_rng(len(equation))
    inputs = {n: rng.standard_normal(s).astype(np.float32) for n, s in zip(names, shapes)}
    want = run_onnxruntime(model, inputs)["y"]
    np.testing.assert_allclose(run_polyc(model, inputs)["y"], want, rtol=1e-5, atol=1e-5)


def test_einsum_with_mismatched_extents_names_the_letter():
    model = make_model([node("Einsum", ["a", "b"], ["y"], equation="ij,jk->ik")],
                       [("a", (2, 3)), ("b", (4, 5))], [("y", (2, 5))], opset=12, check=False)
    with pytest.raises(ShapeError, match="letter 'j' has extents 3 and 4"):
        polyc.compile(model)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot(axis):
    """Negative indices count from the end; indices out of range give all off values."""
    indices = np.array([[0, 3, -1, 7], [2, -5, 4, 1]], np.int64)
    shape = list(indices.shape)
    shape.insert(axis % 3, 5)
    model = make_model([node("OneHot", ["i", "depth", "values"], ["y"], axis=axis)],
                       [("i", (2, 4), TensorProto.INT64)], [("y", tuple(shape))],
                       initializers=[("depth", np.array(5, np.int64)),
                                     ("values", np.array([-0.5, 2.0], np.float32))],
                       opset=11)
    want = run_onnxruntime(model, {"i": indices})["y"]
    np.testing.assert_array_equal(run_polyc(model, {"i": indices})["y"], want)


@pytest.mark.parametrize("k", [0, 2, -1])
def test_eye_like(k):
    model = make_model([node("EyeLike", ["x"], ["y"], k=k, dtype=TensorProto.INT32)],
                       [("x", (4, 6))], [("y", (4, 6), TensorProto.INT32)])
    x = np.zeros((4, 6), np.float32)
    np.testing.assert_array_equal(run_polyc(model, {"x": x})["y"],
                                  run_onnxruntime(model, {"x": x})["y"])
