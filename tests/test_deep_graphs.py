"""Deep and wide graphs compile without recursion proportional to their size: a chain
of elementwise ops is inlined into bodies of bounded depth (``fusion.inline.MAX_DEPTH``)
and a Concat of many parts is a tree of Concats of at most ``CONCAT_PARTS`` each. Both
had overflowed Python's stack (RecursionError at 250 chained ops, at 300 parts). An
unfused chain is written in place op after op in time linear in its length."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import polyc
from polyc.frontend import import_model
from polyc.frontend.core import reads
from polyc.frontend.ops.slicing import CONCAT_PARTS
from polyc.fusion.inline import MAX_DEPTH, body_depth

from onnx_helpers import run_onnxruntime


def _model(nodes, x_shape, y_shape, initializers=()):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
                              list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def chain(n: int) -> onnx.ModelProto:
    """x -> Add c -> Mul c -> Relu -> Add c ... (n ops) -> y, over [64, 64]."""
    nodes, previous = [], "x"
    for k in range(n):
        op = ("Add", "Mul", "Relu")[k % 3]
        out = "y" if k == n - 1 else f"t{k}"
        nodes.append(helper.make_node(op, [previous, "c"] if op != "Relu" else [previous],
                                      [out]))
        previous = out
    c = onnx.numpy_helper.from_array(np.array([0.999], np.float32), "c")
    return _model(nodes, [64, 64], [64, 64], [c])


def wide_concat(n: int) -> onnx.ModelProto:
    """n branches of x [2, 8] (Relu or Neg) concatenated along axis 0."""
    nodes = [helper.make_node("Neg" if k % 2 else "Relu", ["x"], [f"b{k}"]) for k in range(n)]
    nodes.append(helper.make_node("Concat", [f"b{k}" for k in range(n)], ["y"], axis=0))
    return _model(nodes, [2, 8], [2 * n, 8])


@pytest.mark.parametrize("n", [300, 1000, pytest.param(10000, marks=pytest.mark.slow)])
def test_a_long_chain_of_elementwise_ops(n):
    model = chain(n)
    compiled = polyc.compile(model)
    statements = compiled.compilation.scop.statements
    assert all(body_depth(s.body) <= MAX_DEPTH for s in statements)
    assert len(statements) < n / 10  # still inlined, in bounded pieces
    x = np.random.default_rng(1).standard_normal((64, 64), dtype=np.float32)
    np.testing.assert_allclose(compiled.run({"x": x})["y"], run_onnxruntime(model, {"x": x})["y"],
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n, threads", [(200, 1), (200, 2),
                                        pytest.param(2000, 1, marks=pytest.mark.slow)])
def test_a_long_chain_unfused_runs_in_one_memory(n, threads):
    """With ``fuse="none"`` each op is a loop nest; each writes in place into the memory
    of the one before (scratch of one tensor). Checking that was quadratic in the chain
    (every earlier array's accesses at each op: 2000 ops ran past 10 minutes); each op
    now checks the accesses of the array it overwrites only."""
    model = chain(n)
    compiled = polyc.compile(model, fuse="none", threads=threads)
    compilation = compiled.compilation
    assert len(compilation.scop.statements) == n
    assert len(compilation.plan.in_place) >= n - 2
    assert compilation.plan.scratch_bytes <= 64 * 64 * 4
    x = np.random.default_rng(3).standard_normal((64, 64), dtype=np.float32)
    np.testing.assert_allclose(compiled.run({"x": x})["y"], run_onnxruntime(model, {"x": x})["y"],
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", [300, pytest.param(2000, marks=pytest.mark.slow)])
def test_a_concat_of_many_parts(n):
    model = wide_concat(n)
    concats = [op for op in import_model(model).ops if op.label == "concat"]
    assert all(len(reads(op.expr)) <= CONCAT_PARTS for op in concats)
    assert len(concats) > n / CONCAT_PARTS
    x = np.random.default_rng(2).standard_normal((2, 8), dtype=np.float32)
    parts = [-x if k % 2 else np.maximum(x, 0) for k in range(n)]
    np.testing.assert_array_equal(polyc.compile(model).run({"x": x})["y"],
                                  np.concatenate(parts, axis=0))
