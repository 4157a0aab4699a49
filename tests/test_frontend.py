"""Frontend: every supported op (and broadcasting case, and opset variant) lowered to
core ops and run by the reference interpreter, compared with onnxruntime.

Tolerances: rtol=1e-5, atol=1e-6 (``onnx_helpers.RTOL`` / ``ATOL``). Inputs are seeded.
The executor is ``onnx_helpers.run_polyc`` (frontend + ``evaluate`` for now).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import polyc
from polyc.frontend import check_graph, evaluate, import_model
from polyc.frontend.core import Call, Const, Graph, Ix, Map, Read, Reduce, TensorInfo, View

from onnx_helpers import (
    ATOL,
    RTOL,
    assert_matches_onnxruntime,
    make_model,
    random_inputs,
    run_onnxruntime,
    run_polyc,
)

INT64 = TensorProto.INT64
NEWEST = onnx.defs.onnx_opset_version()


def node(op, inputs, outputs=("y",), **attrs):
    return helper.make_node(op, list(inputs), list(outputs), **attrs)


def int64(name, values):
    return (name, np.asarray(values, dtype=np.int64))


def weight(name, shape, seed):
    return (name, np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32))


# -- elementwise ----------------------------------------------------------------------

BROADCAST_CASES = [
    ((3, 4), (3, 4)),        # same shape
    ((), (3, 4)),            # scalar vs tensor
    ((3, 4), ()),            # tensor vs scalar
    ((3, 1), (1, 4)),        # size-1 dims on both sides
    ((4,), (2, 3, 4)),       # rank difference
    ((2, 3, 4), (3, 1)),     # rank difference and a size-1 dim
    ((2, 1, 4), (1, 3, 1)),  # size-1 dims in both operands
    ((1,), (5,)),            # a size-1 vector
    ((0, 3), (3,)),          # zero-size output
]


@pytest.mark.parametrize("opset", [11, 14])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("a_shape,b_shape", BROADCAST_CASES)
def test_binary_broadcasting(op, a_shape, b_shape, opset):
    model = make_model([node(op, ["a", "b"])], [("a", a_shape), ("b", b_shape)], ["y"],
                       opset=opset)
    assert_matches_onnxruntime(model, seed=len(a_shape) * 7 + len(b_shape))


@st.composite
def broadcastable_shapes(draw):
    """Two shapes that broadcast: each dim of each is the common size or 1."""
    full = draw(st.lists(st.integers(1, 4), max_size=4))
    def operand():
        dims = [draw(st.sampled_from([d, 1])) for d in full]
        return tuple(dims[draw(st.integers(0, len(dims))):])  # drop some leading dims
    return operand(), operand()


@settings(derandomize=True, max_examples=60, deadline=None)
@given(shapes=broadcastable_shapes(), op=st.sampled_from(["Add", "Sub", "Mul", "Div"]))
def test_binary_broadcasting_matches_numpy(shapes, op):
    a_shape, b_shape = shapes
    model = make_model([node(op, ["a", "b"])], [("a", a_shape), ("b", b_shape)], ["y"])
    inputs = random_inputs(model, seed=0)
    numpy_op = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}[op]
    expected = numpy_op(inputs["a"], inputs["b"])
    np.testing.assert_allclose(run_polyc(model, inputs)["y"], expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("opset", [11, 13, 14, 25])
@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Neg",
                                "Abs", "Identity"])
def test_unary(op, opset):
    model = make_model([node(op, ["x"])], [("x", (2, 3, 4))], ["y"], opset=opset)
    inputs = random_inputs(model, seed=3)
    if op in ("Log", "Sqrt"):
        inputs["x"] = np.abs(inputs["x"]) + np.float32(0.1)
    assert_matches_onnxruntime(model, inputs=inputs)


def test_unary_on_a_scalar():
    model = make_model([node("Exp", ["x"], ["e"]), node("Sigmoid", ["e"])],
                       [("x", ())], ["y"])
    assert_matches_onnxruntime(model, seed=5)


def test_sigmoid_saturates_without_overflow():
    model = make_model([node("Sigmoid", ["x"])], [("x", (4,))], ["y"])
    x = np.array([-100.0, -20.0, 20.0, 100.0], np.float32)
    assert_matches_onnxruntime(model, inputs={"x": x})


# -- MatMul and Gemm ------------------------------------------------------------------

MATMUL_CASES = [
    ((3, 4), (4, 5)),
    ((4,), (4,)),            # vector . vector -> scalar
    ((4,), (2, 4, 3)),       # 1-D A is a row vector
    ((2, 3, 4), (4,)),       # 1-D B is a column vector
    ((2, 3, 4), (2, 4, 5)),  # batched
    ((2, 1, 3, 4), (5, 4, 2)),  # batch broadcasting with a size-1 dim
    ((3, 4), (2, 4, 5)),     # rank difference
    ((1, 3, 4), (2, 4, 5)),
    ((3, 0), (0, 2)),        # empty reduction: zeros
]


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("a_shape,b_shape", MATMUL_CASES)
def test_matmul(a_shape, b_shape, opset):
    model = make_model([node("MatMul", ["a", "b"])], [("a", a_shape), ("b", b_shape)], ["y"],
                       opset=opset)
    assert_matches_onnxruntime(model, seed=len(a_shape) + 10 * len(b_shape))


GEMM_BIAS_SHAPES = [None, (), (1,), (5,), (3, 1), (1, 5), (3, 5)]


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("c_shape", GEMM_BIAS_SHAPES)
@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_gemm(trans_a, trans_b, c_shape, opset):
    a_shape = (4, 3) if trans_a else (3, 4)
    b_shape = (5, 4) if trans_b else (4, 5)
    inputs = [("a", a_shape), ("b", b_shape)] + ([("c", c_shape)] if c_shape is not None else [])
    gemm = node("Gemm", [name for name, _ in inputs], transA=trans_a, transB=trans_b)
    model = make_model([gemm], inputs, ["y"], opset=opset)
    assert_matches_onnxruntime(model, seed=trans_a + 2 * trans_b)


@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, 1.0), (1.0, -2.0), (0.25, 0.0)])
def test_gemm_alpha_beta_with_weights(alpha, beta):
    gemm = node("Gemm", ["x", "w", "bias"], alpha=alpha, beta=beta, transB=1)
    model = make_model([gemm], [("x", (2, 6))], ["y"],
                       initializers=[weight("w", (3, 6), 1), weight("bias", (3,), 2)])
    assert_matches_onnxruntime(model, seed=4)


def test_gemm_lowers_to_one_reduce_with_bias_init():
    gemm = node("Gemm", ["a", "b", "c"], transA=1)
    graph = import_model(make_model([gemm], [("a", (4, 3)), ("b", (4, 5)), ("c", (5,))],
                                    ["y"]))
    (op,) = graph.ops
    assert isinstance(op, Reduce) and op.combiner == "add" and op.label == "gemm"
    assert op.extents == (3, 5, 4)
    assert op.init == Read("c", (Ix.var(1),))
    i, j, k = Ix.var(0), Ix.var(1), Ix.var(2)
    assert op.expr == Call("mul", (Read("a", (k, i)), Read("b", (k, j))))  # alpha == 1


def test_gemm_scales_by_alpha_and_beta():
    gemm = node("Gemm", ["a", "b", "c"], alpha=2.0, beta=0.5)
    graph = import_model(make_model([gemm], [("a", (3, 4)), ("b", (4, 5)), ("c", (3, 1))],
                                    ["y"]))
    (op,) = graph.ops
    assert op.init == Call("mul", (Const(0.5), Read("c", (Ix.var(0), Ix.constant(0)))))
    assert op.expr.fn == "mul" and op.expr.args[0] == Const(2.0)


# -- layout ops -----------------------------------------------------------------------

RESHAPE_CASES = [
    ((2, 3, 4), [4, 6], 0),
    ((2, 3, 4), [-1], 0),
    ((2, 3, 4), [0, -1], 0),        # 0 copies a dim
    ((2, 3, 4), [2, 0, 2, 2], 0),
    ((2, 3, 4), [1, 1, 24], 0),
    ((0, 3), [3, 0], 1),            # allowzero: 0 is a zero-size dim
    ((2, 3), [3, 2], 1),
]


@pytest.mark.parametrize("x_shape,shape,allowzero,opset", [
    (*case, opset) for case in RESHAPE_CASES for opset in (13, 14, 25)
    if opset >= 14 or not case[2]  # allowzero exists from Reshape-14
])
def test_reshape(x_shape, shape, allowzero, opset):
    attrs = {"allowzero": allowzero} if opset >= 14 else {}
    model = make_model([node("Reshape", ["x", "shape"], **attrs)], [("x", x_shape)], ["y"],
                       initializers=[int64("shape", shape)], opset=opset)
    assert_matches_onnxruntime(model, seed=1)


def test_reshape_output_is_copied_and_view_feeds_later_ops():
    nodes = [node("Reshape", ["x", "shape"], ["r"]), node("Relu", ["r"], ["y"])]
    model = make_model(nodes, [("x", (2, 6))], ["r", "y"],
                       initializers=[int64("shape", [3, 4])])
    graph = import_model(model)
    check_graph(graph)
    kinds = [(type(op).__name__, op.label) for op in graph.ops]
    assert kinds == [("View", "reshape"), ("Map", "copy"), ("Map", "relu")]
    assert_matches_onnxruntime(model, seed=2)


@pytest.mark.parametrize("opset", [11, 13, 25])
@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_flatten(axis, opset):
    model = make_model([node("Flatten", ["x"], axis=axis)], [("x", (2, 3, 4))], ["y"],
                       opset=opset)
    assert_matches_onnxruntime(model, seed=axis + 3)


def test_flatten_default_axis():
    model = make_model([node("Flatten", ["x"])], [("x", (2, 3, 4))], ["y"])
    assert_matches_onnxruntime(model, seed=0)


@pytest.mark.parametrize("opset", [11, 13, 25])
@pytest.mark.parametrize("perm", [None, (0, 1, 2), (2, 0, 1), (1, 0, 2), (0, 2, 1)])
def test_transpose(perm, opset):
    attrs = {} if perm is None else {"perm": list(perm)}
    model = make_model([node("Transpose", ["x"], **attrs)], [("x", (2, 3, 4))], ["y"],
                       opset=opset)
    assert_matches_onnxruntime(model, seed=1)


def test_transpose_then_matmul_reads_through_the_view():
    nodes = [node("Transpose", ["a"], ["at"]), node("MatMul", ["at", "b"])]
    model = make_model(nodes, [("a", (4, 3)), ("b", (4, 2))], ["y"])
    graph = import_model(model)
    assert isinstance(graph.ops[0], View) and graph.ops[0].perm == (1, 0)
    assert_matches_onnxruntime(model, seed=8)


# -- Softmax and reductions -----------------------------------------------------------

@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, -2])
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax(opset, axis):
    attrs = {} if axis is None else {"axis": axis}
    model = make_model([node("Softmax", ["x"], **attrs)], [("x", (2, 3, 4))], ["y"],
                       opset=opset)
    assert_matches_onnxruntime(model, seed=9)


def test_softmax_opset11_coerces_to_2d_but_opset13_uses_one_axis():
    x = random_inputs(make_model([node("Relu", ["x"])], [("x", (2, 3, 4))], ["y"]), seed=4)
    old = make_model([node("Softmax", ["x"])], [("x", (2, 3, 4))], ["y"], opset=11)
    new = make_model([node("Softmax", ["x"], axis=1)], [("x", (2, 3, 4))], ["y"], opset=13)
    old_y, new_y = run_polyc(old, x)["y"], run_polyc(new, x)["y"]
    np.testing.assert_allclose(old_y.sum(axis=(1, 2)), 1.0, rtol=RTOL)
    np.testing.assert_allclose(new_y.sum(axis=1), 1.0, rtol=RTOL)


def test_softmax_lowering_labels():
    graph = import_model(make_model([node("Softmax", ["x"])], [("x", (2, 5))], ["y"]))
    assert [op.label for op in graph.ops] == ["softmax_max", "softmax_exp", "softmax_sum",
                                              "softmax_div"]
    assert graph.ops[0].init == Const(float("-inf")) and graph.ops[0].combiner == "max"


def test_softmax_of_large_numbers_is_stable():
    model = make_model([node("Softmax", ["x"])], [("x", (2, 4))], ["y"])
    x = np.array([[1000, 1001, 1002, 1003], [-1000, 0, 1000, 3000]], np.float32)
    assert_matches_onnxruntime(model, inputs={"x": x})


REDUCE_CASES = [
    (None, 1), (None, 0), ((1,), 1), ((1,), 0), ((0, 2), 1), ((0, 2), 0), ((-1,), 1),
    ((-3, -1), 0),
]


def _reduce_model(op, axes, keepdims, opset, shape=(2, 3, 4), noop=None):
    """A Reduce* node with axes as an attribute or as an int64 initializer per opset."""
    axes_as_input = (op == "ReduceSum" and opset >= 13) or opset >= 18
    attrs = {"keepdims": keepdims}
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    inputs, initializers = ["x"], []
    if axes is not None and axes_as_input:
        inputs.append("axes")
        initializers.append(int64("axes", axes))
    elif axes is not None:
        attrs["axes"] = list(axes)
    return make_model([node(op, inputs, **attrs)], [("x", shape)], ["y"],
                      initializers=initializers, opset=opset)


@pytest.mark.parametrize("axes,keepdims", REDUCE_CASES)
@pytest.mark.parametrize("op,opset", [
    ("ReduceSum", 11), ("ReduceSum", 13), ("ReduceMean", 13), ("ReduceMean", 18),
    ("ReduceMax", 13), ("ReduceMax", 18), ("ReduceMax", 20),
])
def test_reduce(op, opset, axes, keepdims):
    model = _reduce_model(op, axes, keepdims, opset)
    assert_matches_onnxruntime(model, seed=11)


@pytest.mark.parametrize("op,opset", [("ReduceSum", 13), ("ReduceMean", 18),
                                      ("ReduceMax", 18)])
def test_reduce_noop_with_empty_axes_is_identity(op, opset):
    model = _reduce_model(op, None, 1, opset, noop=1)
    assert_matches_onnxruntime(model, seed=12)
    assert all(not isinstance(o, Reduce) for o in import_model(model).ops)


@pytest.mark.parametrize("op,expected", [("ReduceSum", 0.0), ("ReduceMax", -np.inf)])
def test_reduce_over_a_zero_size_axis_gives_the_identity(op, expected):
    model = _reduce_model(op, (1,), 1, 18, shape=(2, 0, 3))
    (y,) = run_polyc(model, {"x": np.zeros((2, 0, 3), np.float32)}).values()
    assert y.shape == (2, 1, 3)
    np.testing.assert_array_equal(y, np.full((2, 1, 3), expected, np.float32))


def test_reduce_over_an_empty_box_is_a_map_of_its_init():
    """The body never runs: no Reduce, and the (empty) operand is not read at all."""
    graph = import_model(make_model([node("MatMul", ["a", "b"])],
                                    [("a", (3, 0)), ("b", (0, 2))], ["y"]))
    (op,) = graph.ops
    assert isinstance(op, Map) and op.expr == Const(0.0) and op.label == "matmul"


def test_ops_whose_result_is_never_read_are_dropped():
    nodes = [node("Abs", ["x"], ["a"]), node("ReduceSum", ["a", "axes"])]
    model = make_model(nodes, [("x", (2, 0, 3))], ["y"], initializers=[int64("axes", [1])])
    graph = import_model(model)
    assert [op.label for op in graph.ops] == ["reduce_sum"]
    check_graph(graph)


def test_reduce_mean_divides_a_sum_by_the_count():
    graph = import_model(_reduce_model("ReduceMean", (0, 2), 0, 18))
    reduce_op, div = graph.ops
    assert reduce_op.combiner == "add" and reduce_op.label == "mean_sum"
    assert div.expr == Call("div", (Read(reduce_op.out, (Ix.var(0),)), Const(8.0)))


# -- constants, weights, clean-up -----------------------------------------------------

@pytest.mark.parametrize("attr,value", [
    ("value", helper.make_tensor("v", TensorProto.FLOAT, [3], [1.0, -2.0, 3.5])),
    ("value_float", 2.5),
    ("value_floats", [1.0, 2.0, 3.0]),
])
def test_constant_node_as_an_operand(attr, value):
    nodes = [helper.make_node("Constant", [], ["c"], **{attr: value}), node("Mul", ["x", "c"])]
    model = make_model(nodes, [("x", (2, 3))], ["y"])
    assert_matches_onnxruntime(model, seed=13)
    assert "turned 1 Constant node into constants" in import_model(model).notes


@pytest.mark.parametrize("attr,value", [("value_ints", [3, -1]), ("value_int", -1)])
def test_int_constant_as_reshape_shape(attr, value):
    if attr == "value_int":
        nodes = [helper.make_node("Constant", [], ["n"], value_int=value),
                 helper.make_node("Constant", [], ["one"], value_ints=[1]),
                 node("Reshape", ["n", "one"], ["shape"]),
                 node("Reshape", ["x", "shape"])]
    else:
        nodes = [helper.make_node("Constant", [], ["shape"], value_ints=value),
                 node("Reshape", ["x", "shape"])]
    out_shape = (12,) if attr == "value_int" else (3, 4)
    model = make_model(nodes, [("x", (2, 6))], [("y", out_shape)])
    assert_matches_onnxruntime(model, seed=14)


def test_constant_graph_output_is_copied():
    value = helper.make_tensor("v", TensorProto.FLOAT, [2, 2], [1.0, 2.0, 3.0, 4.0])
    nodes = [helper.make_node("Constant", [], ["c"], value=value), node("Add", ["x", "c"])]
    model = make_model(nodes, [("x", (2, 2))], ["c", "y"])
    graph = import_model(model)
    check_graph(graph)
    assert "c" not in graph.constants and "c" in {op.out for op in graph.ops}
    assert_matches_onnxruntime(model, seed=15)


def test_weights_and_old_style_initializer_inputs():
    w = weight("w", (4, 3), 16)
    nodes = [node("MatMul", ["x", "w"], ["h"]), node("Relu", ["h"])]
    model = make_model(nodes, [("x", (2, 4)), ("w", (4, 3))], ["y"], initializers=[w])
    graph = import_model(model)
    assert [t.name for t in graph.inputs] == ["x"] and "w" in graph.constants
    assert_matches_onnxruntime(model, seed=16)


def test_constant_folding_and_dead_node_removal():
    nodes = [node("Add", ["w1", "w2"], ["w"]),           # folded
             node("Mul", ["x", "w"], ["y"]),
             node("Exp", ["x"], ["unused"])]              # dead
    model = make_model(nodes, [("x", (3,))], ["y"],
                       initializers=[weight("w1", (3,), 1), weight("w2", (3,), 2)])
    graph = import_model(model)
    assert graph.notes == ("removed 1 dead node", "folded 1 constant node",
                           "dropped 2 unused constants")
    assert [op.label for op in graph.ops] == ["mul"]
    assert_matches_onnxruntime(model, seed=17)


def test_folding_evaluates_ops_polyc_does_not_lower():
    """Shape -> Concat on constants folds away, leaving only supported ops."""
    nodes = [node("Shape", ["w"], ["s"]),
             helper.make_node("Constant", [], ["minus1"], value_ints=[-1]),
             node("Concat", ["minus1", "s"], ["shape"], axis=0),
             node("Reshape", ["x", "shape"], ["r"]),
             node("Add", ["r", "w"])]
    model = make_model(nodes, [("x", (2, 3, 4))], [("y", (2, 3, 4))],
                       initializers=[weight("w", (3, 4), 3)])
    assert_matches_onnxruntime(model, seed=18)


# -- whole models, shapes, naming -----------------------------------------------------

def test_mlp_with_softmax():
    nodes = [node("Gemm", ["x", "w1", "b1"], ["h1"], transB=1), node("Relu", ["h1"], ["a1"]),
             node("Gemm", ["a1", "w2", "b2"], ["h2"]), node("Softmax", ["h2"])]
    inits = [weight("w1", (16, 8), 1), weight("b1", (16,), 2), weight("w2", (16, 4), 3),
             weight("b2", (4,), 4)]
    model = make_model(nodes, [("x", (5, 8))], ["y"], initializers=inits)
    assert_matches_onnxruntime(model, seed=19)
    check_graph(import_model(model))


def test_shapes_override_symbolic_dims():
    model = make_model([node("MatMul", ["x", "w"])], [("x", ("N", 4))], ["y"],
                       initializers=[weight("w", (4, 2), 5)])
    graph = import_model(model, shapes={"x": (3, 4)})
    assert graph.inputs == (TensorInfo("x", (3, 4)),)
    assert graph.outputs == (TensorInfo("y", (3, 2)),)


def test_accepts_path_bytes_and_proto_with_one_hash(tmp_path):
    model = make_model([node("Relu", ["x"])], [("x", (2,))], ["y"])
    path = tmp_path / "relu.onnx"
    onnx.save(model, path)
    hashes = {import_model(m).model_hash for m in (model, model.SerializeToString(), path,
                                                    str(path))}
    assert len(hashes) == 1 and len(hashes.pop()) == 64


def test_hash_depends_on_shape_overrides():
    model = make_model([node("Relu", ["x"])], [("x", ("N",))], ["y"])
    assert (import_model(model, shapes={"x": (2,)}).model_hash
            != import_model(model, shapes={"x": (3,)}).model_hash)


def test_node_names_and_fresh_names_do_not_clash():
    nodes = [node("Softmax", ["_softmax_max0"], ["_softmax_exp1"], name="sm"),
             node("Relu", ["_softmax_exp1"], ["y"])]
    model = make_model(nodes, [("_softmax_max0", (2, 3))], ["y"])
    graph = import_model(model)
    check_graph(graph)
    outs = [op.out for op in graph.ops]
    assert len(set(outs)) == len(outs) and "_softmax_max0" not in outs
    assert {op.node for op in graph.ops} == {"sm", "Relu#1"}
    assert_matches_onnxruntime(model, seed=20)


def test_broadcast_reads_index_zero_for_size_one_dims():
    graph = import_model(make_model([node("Add", ["a", "b"])], [("a", (3, 1)), ("b", (4,))],
                                    ["y"]))
    (op,) = graph.ops
    assert op.shape == (3, 4)
    assert op.expr == Call("add", (Read("a", (Ix.var(0), Ix.constant(0))),
                                   Read("b", (Ix.var(1),))))


@pytest.mark.parametrize("op,inputs,attrs", [
    ("Add", [("a", (2, 3)), ("b", (3,))], {}),
    ("MatMul", [("a", (2, 3)), ("b", (3, 4))], {}),
    ("Gemm", [("a", (2, 3)), ("b", (3, 4)), ("c", (4,))], {"alpha": 0.5}),
    ("Softmax", [("a", (2, 3))], {}),
    ("Reshape", [("a", (2, 3))], {}),
    ("Flatten", [("a", (2, 3, 2))], {"axis": 2}),
    ("Transpose", [("a", (2, 3))], {}),
    ("Relu", [("a", (2, 3))], {}),
])
def test_newest_opset_matches_the_reference_evaluator(op, inputs, attrs):
    """onnxruntime 1.31 stops below the newest opset; onnx's evaluator is the reference."""
    names = [n for n, _ in inputs]
    initializers = []
    if op == "Reshape":
        names.append("shape")
        initializers.append(int64("shape", [3, 2]))
    model = make_model([node(op, names, **attrs)], inputs, ["y"], opset=NEWEST,
                       initializers=initializers)
    feeds = random_inputs(model, seed=21)
    (expected,) = ReferenceEvaluator(model).run(None, feeds)
    np.testing.assert_allclose(run_polyc(model, feeds)["y"], expected, rtol=RTOL, atol=ATOL)


