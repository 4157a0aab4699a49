"""Frontend errors: each names what is wrong (op, node, opset, tensor, shape, file)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from onnx import TensorProto, helper

from polyc.errors import ModelError, ShapeError, UnsupportedDtypeError, UnsupportedOpError
from polyc.frontend import import_model
from polyc.frontend.cleanup import cleanup
from polyc.frontend.load import load_model
from polyc.frontend.lower import lower
from polyc.frontend.ops import OPS, NodeContext
from polyc.frontend.ops.constant import Constant

from onnx_helpers import make_model

INT64 = TensorProto.INT64


def relu_model(**kwargs):
    return make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", (2, 3))], ["y"],
                      **kwargs)


def test_unsupported_op_names_op_node_and_opset():
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Det", ["r"], ["y"], name="det1")]
    model = make_model(nodes, [("x", (2, 3, 3))], ["y"], opset=17)
    with pytest.raises(UnsupportedOpError, match=r"Det \(opset 17\) at node 'det1'"):
        import_model(model)


def test_unsupported_unnamed_node_is_named_by_op_and_model_index():
    """The index is the node's position in the model, before clean-up removed any."""
    nodes = [helper.make_node("Constant", [], ["c"], value_float=2.0),
             helper.make_node("Mul", ["x", "c"], ["r"]),
             helper.make_node("Det", ["r"], ["y"])]
    model = make_model(nodes, [("x", (3, 3))], ["y"])
    with pytest.raises(UnsupportedOpError, match=r"Det \(opset 13\) at node 'Det#2'"):
        import_model(model)


def test_unsupported_op_version(monkeypatch):
    monkeypatch.delitem(OPS, ("Relu", 14))
    with pytest.raises(UnsupportedOpError,
                       match=r"Relu \(opset 15\).*version 14 of the op is not supported"):
        import_model(relu_model(opset=15))


def test_unsupported_op_is_reported_before_lowering_any_node():
    """The bad Reshape (runtime shape) comes first, but the unknown op is reported."""
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]),
             helper.make_node("Det", ["r"], ["y"])]
    model = make_model(nodes, [("x", (2, 2)), ("s", (2,), INT64)], [("y", ())])
    with pytest.raises(UnsupportedOpError, match="Det"):
        import_model(model)


def test_string_constant_is_unsupported():
    ctx = NodeContext("Constant", "c0", 13)
    with pytest.raises(UnsupportedOpError, match="Constant.*'c0'.*string constants"):
        Constant(ctx, value_string="hello")


def test_unsupported_graph_input_dtype():
    model = make_model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
                       [("x", (3,), TensorProto.FLOAT8E8M0)], [("y", (3,))], opset=24)
    with pytest.raises(UnsupportedDtypeError, match="graph input 'x' has dtype float8_e8m0"):
        import_model(model)


def test_unsupported_graph_output_dtype():
    model = make_model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E8M0)],
                       [("x", (3,))], [("y", (3,), TensorProto.FLOAT8E8M0)], opset=24)
    with pytest.raises(UnsupportedDtypeError, match="graph output 'y' has dtype float8_e8m0"):
        import_model(model)


def test_node_reading_unsupported_data_names_node_and_tensor():
    """Only reachable past clean-up (which folds all-constant nodes): lower directly."""
    graph = dataclasses.replace(load_model(relu_model()), value_shapes={}, value_dtypes={},
                                nodes=(helper.make_node("Relu", ["k"], ["y"], name="r"),),
                                constants={"k": np.arange(3, dtype=np.complex64)})
    with pytest.raises(UnsupportedDtypeError,
                       match=r"Relu node 'r' \(opset 13\) reads tensor 'k' of dtype complex64"):
        lower(graph)


def test_node_given_a_type_it_does_not_take_names_node_and_tensor():
    graph = dataclasses.replace(load_model(relu_model()), value_shapes={}, value_dtypes={},
                                nodes=(helper.make_node("Exp", ["k"], ["y"], name="e"),),
                                constants={"k": np.arange(3)})
    with pytest.raises(UnsupportedDtypeError,
                       match=r"Exp node 'e' \(opset 13\) reading 'k' \(int64\): exp does "
                             "not take int64"):
        lower(graph)


