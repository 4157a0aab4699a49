"""Graph clean-up (``polyc.frontend.cleanup``): each pass on small hand-built models.

Every test checks the structure (which nodes remain, the notes) and the numbers: the
cleaned graph, turned back into a model (``to_model``), run by onnxruntime against the
original model on seeded inputs; exact for structural passes, rtol 1e-4 / atol 1e-5
for batch-norm folding (it rounds the weights differently).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper

import polyc
from polyc.frontend.cleanup import (
    canonical_reshapes,
    cleanup,
    collapse_layout_chains,
    describe,
    fold_batch_norm,
    fold_shape_ops,
    remove_identities,
    to_model,
)
from polyc.frontend.load import load_model

from onnx_helpers import make_model, random_inputs, run_onnxruntime

BN_RTOL, BN_ATOL = 1e-4, 1e-5


def node(op, inputs, outputs=("y",), **attrs):
    return helper.make_node(op, list(inputs), list(outputs), name=f"{op.lower()}_{outputs[0]}",
                            **attrs)


def int64(name, values):
    return (name, np.asarray(values, dtype=np.int64))


def weight(name, shape, seed, low=-1.0):
    return (name, np.random.default_rng(seed).uniform(low, 1, shape).astype(np.float32))


def cleaned(model, *passes):
    """The loaded model after ``passes`` (all of ``cleanup`` if none are given)."""
    graph = load_model(model)
    for clean in passes or (cleanup,):
        graph = clean(graph)
    assert graph.outputs == tuple(o.name for o in model.graph.output)
    assert [t.name for t in graph.inputs] == [t.name for t in load_model(model).inputs]
    return graph


def op_types(graph) -> list[str]:
    return [n.op_type for n in graph.nodes]


def producer(graph, name):
    (found,) = [n for n in graph.nodes if name in n.output]
    return found


def assert_same_outputs(model, graph, seed: int, rtol: float = 0.0, atol: float = 0.0):
    """onnxruntime gives the same outputs for ``model`` and the cleaned ``graph``."""
    inputs = random_inputs(model, seed)
    expected = run_onnxruntime(model, inputs)
    actual = run_onnxruntime(to_model(graph), inputs)
    assert set(actual) == set(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(actual[name], value, rtol=rtol, atol=atol, err_msg=name)


def assert_polyc_matches(model, seed: int, rtol: float = 1e-5, atol: float = 1e-6):
    """The whole compiler (clean-up included) agrees with onnxruntime on the model."""
    inputs = random_inputs(model, seed)
    expected = run_onnxruntime(model, inputs)
    actual = polyc.compile(model).run(inputs)
    for name, value in expected.items():
        np.testing.assert_allclose(actual[name], value, rtol=rtol, atol=atol, err_msg=name)


# -- shape folding ----------------------------------------------------------------------

def shape_chain_model():
    """x[2, 3, 4] reshaped to [2, -1] by a target computed from its own shape."""
    nodes = [node("Shape", ["x"], ["s"]),
             node("Gather", ["s", "zero"], ["d0"], axis=0),
             node("Unsqueeze", ["d0", "axis0"], ["d0u"]),
             node("Concat", ["d0u", "minus1"], ["target"], axis=0),
             node("Reshape", ["x", "target"], ["y"])]
    return make_model(nodes, [("x", (2, 3, 4))], [("y", (2, 12))],
                      initializers=[int64("zero", 0), int64("axis0", [0]),
                                    int64("minus1", [-1])])


def test_shape_chain_folds_to_a_constant_reshape_target():
    model = shape_chain_model()
    graph = cleaned(model)
    assert op_types(graph) == ["Reshape"]
    reshape = graph.nodes[0]
    assert list(reshape.input[:1]) == ["x"]
    assert graph.constants[reshape.input[1]].tolist() == [2, -1]
    assert graph.notes == ("folded 1 Shape/Size node of static shapes into constants",
                           "folded 3 constant nodes", "dropped 6 unused constants")
    assert_same_outputs(model, graph, seed=1)
    assert_polyc_matches(model, seed=1)


@pytest.mark.parametrize("attrs,expected", [
    ({}, [2, 3, 4, 5]), ({"start": 1}, [3, 4, 5]), ({"start": -2}, [4, 5]),
    ({"end": -1}, [2, 3, 4]), ({"start": 1, "end": 3}, [3, 4]), ({"start": -9, "end": 9},
                                                                [2, 3, 4, 5]),
    ({"start": 3, "end": 1}, []),
])
def test_shape_15_start_and_end(attrs, expected):
    """Shape -> ConstantOfShape: the output becomes a constant of the sliced shape."""
    value = helper.make_tensor("v", TensorProto.FLOAT, [1], [1.5])
    nodes = [node("Shape", ["x"], ["s"], **attrs),
             node("ConstantOfShape", ["s"], ["y"], value=value)]
    model = make_model(nodes, [("x", (2, 3, 4, 5))], [("y", tuple(expected))], opset=15)
    assert fold_shape_ops(load_model(model)).constants["s"].tolist() == expected
    graph = cleaned(model)
    assert graph.nodes == () and graph.constants["y"].shape == tuple(expected)
    assert_same_outputs(model, graph, seed=2)


def test_size_and_range_fold():
    """Size -> Range -> Cast: y = x * [0, 1, .., 5] with the ramp a constant."""
    nodes = [node("Size", ["x"], ["n"]),
             node("Range", ["zero", "n", "one"], ["ramp"]),
             node("Cast", ["ramp"], ["rampf"], to=TensorProto.FLOAT),
             node("Reshape", ["rampf", "shape"], ["grid"]),
             node("Mul", ["x", "grid"], ["y"])]
    model = make_model(nodes, [("x", (2, 3))], [("y", (2, 3))],
                       initializers=[int64("zero", 0), int64("one", 1), int64("shape", [2, 3])])
    graph = cleaned(model)
    assert op_types(graph) == ["Mul"]
    assert graph.constants["grid"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert "folded 1 Shape/Size node of static shapes into constants" in graph.notes
    assert "folded 3 constant nodes" in graph.notes
    assert_same_outputs(model, graph, seed=3)


def test_folding_repeats_with_reinferred_shapes():
    """ONNX's data propagation stops at Div: the Shape of the first Reshape's output
    folds only in a second round, after shape inference ran on the folded graph."""
    nodes = [node("Shape", ["x"], ["s"]), node("Gather", ["s", "one"], ["d1"], axis=0),
             node("Div", ["d1", "two"], ["half"]), node("Unsqueeze", ["half", "axis0"], ["hu"]),
             node("Concat", ["minus1", "hu"], ["t"], axis=0), node("Reshape", ["x", "t"], ["r"]),
             node("Shape", ["r"], ["rs"]), node("Reshape", ["r", "rs"], ["r2"]),
             node("Relu", ["r2"], ["y"])]
    model = make_model(nodes, [("x", (4, 6))], [("y", (8, 3))],
                       initializers=[int64("one", 1), int64("two", 2), int64("axis0", [0]),
                                     int64("minus1", [-1])])
    assert load_model(model).value_shapes["rs"] == (None,)
    graph = cleaned(model)
    assert op_types(graph) == ["Reshape", "Relu"]
    assert graph.constants[graph.nodes[0].input[1]].tolist() == [8, 3]
    assert "folded 2 Shape/Size nodes of static shapes into constants in 2 rounds" \
        in graph.notes
    assert "merged 1 Reshape/Transpose node with the one before it" in graph.notes
    assert_same_outputs(model, graph, seed=4)


# -- Identity and Dropout -----------------------------------------------------------------

@pytest.mark.parametrize("attrs", [
    # the reference evaluator gives [1, 2, 2, 7] where onnxruntime gives [1, 2, 1, 6]
    {"ceil_mode": 1, "kernel_shape": [2, 2], "pads": [1, 0, 0, 1]},
    # every window skips the one pixel of each row: 0 by the reference evaluator, the
    # lowest float by onnxruntime (graph fuzzer seed 5504)
    {"kernel_shape": [1, 2], "pads": [0, 1, 0, 1], "dilations": [1, 2], "strides": [1, 2]},
])
def test_max_pool_of_constants_is_not_folded(attrs):
    """onnx's reference evaluator computes MaxPool otherwise than onnxruntime (found by
    the graph fuzzer: a wrong output shape, wrong values): polyc lowers it instead."""
    shape = (1, 2, 1, 6) if "ceil_mode" in attrs else (1, 2, 3, 1)  # as onnxruntime's output
    pool = node("MaxPool", ["w"], ["p"], **attrs)
    model = make_model([pool, node("Add", ["p", "x"])], [("x", list(shape))], ["y"],
                       initializers=[weight("w", shape, 7)], opset=17)
    graph = cleaned(model)
    assert "MaxPool" in op_types(graph)
    assert_polyc_matches(model, seed=3)


def test_a_fold_whose_shape_disagrees_with_inference_is_refused():
    """A reference result of another shape than shape inference gives is no fold."""
    from polyc.frontend.cleanup.constants import _check_shapes

    model = make_model([node("Relu", ["x"], ["y"])], [("x", [2, 3])], [("y", [2, 3])])
    _check_shapes(model, [np.zeros((2, 3), np.float32)])
    with pytest.raises(ValueError, match=r"gives shape \[3, 2\], shape inference \[2, 3\]"):
        _check_shapes(model, [np.zeros((3, 2), np.float32)])


def test_identity_in_the_middle_is_removed():
    nodes = [node("Identity", ["x"], ["i"]), node("Relu", ["i"], ["y"])]
    model = make_model(nodes, [("x", (3, 4))], [("y", (3, 4))])
    graph = cleaned(model, remove_identities)
    assert op_types(graph) == ["Relu"] and list(graph.nodes[0].input) == ["x"]
    assert graph.notes == ("removed 1 Identity node",)
    assert_same_outputs(model, graph, seed=5)


def test_identity_feeding_graph_outputs_keeps_their_names():
    """h -> Identity -> y1 renames Relu's output to y1; y1 -> Identity -> y2 stays (y1
    is an output itself); x -> Identity -> y3 stays (x is a graph input)."""
    nodes = [node("Relu", ["x"], ["h"]), node("Identity", ["h"], ["y1"]),
             node("Identity", ["h"], ["y2"]), node("Identity", ["x"], ["y3"]),
             node("Exp", ["h"], ["y4"])]
    model = make_model(nodes, [("x", (3, 4))], [(n, (3, 4)) for n in ("y1", "y2", "y3", "y4")])
    graph = cleaned(model, remove_identities)
    assert [(n.op_type, list(n.input), list(n.output)) for n in graph.nodes] == [
        ("Relu", ["x"], ["y1"]), ("Identity", ["y1"], ["y2"]), ("Identity", ["x"], ["y3"]),
        ("Exp", ["y1"], ["y4"])]
    assert graph.notes == ("removed 1 Identity node",)
    assert_same_outputs(model, graph, seed=6)
    assert_polyc_matches(model, seed=6)


def dropout_model(*, training=None, opset=13):
    """Dropout with its mask read: y = dropout(x) * float(mask) + x."""
    inputs = ["x", "ratio"] + (["training"] if training is not None else [])
    inits = [("ratio", np.array(0.3, np.float32))]
    if training is not None:
        inits.append(("training", np.array(training)))
    if opset < 12:
        inputs, inits = ["x"], []
    nodes = [node("Dropout", inputs, ["d", "mask"]),
             node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),
             node("Mul", ["d", "maskf"], ["dm"]), node("Add", ["dm", "x"], ["y"])]
    return make_model(nodes, [("x", (2, 5))], [("y", (2, 5))], initializers=inits,
                      opset=opset)


@pytest.mark.parametrize("training", [None, False])
def test_inference_dropout_with_a_read_mask(training):
    model = dropout_model(training=training)
    graph = cleaned(model)
    assert op_types(graph) == ["Mul", "Add"]
    assert list(graph.nodes[0].input) == ["x", "maskf"]
    assert graph.constants["maskf"].tolist() == [[1.0] * 5] * 2
    assert "the mask 'mask' of Dropout node 'dropout_d' became an all-true constant" \
        in graph.notes
    assert "removed 1 Dropout node" in graph.notes and "folded 1 constant node" in graph.notes
    assert_same_outputs(model, graph, seed=7)
    assert_polyc_matches(model, seed=7)


def test_dropout_10_is_removed_unless_its_mask_is_read():
    nodes = [node("Dropout", ["x"], ["d", "unread"]), node("Relu", ["d"], ["y"])]
    model = make_model(nodes, [("x", (2, 5))], [("y", (2, 5))], opset=11)
    graph = cleaned(model, remove_identities)
    assert [(n.op_type, list(n.input)) for n in graph.nodes] == [("Relu", ["x"])]
    assert_same_outputs(model, graph, seed=8)
    graph = cleaned(dropout_model(opset=11), remove_identities)
    assert op_types(graph) == ["Dropout", "Cast", "Mul", "Add"]
    assert graph.notes == ("kept Dropout node 'dropout_d': its mask 'mask' is read, and "
                           "Dropout-10 does not define it at inference",)


def test_training_dropout_stays():
    model = dropout_model(training=True)
    graph = cleaned(model, remove_identities)
    assert op_types(graph) == ["Dropout", "Cast", "Mul", "Add"]
    assert graph.notes == ("kept Dropout node 'dropout_d': training_mode is true",)


# -- batch-norm folding -------------------------------------------------------------------

def bn_inputs(channels: int, seed: int):
    names = [f"bn_{p}" for p in ("scale", "bias", "mean", "var")]
    inits = [weight(names[0], (channels,), seed), weight(names[1], (channels,), seed + 1),
             weight(names[2], (channels,), seed + 2), weight(names[3], (channels,), seed + 3,
                                                             low=0.1)]
    return names, inits


@pytest.mark.parametrize("group,bias", [(1, True), (1, False), (4, True)])
def test_batch_norm_folds_into_conv(group, bias):
    """Conv 4 -> 4 channels (group 4: depthwise), then BN: one Conv writing y."""
    names, inits = bn_inputs(4, seed=10)
    conv_inputs = ["x", "w"] + (["b"] if bias else [])
    inits += [weight("w", (4, 4 // group, 3, 3), 8)] + ([weight("b", (4,), 9)] if bias else [])
    nodes = [node("Conv", conv_inputs, ["c"], group=group, pads=[1, 1, 1, 1]),
             node("BatchNormalization", ["c", *names], ["y"], epsilon=1e-3)]
    model = make_model(nodes, [("x", (2, 4, 5, 5))], [("y", (2, 4, 5, 5))], initializers=inits)
    graph = cleaned(model)
    assert op_types(graph) == ["Conv"] and list(graph.nodes[0].output) == ["y"]
    assert graph.notes[0] == "folded 1 BatchNormalization node into the Conv/Gemm before it"
    assert all(value.dtype == np.float32 for value in graph.constants.values())
    assert_same_outputs(model, graph, seed=11, rtol=BN_RTOL, atol=BN_ATOL)


@pytest.mark.parametrize("trans_b,with_c", [(1, True), (0, False), (1, False)])
def test_batch_norm_folds_into_gemm(trans_b, with_c):
    names, inits = bn_inputs(6, seed=20)
    inits.append(weight("b", (6, 5) if trans_b else (5, 6), 12))
    gemm_inputs = ["x", "b"]
    if with_c:
        inits.append(weight("c", (6,), 13))
        gemm_inputs.append("c")
    nodes = [node("Gemm", gemm_inputs, ["g"], transB=trans_b, alpha=0.5, beta=2.0),
             node("BatchNormalization", ["g", *names], ["bn"]), node("Relu", ["bn"], ["y"])]
    model = make_model(nodes, [("x", (3, 5))], [("y", (3, 6))], initializers=inits)
    graph = cleaned(model, fold_batch_norm)
    assert op_types(graph) == ["Gemm", "Relu"] and list(graph.nodes[0].output) == ["bn"]
    assert graph.notes == ("folded 1 BatchNormalization node into the Conv/Gemm before it",)
    assert_same_outputs(model, graph, seed=14, rtol=BN_RTOL, atol=BN_ATOL)
    assert_polyc_matches(model, seed=14, rtol=BN_RTOL, atol=BN_ATOL)


def test_batch_norm_after_a_conv_output_read_twice_stays():
    names, inits = bn_inputs(2, seed=30)
    inits.append(weight("w", (2, 3, 1, 1), 31))
    nodes = [node("Conv", ["x", "w"], ["c"]),
             node("BatchNormalization", ["c", *names], ["bn"]),
             node("Add", ["bn", "c"], ["y"])]
    model = make_model(nodes, [("x", (1, 3, 4, 4))], [("y", (1, 2, 4, 4))], initializers=inits)
    graph = cleaned(model)
    assert op_types(graph) == ["Conv", "BatchNormalization", "Add"]
    assert not any(name.endswith("_bnfold") for name in graph.constants)
    assert "kept BatchNormalization node 'batchnormalization_bn': 'c' (Conv node " \
        "'conv_c') has other readers" in graph.notes
    assert_same_outputs(model, graph, seed=32)


def test_batch_norm_folding_leaves_shared_weights_alone():
    """Two Convs share w; each BN gets its own folded copy, and a BN reading a graph
    input stays."""
    names, inits = bn_inputs(2, seed=33)
    inits.append(weight("w", (2, 2, 1, 1), 34))
    nodes = [node("Conv", ["x", "w"], ["c1"]), node("BatchNormalization", ["c1", *names], ["b1"]),
             node("Conv", ["b1", "w"], ["c2"]), node("BatchNormalization", ["c2", *names], ["b2"]),
             node("BatchNormalization", ["x", *names], ["b3"]), node("Add", ["b2", "b3"], ["y"])]
    model = make_model(nodes, [("x", (1, 2, 3, 3))], [("y", (1, 2, 3, 3))], initializers=inits)
    graph = cleaned(model)
    assert op_types(graph) == ["Conv", "Conv", "BatchNormalization", "Add"]
    weights = [graph.nodes[k].input[1] for k in (0, 1)]
    assert weights == ["w_bnfold", "w_bnfold_1"] and "w" not in graph.constants
    assert graph.notes == (
        "kept BatchNormalization node 'batchnormalization_b3': its input 'x' is not computed "
        "by a Conv or Gemm", "folded 2 BatchNormalization nodes into the Conv/Gemm before it",
        "dropped 1 unused constant")
    assert_same_outputs(model, graph, seed=35, rtol=BN_RTOL, atol=BN_ATOL)


# -- layout: Flatten, Squeeze, Unsqueeze, Reshape and Transpose chains ----------------------

LAYOUT_CASES = [
    ("Flatten", (2, 3, 4), (6, 4), {"axis": 2}, 13, None),
    ("Squeeze", (1, 3, 1, 4), (3, 4), {}, 13, None),
    ("Squeeze", (1, 3, 1, 4), (1, 3, 4), {}, 13, [2]),
    ("Squeeze", (1, 3, 1, 4), (3, 1, 4), {"axes": [0]}, 11, None),
    ("Unsqueeze", (3, 4), (3, 1, 4, 1), {}, 13, [1, -1]),
    ("Unsqueeze", (3, 4), (1, 3, 4), {"axes": [0]}, 11, None),
]


@pytest.mark.parametrize("op,in_shape,out_shape,attrs,opset,axes", LAYOUT_CASES)
def test_flatten_squeeze_unsqueeze_become_reshape(op, in_shape, out_shape, attrs, opset, axes):
    inputs, inits = ["x"], []
    if axes is not None:
        inputs.append("axes")
        inits.append(int64("axes", axes))
    nodes = [node(op, inputs, ["v"], **attrs), node("Relu", ["v"], ["y"])]
    model = make_model(nodes, [("x", in_shape)], [("y", out_shape)], initializers=inits,
                       opset=opset)
    graph = cleaned(model)
    reshape, _ = graph.nodes
    assert op_types(graph) == ["Reshape", "Relu"] and reshape.name == f"{op.lower()}_v"
    assert graph.constants[reshape.input[1]].tolist() == list(out_shape)
    assert graph.notes[0] == "turned 1 Flatten/Squeeze/Unsqueeze node into Reshape"
    assert_same_outputs(model, graph, seed=40)
    if op != "Flatten":  # Squeeze and Unsqueeze compile only as Reshape
        assert_polyc_matches(model, seed=40)


def test_new_shape_constants_get_fresh_names():
    nodes = [node("Unsqueeze", ["x"], ["u"], axes=[0]), node("Relu", ["u"], ["y"])]
    model = make_model(nodes, [("x", (3,))], [("y", (1, 3))],
                       initializers=[("u_shape", np.ones(1, np.float32))], opset=11)
    graph = cleaned(model, canonical_reshapes)
    assert graph.nodes[0].input[1] == "u_shape_1"
    assert graph.constants["u_shape_1"].tolist() == [1, 3]
    assert graph.value_shapes["u_shape_1"] == (2,)


def test_reshape_chain_becomes_one_reshape():
    nodes = [node("Reshape", ["x", "s1"], ["r1"]), node("Reshape", ["r1", "s2"], ["r2"]),
             node("Relu", ["r2"], ["y"])]
    model = make_model(nodes, [("x", (2, 3, 4))], [("y", (4, 6))],
                       initializers=[int64("s1", [6, 4]), int64("s2", [4, -1])])
    graph = cleaned(model)
    assert op_types(graph) == ["Reshape", "Relu"]
    assert list(graph.nodes[0].input) == ["x", "s2"]
    assert graph.notes == ("merged 1 Reshape/Transpose node with the one before it",
                           "removed 1 dead node", "dropped 1 unused constant")
    assert_same_outputs(model, graph, seed=41)


def test_reshape_chain_with_a_copied_dim_gets_a_static_target():
    """[0, 2, 4] copies dim 0 of the inner result (3), not of x (4)."""
    nodes = [node("Reshape", ["x", "s1"], ["r1"]), node("Reshape", ["r1", "s2"], ["y"])]
    model = make_model(nodes, [("x", (4, 6))], [("y", (3, 2, 4))],
                       initializers=[int64("s1", [3, 8]), int64("s2", [0, 2, 4])])
    graph = cleaned(model)
    (reshape,) = graph.nodes
    assert reshape.input[0] == "x" and graph.constants[reshape.input[1]].tolist() == [3, 2, 4]
    assert_same_outputs(model, graph, seed=42)


def test_reshape_to_its_own_shape_is_removed_and_the_output_name_kept():
    nodes = [node("Relu", ["x"], ["h"]), node("Reshape", ["h", "s"], ["y"])]
    model = make_model(nodes, [("x", (2, 3))], [("y", (2, 3))],
                       initializers=[int64("s", [2, -1])])
    graph = cleaned(model)
    assert [(n.op_type, list(n.input), list(n.output)) for n in graph.nodes] == [
        ("Relu", ["x"], ["y"])]
    assert "removed 1 Reshape/Transpose node that changed nothing" in graph.notes
    assert_same_outputs(model, graph, seed=43)


def test_unsqueeze_then_squeeze_cancel():
    nodes = [node("Unsqueeze", ["x", "axes"], ["u"]), node("Squeeze", ["u", "axes"], ["s"]),
             node("Relu", ["s"], ["y"])]
    model = make_model(nodes, [("x", (3, 4))], [("y", (3, 4))],
                       initializers=[int64("axes", [1])])
    graph = cleaned(model)
    assert [(n.op_type, list(n.input)) for n in graph.nodes] == [("Relu", ["x"])]
    assert graph.notes[:3] == ("turned 2 Flatten/Squeeze/Unsqueeze nodes into Reshape",
                               "merged 1 Reshape/Transpose node with the one before it",
                               "removed 1 Reshape/Transpose node that changed nothing")
    assert_same_outputs(model, graph, seed=44)


@pytest.mark.parametrize("first,second", [((1, 2, 0), (2, 0, 1)), (None, None)])
def test_transpose_pair_that_cancels_is_removed(first, second):
    perms = [{"perm": list(p)} if p else {} for p in (first, second)]
    nodes = [node("Transpose", ["x"], ["t1"], **perms[0]),
             node("Transpose", ["t1"], ["t2"], **perms[1]), node("Relu", ["t2"], ["y"])]
    model = make_model(nodes, [("x", (2, 3, 4))], [("y", (2, 3, 4))])
    graph = cleaned(model)
    assert [(n.op_type, list(n.input)) for n in graph.nodes] == [("Relu", ["x"])]
    assert graph.notes == ("merged 1 Reshape/Transpose node with the one before it",
                           "removed 1 Reshape/Transpose node that changed nothing",
                           "removed 1 dead node")
    assert_same_outputs(model, graph, seed=45)


def test_transpose_chain_composes_perms():
    nodes = [node("Transpose", ["x"], ["t1"], perm=[1, 0, 2]),
             node("Transpose", ["t1"], ["t2"], perm=[0, 2, 1]),
             node("Transpose", ["t2"], ["y"], perm=[2, 1, 0])]
    model = make_model(nodes, [("x", (2, 3, 4))], [("y", (2, 4, 3))])
    graph = cleaned(model, collapse_layout_chains)
    last = graph.nodes[-1]
    assert list(last.input) == ["x"]  # perms composed: [1, 2, 0], then [0, 2, 1]
    assert list(helper.get_attribute_value(last.attribute[0])) == [0, 2, 1]
    assert graph.notes == ("merged 2 Reshape/Transpose nodes with the one before it",)
    assert_same_outputs(model, graph, seed=46)


# -- describe, to_model and the command line -----------------------------------------------

def test_describe_lists_inputs_constants_nodes_and_outputs():
    graph = load_model(shape_chain_model())
    assert describe(graph).splitlines() == [
        "graph 'test' (opset 13): 1 input, 3 constants, 5 nodes",
        "  input x: float32[2, 3, 4]",
        "  constant zero: int64[] = [0]",
        "  constant axis0: int64[1] = [0]",
        "  constant minus1: int64[1] = [-1]",
        "  Shape shape_s: x[2, 3, 4] -> s[3]",
        "  Gather gather_d0: s[3], zero -> d0[]",
        "  Unsqueeze unsqueeze_d0u: d0[], axis0 -> d0u[1]",
        "  Concat concat_target: d0u[1], minus1 -> target[2]",
        "  Reshape reshape_y: x[2, 3, 4], target[2] -> y[2, 12]",
        "  output y[2, 12]",
    ]


def test_cli_inspect_graph(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(shape_chain_model().SerializeToString())
    done = subprocess.run([sys.executable, "-m", "polyc.cli", "inspect", "--graph", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    sections = done.stdout.split("\n\n")
    assert [s.splitlines()[0] for s in sections] == [
        "== ONNX GRAPH ==", "== CLEAN-UP ==", "== CLEANED ONNX GRAPH =="]
    assert "  Shape shape_s: x[2, 3, 4] -> s[3]" in sections[0]
    assert sections[1].splitlines()[1:] == list(cleanup(load_model(path)).notes)
    assert sections[2].splitlines()[2:] == [
        "  input x: float32[2, 3, 4]",
        "  constant target: int64[2] = [2, -1]",
        "  Reshape reshape_y: x[2, 3, 4], target -> y[2, 12]",
        "  output y[2, 12]"]


def test_cli_inspect_graph_needs_an_onnx_model(tmp_path):
    done = subprocess.run([sys.executable, "-m", "polyc.cli", "inspect", "--graph",
                           str(tmp_path / "model.so")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr.startswith("polyc: error: --graph shows an ONNX model's graph")
