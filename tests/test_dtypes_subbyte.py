"""The 4- and 2-bit integers (int4, uint4, int2, uint2: one byte per element in memory,
as ml_dtypes' numpy arrays hold them): Cast to and from them wrapping at their width,
QuantizeLinear saturating to them, DequantizeLinear of blocked int4 weights before a
MatMul (weight-only quantization), graph inputs and outputs of those types; against
onnxruntime where it has kernels, else ml_dtypes' conversions."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

from onnx_helpers import make_model, run_onnxruntime, run_polyc, run_reference

T = TensorProto
SUB = {"int4": T.INT4, "uint4": T.UINT4, "int2": T.INT2, "uint2": T.UINT2}
node = helper.make_node


def both(model, feeds):
    """The compiled code's and the reference interpreter's outputs (they must agree:
    exactly, floats within 1e-6, summed in another order)."""
    got, reference = run_polyc(model, feeds), run_reference(model, feeds)
    for name in got:
        if got[name].dtype.kind == "f":
            np.testing.assert_allclose(got[name], reference[name], rtol=1e-6, atol=1e-6)
        else:
            np.testing.assert_array_equal(got[name], reference[name], err_msg=name)
    return got


@pytest.mark.parametrize("dtype", sorted(SUB))
def test_cast_from_float_wraps_and_back(dtype):
    """float32 -> sub-byte truncates towards zero and wraps at the width (ml_dtypes'
    conversion, the onnx suite's expectation); sub-byte -> float32 and -> int32 exact."""
    x = np.array([-9.7, -8.0, -5.5, -2.5, -1.0, -0.4, 0.0, 0.6, 1.5, 3.9, 7.0, 8.0, 9.2,
                  15.0, 17.0, 100.0], np.float32)
    model = make_model([node("Cast", ["x"], ["q"], to=SUB[dtype]),
                        node("Cast", ["q"], ["f"], to=T.FLOAT),
                        node("Cast", ["q"], ["i"], to=T.INT32)],
                       [("x", x.shape)], [("q", x.shape, SUB[dtype]), ("f", x.shape),
                                          ("i", x.shape, T.INT32)], opset=25)
    got = both(model, {"x": x})
    want = np.trunc(x).astype(np.int64).astype(dtype)
    assert got["q"].dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got["q"].astype(np.int64), want.astype(np.int64))
    np.testing.assert_array_equal(got["f"], want.astype(np.float32))
    np.testing.assert_array_equal(got["i"], want.astype(np.int32))


@pytest.mark.parametrize("dtype", ["int4", "uint4"])
def test_quantize_saturates_and_matches_onnxruntime(dtype):
    """QuantizeLinear to int4/uint4 (rounding half to even, saturating) and back: the
    round trip against onnxruntime (whose Python API returns no 4-bit arrays), the
    quantized values against numpy's formula."""
    rng = np.random.default_rng(1)
    x = rng.uniform(-3, 3, (4, 8)).astype(np.float32)
    x[0, :4] = [0.125, 0.375, -0.125, 2.875]  # halves of the 0.25 step
    zero = np.array(1 if dtype == "int4" else 8, dtype)
    inits = [("s", np.array(0.25, np.float32)), ("z", zero)]
    nodes = [node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    model = make_model(nodes, [("x", x.shape)], [("q", x.shape, SUB[dtype]), ("y", x.shape)],
                       initializers=inits, opset=21)
    round_trip = make_model(nodes, [("x", x.shape)], [("y", x.shape)], initializers=inits,
                            opset=21)
    got = both(model, {"x": x})
    np.testing.assert_array_equal(got["y"], run_onnxruntime(round_trip, {"x": x})["y"])
    low, high = (-8, 7) if dtype == "int4" else (0, 15)
    want = np.clip(np.round(x / 0.25) + int(zero.astype(np.int64)), low, high)
    np.testing.assert_array_equal(got["q"].astype(np.int64), want.astype(np.int64))


def test_blocked_int4_weights_dequantized_before_a_matmul():
    """Weight-only quantization: int4 weights with one scale per block of 16 input
    features, dequantized and multiplied. Against the product in float64: onnxruntime
    fuses the pair into its MatMulNBits kernel, whose results are up to 1e-2 off."""
    rng = np.random.default_rng(2)
    weights = rng.integers(-8, 8, (64, 32)).astype(ml_dtypes.int4)
    scales = rng.uniform(0.01, 0.05, (4, 32)).astype(np.float32)  # blocks along axis 0
    x = rng.standard_normal((5, 64)).astype(np.float32)
    model = make_model([node("DequantizeLinear", ["w", "s"], ["wf"], axis=0, block_size=16),
                        node("MatMul", ["x", "wf"], ["y"])],
                       [("x", x.shape)], [("y", (5, 32))],
                       initializers=[("w", weights), ("s", scales)], opset=21)
    dequantized = weights.astype(np.float64) * np.repeat(scales, 16, axis=0)
    np.testing.assert_allclose(both(model, {"x": x})["y"], x @ dequantized, rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("dtype", sorted(SUB))
def test_graph_inputs_and_outputs_of_sub_byte_types(dtype):
    """An input of ml_dtypes' type in, transposed, out (its bytes as numpy holds them)."""
    low, high = (-2 ** (int(dtype[-1]) - 1), 2 ** (int(dtype[-1]) - 1)) \
        if dtype.startswith("int") else (0, 2 ** int(dtype[-1]))
    x = np.random.default_rng(3).integers(low, high, (3, 5)).astype(dtype)
    model = make_model([node("Transpose", ["x"], ["y"], perm=[1, 0])],
                       [("x", x.shape, SUB[dtype])], [("y", (5, 3), SUB[dtype])], opset=25)
    got = both(model, {"x": x})["y"]
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got.view(np.uint8), x.T.view(np.uint8))