def test_symbolic_dim_without_shapes():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", ("batch", 3))], ["y"])
    with pytest.raises(ShapeError, match=r"(?s)--dim batch=N.*--shape x=D0,D1.*"
                                         r"input 'x': float32\[batch, 3\] \(dynamic: batch\)"):
        import_model(model)


def test_shapes_for_an_unknown_input():
    with pytest.raises(ShapeError, match="'z', which is not a graph input .*inputs: x"):
        import_model(relu_model(), shapes={"z": (2, 3)})


def test_shapes_with_the_wrong_rank():
    with pytest.raises(ShapeError, match="input 'x' has rank 2, but shapes gives"):
        import_model(relu_model(), shapes={"x": (6,)})


def test_reshape_shape_must_be_constant():
    model = make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
                       [("x", (2, 3)), ("s", (2,), INT64)], [("y", (3, 2))])
    with pytest.raises(UnsupportedOpError, match=r"Reshape \(opset 13\) at node 'rs'.*"
                                                 r"input 'shape' must be a constant"):
        import_model(model)


def test_reduce_axes_must_be_constant():
    model = make_model([helper.make_node("ReduceSum", ["x", "axes"], ["y"])],
                       [("x", (2, 3)), ("axes", (1,), INT64)], [("y", (2, 1))])
    with pytest.raises(UnsupportedOpError, match="input 'axes' must be a constant"):
        import_model(model)


def test_bad_reshape_target_names_node_and_shapes():
    model = make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
                       [("x", (2, 3))], [("y", (4, 2))],
                       initializers=[("s", np.array([4, 2]))], check=False)
    with pytest.raises(ShapeError, match=r"Reshape.*cannot reshape|shape inference failed"):
        import_model(model)


def test_unparsable_file(tmp_path):
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"\x08\x01 this is not a protobuf \xff\xff")
    with pytest.raises(ModelError, match="garbage.onnx is not an ONNX model"):
        import_model(path)


def test_missing_file(tmp_path):
    with pytest.raises(ModelError, match="cannot read model file .*missing.onnx"):
        import_model(tmp_path / "missing.onnx")


def test_model_failing_the_checker(tmp_path):
    nodes = [helper.make_node("Relu", ["nowhere"], ["y"])]
    path = tmp_path / "bad.onnx"
    path.write_bytes(make_model(nodes, [("x", (3,))], [("y", (3,))], check=False)
                     .SerializeToString())
    with pytest.raises(ModelError, match="bad.onnx fails onnx.checker: .*topologically"):
        import_model(path)


@pytest.mark.parametrize("opset", [4, 5])
def test_opset_below_range(opset):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", (2, 3))],
                       [("y", (2, 3))], opset=opset)
    with pytest.raises(ModelError, match=f"opset {opset} .*supports opsets 6 to"):
        import_model(model)


def test_opset_above_range():
    model = relu_model()
    model.opset_import[0].version = 99
    with pytest.raises(ModelError, match="opset 99"):
        import_model(model)


def test_failed_shape_inference():
    model = make_model([helper.make_node("Add", ["a", "b"], ["y"])],
                       [("a", (3,)), ("b", (4,))], [("y", (4,))], check=False)
    with pytest.raises(ShapeError, match="shape inference failed"):
        import_model(model)


def test_not_a_model_object():
    with pytest.raises(ModelError, match="cannot read a model from a int"):
        import_model(42)


def test_cleanup_leaves_unfoldable_nodes_and_notes_why():
    """A node the reference evaluator rejects stays, and lowering then reports it."""
    nodes = [helper.make_node("Relu", ["w"], ["y"], name="bad")]
    model = make_model(nodes, [("x", (2,))], [("y", (2,))],
                       initializers=[("w", np.ones(2, np.float32))])
    graph = cleanup(load_model(model))
    assert graph.nodes == () and "folded 1 constant node" in graph.notes
