"""Symbolic dims from the frontend to the SCoP: which shapes keep them, the isl
parameters they become, and the errors (checked against onnxruntime where it runs)."""

import islpy as isl
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import polyc
from polyc.errors import ShapeError
from polyc.frontend import import_model
from polyc.frontend.symbolic import Sym, SymbolicDimError
from polyc.islutil import fixed_params
from polyc.scop.build import build_scop
from polyc.scop.dependences import compute_dependences


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        initializer=[numpy_helper.from_array(v, n) for n, v in initializers])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def _run_both(model, feeds, **options):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    got = polyc.compile(model, **options).run(feeds)
    for value, (name, array) in zip(want, got.items()):
        np.testing.assert_allclose(array, value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_sym_passes_through_and_refuses_arithmetic():
    batch = Sym("batch")
    assert batch * 1 == batch and 1 * batch == batch and batch + 0 == batch
    assert batch == Sym("batch") and batch != 3
    for needs_value in (lambda: batch * 2, lambda: int(batch), lambda: batch < 4,
                        lambda: np.prod((batch, 3)), lambda: range(batch)):
        with pytest.raises(SymbolicDimError, match="symbolic dim 'batch'"):
            needs_value()


def test_symbolic_batch_is_a_parameter_of_the_scop():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", ["batch", 16])],
                   [("y", ["batch", 16])])
    graph = import_model(model, symbolic=["batch"])
    assert graph.params == ("batch",)
    assert graph.inputs[0].shape == (Sym("batch"), 16)
    scop = compute_dependences(build_scop(graph))
    assert scop.params == ("batch",)
    assert scop.array(scop.statements[0].write.array).shape == ("batch", 16)
    at_three = scop.statements[0].domain.intersect_params(
        fixed_params(scop.ctx, ["batch"], {"batch": 3}))
    assert at_three.count_val().to_python() == 3 * 16
    assert scop.context.is_equal(isl.Set.read_from_str(scop.ctx, "[batch] -> { : batch >= 1 }"))


@pytest.mark.parametrize("target, shape", [
    ([0, -1, 4, 16], [1, "seq", 4, 16]),   # -1 stands for the fixed part
    ([1, -1, 4, 16], [1, "seq", 4, 16]),   # -1 is the symbolic dim
    ([0, 0, 4, 16], [1, "seq", 4, 16]),    # 0 copies it
])
def test_reshape_keeps_a_symbolic_dim_of_its_own(target, shape):
    model = _model([helper.make_node("Reshape", ["x", "to"], ["r"]),
                    helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 1, 3])],
                   [("x", [1, "seq", 64])], [("y", [1, 4, "seq", 16])],
                   [("to", np.array(target, np.int64))])
    graph = import_model(model, symbolic=["seq"])
    reshaped = [t for name, t in graph.tensors.items() if name not in ("x", "y")]
    assert any([str(d) for d in t.shape] == [str(d) for d in shape] for t in reshaped)
    rng = np.random.default_rng(0)
    compiled = polyc.compile(model, symbolic=["seq"])
    for seq in (1, 6):
        x = rng.standard_normal((1, seq, 64)).astype(np.float32)
        expected = x.reshape(1, seq, 4, 16).transpose(0, 2, 1, 3)
        np.testing.assert_array_equal(compiled.run({"x": x})["y"], expected)


def test_flatten_and_reshape_around_a_symbolic_batch_match_onnxruntime():
    weight = np.random.default_rng(1).standard_normal((48, 5)).astype(np.float32)
    model = _model([helper.make_node("Flatten", ["x"], ["f"], axis=1),
                    helper.make_node("MatMul", ["f", "w"], ["m"]),
                    helper.make_node("Reshape", ["m", "to"], ["y"])],
                   [("x", ["batch", 3, 4, 4])], [("y", ["batch", 1, 5])],
                   [("w", weight), ("to", np.array([-1, 1, 5], np.int64))])
    for batch in (1, 7):
        x = np.random.default_rng(batch).standard_normal((batch, 3, 4, 4)).astype(np.float32)
        _run_both(model, {"x": x}, symbolic=["batch"])


