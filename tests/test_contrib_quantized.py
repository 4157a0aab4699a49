"""onnxruntime's quantized contrib ops (com.microsoft, the QOperator format:
polyc/frontend/ops/contrib_quantized.py) against onnxruntime on seeded inputs.

Tolerance: one quantization step. polyc computes ``quantize(f(dequantize(x)))``;
onnxruntime computes some of these other ways (tables, integer sums, scale ratios), so
a value near a rounding boundary may round the other way. QGemm is bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import polyc
from polyc.errors import UnsupportedOpError

from onnx_helpers import make_model, run_onnxruntime

T = TensorProto
BYTE = {"uint8": T.UINT8, "int8": T.INT8}


def contrib_model(nodes, inputs, outputs, initializers):
    """A model of ``nodes`` (com.microsoft ops among them), opset 17 and com.microsoft 1."""
    model = make_model(nodes, inputs, outputs, initializers=initializers, opset=17,
                       check=False)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


def ms(op, inputs, outputs, **attributes):
    return helper.make_node(op, inputs, outputs, domain="com.microsoft", **attributes)


def _bytes(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


def _params(prefix, dtype, scale, zero):
    return [(f"{prefix}s", np.array(scale, np.float32)), (f"{prefix}z", np.array(zero, dtype))]


def check_within_a_step(model, inputs, exact=False):
    want = run_onnxruntime(model, inputs)
    got = polyc.compile(model).run(inputs)
    for name, expected in want.items():
        assert got[name].dtype == expected.dtype and got[name].shape == expected.shape
        difference = np.abs(got[name].astype(np.float64) - expected.astype(np.float64))
        assert difference.max(initial=0) <= (0 if exact else 1), name


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_binary_ops_broadcast(op, dtype):
    rng = np.random.default_rng(len(op) + len(dtype))
    a, b = _bytes(rng, (2, 3, 5), dtype), _bytes(rng, (3, 1), dtype)
    zero = 7 if dtype == "uint8" else -3
    model = contrib_model(
        [ms(op, ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["c"])],
        [("a", a.shape, BYTE[dtype]), ("b", b.shape, BYTE[dtype])],
        [("c", (2, 3, 5), BYTE[dtype])],
        _params("a", dtype, 0.03, zero) + _params("b", dtype, 0.05, abs(zero) // 2)
        + _params("c", dtype, 0.07 if op == "QLinearAdd" else 0.2, zero + 1))
    check_within_a_step(model, {"a": a, "b": b})


@pytest.mark.parametrize("op, attributes", [("QLinearSigmoid", {}),
                                            ("QLinearLeakyRelu", {"alpha": 0.2}),
                                            ("QLinearSoftmax", {"axis": -1, "opset": 13})])
def test_unary_ops(op, attributes):
    rng = np.random.default_rng(len(op))
    x = _bytes(rng, (4, 33), "uint8")
    x[0, :] = np.arange(33) * 7  # a spread of every part of the range
    y_scale = 1 / 256 if op != "QLinearLeakyRelu" else 0.02
    model = contrib_model([ms(op, ["x", "xs", "xz", "ys", "yz"], ["y"], **attributes)],
                          [("x", x.shape, T.UINT8)], [("y", x.shape, T.UINT8)],
                          _params("x", "uint8", 0.05, 128)
                          + _params("y", "uint8", y_scale, 0 if op != "QLinearLeakyRelu"
                                    else 100))
    check_within_a_step(model, {"x": x})


@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("pool", ["global", "average"])
def test_average_pools(channels_last, pool):
    rng = np.random.default_rng(channels_last + len(pool))
    shape = (1, 6, 7, 9) if not channels_last else (1, 7, 9, 6)
    x = _bytes(rng, shape, "uint8")
    if pool == "global":
        node = ms("QLinearGlobalAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"],
                  channels_last=channels_last)
        out = (1, 6, 1, 1) if not channels_last else (1, 1, 1, 6)
    else:
        node = ms("QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"],
                  channels_last=channels_last, kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                  strides=[2, 2])
        out = (1, 6, 4, 5) if not channels_last else (1, 4, 5, 6)
    model = contrib_model([node], [("x", shape, T.UINT8)], [("y", out, T.UINT8)],
                          _params("x", "uint8", 0.04, 120) + _params("y", "uint8", 0.03, 110))
    check_within_a_step(model, {"x": x})


def test_concat_of_differently_quantized_inputs():
    rng = np.random.default_rng(9)
    a, b = _bytes(rng, (2, 3, 4), "int8"), _bytes(rng, (2, 5, 4), "int8")
    model = contrib_model(
        [ms("QLinearConcat", ["ys", "yz", "a", "as", "az", "b", "bs", "bz"], ["y"], axis=1)],
        [("a", a.shape, T.INT8), ("b", b.shape, T.INT8)], [("y", (2, 8, 4), T.INT8)],
        _params("y", "int8", 0.05, 3) + _params("a", "int8", 0.04, -5)
        + _params("b", "int8", 0.06, 2))
    check_within_a_step(model, {"a": a, "b": b})


@pytest.mark.parametrize("quantized_output", [True, False])
@pytest.mark.parametrize("per_column", [False, True])
def test_qgemm(quantized_output, per_column):
    """QGemm with transposed constant weights, an int32 bias and alpha; requantized or
    float32 out; bit for bit."""
    rng = np.random.default_rng(quantized_output * 2 + per_column)
    a = _bytes(rng, (6, 32), "uint8")
    b = _bytes(rng, (20, 32), "int8")  # transB: [N, K]
    b_scale = rng.uniform(0.01, 0.02, 20 if per_column else ()).astype(np.float32)
    inits = _params("a", "uint8", 0.02, 130) + [
        ("b", b), ("bs", b_scale), ("bz", np.zeros(b_scale.shape, np.int8)),
        ("c", rng.integers(-3000, 3000, 20).astype(np.int32))]
    names = ["a", "as", "az", "b", "bs", "bz", "c"]
    if quantized_output:
        inits += _params("y", "uint8", 0.5, 100)
        names += ["ys", "yz"]
    model = contrib_model([ms("QGemm", names, ["y"], transB=1, alpha=0.5)],
                          [("a", a.shape, T.UINT8)],
                          [("y", (6, 20), T.UINT8 if quantized_output else T.FLOAT)], inits)
    check_within_a_step(model, {"a": a}, exact=True)


def test_qlinear_matmul_with_a_scale_per_column():
    """QLinearMatMul's b_scale one per column of b (as the quantizer writes per-channel
    weights), bit for bit."""
    rng = np.random.default_rng(4)
    a, b = _bytes(rng, (5, 24), "uint8"), _bytes(rng, (24, 12), "int8")
    inits = _params("a", "uint8", 0.02, 120) + [
        ("b", b), ("bs", rng.uniform(0.005, 0.02, 12).astype(np.float32)),
        ("bz", np.zeros(12, np.int8))] + _params("y", "uint8", 0.3, 90)
    model = make_model([helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz",
                                                           "ys", "yz"], ["y"])],
                       [("a", a.shape, T.UINT8)], [("y", (5, 12), T.UINT8)],
                       initializers=inits, opset=21)
    check_within_a_step(model, {"a": a}, exact=True)


def test_other_contrib_ops_are_refused_with_the_list():
    model = contrib_model([ms("FusedConv", ["x", "w"], ["y"])],
                          [("x", (1, 1, 3, 3))], [("y", (1, 1, 3, 3))],
                          [("w", np.ones((1, 1, 1, 1), np.float32))])
    with pytest.raises(UnsupportedOpError, match="com.microsoft' polyc lowers only QGemm"):
        polyc.compile(model)


def test_qgemm_with_a_bias_that_does_not_broadcast_is_a_shape_error():
    rng = np.random.default_rng(2)
    inits = _params("a", "uint8", 0.02, 130) + [
        ("b", _bytes(rng, (8, 6), "int8")), ("bs", np.array(0.01, np.float32)),
        ("bz", np.array(0, np.int8)), ("c", np.zeros(5, np.int32))]
    model = contrib_model([ms("QGemm", ["a", "as", "az", "b", "bs", "bz", "c"], ["y"])],
                          [("a", (4, 8), T.UINT8)], [("y", (4, 6), T.FLOAT)], inits)
    with pytest.raises(polyc.errors.ShapeError, match="QGemm.*C: cannot broadcast"):
        polyc.compile(model)
