"""Producer inlining (polyc.fusion.inline): which temporaries disappear, and that the
compiled models still match onnxruntime."""

from __future__ import annotations

import islpy as isl
import numpy as np
import pytest
from onnx import helper

import polyc
from polyc.errors import PolycError
from polyc.frontend import import_model
from polyc.frontend.core import Call, Graph, Ix, Map, Read, TensorInfo
from polyc.fusion.inline import inline_temporaries
from polyc.scop.build import build_scop
from polyc.scop.dependences import compute_dependences
from polyc.scop.model import Load

from onnx_helpers import ATOL, RTOL, make_model, random_inputs, run_onnxruntime


def chain():
    """((x * y + x) - y) -> relu -> tanh: four temporaries, each read once per element."""
    nodes = [helper.make_node("Mul", ["x", "y"], ["t0"]),
             helper.make_node("Add", ["t0", "x"], ["t1"]),
             helper.make_node("Sub", ["t1", "y"], ["t2"]),
             helper.make_node("Relu", ["t2"], ["t3"]),
             helper.make_node("Tanh", ["t3"], ["z"])]
    return make_model(nodes, [("x", [6, 7]), ("y", [6, 7])], ["z"])


def scop_of(model):
    return build_scop(import_model(model))


def check(model, seed=0, **options):
    inputs = random_inputs(model, seed=seed)
    compiled = polyc.compile(model, **options)
    expected = run_onnxruntime(model, inputs)
    for name, value in compiled.run(inputs).items():
        np.testing.assert_allclose(value, expected[name], rtol=RTOL, atol=ATOL, err_msg=name)
    return compiled


def test_an_elementwise_chain_becomes_one_statement():
    scop, notes = inline_temporaries(scop_of(chain()))
    assert notes == ("inline: S0_mul into S1_add (t0)", "inline: S1_add into S2_sub (t1)",
                     "inline: S2_sub into S3_relu (t2)", "inline: S3_relu into S4_tanh (t3)")
    (statement,) = scop.statements
    assert statement.name == "S4_tanh"
    assert [r.array for r in statement.reads] == ["x", "y", "x", "y"]
    assert str(statement.body) == "tanh(relu(sub(add(mul(R0, R1), R2), R3)))"
    assert {a.kind for a in scop.arrays} == {"input", "output"}
    for read in statement.reads:  # z[i, j] reads x[i, j] and y[i, j]
        expected = statement.write.relation.set_tuple_name(isl.dim_type.out, read.array)
        assert read.relation.is_equal(expected)
    assert scop.order.get_domain().is_equal(scop.domain)
    compiled = check(chain())
    assert compiled.compilation.plan.scratch_bytes == 0
    assert str(compiled.compilation.groups).startswith("inline: S0_mul into S1_add (t0)")


def test_fusion_policy_none_inlines_nothing():
    scop, notes = inline_temporaries(scop_of(chain()), policy="none")
    assert notes == () and len(scop.statements) == 5
    compiled = check(chain(), fuse="none")
    plan = compiled.compilation.plan
    assert len(plan.scratch) == 4 and plan.unshared_bytes > 0  # (each in place, into z)
    with pytest.raises(PolycError, match="unknown fusion policy"):
        inline_temporaries(scop_of(chain()), policy="most")


def test_a_broadcast_read_is_not_inlined():
    """relu(b) is read once per row of x: inlining would recompute it for every row."""
    nodes = [helper.make_node("Relu", ["b"], ["rb"]),
             helper.make_node("Add", ["x", "rb"], ["z"])]
    model = make_model(nodes, [("x", [5, 8]), ("b", [8])], ["z"])
    scop, notes = inline_temporaries(scop_of(model))
    assert notes == () and len(scop.statements) == 2
    check(model)


def test_a_temporary_with_two_readers_is_kept():
    nodes = [helper.make_node("Exp", ["x"], ["e"]),
             helper.make_node("Add", ["e", "x"], ["a"]),
             helper.make_node("Mul", ["e", "x"], ["m"]),
             helper.make_node("Sub", ["a", "m"], ["z"])]
    model = make_model(nodes, [("x", [4, 9])], ["z"])
    scop, notes = inline_temporaries(scop_of(model))
    # once a and m are inlined, S3 reads e[i, j] twice: the same element, so e goes too
    assert notes == ("inline: S1_add into S3_sub (a)", "inline: S2_mul into S3_sub (m)",
                     "inline: S0_exp into S3_sub (e)")
    assert [s.name for s in scop.statements] == ["S3_sub"]
    check(model)


