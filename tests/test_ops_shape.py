"""Shape and data-movement ops (Squeeze, Unsqueeze, Slice, Split, Concat, Pad, Tile,
Expand, DepthToSpace, SpaceToDepth, ConstantOfShape, Gather), the reductions, and the
transformer family (Softmax, LogSoftmax, Hardmax, LayerNormalization), compiled by polyc
and compared with onnxruntime (with onnx's reference evaluator for opsets onnxruntime
does not know yet) on seeded inputs; the reference interpreter of the core graph too.

Tolerances: rtol 1e-4, atol 1e-5. Each case runs under one of the compile options in
``OPTIONS`` (cycled), so the defaults, ``fuse="none"`` and ``tile=False`` all appear.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import polyc
from polyc.errors import UnsupportedOpError
from polyc.frontend import import_model
from polyc.frontend.core import Lookup, Map, Reduce
from polyc.frontend.load import load_model
from polyc.frontend.lower import lower

from onnx_helpers import make_model, random_inputs, run_onnxruntime, run_polyc, run_reference

RTOL, ATOL = 1e-4, 1e-5
OPTIONS = [{}, {"fuse": "none"}, {"tile": False}]
_next_options = itertools.cycle(OPTIONS)
ORT_MAX_OPSET = 26  # onnxruntime 1.31 loads models up to this opset
INT64_MAX = 2**63 - 1


def node(op, inputs, outputs=("y",), **attrs):
    return helper.make_node(op, list(inputs), list(outputs), **attrs)


def int64(name, values):
    return (name, np.asarray(values, dtype=np.int64))


def expected_outputs(model, inputs) -> dict:
    opset = model.opset_import[0].version
    if opset <= ORT_MAX_OPSET:
        return run_onnxruntime(model, inputs)
    names = [o.name for o in model.graph.output]
    return dict(zip(names, ReferenceEvaluator(model).run(None, dict(inputs))))


def check(model, *, seed=0, inputs=None, options=None, exact=False) -> dict:
    """polyc (with ``options``, else the next of OPTIONS) and the core graph's reference
    interpreter against onnxruntime; bit-exact with ``exact``."""
    inputs = random_inputs(model, seed) if inputs is None else inputs
    options = next(_next_options) if options is None else options
    expected = expected_outputs(model, inputs)
    actual = run_polyc(model, inputs, **options)
    reference = run_reference(model, inputs)
    assert set(actual) == set(expected) == set(reference)
    for name, value in expected.items():
        for got in (actual[name], reference[name]):
            assert got.shape == value.shape, name
            if exact:
                np.testing.assert_array_equal(got.view(np.uint32),
                                              value.astype(np.float32).view(np.uint32))
            else:
                np.testing.assert_allclose(got, value, rtol=RTOL, atol=ATOL, err_msg=name)
    return actual


def one_op(op, x_shape, opset, *, ints=(), extra_inputs=(), outputs=("y",), check=True,
           **attrs):
    """A model of one ``op`` node on input ``x``; ``ints`` are int64 initializer inputs
    (name, values), None for an omitted optional input."""
    inputs, initializers = ["x", *[i[0] for i in extra_inputs]], []
    for spec in ints:
        if spec is None:
            inputs.append("")
            continue
        inputs.append(spec[0])
        initializers.append(int64(*spec))
    graph_inputs = [("x", x_shape), *extra_inputs]
    return make_model([node(op, inputs, outputs, **attrs)], graph_inputs, list(outputs),
                      initializers=initializers, opset=opset, check=check)


# -- Squeeze, Unsqueeze ---------------------------------------------------------------

@pytest.mark.parametrize("axes", [None, [0], [-1], [0, 2]])
@pytest.mark.parametrize("opset", [11, 13, 21])
def test_squeeze(axes, opset):
    if opset < 13:
        model = one_op("Squeeze", (1, 3, 1, 1), opset, **({} if axes is None else
                                                           {"axes": axes}))
    else:
        model = one_op("Squeeze", (1, 3, 1, 1), opset,
                       ints=[] if axes is None else [("axes", axes)])
    check(model)


@pytest.mark.parametrize("axes", [[0], [-1], [1, 3], [0, -1], [4, 0, 2]])
@pytest.mark.parametrize("opset", [11, 13, 24])
def test_unsqueeze(axes, opset):
    if opset < 13:
        model = one_op("Unsqueeze", (3, 2), opset, axes=axes)
    else:
        model = one_op("Unsqueeze", (3, 2), opset, ints=[("axes", axes)])
    check(model)


def test_views_feed_later_ops():
    nodes = [node("Unsqueeze", ["x", "axes"], ["u"]), node("Relu", ["u"], ["r"]),
             node("Squeeze", ["r", "axes"], ["y"])]
    model = make_model(nodes, [("x", (3, 4))], ["y"], initializers=[int64("axes", [1])])
    check(model)


# -- Slice ----------------------------------------------------------------------------

SLICE_CASES = [
    ([1], [4], [0], None),
    ([0, 1], [5, -1], None, None),                    # axes omitted
    ([4], [-10], [0], [-1]),                          # negative step down to the start
    ([-1, 5], [-100, 0], [1, 2], [-2, -1]),           # negative steps, clamped start
    ([0, 0], [INT64_MAX, 3], [-1, -2], [2, 3]),       # steps > 1, end at "infinity"
    ([10], [20], [1], [1]),                           # start past the end: empty
    ([-INT64_MAX], [INT64_MAX], [2], [1]),            # the whole axis: an identity
    ([3], [1], [0], [1]),                             # start > end, positive step
]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICE_CASES)
@pytest.mark.parametrize("opset", [11, 13])
def test_slice(starts, ends, axes, steps, opset):
    ints = [("starts", starts), ("ends", ends)]
    if axes is not None or steps is not None:
        ints.append(None if axes is None else ("axes", axes))
    if steps is not None:
        ints.append(("steps", steps))
    check(one_op("Slice", (5, 6, 4), opset, ints=ints))


# -- Split ----------------------------------------------------------------------------

def _split_model(opset, shape, axis, split=None, num_outputs=None, outputs=3):
    names = [f"y{k}" for k in range(outputs)]
    attrs = {"axis": axis}
    ints = []
    if split is not None and opset < 13:
        attrs["split"] = split
    elif split is not None:
        ints.append(("split", split))
    if num_outputs is not None:
        attrs["num_outputs"] = num_outputs
    return one_op("Split", shape, opset, ints=ints, outputs=names, **attrs)


@pytest.mark.parametrize("opset,shape,axis,split,num_outputs", [
    (11, (4, 7), 1, [2, 4, 1], None),
    (11, (6, 2), 0, [1, 2, 3], None),
    (13, (3, 4, 5), -1, [1, 1, 3], None),
    (13, (3, 4, 5), 1, [0, 4, 0], None),                # empty parts
    (18, (4, 7), 1, None, 3),                          # 3, 3, 1
    (18, (6, 2), -2, None, 3),                         # 2, 2, 2
    (18, (3, 5), 1, [2, 2, 1], None),
])
def test_split(opset, shape, axis, split, num_outputs):
    check(_split_model(opset, shape, axis, split, num_outputs))


@pytest.mark.parametrize("opset", [11, 13])
def test_split_into_equal_parts_by_the_output_count(opset):
    check(_split_model(opset, (6, 2), 0, outputs=3))  # uneven splits fail ONNX's checks


# -- Concat ---------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("opset", [11, 13])
def test_concat_of_three_inputs(axis, opset):
    base = [2, 3, 4]
    shapes = []
    for size in (2, 1, 3):
        shape = list(base)
        shape[axis] = size
        shapes.append(tuple(shape))
    names = ["x", "a", "b"]
    model = make_model([node("Concat", names, axis=axis)], list(zip(names, shapes)), ["y"],
                       opset=opset)
    check(model)


def test_concat_is_exact_for_signed_zeros_infinities_and_nan():
    model = make_model([node("Concat", ["x", "a", "b"], axis=1)],
                       [("x", (2, 2)), ("a", (2, 1)), ("b", (2, 3))], ["y"])
    values = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, -0.0, 1.5, -0.0, 0.0, 2.0,
                       -np.inf, -0.0], np.float32)
    inputs = {"x": values[:4].reshape(2, 2), "a": values[4:6].reshape(2, 1),
              "b": values[6:].reshape(2, 3)}
    expected = np.concatenate([inputs["x"], inputs["a"], inputs["b"]], axis=1)
    for options in OPTIONS:
        got = run_polyc(model, inputs, **options)["y"]
        np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_concat_with_an_empty_part_and_a_weight():
    weight = ("w", np.arange(6, dtype=np.float32).reshape(2, 3))
    model = make_model([node("Concat", ["x", "e", "w"], axis=1)],
                       [("x", (2, 2)), ("e", (2, 0))], ["y"], initializers=[weight])
    check(model, options={"fuse": "none"})


# -- Pad ------------------------------------------------------------------------------

PAD_CASES = [
    ("constant", [1, 2, 0, 1], None),
    ("constant", [0, 0, 2, 3], 1.5),
    ("edge", [2, 1, 1, 2], None),
    ("reflect", [2, 3, 1, 3], None),
    ("constant", [-1, 2, 1, -2], None),                # negative pads crop
    ("edge", [-1, 0, 2, -1], None),
    ("reflect", [0, -2, 3, 1], None),
    ("constant", [-1, 0, 0, -1], None),                # cropping only
]


@pytest.mark.parametrize("mode,pads,value", PAD_CASES)
@pytest.mark.parametrize("opset", [11, 13, 19])
def test_pad(mode, pads, value, opset):
    ints = [("pads", pads)]
    initializers, inputs = [], ["x", "pads"]
    if value is not None:
        initializers.append(("cv", np.array(value, np.float32)))
        inputs.append("cv")
    model = make_model([node("Pad", inputs, mode=mode)], [("x", (4, 5))], ["y"],
                       initializers=[int64(*ints[0]), *initializers], opset=opset)
    check(model)


@pytest.mark.parametrize("shape,axes", [
    ((3, 4), None),         # crop by an odd and an even amount
    ((8, 11), None),        # pad by an odd and an even amount
    ((2, 9), None),         # crop one axis, pad the other
    ((4,), [-1]),           # one axis
    ((9, 2), [1, 0]),       # axes out of order
])
def test_center_crop_pad(shape, axes):
    attrs = {} if axes is None else {"axes": axes}
    model = make_model([node("CenterCropPad", ["x", "shape"], **attrs)], [("x", (6, 7))],
                       ["y"], initializers=[int64("shape", shape)], opset=18)
    check(model, exact=True)


def test_pad_with_a_constant_value_computed_at_run_time():
    model = make_model([node("Pad", ["x", "pads", "cv"], mode="constant")],
                       [("x", (2, 3, 2)), ("cv", ())], ["y"],
                       initializers=[int64("pads", [1, 0, 2, 0, 3, 1])])
    check(model)


@pytest.mark.parametrize("axes,pads", [([1], [2, 1]), ([-1, 0], [1, 0, 2, 1])])
def test_pad_over_axes(axes, pads):
    model = make_model([node("Pad", ["x", "pads", "", "axes"], mode="reflect")],
                       [("x", (3, 4))], ["y"],
                       initializers=[int64("pads", pads), int64("axes", axes)], opset=18)
    check(model)


def test_pad_wrap_mode_and_too_wide_reflections_are_unsupported():
    pads = [int64("pads", [1, 1, 1, 1])]
    wrap = make_model([node("Pad", ["x", "pads"], mode="wrap")], [("x", (3, 4))], ["y"],
                      initializers=pads, opset=19)
    with pytest.raises(UnsupportedOpError, match="mode='wrap'"):
        import_model(wrap)
    wide = make_model([node("Pad", ["x", "pads"], mode="reflect")], [("x", (2, 4))], ["y"],
                      initializers=[int64("pads", [2, 0, 0, 0])])
    with pytest.raises(UnsupportedOpError, match="reflect pads 2, 0 on axis 0"):
        import_model(wide)


# -- Tile, Expand ---------------------------------------------------------------------

@pytest.mark.parametrize("shape,repeats", [
    ((2, 3), [2, 3]), ((2, 3, 2), [1, 2, 1]), ((3,), [1]), ((2, 2), [0, 2]),
    ((1, 3), [4, 1]),
])
@pytest.mark.parametrize("opset", [11, 13])
def test_tile(shape, repeats, opset):
    check(one_op("Tile", shape, opset, ints=[("repeats", repeats)]))


@pytest.mark.parametrize("shape,to", [
    ((3, 1), [2, 3, 4]), ((3, 4), [1]), ((4,), [3, 1]), ((1, 1), [2, 1, 5]),
])
@pytest.mark.parametrize("opset", [11, 13])
def test_expand(shape, to, opset):
    check(one_op("Expand", shape, opset, ints=[("shape", to)]))


# -- DepthToSpace, SpaceToDepth -------------------------------------------------------

@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("opset", [11, 13, 28])
def test_depth_to_space(mode, opset):
    check(one_op("DepthToSpace", (2, 8, 2, 3), opset, blocksize=2, mode=mode))


@pytest.mark.parametrize("opset,mode", [(11, None), (13, None), (28, "DCR"), (28, "CRD")])
def test_space_to_depth(opset, mode):
    attrs = {} if mode is None else {"mode": mode}
    check(one_op("SpaceToDepth", (1, 2, 4, 6), opset, blocksize=2, **attrs))


# -- ConstantOfShape, Shape, Size, Range ----------------------------------------------

def test_constant_of_shape_reaching_lowering_is_a_map():
    """Clean-up folds ConstantOfShape; lowered directly (no clean-up) it is a Map."""
    value = helper.make_tensor("value", TensorProto.FLOAT, [1], [2.5])
    nodes = [node("ConstantOfShape", ["shape"], ["c"], value=value),
             node("Add", ["x", "c"])]
    model = make_model(nodes, [("x", (2, 3))], ["y"], initializers=[int64("shape", [2, 3])])
    graph = lower(load_model(model))
    assert [op.label for op in graph.ops] == ["constant_of_shape", "add"]
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(polyc.compile(graph).run({"x": x})["y"], x + 2.5)


def _reshaped_by(nodes, x_shape, y_shape, **initializers):
    """``y = Reshape(x, s)``, ``s`` computed by ``nodes``; lowered without clean-up."""
    model = make_model([*nodes, node("Reshape", ["x", "s"])], [("x", x_shape)],
                       [("y", y_shape)], check=False,
                       initializers=[int64(k, v) for k, v in initializers.items()])
    return lambda: lower(load_model(model))


def test_a_computed_shape_is_refused():
    value = helper.make_tensor("value", TensorProto.INT64, [1], [3])
    lowering = _reshaped_by([node("ConstantOfShape", ["n"], ["s"], value=value)], (3, 3),
                            (3, 3), n=[2])
    with pytest.raises(UnsupportedOpError, match="'shape' must be a constant"):
        lowering()


@pytest.mark.parametrize("nodes,message", [
    ([node("Shape", ["x"], ["s"])], r"value \[6\] is an int64 tensor"),
    ([node("Size", ["x"], ["n"]), node("Unsqueeze", ["n", "zero"], ["s"])],
     "value 6 is an int64 scalar"),
    ([node("ArgMax", ["x"], ["s"], keepdims=1)], "'shape' must be a constant"),
    ([node("ArgMin", ["x"], ["s"], keepdims=1)], "'shape' must be a constant"),
])
def test_ops_with_integer_results_are_refused(nodes, message):
    with pytest.raises(UnsupportedOpError, match=message):
        _reshaped_by(nodes, (6,), (6,), zero=[0])()


# -- Gather ---------------------------------------------------------------------------

GATHER_CASES = [
    ((5, 3), 0, 2, ()),                    # a scalar index: the rank drops
    ((5, 3), 1, -1, ()),
    ((5, 3, 2), 1, [0, 2], (2,)),
    ((6, 3), 0, [4, 2, 0], (3,)),          # a negative step
    ((6, 3), 0, [-1, -2], (2,)),           # negative indices
    ((4, 6), 1, [[0, 1], [2, 3]], (2, 2)),  # affine in 2-D
    ((4, 6), -1, [[0, 3], [1, 4]], (2, 2)),
    ((5, 4), 0, [3, 0, 0, 2, 4], (5,)),    # not affine: runs, concatenated
    ((5, 4, 2), 1, [[3, 1], [1, 2]], (2, 2)),
]


@pytest.mark.parametrize("shape,axis,indices,ishape", GATHER_CASES)
@pytest.mark.parametrize("opset", [11, 13])
def test_gather_with_constant_indices(shape, axis, indices, ishape, opset):
    idx = ("idx", np.asarray(indices, np.int64).reshape(ishape))
    model = make_model([node("Gather", ["x", "idx"], axis=axis)], [("x", shape)], ["y"],
                       initializers=[idx], opset=opset)
    check(model)


def test_gather_of_an_arithmetic_progression_is_one_affine_read():
    model = make_model([node("Gather", ["x", "idx"], axis=0)], [("x", (9, 2))], ["y"],
                       initializers=[int64("idx", [1, 4, 7])])
    (op,) = import_model(model).ops
    assert isinstance(op, Map) and str(op.expr) == "x[3*i0 + 1, i1]"


def test_gather_with_scattered_indices_reads_them_at_run_time():
    idx = np.random.default_rng(0).permutation(100).astype(np.int64)
    model = make_model([node("Gather", ["x", "idx"])], [("x", (100, 2))], ["y"],
                       initializers=[("idx", idx)])
    (op,) = import_model(model).ops
    assert isinstance(op.expr, Lookup)
    check(model)


# -- Reductions -----------------------------------------------------------------------

NEW_REDUCTIONS = ["ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
                  "ReduceLogSumExp", "ReduceSumSquare"]
REDUCE_CASES = [(None, 1), ((1,), 0), ((-1, 0), 1), ((0, 2), 0)]


def _reduce_model(op, axes, keepdims, opset, shape=(2, 3, 4), noop=None):
    """A Reduce* node with axes as an attribute (before opset 18) or an int64 input."""
    attrs = {"keepdims": keepdims}
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    if axes is not None and opset < 18:
        attrs["axes"] = list(axes)
    ints = [("axes", axes)] if axes is not None and opset >= 18 else []
    return one_op(op, shape, opset, ints=ints, **attrs)


def _reduce_inputs(op, shape, seed):
    x = np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)
    return {"x": np.abs(x) + 0.1 if op == "ReduceLogSum" else x}


@pytest.mark.parametrize("axes,keepdims", REDUCE_CASES)
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("op", NEW_REDUCTIONS)
def test_reduce(op, opset, axes, keepdims):
    model = _reduce_model(op, axes, keepdims, opset)
    check(model, inputs=_reduce_inputs(op, (2, 3, 4), 3))


@pytest.mark.parametrize("op,opset", [(op, v) for op in NEW_REDUCTIONS for v in (11, 20)]
                         + [("ReduceLogSum", 28), ("ReduceLogSumExp", 28)])
def test_reduce_at_other_opsets(op, opset):
    model = _reduce_model(op, (1,), 1, opset)
    check(model, inputs=_reduce_inputs(op, (2, 3, 4), 4))


@pytest.mark.parametrize("op", NEW_REDUCTIONS)
def test_reduce_noop_with_empty_axes_reduces_each_element_alone(op):
    model = _reduce_model(op, None, 1, 18, noop=1)
    check(model, inputs=_reduce_inputs(op, (2, 3, 4), 5))
    assert not any(isinstance(o, Reduce) for o in import_model(model).ops)


@pytest.mark.parametrize("op", NEW_REDUCTIONS)
def test_reduce_over_an_empty_set(op):
    model = _reduce_model(op, (1,), 0, 18, shape=(2, 0, 3))
    check(model, inputs={"x": np.zeros((2, 0, 3), np.float32)})


def test_reduce_log_sum_exp_is_stable_and_handles_infinities():
    model = _reduce_model("ReduceLogSumExp", (1,), 1, 18, shape=(4, 3))
    x = np.array([[1000, 1001, 999], [-1000, -1001, -999], [-np.inf, -np.inf, -np.inf],
                  [np.inf, 0, 1]], np.float32)
    y = run_polyc(model, {"x": x})["y"]
    expected = np.log(np.exp(x[:2] - x[:2].max(1, keepdims=True)).sum(1, keepdims=True)) \
        + x[:2].max(1, keepdims=True)
    np.testing.assert_allclose(y[:2], expected, rtol=RTOL)
    np.testing.assert_array_equal(y[2:], [[-np.inf], [np.inf]])


# -- Softmax, LogSoftmax, Hardmax -----------------------------------------------------

@pytest.mark.parametrize("axis", [None, 0, 1, -1, -3])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_family(op, opset, axis):
    attrs = {} if axis is None else {"axis": axis}
    check(one_op(op, (2, 3, 4), opset, **attrs))


def test_log_softmax_of_large_numbers_is_stable():
    model = one_op("LogSoftmax", (2, 4), 13)
    x = np.array([[1000, 1001, 1002, 1003], [-1000, 0, 1000, 3000]], np.float32)
    check(model, inputs={"x": x})


@pytest.mark.parametrize("shape,axis", [((2, 3, 4), None), ((2, 3, 4), 0), ((2, 3, 4), -1),
                                        ((3, 80), 1), ((2, 3, 4), 2)])
@pytest.mark.parametrize("opset", [11, 13])
def test_hardmax_takes_the_first_maximum(shape, axis, opset):
    attrs = {} if axis is None else {"axis": axis}
    model = one_op("Hardmax", shape, opset, **attrs)
    x = np.round(np.random.default_rng(6).uniform(-2, 2, shape)).astype(np.float32)
    check(model, inputs={"x": x}, exact=True)  # integers in [-2, 2]: many ties


# -- LayerNormalization ---------------------------------------------------------------

@pytest.mark.parametrize("axis,scale_shape,bias,epsilon", [
    (-1, (4,), True, None),
    (1, (3, 4), False, 1e-3),
    (0, (2, 3, 4), True, None),
    (-2, (1, 4), True, 0.5),
])
def test_layer_normalization(axis, scale_shape, bias, epsilon):
    rng = np.random.default_rng(7)
    initializers = [("scale", rng.uniform(0.5, 2, scale_shape).astype(np.float32))]
    inputs = ["x", "scale"]
    if bias:
        initializers.append(("bias", rng.uniform(-1, 1, scale_shape).astype(np.float32)))
        inputs.append("bias")
    attrs = {"axis": axis} if epsilon is None else {"axis": axis, "epsilon": epsilon}
    model = make_model([node("LayerNormalization", inputs, ["y", "mean", "inv"], **attrs)],
                       [("x", (2, 3, 4))], ["y", "mean", "inv"],
                       initializers=initializers, opset=17)
    check(model)


@pytest.mark.parametrize("axis,scale_shape,epsilon", [
    (-1, (4,), None), (1, (3, 4), 1e-3), (0, (2, 3, 4), None), (-2, (1, 4), 0.5)])
def test_rms_normalization(axis, scale_shape, epsilon):
    rng = np.random.default_rng(8)
    scale = rng.uniform(0.5, 2, scale_shape).astype(np.float32)
    attrs = {"axis": axis} if epsilon is None else {"axis": axis, "epsilon": epsilon}
    model = make_model([node("RMSNormalization", ["x", "scale"], **attrs)],
                       [("x", (2, 3, 4))], ["y"], initializers=[("scale", scale)], opset=23)
    check(model)


@pytest.mark.parametrize("axis,p", [(-1, 2), (0, 2), (1, 1), (-1, 1)])
def test_lp_normalization(axis, p):
    x = np.random.default_rng(9).uniform(-2, 2, (3, 5)).astype(np.float32)
    x[1] = 0.0  # a zero norm along axis 1 (and at (1, k) along axis 0 for no k): gives 0
    model = make_model([node("LpNormalization", ["x"], axis=axis, p=p)], [("x", (3, 5))],
                       ["y"], opset=22)
    actual = check(model, inputs={"x": x})
    if axis in (1, -1):
        np.testing.assert_array_equal(actual["y"][1], 0.0)


def test_lp_normalization_of_other_orders_is_refused():
    model = make_model([node("LpNormalization", ["x"], p=3)], [("x", (3, 5))],
                       [("y", (3, 5))], opset=22, check=False)
    with pytest.raises(UnsupportedOpError, match="p=3"):
        import_model(model)


def test_layer_normalization_computes_in_float32_only():
    model = make_model([node("LayerNormalization", ["x", "s"], stash_type=11)],
                       [("x", (2, 3)), ("s", (3,))], ["y"], opset=17)
    with pytest.raises(UnsupportedOpError, match="stash_type=11"):
        import_model(model)


# -- A transformer-like block ---------------------------------------------------------

def test_attention_block_end_to_end():
    """x @ Wq + b -> LayerNormalization -> split into heads (Reshape, Transpose) ->
    scores (MatMul with the transposed keys) -> Softmax over the last axis -> back to
    (tokens, features) through Transpose and Reshape; with Concat, Slice and Gather."""
    tokens, features, heads = 6, 8, 2
    rng = np.random.default_rng(8)
    w = rng.uniform(-0.5, 0.5, (features, features)).astype(np.float32)
    weights = [("w", w), ("b", rng.uniform(-1, 1, (features,)).astype(np.float32)),
               ("g", rng.uniform(0.5, 1.5, (features,)).astype(np.float32)),
               ("beta", rng.uniform(-0.5, 0.5, (features,)).astype(np.float32)),
               int64("heads", [tokens, heads, features // heads]),
               int64("flat", [tokens, features]), int64("first", [0]), int64("last", [1]),
               int64("rows", [0, 2, 4])]
    nodes = [
        node("MatMul", ["x", "w"], ["xw"]), node("Add", ["xw", "b"], ["h"]),
        node("LayerNormalization", ["h", "g", "beta"], ["n"], axis=-1),
        node("Reshape", ["n", "heads"], ["nh"]),
        node("Transpose", ["nh"], ["q"], perm=[1, 0, 2]),           # (heads, tokens, d)
        node("Transpose", ["nh"], ["kt"], perm=[1, 2, 0]),          # (heads, d, tokens)
        node("MatMul", ["q", "kt"], ["scores"]),
        node("Softmax", ["scores"], ["p"], axis=-1),
        node("MatMul", ["p", "q"], ["ctx"]),                        # (heads, tokens, d)
        node("Transpose", ["ctx"], ["ct"], perm=[1, 0, 2]),
        node("Reshape", ["ct", "flat"], ["merged"]),
        node("Slice", ["merged", "first", "last"], ["cls"]),        # (1, features)
        node("Gather", ["merged", "rows"], ["some"], axis=0),       # (3, features)
        node("Concat", ["cls", "some", "merged"], ["y"], axis=0),
    ]
    model = make_model(nodes, [("x", (tokens, features))], ["y"], initializers=weights,
                       opset=17)
    for options in OPTIONS:
        check(model, seed=9, options=options)


def test_every_registered_version_is_an_onnx_version():
    known = {(s.name, s.since_version) for s in onnx.defs.get_all_schemas_with_history()}
    from polyc.frontend.ops import OPS
    assert set(OPS) <= known
