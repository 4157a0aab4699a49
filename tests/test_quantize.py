"""QuantizeLinear and DequantizeLinear (polyc/frontend/ops/quantize.py) against
onnxruntime: per tensor, per axis, blocked, int8/uint8/int16/uint16, and a quantized
round trip."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import polyc
from polyc.codegen import bytedot
from polyc.errors import UnsupportedOpError

from onnx_helpers import make_model, run_onnxruntime, run_polyc

node = helper.make_node
T = TensorProto
INTS = {"int8": T.INT8, "uint8": T.UINT8, "int16": T.INT16, "uint16": T.UINT16}


def check(model, inputs):
    want = run_onnxruntime(model, inputs)
    got = run_polyc(model, inputs)
    for name, expected in want.items():
        assert got[name].dtype == expected.dtype, name
        np.testing.assert_array_equal(got[name], expected, err_msg=name)


@pytest.mark.parametrize("dtype", sorted(INTS))
def test_quantize_per_tensor_rounds_half_to_even_and_saturates(dtype):
    x = np.array([[0.0, 2.5, 3.5, -2.5, 1000.0, -1000.0, 0.49, 7.51, 1e9, -1e9] * 3],
                 np.float32).reshape(3, 10)
    zero = np.array(3 if dtype.startswith("u") else -2, dtype)
    model = make_model([node("QuantizeLinear", ["x", "s", "z"], ["y"])],
                       [("x", (3, 10))], [("y", (3, 10), INTS[dtype])],
                       initializers=[("s", np.array(0.5, np.float32)), ("z", zero)], opset=21)
    check(model, {"x": x})


@pytest.mark.parametrize("axis", [0, 1])
def test_quantize_and_dequantize_per_axis(axis):
    rng = np.random.default_rng(axis)
    x = rng.uniform(-10, 10, (4, 6)).astype(np.float32)
    n = x.shape[axis]
    scale = rng.uniform(0.05, 0.2, n).astype(np.float32)
    zero = rng.integers(-5, 5, n).astype(np.int8)
    model = make_model([node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=axis),
                        node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=axis)],
                       [("x", (4, 6))], [("q", (4, 6), T.INT8), ("y", (4, 6))],
                       initializers=[("s", scale), ("z", zero)], opset=13)
    check(model, {"x": x})


def test_blocked_scales_of_constants():
    rng = np.random.default_rng(5)
    x = rng.uniform(-4, 4, (3, 8)).astype(np.float32)
    scale = rng.uniform(0.02, 0.1, (3, 3)).astype(np.float32)  # blocks of 3 along axis 1
    zero = rng.integers(0, 20, (3, 3)).astype(np.uint8)
    model = make_model([node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1, block_size=3),
                        node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1,
                             block_size=3)],
                       [("x", (3, 8))], [("q", (3, 8), T.UINT8), ("y", (3, 8))],
                       initializers=[("s", scale), ("z", zero)], opset=21)
    check(model, {"x": x})


def test_dynamic_quantize_linear_divides_exactly():
    """DynamicQuantizeLinear (its ONNX function body: ReduceMin/Max, Div, Round, ...):
    x / scale then round must be the division rounded once, not x * (1 / scale), or a
    value on a half step lands one step off (it did: -2.5 of the suite's case)."""
    x = np.array([0.0, 2.0, -3.0, -2.5, 1.34, 0.5], np.float32)
    model = make_model([node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zero"])],
                       [("x", (6,))], [("y", (6,), T.UINT8), ("scale", ()),
                                       ("zero", (), T.UINT8)], opset=11)
    check(model, {"x": x})
    rng = np.random.default_rng(6)
    check(model, {"x": rng.uniform(-3, 7, 6).astype(np.float32)})


def test_a_blocked_scale_computed_at_run_time_is_refused():
    model = make_model([node("QuantizeLinear", ["x", "s"], ["y"], axis=1, block_size=2)],
                       [("x", (2, 4)), ("s", (2, 2))], [("y", (2, 4), T.UINT8)], opset=21)
    with pytest.raises(UnsupportedOpError, match="blocked y_scale must be a constant"):
        polyc.compile(model)


@pytest.mark.parametrize("a_type, b_type", [("uint8", "uint8"), ("int8", "int8"),
                                            ("uint8", "int8")])
def test_matmul_integer_with_per_row_and_per_column_zero_points(a_type, b_type):
    rng = np.random.default_rng(7)
    info_a, info_b = np.iinfo(a_type), np.iinfo(b_type)
    a = rng.integers(info_a.min, info_a.max, (2, 5, 12), endpoint=True).astype(a_type)
    b = rng.integers(info_b.min, info_b.max, (12, 7), endpoint=True).astype(b_type)
    model = make_model([node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])],
                       [("a", (2, 5, 12), INTS[a_type]), ("b", (12, 7), INTS[b_type])],
                       [("y", (2, 5, 7), T.INT32)],
                       initializers=[("za", np.array(3, a_type)),
                                     ("zb", rng.integers(0, 9, 7).astype(b_type))])
    check(model, {"a": a, "b": b})


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_qlinear_matmul_requantizes(dtype):
    rng = np.random.default_rng(8)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (6, 16), endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, (16, 5), endpoint=True).astype(dtype)
    scalars = [("sa", np.array(0.02, np.float32)), ("za", np.array(4, dtype)),
               ("sb", np.array(0.03, np.float32)), ("zb", np.array(-3 if dtype == "int8"
                                                                    else 130, dtype)),
               ("sy", np.array(0.5, np.float32)), ("zy", np.array(7, dtype))]
    model = make_model([node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"],
                             ["y"])],
                       [("a", (6, 16), INTS[dtype]), ("b", (16, 5), INTS[dtype])],
                       [("y", (6, 5), INTS[dtype])], initializers=scalars)
    check(model, {"a": a, "b": b})


