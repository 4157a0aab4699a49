"""Dynamic input dims fixed at compile time: ``shapes=`` / ``--shape`` for whole input
shapes, ``dims=`` / ``--dim`` for named dims wherever they appear, and the error that
lists every dynamic input when neither is given. Results are compared with
onnxruntime at the fixed sizes (rtol 1e-5, atol 1e-6)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import polyc
from polyc.errors import ShapeError

from onnx_helpers import ATOL, RTOL, make_model, run_onnxruntime


def mlp(batch="batch"):
    """y = relu(x @ w1) @ w2 with x [batch, 16], declared output [batch, 4]."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    return make_model(nodes, [("x", (batch, 16))], [("y", (batch, 4))], initializers=[
        ("w1", rng.standard_normal((16, 32)).astype(np.float32)),
        ("w2", rng.standard_normal((32, 4)).astype(np.float32))], check=False)


def masked_scores():
    """scores = x @ x^T + mask, with x [batch, seq, 8] and mask [batch, seq, seq]."""
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["x", "xt"], ["s"]),
             helper.make_node("Add", ["s", "mask"], ["y"])]
    return make_model(nodes, [("x", ("batch", "seq", 8)), ("mask", ("batch", "seq", "seq"))],
                      [("y", ("batch", "seq", "seq"))], check=False)