@pytest.mark.parametrize("node, output, initializers", [
    (helper.make_node("Flatten", ["x"], ["y"], axis=2, name="flat2"), ["rows", 4], ()),
    (helper.make_node("Concat", ["x", "x"], ["y"], axis=0, name="twice"), ["rows", 3, 4], ()),
    (helper.make_node("Reshape", ["x", "to"], ["y"], name="merge"), ["rows", 4],
     [("to", np.array([-1, 4], np.int64))]),
])
def test_an_op_that_needs_the_value_names_its_node(node, output, initializers):
    model = _model([node], [("x", ["batch", 3, 4])], [("y", output)], initializers)
    with pytest.raises(ShapeError) as error:
        polyc.compile(model, symbolic=["batch"])
    message = str(error.value)
    assert f"{node.op_type} node '{node.name}'" in message
    assert "symbolic dim 'batch'" in message and "--dim batch=N" in message


def test_symbolic_names_are_checked():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", ["batch", "seq"])],
                   [("y", ["batch", "seq"])])
    with pytest.raises(ShapeError, match="no graph input has as a dynamic dim.*batch, seq"):
        polyc.compile(model, symbolic=["time"])
    with pytest.raises(ShapeError, match="both given a value .dims. and kept symbolic"):
        polyc.compile(model, dims={"batch": 2}, symbolic=["batch"])
    with pytest.raises(ShapeError, match=r"--symbolic batch \(Python: symbolic=\['batch'\]\)"):
        polyc.compile(model)  # no sizes: the message shows every option
    compiled = polyc.compile(model, dims={"seq": 5}, symbolic=["batch"])
    assert compiled.manifest["inputs"][0]["shape"] == ["batch", 5]


def test_a_dim_name_that_is_not_an_identifier_becomes_one():
    model = _model([helper.make_node("Sigmoid", ["x"], ["y"])],
                   [("x", ["DynamicDimension.0", 8])], [("y", ["DynamicDimension.0", 8])])
    compiled = polyc.compile(model, symbolic=["DynamicDimension.0"])
    assert compiled.manifest["params"] == ["DynamicDimension_0"]
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(3, 8)
    _run_both(model, {"x": x}, symbolic=["DynamicDimension.0"])
    merge = _model([helper.make_node("Reshape", ["x", "to"], ["y"], name="merge")],
                   [("x", ["DynamicDimension.0", 8])], [("y", ["n"])],
                   [("to", _ints(-1))])
    with pytest.raises(ShapeError, match=r"--dim DynamicDimension\.0=N") as error:
        polyc.compile(merge, symbolic=["DynamicDimension.0"])
    assert "dims={'DynamicDimension.0': N}" in str(error.value)  # the hint works:
    _run_both(merge, {"x": x}, dims={"DynamicDimension.0": 3})


def test_an_onnx_model_keeps_the_symbolic_option_in_its_manifest():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", ["n", 4])], [("y", ["n", 4])])
    compiled = polyc.compile(model, symbolic="n")
    assert compiled.manifest["options"]["symbolic"] == ["n"]
    x = np.arange(-6, 6, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(compiled.run({"x": x})["y"], np.maximum(x, 0))


def _float(*shape):
    return np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)


def _ints(*values):
    return np.array(values, np.int64)