def test_reads_of_two_elements_are_not_inlined():
    """z[i] = e[i] + e[i + 1] would compute every exp twice."""
    i = Ix.var(0)
    tensors = {t.name: t for t in [TensorInfo("x", (8,)), TensorInfo("e", (8,)),
                                   TensorInfo("z", (7,))]}
    ops = (Map("e", (8,), Call("exp", (Read("x", (i,)),)), label="exp"),
           Map("z", (7,), Call("add", (Read("e", (i,)), Read("e", (Ix(((0, 1),), 1),)))),
               label="add"))
    graph = Graph("shifted", (tensors["x"],), (tensors["z"],), tensors, {}, ops, 17)
    scop, notes = inline_temporaries(build_scop(graph))
    assert notes == () and [s.name for s in scop.statements] == ["S0_exp", "S1_add"]


def test_a_map_is_inlined_into_a_reduction_but_a_reduction_is_never_a_producer():
    nodes = [helper.make_node("Exp", ["x"], ["e"]),
             helper.make_node("ReduceSum", ["e", "axes"], ["s"], keepdims=0),
             helper.make_node("Relu", ["s"], ["z"])]
    model = make_model(nodes, [("x", [6, 10])], ["z"],
                       initializers=[("axes", np.array([1], np.int64))])
    scop, notes = inline_temporaries(scop_of(model))
    assert notes == ("inline: S0_exp into S2_reduce_sum_update (e)",)
    update = scop.statement("S2_reduce_sum_update")
    assert [r.array for r in update.reads] == ["s", "x"]
    assert isinstance(update.body.args[0], Load)
    check(model)


def test_dependences_after_inlining_are_exact():
    scop = compute_dependences(inline_temporaries(scop_of(chain()))[0])
    assert scop.dependences.all.is_empty()  # one statement, each element written once
    scop = compute_dependences(scop_of(chain()))
    assert not scop.dependences.raw.is_empty()


@pytest.mark.parametrize("fuse", ["smart", "max"])
def test_mixed_models_match_onnxruntime(fuse):
    """Inlining next to contractions, transposes and broadcasts."""
    rng = np.random.default_rng(4)
    w = rng.standard_normal((7, 5)).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]),
             helper.make_node("Sigmoid", ["xt"], ["s"]),
             helper.make_node("MatMul", ["s", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Mul", ["r", "r"], ["z"])]
    model = make_model(nodes, [("x", [7, 9]), ("b", [5])], ["z"], initializers=[("w", w)])
    compiled = check(model, fuse=fuse)
    groups = str(compiled.compilation.groups)
    assert "inline: S3_add into S4_relu (a)\ninline: S4_relu into S5_mul (r)\n" in groups
    assert "S0_sigmoid" in groups  # read by the matmul once per column: kept


def test_a_producer_read_twice_is_inlined_once():
    """SiLU of a padded 5x5 depthwise conv, ``c * sigmoid(c)``: the consumer reads the
    window's 25 taps once (one subtree for both reads of ``c``, which codegen emits
    once), not twice; results match onnxruntime."""
    rng = np.random.default_rng(0)
    weights = [("w", rng.standard_normal((8, 1, 5, 5)).astype(np.float32)),
               ("b", rng.standard_normal(8).astype(np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=8, pads=[2, 2, 2, 2]),
             helper.make_node("Sigmoid", ["c"], ["g"]),
             helper.make_node("Mul", ["c", "g"], ["y"])]
    model = make_model(nodes, [("x", [1, 8, 9, 11])], ["y"], initializers=weights)
    scop, notes = inline_temporaries(scop_of(model))
    (statement,) = scop.statements
    assert [a.kind for a in scop.arrays if a.name in ("c", "g")] == []
    assert sum(r.array == "x" for r in statement.reads) == 25
    assert statement.body.fn == "mul"
    first, second = statement.body.args
    assert first is second.args[0]  # c and sigmoid's argument: the same subtree
    check(model)


def wide_sum(perm):
    """Sum of 9 inputs (a producer of 9 reads), then Relu over it read in ``perm`` order
    (a Transpose, a View, read by the Relu)."""
    names = [f"x{k}" for k in range(9)]
    nodes = [helper.make_node("Sum", names, ["s"]),
             helper.make_node("Transpose", ["s"], ["t"], perm=perm),
             helper.make_node("Relu", ["t"], ["y"])]
    return make_model(nodes, [(n, [4, 5, 32]) for n in names], ["y"])


@pytest.mark.parametrize("perm, inlined", [([0, 1, 2], True), ([0, 2, 1], False),
                                           ([2, 0, 1], False)])
def test_a_wide_producer_is_not_inlined_into_a_transposing_reader(perm, inlined):
    """A producer of more than 8 reads is inlined into a consumer that walks it in its
    own order, not into one whose innermost loop moves another of its dims (its sum would
    then run strided); results match onnxruntime either way."""
    scop, notes = inline_temporaries(scop_of(wide_sum(perm)))
    assert bool(notes) == inlined
    assert len(scop.statements) == (1 if inlined else 2)
    check(wide_sum(perm))
