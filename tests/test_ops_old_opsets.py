"""Op versions in effect at opsets 6 to 10: models stamped with those opsets compiled by
polyc and compared with onnxruntime (and the frontend's reference interpreter) on
seeded random inputs, rtol 1e-4, atol 1e-5.

onnxruntime runs most old versions. It has no kernel for the opset-6 versions Add,
Sub, Mul, Div, Pow, And, Or, Xor, Equal, Less, Greater (``broadcast``/``axis``
attributes), Gemm-6, PRelu-6, BatchNormalization-6, Dropout-6 and AveragePool-1: those
are compared with numpy following the ONNX definition, or (AveragePool-1) with
onnxruntime running the same model stamped with opset 7.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from polyc.errors import ShapeError, UnsupportedOpError
from polyc.frontend import import_model
from polyc.frontend.ops import OPS

from onnx_helpers import make_model, random_inputs, run_onnxruntime, run_polyc, run_reference

RTOL, ATOL = 1e-4, 1e-5
FLOAT, BOOL = TensorProto.FLOAT, TensorProto.BOOL


def node(op, inputs, outputs=("y",), **attrs):
    return helper.make_node(op, list(inputs), list(outputs), **attrs)


def weight(name, shape, seed=1):
    return name, np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def check(model, expected=None, *, seed=0, **options):
    """polyc (with ``options``) and the reference interpreter against onnxruntime, or
    against ``expected(inputs)`` (a dict of outputs)."""
    inputs = random_inputs(model, seed)
    want = expected(inputs) if expected else run_onnxruntime(model, inputs)
    got = run_polyc(model, inputs, **options)
    reference = run_reference(model, inputs)
    assert set(got) == set(want)
    for name, value in want.items():
        assert got[name].shape == value.shape, name
        np.testing.assert_allclose(got[name], value, rtol=RTOL, atol=ATOL, err_msg=name)
        np.testing.assert_allclose(reference[name], value, rtol=RTOL, atol=ATOL, err_msg=name)


def restamped(model, opset: int):
    """``model`` with the default domain's opset set to ``opset``."""
    copy = onnx.ModelProto.FromString(model.SerializeToString())
    copy.opset_import[0].version = opset
    return copy


# -- versions onnxruntime runs -----------------------------------------------------------

X4 = ("x", (2, 3, 6, 6))