# -- the reference interpreter itself -------------------------------------------------

def test_evaluate_general_affine_reduce():
    """out[i0 + i1] += x[i0, i1]: anti-diagonal sums, through numpy's ufunc.at path."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    reduce_op = Reduce("y", (6,), Const(0.0), (3, 4), (Ix(((0, 1), (1, 1))),), "add",
                       Read("x", (Ix.var(0), Ix.var(1))))
    graph = Graph("diag", (TensorInfo("x", (3, 4)),), (TensorInfo("y", (6,)),),
                  {"x": TensorInfo("x", (3, 4)), "y": TensorInfo("y", (6,))}, {},
                  (reduce_op,), 13)
    expected = [sum(x[i, s - i] for i in range(3) if 0 <= s - i < 4) for s in range(6)]
    np.testing.assert_allclose(evaluate(graph, {"x": x})["y"], expected)


def test_evaluate_map_with_strided_read():
    """y[i] = x[2*i + 1]: affine (non-identity) indices in a Map."""
    x = np.arange(8, dtype=np.float32)
    graph = Graph("odd", (TensorInfo("x", (8,)),), (TensorInfo("y", (4,)),),
                  {"x": TensorInfo("x", (8,)), "y": TensorInfo("y", (4,))}, {},
                  (Map("y", (4,), Read("x", (Ix(((0, 2),), 1),))),), 13)
    np.testing.assert_array_equal(evaluate(graph, {"x": x})["y"], x[1::2])


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_a_max_of_a_whole_tensor_reduces_in_two_steps(op, dtype):
    """A ReduceMax/Min to one value first reduces to one value per position of the
    innermost dim (vector lanes), then those (lower.SPLIT_LANES); NaN, -0.0 and the
    extremes give onnxruntime's answer in the compiled code."""
    rng = np.random.default_rng(len(op))
    x = (rng.standard_normal((3, 5, 40)) * 100).astype(dtype)
    if dtype == "float32":
        x[1, 2, 7] = -0.0
    model = make_model([helper.make_node(op, ["x"], ["y"], keepdims=0)],
                       [("x", x.shape, TensorProto.FLOAT if dtype == "float32"
                         else TensorProto.INT32)],
                       [("y", (), TensorProto.FLOAT if dtype == "float32"
                         else TensorProto.INT32)], opset=18)
    graph = import_model(model)
    assert [op.extents for op in graph.ops] == [(3, 5, 40), (40,)]
    compiled = polyc.compile(model)
    np.testing.assert_array_equal(compiled.run({"x": x})["y"],
                                  run_onnxruntime(model, {"x": x})["y"])
    if dtype == "float32":
        x[2, 4, 39] = np.nan
        assert np.isnan(compiled.run({"x": x})["y"])
