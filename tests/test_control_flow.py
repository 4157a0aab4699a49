"""If, Scan and Loop (polyc/frontend/ops/control.py, and If with a constant condition
inlined by clean-up) against onnxruntime on seeded inputs; the reference interpreter on
the lifted Recurrence; and the errors."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import polyc
from polyc.errors import UnsupportedOpError
from polyc.frontend import import_model
from polyc.frontend.core import Recurrence, View

from onnx_helpers import make_model, run_onnxruntime, run_polyc, run_reference

F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
node = helper.make_node


def vi(name, shape, kind=F):
    return helper.make_tensor_value_info(name, kind, shape)


def check(model, feeds, tolerance=1e-5):
    want = run_onnxruntime(model, feeds)
    got = run_polyc(model, feeds)
    reference = run_reference(model, feeds)
    for name, expected in want.items():
        np.testing.assert_allclose(got[name], expected, rtol=tolerance, atol=tolerance,
                                   err_msg=name)
        np.testing.assert_allclose(reference[name], expected, rtol=tolerance, atol=tolerance,
                                   err_msg=name)


def branches():
    then_branch = helper.make_graph(
        [node("Mul", ["x", "two"], ["t0"]), node("Add", ["t0", "y"], ["then_out"])],
        "then", [], [vi("then_out", (3, 4))],
        initializer=[helper.make_tensor("two", F, (), [2.0])])
    else_branch = helper.make_graph([node("Relu", ["x"], ["e0"]),
                                     node("Sub", ["e0", "y"], ["else_out"])],
                                    "else", [], [vi("else_out", (3, 4))])
    return then_branch, else_branch


@pytest.mark.parametrize("taken", [True, False])
def test_if_with_a_condition_computed_at_run_time(taken):
    then_branch, else_branch = branches()
    model = make_model([node("If", ["c"], ["z"], then_branch=then_branch,
                             else_branch=else_branch)],
                       [("c", (), BOOL), ("x", (3, 4)), ("y", (3, 4))], [("z", (3, 4))],
                       opset=16)
    rng = np.random.default_rng(1)
    feeds = {"c": np.array(taken), "x": rng.standard_normal((3, 4), dtype=np.float32),
             "y": rng.standard_normal((3, 4), dtype=np.float32)}
    check(model, feeds)


def test_if_with_a_constant_condition_is_inlined_by_clean_up():
    then_branch, else_branch = branches()
    model = make_model([node("If", ["c"], ["z"], then_branch=then_branch,
                             else_branch=else_branch)],
                       [("x", (3, 4)), ("y", (3, 4))], [("z", (3, 4))],
                       initializers=[("c", np.array(False))], opset=16)
    graph = import_model(model)  # no select between branches: only else_branch's ops
    assert [op.label for op in graph.ops if not isinstance(op, View)] == ["relu", "sub"]
    rng = np.random.default_rng(2)
    check(model, {"x": rng.standard_normal((3, 4), dtype=np.float32),
                  "y": rng.standard_normal((3, 4), dtype=np.float32)})


def test_if_branches_of_different_shapes_are_refused():
    then_branch = helper.make_graph([node("Identity", ["x"], ["a"])], "then", [],
                                    [vi("a", (3, 4))])
    else_branch = helper.make_graph([node("ReduceSum", ["x"], ["b"], keepdims=0)], "else",
                                    [], [vi("b", ())])
    model = make_model([node("If", ["c"], ["z"], then_branch=then_branch,
                             else_branch=else_branch)],
                       [("c", (), BOOL), ("x", (3, 4))], [("z", (3, 4))], opset=11,
                       check=False)
    with pytest.raises(UnsupportedOpError, match="one shape and dtype"):
        polyc.compile(model)


def rnn_body():
    """h' = tanh(W h + x_t) with W an outer constant, and y_t = h' reshaped and
    transposed (views of a lifted tensor), plus a loop-invariant product."""
    return helper.make_graph(
        [node("MatMul", ["W", "h"], ["wh"]), node("Add", ["wh", "x_t"], ["pre"]),
         node("Tanh", ["pre"], ["h_next"]),
         node("Reshape", ["h_next", "shape"], ["h2"]),
         node("Transpose", ["h2"], ["y_t"], perm=[1, 0]),
         node("Mul", ["W", "W"], ["w2"]), node("ReduceSum", ["w2"], ["s"], keepdims=0),
         node("Mul", ["s", "h_next"], ["z_t"])],
        "body", [vi("h", (6,)), vi("x_t", (6,))],
        [vi("h_next", (6,)), vi("y_t", (3, 2)), vi("z_t", (6,))],
        initializer=[helper.make_tensor("shape", I64, (2,), [2, 3])])


@pytest.mark.parametrize("axis,direction", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_scan_carries_a_state_through_a_matrix_product(axis, direction):
    steps = 5
    x_shape = (steps, 6) if axis == 0 else (6, steps)
    rng = np.random.default_rng(axis * 2 + direction)
    w = (rng.standard_normal((6, 6)) * 0.4).astype(np.float32)
    model = make_model(
        [node("Scan", ["h0", "xs"], ["h_last", "ys", "zs"], body=rnn_body(),
              num_scan_inputs=1, scan_input_axes=[axis], scan_input_directions=[direction],
              scan_output_axes=[0, 1], scan_output_directions=[direction, 0])],
        [("h0", (6,)), ("xs", x_shape)], ["h_last", "ys", "zs"],
        initializers=[("W", w)], opset=16)
    feeds = {"h0": rng.standard_normal(6, dtype=np.float32),
             "xs": rng.standard_normal(x_shape, dtype=np.float32)}
    check(model, feeds)
    (recurrence,) = [op for op in import_model(model).ops if isinstance(op, Recurrence)]
    assert recurrence.views  # the Reshape and Transpose of the lifted state
    assert not any("w2" in step.out for step in recurrence.body)  # hoisted out of the loop


def test_scan_with_two_states_and_two_inputs():
    body = helper.make_graph(
        [node("Add", ["s1", "a_t"], ["s1n"]), node("Mul", ["s2", "b_t"], ["s2n"]),
         node("Sub", ["s1n", "s2n"], ["d_t"])],
        "body", [vi("s1", (2, 3)), vi("s2", (2, 3)), vi("a_t", (2, 3)), vi("b_t", (2, 3))],
        [vi("s1n", (2, 3)), vi("s2n", (2, 3)), vi("d_t", (2, 3))])
    model = make_model([node("Scan", ["i1", "i2", "a", "b"], ["o1", "o2", "d"], body=body,
                             num_scan_inputs=2)],
                       [("i1", (2, 3)), ("i2", (2, 3)), ("a", (4, 2, 3)), ("b", (4, 2, 3))],
                       ["o1", "o2", "d"], opset=11)
    rng = np.random.default_rng(3)
    check(model, {k: rng.uniform(0.5, 1.5, s).astype(np.float32) for k, s in
                  [("i1", (2, 3)), ("i2", (2, 3)), ("a", (4, 2, 3)), ("b", (4, 2, 3))]})


def test_loop_with_a_constant_trip_count():
    body = helper.make_graph(
        [node("Cast", ["i"], ["fi"], to=F), node("Mul", ["v", "decay"], ["vd"]),
         node("Add", ["vd", "fi"], ["v_next"]), node("Identity", ["cond"], ["cond_out"]),
         node("ReduceSum", ["v_next"], ["total"], keepdims=0)],
        "body", [vi("i", (), I64), vi("cond", (), BOOL), vi("v", (4,))],
        [vi("cond_out", (), BOOL), vi("v_next", (4,)), vi("total", ())])
    model = make_model([node("Loop", ["M", "go", "v0"], ["v_last", "totals"], body=body)],
                       [("v0", (4,))], [("v_last", (4,)), ("totals", (6,))],
                       initializers=[("M", np.array(6, np.int64)), ("go", np.array(True)),
                                     ("decay", np.array(0.5, np.float32))], opset=16)
    check(model, {"v0": np.random.default_rng(4).standard_normal(4, dtype=np.float32)})


def test_loop_whose_condition_may_turn_false_is_refused():
    body = helper.make_graph(
        [node("ReduceSum", ["v"], ["s"], keepdims=0), node("Less", ["s", "limit"], ["c2"]),
         node("Add", ["v", "v"], ["v2"])],
        "body", [vi("i", (), I64), vi("cond", (), BOOL), vi("v", (4,))],
        [vi("c2", (), BOOL), vi("v2", (4,))])
    model = make_model([node("Loop", ["M", "go", "v0"], ["v_last"], body=body)],
                       [("v0", (4,))], [("v_last", (4,))],
                       initializers=[("M", np.array(6, np.int64)), ("go", np.array(True)),
                                     ("limit", np.array(10.0, np.float32))], opset=16)
    with pytest.raises(UnsupportedOpError, match="early exit"):
        polyc.compile(model)


@pytest.mark.parametrize("direction", [0, 1])
def test_scan_8_runs_the_body_per_batch_element(direction):
    """Scan-8: a batch dim first on the states and scan inputs (scanned along dim 1),
    directions, sequence_lens of full length; against onnxruntime."""
    body = helper.make_graph(
        [node("Add", ["s", "x_t"], ["s_next"]), node("Mul", ["s_next", "x_t"], ["y_t"])],
        "body", [vi("s", (3,)), vi("x_t", (3,))], [vi("s_next", (3,)), vi("y_t", (3,))])
    model = make_model([node("Scan", ["lens", "s0", "xs"], ["s_last", "ys"], body=body,
                             num_scan_inputs=1, directions=[direction])],
                       [("s0", (2, 3)), ("xs", (2, 4, 3))], ["s_last", "ys"],
                       initializers=[("lens", np.array([4, 4], np.int64))], opset=8)
    rng = np.random.default_rng(direction)
    check(model, {"s0": rng.standard_normal((2, 3), dtype=np.float32),
                  "xs": rng.standard_normal((2, 4, 3), dtype=np.float32)})


def test_scan_8_with_shorter_sequences_is_refused():
    body = helper.make_graph([node("Add", ["s", "x_t"], ["s_next"])], "body",
                             [vi("s", (3,)), vi("x_t", (3,))], [vi("s_next", (3,))])
    model = make_model([node("Scan", ["lens", "s0", "xs"], ["s_last"], body=body,
                             num_scan_inputs=1)],
                       [("s0", (2, 3)), ("xs", (2, 4, 3))], ["s_last"],
                       initializers=[("lens", np.array([4, 2], np.int64))], opset=8)
    with pytest.raises(UnsupportedOpError, match="sequence_lens other than"):
        polyc.compile(model)