@pytest.mark.parametrize("attrs", [{}, {"pads": [1, 1, 1, 1]},
                                   {"strides": [2, 1], "pads": [0, 1, 2, 1], "dilations": [1, 2]},
                                   {"group": 2, "pads": [1, 0, 1, 0]}])
@pytest.mark.parametrize("zero_at_run_time", [False, True])
def test_conv_integer(attrs, zero_at_run_time):
    """ConvInteger: int32 sums of (x - x_zero_point) * (w - w_zero_point); the padding
    adds nothing whether x's zero point is a constant or an input."""
    rng = np.random.default_rng(len(attrs))
    group = attrs.get("group", 1)
    x = rng.integers(0, 256, (2, 4, 7, 6)).astype(np.uint8)
    w = rng.integers(0, 256, (6, 4 // group, 3, 3)).astype(np.uint8)
    zero = np.array(rng.integers(100, 150), np.uint8)
    inputs = [("x", x.shape, T.UINT8)] + ([("xz", (), T.UINT8)] if zero_at_run_time else [])
    inits = [("w", w), ("wz", np.array(128, np.uint8))] + \
        ([] if zero_at_run_time else [("xz", zero)])
    model = make_model([node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **attrs)],
                       inputs, [("y", None, T.INT32)], initializers=inits, opset=10)
    check(model, {"x": x, **({"xz": zero} if zero_at_run_time else {})})


@pytest.mark.parametrize("out_type", ["uint8", "int8"])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv(out_type, per_channel):
    """QLinearConv (x and y of one type, as onnxruntime implements it): the int32 sum
    plus bias, requantized with x_scale * w_scale / y_scale (w_scale one value or one
    per output channel), bit for bit."""
    rng = np.random.default_rng(7 + per_channel)
    low, high = (0, 256) if out_type == "uint8" else (-128, 128)
    x = rng.integers(low, high, (1, 3, 8, 8)).astype(out_type)
    w = rng.integers(-100, 100, (4, 3, 3, 3)).astype(np.int8)
    w_scale = (rng.uniform(0.002, 0.01, 4) if per_channel else np.array(0.004)).astype(
        np.float32)
    w_zero = np.zeros(4 if per_channel else (), np.int8)
    y_zero = np.array(10 if out_type == "uint8" else -5, out_type)
    inits = [("xs", np.array(0.02, np.float32)), ("xz", np.array(low + 120, out_type)),
             ("w", w),
             ("ws", w_scale), ("wz", w_zero), ("ys", np.array(0.05, np.float32)),
             ("yz", y_zero), ("b", rng.integers(-500, 500, 4).astype(np.int32))]
    model = make_model([node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                             ["y"], pads=[1, 1, 1, 1])],
                       [("x", x.shape, INTS[out_type])], [("y", None, INTS[out_type])],
                       initializers=inits, opset=10)
    check(model, {"x": x})