# id: (opset, nodes, inputs, initializers)
WITH_ORT = {
    "Conv-1": (6, [node("Conv", ["x", "w", "b"], pads=[1, 0, 1, 2], strides=[2, 1])],
               [X4], [weight("w", (4, 3, 3, 3)), weight("b", (4,))]),
    "Conv-1_group": (9, [node("Conv", ["x", "w"], group=3, dilations=[2, 2])],
                     [X4], [weight("w", (6, 1, 2, 2))]),
    "ConvTranspose-1": (9, [node("ConvTranspose", ["x", "w"], strides=[2, 3],
                                 output_padding=[1, 1], pads=[1, 1, 1, 1])],
                        [X4], [weight("w", (3, 2, 3, 3))]),
    "MaxPool-1": (7, [node("MaxPool", ["x"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                           strides=[2, 2])], [X4], []),
    "MaxPool-8": (9, [node("MaxPool", ["x"], kernel_shape=[2, 3], storage_order=0)], [X4], []),
    "MaxPool-10": (10, [node("MaxPool", ["x"], kernel_shape=[2, 2], strides=[2, 2],
                             ceil_mode=1, dilations=[1, 2], pads=[1, 0, 0, 0])],
                   [("x", (1, 2, 7, 8))], []),
    "AveragePool-7": (7, [node("AveragePool", ["x"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                               count_include_pad=1)], [X4], []),
    "AveragePool-10": (10, [node("AveragePool", ["x"], kernel_shape=[2, 2], strides=[2, 2],
                                 ceil_mode=1, pads=[1, 1, 0, 0])], [("x", (1, 2, 5, 5))], []),
    "LpPool-2": (9, [node("LpPool", ["x"], kernel_shape=[2, 2], p=2)], [X4], []),
    "Softmax-1": (9, [node("Softmax", ["x"])], [("x", (2, 3, 4))], []),
    "LogSoftmax-1": (9, [node("LogSoftmax", ["x"], axis=2)], [("x", (2, 3, 4))], []),
    "Hardmax-1": (9, [node("Hardmax", ["x"], axis=0)], [("x", (2, 3))], []),
    "Concat-4": (8, [node("Concat", ["x", "c"], axis=1)], [X4], [weight("c", (2, 1, 6, 6))]),
    "Dropout-7": (9, [node("Dropout", ["x"], ["d"], ratio=0.3), node("Relu", ["d"])],
                  [X4], []),
    "Squeeze-Unsqueeze-1": (6, [node("Unsqueeze", ["x"], ["u"], axes=[0, 3]),
                                node("Squeeze", ["u"], axes=[0])], [("x", (2, 3, 4))], []),
    "Flatten-1": (8, [node("Flatten", ["x"], axis=2)], [X4], []),
    "Flatten-9": (9, [node("Flatten", ["x"], axis=0)], [X4], []),
    "BatchNormalization-7": (7, [node("BatchNormalization", ["x", "s", "b", "m", "v"],
                                      epsilon=1e-3)],
                             [X4], [weight("s", (3,)), weight("b", (3,), 2),
                                    weight("m", (3,), 3), ("v", np.full(3, 0.5, np.float32))]),
    "BatchNormalization-7_spatial0": (
        8, [node("BatchNormalization", ["x", "s", "b", "m", "v"], spatial=0)],
        [("x", (2, 3, 4))], [weight("s", (3, 4)), weight("b", (3, 4), 2),
                             weight("m", (3, 4), 3), ("v", np.full((3, 4), 2.0, np.float32))]),
    "Sum-Max-Min-Mean-6": (6, [node("Sum", ["x", "x2", "c"], ["s"]),
                               node("Max", ["s", "x"], ["a"]), node("Min", ["a", "x2"], ["b"]),
                               node("Mean", ["b", "x", "c"])],
                           [("x", (3, 4)), ("x2", (3, 4))], [weight("c", (3, 4))]),
    "Clip-6": (6, [node("Clip", ["x"], min=-0.5, max=0.7)], [X4], []),
    "PRelu-7": (7, [node("PRelu", ["x", "s"])], [X4], [weight("s", (3, 1, 1))]),
    "Cast-6": (6, [node("Cast", ["x"], ["c"], to=BOOL), node("Cast", ["c"], to=FLOAT)],
               [X4], []),
    "Constant-1": (6, [node("Constant", [], ["k"], value=helper.make_tensor(
        "k", FLOAT, [6], np.arange(6, dtype=np.float32))), node("Sum", ["x", "k"])],
        [("x", (6,))], []),
    "Constant-9": (9, [node("Constant", [], ["k"], value=helper.make_tensor(
        "k", FLOAT, [6], np.arange(6, dtype=np.float32))), node("Add", ["x", "k"])],
        [("x", (2, 6))], []),
    "Pad-2_constant": (6, [node("Pad", ["x"], pads=[0, 1, 2, 0, 0, 0, 1, -1], value=1.5)],
                       [X4], []),
    "Pad-2_reflect": (9, [node("Pad", ["x"], pads=[0, 0, 2, 1, 0, 0, 1, 3], mode="reflect")],
                      [X4], []),
    "Pad-2_edge": (10, [node("Pad", ["x"], pads=[0, 0, 2, 1, 0, 0, 1, 3], mode="edge")],
                   [X4], []),
    "Slice-1": (6, [node("Slice", ["x"], starts=[1, -4], ends=[3, 100], axes=[1, 3])],
                [X4], []),
    "Slice-10": (10, [node("Slice", ["x", "st", "en", "ax", "sp"])], [X4],
                 [("st", np.array([5, 1], np.int64)), ("en", np.array([0, 6], np.int64)),
                  ("ax", np.array([2, 3], np.int64)), ("sp", np.array([-2, 2], np.int64))]),
    "Split-2": (8, [node("Split", ["x"], ["a", "b"], axis=1, split=[1, 2]),
                    node("Add", ["b", "b"], ["c"]),
                    node("Concat", ["c", "a"], ["y"], axis=1)], [X4], []),
    "Gather-1": (6, [node("Gather", ["x", "i"], axis=1)], [X4],
                 [("i", np.array([[2, 0], [1, 1]], np.int64))]),
    "DepthToSpace-1": (9, [node("DepthToSpace", ["x"], blocksize=2)], [("x", (1, 8, 2, 3))],
                       []),
    "Less-Greater-Equal-7": (8, [node("Less", ["x", "c"], ["l"]),
                                 node("Greater", ["x", "c"], ["g"]),
                                 node("Equal", ["l", "g"], ["e"]),
                                 node("Cast", ["e"], to=FLOAT)],
                             [X4], [weight("c", (6,))]),
    "Upsample-7_nearest": (7, [node("Upsample", ["x"], scales=[1.0, 1.0, 2.0, 3.0])], [X4],
                           []),
    "Upsample-7_linear": (8, [node("Upsample", ["x"], scales=[1.0, 1.0, 3.0, 2.0],
                                   mode="linear")], [X4], []),
    "Upsample-9_nearest": (9, [node("Upsample", ["x", "s"])], [X4],
                           [("s", np.array([1, 2, 1, 2], np.float32))]),
    "Resize-10_linear": (10, [node("Resize", ["x", "s"], mode="linear")], [X4],
                         [("s", np.array([1, 1, 2, 0.5], np.float32))]),
    "Resize-10_nearest": (10, [node("Resize", ["x", "s"])], [("x", (1, 2, 5, 7))],
                          [("s", np.array([1, 1, 0.5, 3], np.float32))]),
}


@pytest.mark.parametrize("case", list(WITH_ORT))
def test_matches_onnxruntime(case):
    opset, nodes, inputs, initializers = WITH_ORT[case]
    check(make_model(nodes, inputs, ["y"], initializers=initializers, opset=opset))


REDUCTIONS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]


def test_reductions_1():
    """Every Reduce*-1 (axes attribute) in one model, with and without keepdims."""
    nodes = [node(op, ["x"], [f"y{k}"], axes=[1, 2] if k % 2 else [0], keepdims=k % 2)
             for k, op in enumerate(REDUCTIONS)]
    nodes.append(node("ReduceL1", ["x"], ["all"]))
    outputs = [f"y{k}" for k in range(len(REDUCTIONS))] + ["all"]
    model = make_model(nodes, [("x", (3, 4, 5))], outputs, opset=9)
    inputs = {"x": np.random.default_rng(0).uniform(0.5, 1.5, (3, 4, 5)).astype(np.float32)}
    want = run_onnxruntime(model, inputs)
    got = run_polyc(model, inputs, fuse="none", tile=False)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.mark.parametrize("options", [{"fuse": "none"}, {"tile": False}])
def test_conv_pool_chain_options(options):
    """A little opset-9 CNN (Conv-1, BatchNormalization-9, MaxPool-8, AveragePool-7,
    Concat-4, Softmax-1) with other compile options."""
    nodes = [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
             node("MaxPool", ["n"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             node("AveragePool", ["n"], ["q"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Concat", ["p", "q"], ["j"], axis=1),
             node("Softmax", ["j"])]
    weights = [weight("w", (4, 3, 3, 3)), weight("s", (4,)), weight("b", (4,), 2),
               weight("m", (4,), 3), ("v", np.full(4, 0.5, np.float32))]
    check(make_model(nodes, [X4], ["y"], initializers=weights, opset=9), **options)


# -- versions onnxruntime has no kernel for ----------------------------------------------

def legacy_broadcast(a, b, broadcast, axis):
    """``b`` shaped to broadcast against ``a`` as the opset-6 binary ops do."""
    if not broadcast or b.size == 1:
        return b.reshape(b.shape if not broadcast else ())
    start = a.ndim - b.ndim if axis is None else axis
    return b.reshape(b.shape + (1,) * (a.ndim - start - b.ndim))


BINARY_6 = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
            "Pow": np.power}


@pytest.mark.parametrize("b_shape,attrs", [
    ((3, 4), {"broadcast": 1, "axis": 1}),
    ((5,), {"broadcast": 1}),
    ((1, 1), {"broadcast": 1}),
    ((2, 3, 4, 5), {}),
    ((2,), {"broadcast": 1, "axis": 0}),
])
def test_binary_6(b_shape, attrs):
    """Add, Sub, Mul, Div-6 and Pow-1 with the legacy broadcast, one model each way."""
    nodes = [node(op, ["a", "b"], [op.lower()], **attrs) for op in BINARY_6]
    model = make_model(nodes, [("a", (2, 3, 4, 5)), ("b", b_shape)],
                       [op.lower() for op in BINARY_6], opset=6)

    def expected(inputs):
        a = inputs["a"]
        b = legacy_broadcast(a, inputs["b"], attrs.get("broadcast", 0), attrs.get("axis"))
        with np.errstate(invalid="ignore"):
            return {op.lower(): fn(a, b).astype(np.float32) for op, fn in BINARY_6.items()}

    check(model, expected)


def test_logic_1():
    """Less-1, Greater-1, Equal-1, And-1, Or-1 and Xor-1 (broadcast along axis 1), Not-1."""
    attrs = {"broadcast": 1, "axis": 1}
    nodes = [node("Less", ["a", "b"], ["l"], **attrs), node("Greater", ["a", "b"], ["g"], **attrs),
             node("Less", ["b", "c"], ["m"]),  # (3,) bools to broadcast back
             node("And", ["l", "m"], ["and"], **attrs), node("Or", ["g", "m"], ["or"], **attrs),
             node("Xor", ["l", "g"], ["xor"]), node("Equal", ["and", "or"], ["eq"]),
             node("Not", ["eq"], ["not"])]
    nodes += [node("Cast", [name], [f"{name}_f"], to=FLOAT) for name in ("xor", "eq", "not")]
    model = make_model(nodes, [("a", (2, 3, 4)), ("b", (3,)), ("c", (3,))],
                       ["xor_f", "eq_f", "not_f"], opset=6)

    def expected(inputs):
        a, b, c = inputs["a"], inputs["b"][:, None], inputs["c"]
        less, greater, m = a < b, a > b, (inputs["b"] < c)[:, None]
        eq = (less & m) == (greater | m)
        return {"xor_f": (less ^ greater).astype(np.float32), "eq_f": eq.astype(np.float32),
                "not_f": (~eq).astype(np.float32)}

    check(model, expected)


def test_gemm_6():
    """Gemm-6: C broadcast with broadcast=1, C of Y's shape without."""
    nodes = [node("Gemm", ["a", "b", "c"], ["g"], alpha=0.5, beta=2.0, broadcast=1, transB=1),
             node("Gemm", ["g", "b", "d"], ["y"], beta=0.5)]
    model = make_model(nodes, [("a", (3, 4))], ["y"], opset=6,
                       initializers=[weight("b", (4, 4)), weight("c", (4,), 2),
                                     weight("d", (3, 4), 3)])
    b, c, d = (np.asarray(onnx.numpy_helper.to_array(i)) for i in model.graph.initializer)

    def expected(inputs):
        g = 0.5 * inputs["a"] @ b.T + 2.0 * c
        return {"y": g @ b + 0.5 * d}

    check(model, expected)


def test_prelu_6_per_channel():
    """PRelu-6: a slope per channel (dim 1) and a shared one."""
    nodes = [node("PRelu", ["x", "s"], ["p"]), node("PRelu", ["p", "t"])]
    model = make_model(nodes, [("x", (2, 3, 4))], ["y"], opset=6,
                       initializers=[weight("s", (3,)), ("t", np.array([0.25], np.float32))])
    s = onnx.numpy_helper.to_array(model.graph.initializer[0])

    def expected(inputs):
        x = inputs["x"]
        p = np.where(x < 0, s[:, None] * x, x)
        return {"y": np.where(p < 0, 0.25 * p, p)}

    check(model, expected)


def test_batch_norm_and_dropout_6():
    """BatchNormalization-6 and Dropout-6 with is_test=1, per channel (spatial=1)."""
    nodes = [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["n"], is_test=1,
                  epsilon=1e-3, momentum=0.5),
             node("Dropout", ["n"], ["y"], is_test=1, ratio=0.2)]
    s, b, m = (weight(name, (3,), k)[1] for k, name in enumerate("sbm"))
    v = np.full(3, 0.5, np.float32)
    model = make_model(nodes, [("x", (2, 3, 5))], ["y"], opset=6,
                       initializers=[("s", s), ("b", b), ("m", m), ("v", v)])

    def expected(inputs):
        shape = (3, 1)
        factor = s.reshape(shape) / np.sqrt(v.reshape(shape) + 1e-3)
        return {"y": (inputs["x"] - m.reshape(shape)) * factor + b.reshape(shape)}

    check(model, expected)


def test_average_pool_1_as_opset_7():
    """AveragePool-1 computes what AveragePool-7 does without count_include_pad."""
    model = make_model([node("AveragePool", ["x"], kernel_shape=[3, 2], pads=[1, 0, 1, 1],
                             strides=[2, 1])], [X4], ["y"], opset=6)
    check(model, lambda inputs: run_onnxruntime(restamped(model, 7), inputs))


# -- errors and coverage -------------------------------------------------------------------

@pytest.mark.parametrize("opset,nodes,shape,error,match", [
    (6, [node("Dropout", ["x"])], (2, 3), UnsupportedOpError, "is_test=0"),
    (6, [node("BatchNormalization", ["x", "w", "w", "w", "w"])], (2, 3), UnsupportedOpError,
     "is_test=0"),
    (7, [node("Upsample", ["x"], scales=[1.0, 1.5])], (2, 3), UnsupportedOpError,
     "scale 1.5"),
    (9, [node("Upsample", ["x", "s"], mode="cubic")], (2, 3), UnsupportedOpError,
     "mode='cubic'"),
    (6, [node("Add", ["x", "x2"])], (2, 3), ShapeError, "broadcast=1"),
    (6, [node("Mul", ["x", "w"], broadcast=1, axis=0)], (2, 3), ShapeError, "from axis 0"),
])
def test_unsupported(opset, nodes, shape, error, match):
    inputs = [("x", shape), ("x2", (3,))] if "x2" in nodes[0].input else [("x", shape)]
    initializers = [("w", np.ones(3, np.float32)), ("s", np.array([1, 2], np.float32))]
    used = {i for n in nodes for i in n.input}
    model = make_model(nodes, inputs, ["y"], opset=opset,
                       initializers=[w for w in initializers if w[0] in used])
    with pytest.raises(error, match=match):
        import_model(model)


# Versions in effect at opsets 6 to 10 of ops polyc lowers that stay unregistered:
# Upsample-1 (opset 6) was experimental (its bilinear mode is not defined precisely),
# Upsample-10 is deprecated (onnx.checker rejects both).
UNREGISTERED = {("Upsample", 1), ("Upsample", 10)}


def test_every_old_version_of_a_lowered_op_is_registered():
    lowered = {op for op, _ in OPS}
    missing = set()
    for op in lowered:
        for opset in range(6, 11):
            try:
                schema = onnx.defs.get_schema(op, opset, "")
            except onnx.defs.SchemaError:
                continue
            if (op, schema.since_version) not in OPS:
                missing.add((op, schema.since_version))
    assert missing == UNREGISTERED