def flatten_by_shape():
    """y = Reshape(x, concat(Shape(x)[0:1], [-1])): a shape computation on a dynamic dim."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "zero", "one"], ["b"]),
             helper.make_node("Concat", ["b", "minus_one"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    ints = lambda name, v: (name, np.array(v, dtype=np.int64))  # noqa: E731
    return make_model(nodes, [("x", ("N", 3, 4))], [("y", ("N", 12))], check=False,
                      initializers=[ints("zero", [0]), ints("one", [1]), ints("minus_one", [-1])])


def check(model, compiled, inputs):
    expected = run_onnxruntime(model, inputs)
    actual = compiled.run(inputs)
    for name, value in expected.items():
        assert actual[name].shape == value.shape
        np.testing.assert_allclose(actual[name], value, rtol=RTOL, atol=ATOL)


def test_a_model_with_dynamic_dims_and_no_sizes_lists_every_input():
    with pytest.raises(ShapeError) as error:
        polyc.compile(masked_scores())
    message = str(error.value)
    assert "input 'x': float32[batch, seq, 8] (dynamic: batch, seq)" in message
    assert "input 'mask': float32[batch, seq, seq] (dynamic: batch, seq, seq)" in message
    assert "--dim batch=N (Python: dims={'batch': N, 'seq': N})" in message
    assert "--shape x=D0,D1,..." in message


@pytest.mark.parametrize("batch", [1, 3])
def test_dims_fix_a_named_dim_everywhere(batch):
    model = mlp()
    compiled = polyc.compile(model, dims={"batch": batch})
    assert compiled.inputs[0].shape == (batch, 16)
    x = np.random.default_rng(batch).standard_normal((batch, 16)).astype(np.float32)
    check(model, compiled, {"x": x})
    assert compiled.manifest["options"]["dims"] == {"batch": batch}


def test_dims_and_shapes_together():
    model = masked_scores()
    with pytest.raises(ShapeError) as error:  # mask's batch is still dynamic
        polyc.compile(model, dims={"seq": 5}, shapes={"x": (2, 5, 8)})
    assert "input 'mask': float32[batch, 5, 5] (dynamic: batch)" in str(error.value)
    assert "input 'x'" not in str(error.value)
    compiled = polyc.compile(model, dims={"seq": 5, "batch": 2}, shapes={"x": (2, 5, 8)})
    rng = np.random.default_rng(1)
    inputs = {"x": rng.standard_normal((2, 5, 8)).astype(np.float32),
              "mask": rng.standard_normal((2, 5, 5)).astype(np.float32)}
    check(model, compiled, inputs)


def test_shape_computations_on_a_fixed_dim_fold_to_constants():
    model = flatten_by_shape()
    compiled = polyc.compile(model, dims={"N": 6})
    x = np.arange(6 * 12, dtype=np.float32).reshape(6, 3, 4)
    check(model, compiled, {"x": x})


def test_a_dim_no_input_has_is_refused():
    with pytest.raises(ShapeError, match=r"'sequence', which no graph input has as a "
                                         r"dynamic dim \(dynamic dims: batch\)"):
        polyc.compile(mlp(), dims={"sequence": 4})


@pytest.mark.parametrize("value", [0, -2, 2.5, True])
def test_a_dim_must_be_a_positive_int(value):
    with pytest.raises(ShapeError, match="dim 'batch' must be a positive int"):
        polyc.compile(mlp(), dims={"batch": value})


def test_an_unnamed_dynamic_dim_asks_for_a_shape():
    model = mlp(batch=None)  # declared as '?'
    with pytest.raises(ShapeError) as error:
        polyc.compile(model)
    message = str(error.value)
    assert "input 'x': float32[?, 16] (dynamic: unnamed)" in message
    assert "--dim" not in message and "--shape x=D0,D1,..." in message
    compiled = polyc.compile(model, shapes={"x": (2, 16)})
    check(model, compiled, {"x": np.ones((2, 16), np.float32)})


def test_cli_dim_option(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp(), path)
    run = lambda *args: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "polyc.cli", *map(str, args)], capture_output=True,
        text=True, timeout=300, check=False)
    refused = run("compile", path, "-o", tmp_path / "m.so")
    assert refused.returncode == 1
    assert "input 'x': float32[batch, 16] (dynamic: batch)" in refused.stderr
    assert "--dim batch=N" in refused.stderr
    done = run("compile", path, "--dim", "batch=3", "-o", tmp_path / "m.so")
    assert done.returncode == 0, done.stderr
    loaded = polyc.load(tmp_path / "m.so")
    x = np.random.default_rng(2).standard_normal((3, 16)).astype(np.float32)
    np.testing.assert_allclose(loaded.run({"x": x})["y"],
                               run_onnxruntime(mlp(), {"x": x})["y"], rtol=RTOL, atol=ATOL)
    bad = run("compile", path, "--dim", "batch=0", "-o", tmp_path / "m.so")
    assert bad.returncode == 2 and "expected NAME=N with N >= 1" in bad.stderr


def test_dims_of_an_integer_input_too():
    model = make_model([helper.make_node("Cast", ["ids"], ["y"], to=TensorProto.FLOAT)],
                       [("ids", ("batch", 3), TensorProto.INT64)], [("y", ("batch", 3))],
                       check=False)
    compiled = polyc.compile(model, dims={"batch": 2})
    ids = np.array([[1, -2, 3], [4, 5, -6]], dtype=np.int64)
    check(model, compiled, {"ids": ids})


def _placeholder_model(input_shape, placeholder):
    """MatMul + Softmax whose intermediate and output value infos write the batch dim
    as ``placeholder`` (-1 or 0, as PaddlePaddle's exporter does)."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]),
         helper.make_node("Softmax", ["m"], ["y"], axis=-1)], "paddle",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [placeholder, 3])],
        [onnx.numpy_helper.from_array(
            np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32), "w")],
        value_info=[helper.make_tensor_value_info("m", TensorProto.FLOAT, [placeholder, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("placeholder", [-1, 0])
def test_dims_written_as_minus_one_or_zero_are_dynamic(placeholder):
    """In value infos they are unknown dims shape inference fills (no contradiction with
    the lowered [2, 3]); -1 in an input is a dynamic dim to fix with shapes= or dims=
    (0 there is an empty dim)."""
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    model = _placeholder_model([2, 4], placeholder)
    got = polyc.compile(model).run({"x": x})["y"]
    np.testing.assert_allclose(got, run_onnxruntime(model, {"x": x})["y"], rtol=RTOL, atol=ATOL)
    dynamic = _placeholder_model([-1, 4], placeholder)
    with pytest.raises(ShapeError, match=r"input 'x': float32\[\?, 4\] \(dynamic: unnamed\)"):
        polyc.compile(dynamic)
    got = polyc.compile(dynamic, shapes={"x": (2, 4)}).run({"x": x})["y"]
    np.testing.assert_allclose(got, run_onnxruntime(model, {"x": x})["y"], rtol=RTOL, atol=ATOL)