def _byte_matmul_model(a_type, b_type, a_shape, b, za, zb, zero_at_run_time=False):
    """MatMulInteger of an input A by the constant B (byte dot products: byte_product)."""
    inputs = [("a", a_shape, INTS[a_type])]
    inits = [("b", b)]
    names = ["a", "b", "", ""]
    if za is not None:
        names[2] = "za"
        if zero_at_run_time:
            inputs.append(("za", za.shape, INTS[a_type]))
        else:
            inits.append(("za", za))
    if zb is not None:
        names[3] = "zb"
        inits.append(("zb", zb))
    return make_model([node("MatMulInteger", names, ["y"])], inputs,
                      [("y", (*a_shape[:-1], b.shape[1]), T.INT32)], initializers=inits)


@pytest.mark.parametrize("a_type, b_type", [("uint8", "int8"), ("int8", "int8"),
                                            ("uint8", "uint8"), ("int8", "uint8")])
@pytest.mark.parametrize("zero_points", ["none", "tensor", "row_column", "run_time"])
def test_matmul_integer_by_constant_weights_as_byte_dot_products(a_type, b_type, zero_points):
    """A constant B with K a multiple of 4: dot4 words, the zero points and the int8/uint8
    offsets corrected after (byte_product); bit for bit with onnxruntime, extreme values
    included."""
    rng = np.random.default_rng(len(a_type) * 7 + len(b_type) + len(zero_points))
    info_a, info_b = np.iinfo(a_type), np.iinfo(b_type)
    shape = (2, 13, 40)
    a = rng.integers(info_a.min, info_a.max, shape, endpoint=True).astype(a_type)
    a[0, 0] = info_a.max
    a[0, 1] = info_a.min
    b = rng.integers(info_b.min, info_b.max, (40, 37), endpoint=True).astype(b_type)
    b[:, 0] = info_b.min
    b[:, 1] = info_b.max
    za = zb = None
    if zero_points in ("tensor", "run_time"):
        za, zb = np.array(info_a.max // 3, a_type), np.array(info_b.min // 5, b_type)
    elif zero_points == "row_column":  # onnxruntime takes one zero point for A
        za = np.array(info_a.min // 7, a_type)
        zb = rng.integers(0, 9, 37).astype(b_type)
    model = _byte_matmul_model(a_type, b_type, shape, b, za, zb, zero_points == "run_time")
    inputs = {"a": a} if zero_points != "run_time" else {"a": a, "za": za}
    check(model, inputs)


def test_matmul_integer_by_constant_weights_with_a_zero_point_per_row():
    """A zero point per row of A (onnxruntime takes one only): against numpy's int64."""
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (3, 9, 16)).astype(np.int8)
    b = rng.integers(0, 256, (16, 20)).astype(np.uint8)
    za, zb = rng.integers(-9, 9, 9).astype(np.int8), rng.integers(0, 256, 20).astype(np.uint8)
    model = _byte_matmul_model("int8", "uint8", a.shape, b, za, zb)
    want = (a.astype(np.int64) - za[:, None]) @ (b.astype(np.int64) - zb)
    np.testing.assert_array_equal(run_polyc(model, {"a": a})["y"], want.astype(np.int32))


@pytest.mark.parametrize("a_type, b_type, threads", [("uint8", "int8", 1), ("int8", "uint8", 2)])
def test_byte_products_take_the_register_tile_recipe(a_type, b_type, threads):
    """A product big enough for the register tiles: B's words packed at compile time,
    vpdpbusd where the host has VNNI;
    bit for bit with onnxruntime (the compile ran the legality checker)."""
    rng = np.random.default_rng(11)
    info_a, info_b = np.iinfo(a_type), np.iinfo(b_type)
    a = rng.integers(info_a.min, info_a.max, (2, 30, 260), endpoint=True).astype(a_type)
    b = rng.integers(info_b.min, info_b.max, (260, 100), endpoint=True).astype(b_type)
    za, zb = np.array(info_a.max // 2 - 3, a_type), np.array(info_b.max // 2 + 1, b_type)
    model = _byte_matmul_model(a_type, b_type, a.shape, b, za, zb)
    compiled = polyc.compile(model, threads=threads)
    notes = [d for d in compiled.schedule.decisions if d.startswith("tiling: contraction")]
    assert len(notes) == 1 and "byte_words" in notes[0] and "at compile time" in notes[0]
    assert ("vpdpbusd" in compiled.compilation.llvm_ir) == bytedot.host_has_vnni()
    want = run_onnxruntime(model, {"a": a})["y"]
    np.testing.assert_array_equal(compiled.run({"a": a})["y"], want)


def test_byte_dot_product_without_vnni_is_the_same_sum(monkeypatch):
    """The byte-by-byte form (hosts without AVX-512 VNNI) gives the same int32 sums."""
    monkeypatch.setattr(bytedot, "host_has_vnni", lambda: False)
    rng = np.random.default_rng(12)
    a = rng.integers(0, 256, (40, 64)).astype(np.uint8)
    b = rng.integers(-128, 128, (64, 48)).astype(np.int8)
    model = _byte_matmul_model("uint8", "int8", a.shape, b, np.array(131, np.uint8), None)
    compiled = polyc.compile(model)
    assert "vpdpbusd" not in compiled.compilation.llvm_ir
    want = (a.astype(np.int64) - 131) @ b.astype(np.int64)
    np.testing.assert_array_equal(compiled.run({"a": a})["y"], want.astype(np.int32))


@pytest.mark.parametrize("x_type, w_type, channels, attrs, zero", [
    ("uint8", "int8", 32, {"pads": [1, 1, 1, 1]}, "constant"),
    ("uint8", "uint8", 32, {"pads": [1, 1, 1, 1], "strides": [2, 2]}, "run_time"),
    ("int8", "int8", 6, {"pads": [2, 1, 0, 1], "dilations": [2, 1]}, "constant"),
    ("uint8", "int8", 3, {"strides": [2, 1]}, "none"),
    ("uint8", "uint8", 16, {"pads": [1, 1, 1, 1]}, "off_centre"),
    ("int8", "int8", 5, {"pads": [1, 0, 1, 2], "strides": [1, 2]}, "off_centre"),
    ("uint8", "uint8", 8, {"pads": [1, 1, 1, 1]}, "weights_at_run_time"),  # plain loops
])
def test_conv_integer_by_constant_weights_as_byte_dot_products(x_type, w_type, channels,
                                                               attrs, zero):
    """ConvInteger as byte dot products (byte_conv): a channels-last padded copy holding
    x's zero point, channels rounded up to 4, the register-tile recipe over output
    channels; weights whose zero point is off their byte offset with the window sums of
    x; a weight zero point given at run time takes the plain loops. Bit for bit with
    onnxruntime."""
    rng = np.random.default_rng(channels)
    info_x, info_w = np.iinfo(x_type), np.iinfo(w_type)
    x = rng.integers(info_x.min, info_x.max, (2, channels, 30, 29), endpoint=True).astype(x_type)
    w = rng.integers(info_w.min, info_w.max, (48, channels, 3, 3), endpoint=True).astype(w_type)
    w_zero = {"uint8": 128, "int8": 0}[w_type] + (3 if zero == "off_centre" else 0)
    x_zero = np.array(info_x.max // 2 + 5, x_type)
    names = ["x", "w", "" if zero == "none" else "xz", "wz"]
    inputs = [("x", x.shape, INTS[x_type])] + ([("xz", (), INTS[x_type])]
                                                if zero == "run_time" else []) + \
        ([("wz", (), INTS[w_type])] if zero == "weights_at_run_time" else [])
    inits = [("w", w)] + ([("wz", np.array(w_zero, w_type))]
                          if zero != "weights_at_run_time" else []) + \
        ([("xz", x_zero)] if zero in ("constant", "off_centre", "weights_at_run_time") else [])
    model = make_model([node("ConvInteger", names, ["y"], **attrs)], inputs,
                       [("y", None, T.INT32)], initializers=inits, opset=10)
    compiled = polyc.compile(model)
    notes = [d for d in compiled.schedule.decisions if d.startswith("tiling: contraction")]
    assert any("conv_words" in note for note in notes) == (zero != "weights_at_run_time")
    feeds = {"x": x, "xz": x_zero} if zero == "run_time" else {"x": x}
    if zero == "weights_at_run_time":
        feeds["wz"] = np.array(w_zero, w_type)
    want = run_onnxruntime(model, feeds)["y"]
    np.testing.assert_array_equal(compiled.run(feeds)["y"], want)


@pytest.mark.parametrize("x_type, stride, zero", [("uint8", 1, "constant"), ("int8", 2, "run_time"),
                                                  ("uint8", 1, "per_channel")])
def test_depthwise_qlinear_conv_runs_exactly_in_floats(x_type, stride, zero):
    """A depthwise QLinearConv whose sums stay below 2**24 runs as the float depthwise
    conv of the shifted values (exact), then requantizes: bit for bit with onnxruntime."""
    rng = np.random.default_rng(stride)
    info = np.iinfo(x_type)
    x = rng.integers(info.min, info.max, (1, 24, 17, 16), endpoint=True).astype(x_type)
    w = rng.integers(-127, 128, (24, 1, 3, 3)).astype(np.int8)
    per_channel = zero == "per_channel"
    w_scale = (rng.uniform(0.002, 0.01, 24) if per_channel else np.array(0.004)).astype(
        np.float32)
    w_zero = rng.integers(-3, 4, 24).astype(np.int8) if per_channel else np.array(0, np.int8)
    x_zero = np.array(info.min + 100, x_type)
    inputs = [("x", x.shape, INTS[x_type])] + ([("xz", (), INTS[x_type])]
                                                if zero == "run_time" else [])
    inits = [("xs", np.array(0.02, np.float32)), ("w", w), ("ws", w_scale), ("wz", w_zero),
             ("ys", np.array(0.03, np.float32)), ("yz", np.array(info.min + 9, x_type)),
             ("b", rng.integers(-900, 900, 24).astype(np.int32))] + \
        ([] if zero == "run_time" else [("xz", x_zero)])
    model = make_model([node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                             ["y"], group=24, pads=[1, 1, 1, 1], strides=[stride, stride])],
                       inputs, [("y", None, INTS[x_type])], initializers=inits, opset=10)
    compiled = polyc.compile(model)
    assert "conv_integer_floats" in str(compiled.compilation.graph)
    feeds = {"x": x, "xz": x_zero} if zero == "run_time" else {"x": x}
    want = run_onnxruntime(model, feeds)["y"]
    np.testing.assert_array_equal(compiled.run(feeds)["y"], want)


def _qdq_model(op, x_type, w, w_scale, bias_scale_factor=1.0, opset=13):
    """float x -> Q -> DQ -> ``op`` (DQ of the 8-bit weights, a Conv's or Gemm's DQ'd
    int32 bias) -> Q -> DQ -> y: the QDQ form a static quantization writes. A Gemm takes
    its weights transposed ([N, K]); per-channel scales run along the output channels."""
    rng = np.random.default_rng(4)
    x_zero = np.array(3 if x_type == "uint8" else -2, x_type)
    inits = [("xs", np.array(0.05, np.float32)), ("xz", x_zero), ("wq", w),
             ("ws", w_scale), ("wz", np.zeros(w_scale.shape, w.dtype)),
             ("ys", np.array(0.2, np.float32)), ("yz", np.array(5, x_type))]
    nodes = [node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             node("DequantizeLinear", ["xq", "xs", "xz"], ["xf"]),
             node("DequantizeLinear", ["wq", "ws", "wz"], ["wf"],
                  axis=1 if op == "MatMul" else 0)]
    if op in ("Conv", "Gemm"):
        bias = rng.integers(-2000, 2000, w.shape[0]).astype(np.int32)
        inits += [("bq", bias), ("bs", (0.05 * w_scale * bias_scale_factor).astype(np.float32)),
                  ("bz", np.zeros(w.shape[0], np.int32))]
        nodes.append(node("DequantizeLinear", ["bq", "bs", "bz"], ["bf"], axis=0))
    if op == "Conv":
        nodes.append(node("Conv", ["xf", "wf", "bf"], ["c"], pads=[1, 1, 1, 1]))
        x_shape, y_shape = (1, w.shape[1], 10, 9), (1, w.shape[0], 10, 9)
    elif op == "Gemm":
        nodes.append(node("Gemm", ["xf", "wf", "bf"], ["c"], transB=1))
        x_shape, y_shape = (6, w.shape[1]), (6, w.shape[0])
    else:
        nodes.append(node("MatMul", ["xf", "wf"], ["c"]))
        x_shape, y_shape = (6, w.shape[0]), (6, w.shape[1])
    nodes += [node("QuantizeLinear", ["c", "ys", "yz"], ["yq"]),
              node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    model = make_model(nodes, [("x", x_shape)], [("y", y_shape)], initializers=inits,
                       opset=opset)
    return model, {"x": rng.standard_normal(x_shape).astype(np.float32) * 2}


@pytest.mark.parametrize("op, x_type", [("Conv", "uint8"), ("Conv", "int8"),
                                        ("MatMul", "uint8"), ("MatMul", "int8"),
                                        ("Gemm", "uint8")])
def test_qdq_conv_and_matmul_become_qlinear_ops(op, x_type):
    """DequantizeLinear -> Conv / MatMul / Gemm -> QuantizeLinear is QLinearConv /
    QLinearMatMul / QGemm (cleanup/quantized.py), as onnxruntime runs it, weights per
    output channel or column: bit for bit (opset 13, whose DequantizeLinear the
    reference evaluator folds at version 19)."""
    rng = np.random.default_rng(5)
    if op == "Conv":
        w = rng.integers(-127, 128, (16, 8, 3, 3)).astype(np.int8)
        w_scale = rng.uniform(0.005, 0.02, 16).astype(np.float32)
    elif op == "Gemm":
        w = rng.integers(-127, 128, (20, 32)).astype(np.int8)
        w_scale = rng.uniform(0.005, 0.02, 20).astype(np.float32)
    else:
        w = rng.integers(-127, 128, (32, 20)).astype(np.int8)
        w_scale = rng.uniform(0.005, 0.02, 20).astype(np.float32) if x_type == "uint8" \
            else np.array(0.01, np.float32)
    model, inputs = _qdq_model(op, x_type, w, w_scale)
    compiled = polyc.compile(model)
    assert any(note.startswith("fused 1 DequantizeLinear") for note in
               compiled.compilation.graph.notes)
    assert not any("could not fold" in note for note in compiled.compilation.graph.notes)
    want = run_onnxruntime(model, inputs)["y"]
    np.testing.assert_array_equal(compiled.run(inputs)["y"], want)


def test_qdq_conv_with_a_bias_off_its_scale_stays_float():
    """A bias dequantized with another scale than x_scale * w_scale is no QLinearConv bias:
    the pattern stays float arithmetic (within a quantization step of onnxruntime)."""
    rng = np.random.default_rng(6)
    w = rng.integers(-127, 128, (16, 8, 3, 3)).astype(np.int8)
    model, inputs = _qdq_model("Conv", "uint8", w, np.full(16, 0.01, np.float32),
                               bias_scale_factor=1.5)
    compiled = polyc.compile(model)
    assert not any(note.startswith("fused") for note in compiled.compilation.graph.notes)
    want = run_onnxruntime(model, inputs)["y"]
    np.testing.assert_allclose(compiled.run(inputs)["y"], want, rtol=0, atol=0.2 + 1e-6)


@pytest.mark.parametrize("shape, attrs", [((2, 6, 11), {"group": 3, "pads": [1, 2]}),
                                          ((1, 4, 5, 6, 7), {"pads": [1] * 6})])
def test_grouped_and_other_rank_integer_convs_run_exactly_in_floats(shape, attrs):
    """A grouped 1-D and a 3-D ConvInteger whose sums stay below 2**24: the float conv of
    the shifted values (conv_integer_floats), bit for bit with onnxruntime."""
    rng = np.random.default_rng(len(shape))
    group = attrs.get("group", 1)
    kernel = (3,) * (len(shape) - 2)
    x = rng.integers(0, 256, shape).astype(np.uint8)
    w = rng.integers(0, 256, (6, shape[1] // group, *kernel)).astype(np.uint8)
    model = make_model([node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **attrs)],
                       [("x", shape, T.UINT8)], [("y", None, T.INT32)],
                       initializers=[("w", w), ("xz", np.array(117, np.uint8)),
                                     ("wz", np.array(130, np.uint8))], opset=10)
    compiled = polyc.compile(model)
    assert "conv_integer_floats" in str(compiled.compilation.graph)
    np.testing.assert_array_equal(compiled.run({"x": x})["y"],
                                  run_onnxruntime(model, {"x": x})["y"])