B = "batch"
OPS = {  # name: (nodes, inputs, output shape, initializers)
    "reduce_over_batch": ([helper.make_node("ReduceSum", ["x", "ax"], ["y"], keepdims=0)],
                          [("x", [B, 16])], [16], [("ax", _ints(0))]),
    "softmax_over_batch": ([helper.make_node("Softmax", ["x"], ["y"], axis=0)],
                           [("x", [B, 16])], [B, 16], ()),
    "conv_with_pads": ([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                       [("x", [B, 3, 8, 8])], [B, 4, 8, 8], [("w", _float(4, 3, 3, 3))]),
    "average_pool_with_pads": ([helper.make_node("AveragePool", ["x"], ["y"],
                                                 kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
                               [("x", [B, 3, 8, 8])], [B, 3, 8, 8], ()),
    "concat_slice_gather": ([helper.make_node("Concat", ["x", "x"], ["c"], axis=1),
                             helper.make_node("Slice", ["c", "s", "e", "a"], ["d"]),
                             helper.make_node("Gather", ["d", "i"], ["y"], axis=1)],
                            [("x", [B, 4])], [B, 2],
                            [("s", _ints(2)), ("e", _ints(7)), ("a", _ints(1)),
                             ("i", _ints(3, 1))]),
    "batched_matmul": ([helper.make_node("MatMul", ["x", "z"], ["y"])],
                       [("x", [B, 4, 8]), ("z", [B, 8, 5])], [B, 4, 5], ()),
    "reflect_pad": ([helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")],
                    [("x", [B, 2, 5])], [B, 2, 9], [("p", _ints(0, 0, 2, 0, 0, 2))]),
    "shape_gather_concat_reshape": ([helper.make_node("Shape", ["x"], ["s"]),
                                     helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
                                     helper.make_node("Unsqueeze", ["n", "zeros"], ["n1"]),
                                     helper.make_node("Concat", ["n1", "rest"], ["to"], axis=0),
                                     helper.make_node("Reshape", ["x", "to"], ["y"])],
                                    [("x", [B, 2, 3])], [B, 6],
                                    [("zero", np.array(0, np.int64)), ("zeros", _ints(0)),
                                     ("rest", _ints(-1))]),
    "resize_linear": ([helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear")],
                      [("x", [B, 2, 4, 4])], [B, 2, 8, 8],
                      [("sc", np.array([1, 1, 2, 2], np.float32))]),
    "transpose_argmax": ([helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
                          helper.make_node("ArgMax", ["t"], ["i"], axis=0),
                          helper.make_node("Cast", ["i"], ["y"], to=TensorProto.FLOAT)],
                         [("x", [B, 8])], [1, B], ()),
}


@pytest.mark.parametrize("name", OPS)
def test_ops_keep_a_symbolic_batch(name):
    nodes, inputs, output, initializers = OPS[name]
    model = _model(nodes, inputs, [("y", output)], initializers)
    compiled = polyc.compile(model, symbolic=["batch"])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (1, 5):
        rng = np.random.default_rng(batch)
        feeds = {n: rng.standard_normal([batch if d == B else d for d in shape])
                 .astype(np.float32) for n, shape in inputs}
        np.testing.assert_allclose(compiled.run(feeds)["y"], session.run(None, feeds)[0],
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape, axis", [([4, "n"], 0), (["n", 6], 0)])
def test_gather_with_run_time_indices_in_a_symbolic_shape(shape, axis):
    """The looked-up dim is fixed with a symbolic dim after it (a run-time stride), or
    symbolic itself (indices wrap and clamp by its run-time extent)."""
    out = [3] + [d for k, d in enumerate(shape) if k != axis]
    graph = helper.make_graph(
        [helper.make_node("Gather", ["x", "ids"], ["y"], axis=axis)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape),
         helper.make_tensor_value_info("ids", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    compiled = polyc.compile(model, symbolic=["n"])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (4, 9):
        x = np.arange(np.prod([n if d == "n" else d for d in shape]), dtype=np.float32)
        feeds = {"x": x.reshape([n if d == "n" else d for d in shape]),
                 "ids": np.array([3, -1, 0], np.int64)}
        np.testing.assert_array_equal(compiled.run(feeds)["y"], session.run(None, feeds)[0])
