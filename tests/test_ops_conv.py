"""Convolutions, pooling and normalizations: compiled with polyc and compared with
onnxruntime (and the frontend's reference interpreter) on seeded random inputs.

Tolerances: rtol 1e-4, atol 1e-5 (sums over windows and channels are added in another
order than onnxruntime's). LRN with an even ``size`` or on other than 4-D input, which
onnxruntime refuses, is compared with numpy following the ONNX definition.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto, helper

import polyc
from polyc.errors import PolycError, ShapeError, UnsupportedOpError
from polyc.frontend import import_model
from polyc.frontend.core import Map, Reduce
from polyc.tiling import parallel as parallel_stage
from polyc.tiling.cache import Caches
from polyc.tiling.microkernel import choose_blocking

from onnx_helpers import (
    make_model,
    random_inputs,
    run_onnxruntime,
    run_polyc,
    run_reference,
    untiled_contraction,
)

pytestmark = pytest.mark.usefixtures("avx512_register_tiles")  # the tiles named here


RTOL, ATOL = 1e-4, 1e-5
OPTIONS = [{}, {"fuse": "none"}, {"tile": False}]


def weight(name, shape, seed, low=-1.0):
    return (name, np.random.default_rng(seed).uniform(low, 1, shape).astype(np.float32))


def single_node_model(op, x_shape, weights=(), *, opset=13, **attrs):
    """``y = op(x, *weights)``: x a graph input, the weights initializers."""
    node = helper.make_node(op, ["x"] + [name for name, _ in weights], ["y"], **attrs)
    return make_model([node], [("x", x_shape)], ["y"], initializers=weights, opset=opset)


def assert_matches(model, *, seed=0, expected=None, **options):
    """polyc (with ``options``) and the reference interpreter against onnxruntime, or
    against ``expected(inputs)``."""
    inputs = random_inputs(model, seed)
    want = expected(inputs) if expected else run_onnxruntime(model, inputs)
    got = run_polyc(model, inputs, **options)
    reference = run_reference(model, inputs)
    for name, value in (want if isinstance(want, dict) else {"y": want}).items():
        assert got[name].shape == value.shape, name
        np.testing.assert_allclose(got[name], value, rtol=RTOL, atol=ATOL, err_msg=name)
        np.testing.assert_allclose(reference[name], value, rtol=RTOL, atol=ATOL, err_msg=name)


def assert_compiled_matches(compiled, model) -> None:
    """``compiled`` (of ``model``, output ``y``) against onnxruntime on seed 0's inputs."""
    inputs = random_inputs(model, 0)
    np.testing.assert_allclose(compiled.run(inputs)["y"], run_onnxruntime(model, inputs)["y"],
                               rtol=RTOL, atol=ATOL)


# -- Conv -----------------------------------------------------------------------------

CONV_CASES = {
    "default": ((2, 3, 7, 7), (4, 3, 3, 3), {}),
    "asymmetric_pads_no_bias": ((2, 3, 7, 7), (4, 3, 3, 3), {"pads": [1, 0, 2, 1]}),
    "same_upper_stride2": ((2, 3, 7, 7), (4, 3, 3, 3),
                           {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    "same_lower_stride2": ((2, 3, 8, 7), (4, 3, 3, 2),
                           {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    "valid_dilation2": ((2, 3, 9, 9), (4, 3, 3, 3), {"auto_pad": "VALID", "dilations": [2, 2]}),
    "group2": ((2, 4, 6, 6), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    "depthwise": ((2, 4, 6, 6), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1],
                                                "strides": [2, 2]}),
    "depthwise_multiplier2": ((2, 4, 6, 6), (8, 1, 3, 3), {"group": 4, "pads": [1, 2, 0, 1]}),
    "1d": ((2, 3, 9), (4, 3, 3), {"strides": [2], "pads": [1, 2]}),
    "3d": ((1, 2, 5, 5, 4), (3, 2, 3, 3, 2), {"pads": [1, 1, 0, 1, 1, 1]}),
    "1x1": ((2, 5, 6, 7), (4, 5, 1, 1), {}),
    "1x1_stride2": ((2, 5, 6, 7), (4, 5, 1, 1), {"strides": [2, 2]}),
    # im2col reads one pixel per row of x, a guarded read whose first lane is outside
    # (the graph fuzzer's seed 205: that lane's clamped pixel was loaded for every lane)
    "1x1_pads_stride2": ((1, 3, 3, 3), (3, 3, 1, 1), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "kernel_shape_strides_dilations": ((2, 3, 9, 8), (4, 3, 2, 3),
                                       {"kernel_shape": [2, 3], "strides": [2, 1],
                                        "dilations": [2, 2], "pads": [0, 1, 1, 0]}),
}


@pytest.mark.parametrize("case,opset", [(case, 11) for case in sorted(CONV_CASES)] + [
    (case, 22) for case in ("default", "depthwise", "3d")])  # Conv-22 only adds types
def test_conv(case, opset):
    x_shape, w_shape, attrs = CONV_CASES[case]
    weights = [weight("w", w_shape, 1)]
    if "no_bias" not in case:
        weights.append(weight("b", (w_shape[0],), 2))
    assert_matches(single_node_model("Conv", x_shape, weights, opset=opset, **attrs))


@pytest.mark.parametrize("options", OPTIONS[1:])
@pytest.mark.parametrize("case", ["asymmetric_pads_no_bias", "depthwise"])
def test_conv_options(case, options):
    x_shape, w_shape, attrs = CONV_CASES[case]
    model = single_node_model("Conv", x_shape, [weight("w", w_shape, 1)], **attrs)
    assert_matches(model, **options)


def test_conv_weights_from_graph_inputs():
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], group=2)
    model = make_model([node], [("x", (2, 4, 5, 5)), ("w", (6, 2, 3, 3)), ("b", (6,))], ["y"])
    assert_matches(model, seed=3)


def test_strided_conv_is_im2col_and_one_packed_product():
    """A strided conv: im2col Map, then a Reduce with one reduction loop the contraction
    tiler takes (with at least 6 output channels and 64 output positions: a full
    register tile)."""
    model = single_node_model("Conv", (1, 3, 20, 20), [weight("w", (8, 3, 3, 3), 1)],
                              pads=[1, 0, 2, 1], strides=[2, 2])
    ops = [op for op in import_model(model).ops if not hasattr(op, "src")]  # no Views
    assert [type(op) for op in ops] == [Map, Reduce, Map]  # im2col, product, crop
    im2col, product = ops[0], ops[1]
    assert im2col.shape == (1, 3, 3, 3, 11, 10) and im2col.expr.outside == "fill"
    # n, g, m, output positions (110 padded to 112: whole vectors), (c, kh, kw)
    assert product.extents == (1, 1, 8, 112, 27)
    compiled = polyc.compile(model)
    np.testing.assert_allclose(compiled.run(random_inputs(model, 0))["y"],
                               run_onnxruntime(model, random_inputs(model, 0))["y"],
                               rtol=RTOL, atol=ATOL)
    assert any(d.startswith("tiling: contraction") and "_conv_update" in d
               for d in compiled.schedule.decisions)


def test_stride1_conv_to_few_channels_is_flat_direct():
    """A stride-1 conv to 8 channels (not whole vectors): a padded copy of X, one Reduce
    over (n, m, p, c, kh, kw) whose read of the copy is affine and stride 1 along the
    pixels p of a padded-width grid, and a crop; the tiler runs the three reductions in
    a register tile, no im2col."""
    model = single_node_model("Conv", (1, 3, 10, 10), [weight("w", (8, 3, 3, 3), 1)],
                              pads=[1, 0, 2, 1])
    ops = [op for op in import_model(model).ops if not hasattr(op, "src")]  # no Views
    assert [type(op) for op in ops] == [Map, Reduce, Map]  # pad, product, crop
    pad, product, crop = ops
    # 11 x 11 pixels (9 columns + 2) rounded up to 128 are at most 1.5 x 99 pixels: direct;
    # the grid: 121 rounded up to 128 (whole vectors); rows: ceil((2*11 + 2 + 128) / 11)
    assert product.extents == (1, 8, 128, 3, 3, 3)
    assert pad.shape == (1, 3, 14, 11)
    assert crop.shape == (1, 8, 11, 9)
    compiled = polyc.compile(model)
    assert_compiled_matches(compiled, model)
    assert any(d.startswith("tiling: contraction") and "read in place" in d
               for d in compiled.schedule.decisions)
    assert "im2col" not in str(compiled.compilation.scop)


FLAT_DIRECT_CASES = {  # output channels not in whole vectors, pixels past 64
    "pads_bias_relu": ((2, 16, 17, 19), (24, 16, 3, 3), {"pads": [1, 1, 1, 1]}, True),
    "asymmetric_dilation2": ((1, 5, 21, 23), (24, 5, 3, 3),
                             {"pads": [2, 0, 1, 3], "dilations": [2, 2]}, False),
    "5x5_valid": ((1, 8, 20, 22), (40, 8, 5, 5), {}, True),
    "3x1_same_upper": ((1, 4, 15, 33), (8, 4, 3, 1), {"auto_pad": "SAME_UPPER"}, True),
}


def _conv_relu(x_shape, w_shape, attrs, bias):
    weights = [weight("w", w_shape, 1)] + ([weight("b", (w_shape[0],), 2)] if bias else [])
    conv = helper.make_node("Conv", ["x"] + [n for n, _ in weights], ["c"], **attrs)
    relu = helper.make_node("Relu", ["c"], ["y"])
    return make_model([conv, relu], [("x", x_shape)], ["y"], initializers=weights)


@pytest.mark.parametrize("case", sorted(FLAT_DIRECT_CASES))
@pytest.mark.parametrize("threads", [1, 2])
def test_flat_direct_conv_matches_onnxruntime(case, threads):
    model = _conv_relu(*FLAT_DIRECT_CASES[case])
    compiled = polyc.compile(model, threads=threads)
    assert any("read in place" in d for d in compiled.schedule.decisions)
    assert_compiled_matches(compiled, model)


def test_flat_direct_conv_crop_with_sigmoid_runs_as_a_pass_of_its_own():
    """A flat direct conv's crop skips the padding columns of the pixel grid: in the
    register tile its vector loop would have holes (scalar code), so it and the SiLU
    after it run as their own vector loops; results match onnxruntime."""
    x_shape, w_shape, attrs, _ = FLAT_DIRECT_CASES["pads_bias_relu"]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs),
             helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["y"])]
    model = make_model(nodes, [("x", x_shape)], ["y"], initializers=[
        weight("w", w_shape, 1), weight("b", (w_shape[0],), 2)])
    compiled = polyc.compile(model)
    (note,) = [d for d in compiled.schedule.decisions if d.startswith("tiling: contraction")]
    assert "read in place" in note and "epilogue" not in note
    mul = next(s.name for s in compiled.compilation.scop.statements if s.name.endswith("_mul"))
    assert any(d.startswith(f"tiling: band of {mul}") for d in compiled.schedule.decisions)
    assert_compiled_matches(compiled, model)


DIRECT_CASES = {  # output channels in whole vectors
    "pads_bias_relu": ((2, 16, 23, 24), (64, 16, 3, 3), {"pads": [1, 1, 1, 1]}, True),
    "7x7_output": ((1, 96, 7, 7), (64, 96, 3, 3), {"pads": [1, 1, 1, 1]}, True),
    "2x2_output_stride2": ((1, 64, 4, 4), (48, 64, 3, 3),
                           {"strides": [2, 2], "pads": [1, 1, 1, 1]}, False),
    "asymmetric_dilation2": ((1, 5, 25, 27), (128, 5, 3, 3),
                             {"pads": [2, 0, 1, 3], "dilations": [2, 2]}, False),
    "5x5_valid": ((1, 8, 28, 30), (64, 8, 5, 5), {}, True),
    "7x7_stride2": ((1, 3, 48, 50), (64, 3, 7, 7), {"strides": [2, 2], "pads": [3] * 4}, True),
    "3x3_stride2_batch2": ((2, 16, 46, 46), (64, 16, 3, 3),
                           {"strides": [2, 2], "pads": [1, 1, 1, 1]}, False),
    "stride2x1_dilation2": ((1, 4, 40, 30), (128, 4, 3, 3),
                            {"strides": [2, 1], "dilations": [2, 2], "pads": [2, 0, 1, 3]}, True),
}


@pytest.mark.parametrize("case", sorted(DIRECT_CASES))
@pytest.mark.parametrize("threads", [1, 2])
def test_direct_conv_with_channels_in_the_lanes(case, threads):
    """A direct conv to a multiple of 16 channels computes Yt[n, oh, ow, m]: weights
    packed at compile time with the kernel loops (c, kh, kw) inside the register tile
    of 6 to 8 pixels x 32 channels (16 for 48); the output is that tensor, stored
    channels-last, so the Relu before the graph output (NCHW) joins the copy that
    transposes it, tiled as a transpose; results match onnxruntime. (The 7x7 case would
    run by Winograd: ``winograd="off"``.)"""
    model = _conv_relu(*DIRECT_CASES[case])
    compiled = polyc.compile(model, threads=threads, winograd="off")
    decisions = compiled.schedule.decisions
    assert any(re.match(r"tiling: contraction S\d_conv_transposed_update: w packed into "
                        r"w_packed at compile time, register tile [2-8]x(16|32),", d)
               and "_relu" not in d for d in decisions)
    assert any(re.match(r"tiling: band of S\d_copy: tiles (1x)?64x(1x)?112", d) for d in decisions)
    assert "im2col" not in str(compiled.compilation.scop)
    assert_compiled_matches(compiled, model)


@pytest.mark.parametrize("name", ["F2", "F4"])
def test_winograd_transforms_compute_a_correlation(name):
    """At ((G g Gt) . (Bt d B)) A is the m x m valid correlation of a t x t tile d with a
    3x3 kernel g (float64), for the transforms toom_cook derives, and the filters of a
    conv are G g Gt per channel pair."""
    from polyc.frontend.ops import winograd

    f = getattr(winograd, name)
    t, m = f.taps, f.tile
    rng = np.random.default_rng(7)
    for _ in range(5):
        d, g = rng.standard_normal((t, t)), rng.standard_normal((3, 3))
        want = np.array([[np.sum(d[y:y + 3, x:x + 3] * g) for x in range(m)] for y in range(m)])
        got = f.at @ ((f.g @ g @ f.g.T) * (f.bt @ d @ f.bt.T)) @ f.at.T
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    weights = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    u = winograd.filters(f, weights).reshape(t, t, 16, 32)
    np.testing.assert_allclose(u[:, :, 5, 7], f.g @ weights[7, 5] @ f.g.T, rtol=1e-6, atol=1e-6)


WINOGRAD_CASES = {  # (x, first conv to C channels, second conv, its attrs, bias)
    "pads_bias": ((1, 16, 12, 14), 64, (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}, True),
    "batch2_no_bias": ((2, 16, 10, 8), 80, (96, 80, 3, 3), {"pads": [1, 1, 1, 1]}, False),
    "asymmetric_pads": ((1, 16, 11, 12), 64, (64, 64, 3, 3), {"pads": [0, 2, 3, 0]}, True),
    "valid": ((1, 16, 14, 18), 64, (128, 64, 3, 3), {}, True),
    "odd_7x7_cropped": ((1, 16, 7, 7), 64, (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}, True),
    "odd_13x11_cropped": ((1, 16, 13, 11), 64, (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}, False),
}


def _channels_last_conv_pair(x_shape, c_size, w_shape, attrs, bias):
    """A 3x3 conv from x to ``c_size`` channels (direct: its output channels-last), Relu,
    then the conv under test and Relu."""
    first = [weight("w0", (c_size, x_shape[1], 3, 3), 3), weight("b0", (c_size,), 4)]
    weights = [weight("w", w_shape, 1)] + ([weight("b", (w_shape[0],), 2)] if bias else [])
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0"] + [n for n, _ in weights], ["c"], **attrs),
             helper.make_node("Relu", ["c"], ["y"])]
    return make_model(nodes, [("x", x_shape)], ["y"], initializers=first + weights)


@pytest.mark.parametrize("case", sorted(WINOGRAD_CASES))
@pytest.mark.parametrize("threads", [1, 2])
def test_winograd_conv_matches_onnxruntime(case, threads):
    """A 3x3 stride-1 conv over a channels-last input, 64 or more channels each side and
    16 or more 2x2 output tiles, is Winograd's F(2x2, 3x3): input transform in two
    passes, 16 products (tiles x C) @ (C x M), each with the contraction recipe and its
    filters packed at compile time, and an output transform (of whole tiles: an odd
    output size is cropped from them, 7x7 from 8x8); results match
    onnxruntime's within 1e-5 of the largest output (other rounding than a direct
    conv's: G holds halves and the sums run in another order)."""
    model = _channels_last_conv_pair(*WINOGRAD_CASES[case])
    labels = [op.label for op in import_model(model).ops]
    crop = ["winograd_crop"] if "cropped" in case else []
    assert [label for label in labels if label.startswith("winograd_")] == [
        "winograd_rows", "winograd_input", "winograd_tiles", "winograd_product",
        "winograd_output"] + crop
    compiled = polyc.compile(model, threads=threads)
    assert any(re.match(r"tiling: contraction S\d+_winograd_product_update: (winograd_filters"
                        r"\d*) packed into \1_packed at compile time", d)
               for d in compiled.schedule.decisions)
    inputs = random_inputs(model, 0)
    want = run_onnxruntime(model, inputs)["y"]
    np.testing.assert_allclose(compiled.run(inputs)["y"], want, rtol=RTOL,
                               atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("winograd, taps", [("4x4", 36), ("2x2", 16), ("off", None)])
def test_winograd_option_chooses_the_transform(winograd, taps):
    """``winograd="4x4"`` runs F(4x4, 3x3) where whole 4x4 tiles fit (36 products; within
    1e-5 of the largest output of onnxruntime's, measured 2-3.5e-6 over 64-256
    channels), ``"2x2"`` (the default) F(2x2, 3x3), ``"off"`` the direct conv."""
    model = _channels_last_conv_pair((1, 16, 16, 16), 64, (64, 64, 3, 3),
                                     {"pads": [1, 1, 1, 1]}, True)
    products = [op for op in import_model(model, winograd=winograd).ops
                if op.label == "winograd_product"]
    assert [op.extents[0] for op in products] == ([taps] if taps else [])
    compiled = polyc.compile(model, winograd=winograd)
    assert compiled.compilation.options.winograd == winograd
    inputs = random_inputs(model, 0)
    want = run_onnxruntime(model, inputs)["y"]
    np.testing.assert_allclose(compiled.run(inputs)["y"], want, rtol=RTOL,
                               atol=1e-5 * np.abs(want).max())


def test_bad_winograd_option_is_refused():
    model = _channels_last_conv_pair((1, 16, 8, 8), 64, (64, 64, 3, 3), {"pads": [1] * 4}, True)
    with pytest.raises(PolycError, match="winograd must be one of 2x2, 4x4, off, got '6x6'"):
        polyc.compile(model, winograd="6x6")


def test_winograd_conv_over_an_nchw_input_copies_it_channels_last():
    """A graph input is NCHW: the Winograd conv reads a channels-last copy of it (a
    transposing pass, 0.08 ms at 64 channels 56x56 against 1.4 ms for the conv)."""
    model = _conv_relu((1, 64, 12, 10), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}, True)
    labels = [op.label for op in import_model(model).ops]
    assert labels[:2] == ["winograd_nhwc", "winograd_rows"]
    inputs = random_inputs(model, 0)
    want = run_onnxruntime(model, inputs)["y"]
    np.testing.assert_allclose(polyc.compile(model).run(inputs)["y"], want, rtol=RTOL,
                               atol=1e-5 * np.abs(want).max())


def test_winograd_conv_with_a_symbolic_batch():
    """One compiled Winograd conv for every batch size (a symbolic dim): batches 1 and 3
    match onnxruntime within 1e-5 of the largest output."""
    model = _channels_last_conv_pair((1, 16, 10, 12), 64, (64, 64, 3, 3), {"pads": [1] * 4},
                                     True)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    del model.graph.value_info[:]  # inferred for batch 1
    compiled = polyc.compile(model, symbolic=["batch"])
    assert any(op.label == "winograd_product" for op in compiled.compilation.graph.ops)
    rng = np.random.default_rng(3)
    for batch in (1, 3):
        inputs = {"x": rng.standard_normal((batch, 16, 10, 12)).astype(np.float32)}
        want = run_onnxruntime(model, inputs)["y"]
        np.testing.assert_allclose(compiled.run(inputs)["y"], want, rtol=RTOL,
                                   atol=1e-5 * np.abs(want).max())


def test_cli_winograd_option(tmp_path, capsys):
    """``--winograd`` reaches the frontend (the manifest of a compiled artifact records
    it); its choices are the frontend's; another value is an argparse error."""
    import json

    from polyc.cli import build_parser, main
    from polyc.frontend.ops import winograd

    model = _channels_last_conv_pair((1, 16, 16, 16), 64, (64, 64, 3, 3), {"pads": [1] * 4},
                                     True)
    path, out = tmp_path / "conv.onnx", tmp_path / "conv.so"
    path.write_bytes(model.SerializeToString())
    assert main(["compile", str(path), "-o", str(out), "--winograd", "4x4"]) == 0
    manifest = json.loads(json.dumps(polyc.load(out).manifest))
    assert manifest["options"]["winograd"] == "4x4"
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["inspect", str(path), "--winograd", "3x3"])
    assert "invalid choice: '3x3'" in capsys.readouterr().err
    compile_parser = build_parser()._subparsers._group_actions[0].choices["compile"]
    (action,) = [a for a in compile_parser._actions if a.dest == "winograd"]
    assert tuple(action.choices) == winograd.CHOICES


@pytest.mark.parametrize("x_shape, c_size, w_shape, attrs", [
    ((1, 16, 12, 12), 32, (64, 32, 3, 3), {"pads": [1, 1, 1, 1]}),   # 32 input channels
    ((1, 16, 5, 9), 64, (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}),     # 5x9 as 6x10: 1.33x
    ((1, 16, 6, 6), 64, (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}),     # 9 tiles
    ((1, 16, 12, 12), 64, (64, 64, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
])
def test_convs_that_winograd_does_not_pay_for_stay_direct(x_shape, c_size, w_shape, attrs):
    """Fewer than 64 channels, 15 tiles, fewer than 16 tiles, a dilation: the
    direct conv, whose sums of 288-576 products match onnxruntime's within 1e-5 of the
    largest output."""
    model = _channels_last_conv_pair(x_shape, c_size, w_shape, attrs, True)
    assert not any(op.label.startswith("winograd") for op in import_model(model).ops)
    inputs = random_inputs(model, 0)
    want = run_onnxruntime(model, inputs)["y"]
    np.testing.assert_allclose(polyc.compile(model).run(inputs)["y"], want, rtol=RTOL,
                               atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("channels, computed, weights", [(24, 24, "w"),
                                                         (72, 80, r"conv_weights\d*")])
def test_strided_conv_to_channels_short_of_whole_vectors_is_direct(bias, channels, computed,
                                                                   weights):
    """A 3x3 stride-2 conv over an NCHW input to channels short of whole vectors (im2col
    before): direct; to 24 channels (8 more than whole vectors, at most 56) over those
    24, the register tile's last 8 a half vector; to 72 over 80 with zero weights (and
    bias) beyond the 72, its output a view of the first 72; results match onnxruntime."""
    model = _conv_relu((1, 3, 33, 30), (channels, 3, 3, 3),
                       {"strides": [2, 2], "pads": [1] * 4}, bias)
    (product,) = [op for op in import_model(model).ops if isinstance(op, Reduce)]
    assert product.extents == (1, 17, 15, computed, 3, 3, 3)
    compiled = polyc.compile(model)
    assert any(re.match(rf"tiling: contraction S\d_conv_transposed_update: {weights} "
                        r"packed into .* at compile time", d) for d in compiled.schedule.decisions)
    assert "im2col" not in str(compiled.compilation.scop)
    assert_compiled_matches(compiled, model)


@pytest.mark.parametrize("channels, width, tile", [
    (16, 48, "16x16"), (32, 48, "8x32"), (48, 42, "7x16"), (80, 36, "6x16"), (64, 16, "8x32"),
    (96, 24, "6x32"), (32, 4, "2x32"), (64, 110, "11x32"), (32, 54, "9x32")])
def test_direct_conv_tile_fits_the_output_rows(channels, width, tile):
    """A 16-channel conv: a tile as wide as the channels, with more pixel rows (16
    accumulators); more channels: 32 wide, or 16 when 32 would leave a last tile of 16
    columns (48 and 80 channels), with 6, 7 or 8 rows, whichever leaves fewest to a
    partial tile of the output row (24, 21, 18, 8 and 12 columns), and no more than the
    row has (2 columns, 2 rows); rows of 55 and 27 pixels, which none of 6, 7 and 8
    divides, take 11 and 9 rows; results match onnxruntime."""
    model = _conv_relu((1, 3, 50, width), (channels, 3, 3, 3),
                       {"strides": [2, 2], "pads": [1, 1, 1, 1]}, True)
    compiled = polyc.compile(model)
    assert any(re.match(r"tiling: contraction S\d_conv_transposed_update: w packed into "
                        rf"w_packed at compile time, register tile {tile},", d)
               for d in compiled.schedule.decisions)
    assert_compiled_matches(compiled, model)


@pytest.mark.parametrize("channels, size, threads, nc, parallel", [
    (256, 13, 1, 256, None), (256, 7, 2, 64, "i3/64 (c0)"), (192, 7, 2, 32, "i3/32 (c0)"),
    (256, 13, 2, 256, "i1 (c3)"), (64, 13, 2, 64, "i1 (c3)")])
def test_direct_conv_on_threads_splits_its_channels_or_rows(channels, size, threads, nc,
                                                            parallel, monkeypatch):
    """On several threads a direct conv over 7 output rows (fewer than 8) makes at least
    4 column blocks of its channels (of 2 register tiles of 32 for 256 channels; of one
    for 192, whose 6 tiles would make 3 blocks of 2), the outermost loop, which the
    threads split once per call; over 13 rows and one k block (16 input channels) the
    columns stay in one block and the threads split the rows (once: there is one k
    block), as they do for 64 channels (2 tiles: blocks of one would be too few to
    split); on one thread a block holds all the channels (squeezenet's conv1 had taken
    1.00 ms with 3 blocks on one thread, 0.88 with one); results match onnxruntime. (The
    smaller convs, alone in a program, would stay serial: MIN_PROGRAM_INSTANCES.)"""
    monkeypatch.setattr(parallel_stage, "MIN_PROGRAM_INSTANCES", 1)
    model = _conv_relu((1, 16, size, size), (channels, 16, 3, 3), {"pads": [1, 1, 1, 1]},
                       True)
    compiled = polyc.compile(model, threads=threads)
    decisions = compiled.schedule.decisions
    assert any(re.match(r"tiling: contraction S\d_conv_transposed_update: .* register tile "
                        rf"7x32, blocks mc=\d+ nc={nc} kc=16", d) for d in decisions), decisions
    notes = [d for d in decisions if d.startswith("parallel: S1_conv_transposed_init")]
    assert [n.split(": loop ")[1] for n in notes] == ([parallel] if parallel else [])
    assert_compiled_matches(compiled, model)


@pytest.mark.parametrize("channels, l2, kc", [(64, 2 << 20, 64), (96, 256 << 10, 32)])
def test_direct_conv_reduces_over_few_equal_channel_blocks(channels, l2, kc):
    """A direct conv's k blocks are all its input channels when a register tile's panel
    of weights fits half of L2, else the fewest equal blocks that do (5x5 kernels, 32
    columns: 96 channels take 307 KB, 3 blocks of 32 fit 128 KB)."""
    model = _conv_relu((1, channels, 9, 9), (32, channels, 5, 5), {"pads": [2, 2, 2, 2]}, True)
    c = untiled_contraction(model)
    assert c.inner_size == 25 and c.size("k") == channels
    block = choose_blocking(c, Caches(48 << 10, l2, 64 << 20))
    assert (block.nr, block.kc) == (32, kc)
    inputs = random_inputs(model, 0)  # float32 sums of 1600 and 2400 products: within
    want = run_onnxruntime(model, inputs)["y"]  # 1e-4 of the largest output
    np.testing.assert_allclose(polyc.compile(model).run(inputs)["y"], want, rtol=RTOL,
                               atol=1e-4 * np.abs(want).max())


def test_strided_direct_conv_reads_the_padded_input_two_pixel_loops():
    """A stride-2 7x7 conv (a CNN's stem): the padded copy of X spans the windows, and
    one Reduce over (n, oh, ow, m, c, kh, kw) reads it at (oh*2 + kh, ow*2 + kw)."""
    x_shape, w_shape, attrs, _ = DIRECT_CASES["7x7_stride2"]
    model = single_node_model("Conv", x_shape, [weight("w", w_shape, 1)], **attrs)
    ops = [op for op in import_model(model).ops if not hasattr(op, "src")]  # no Views
    assert [type(op) for op in ops] == [Map, Reduce, Map]  # pad, product, crop
    pad, product, crop = ops
    assert pad.shape == (1, 3, 53, 55)  # (24-1)*2 + 7 rows, (25-1)*2 + 7 columns
    assert product.extents == (1, 24, 25, 64, 3, 7, 7)
    assert crop.shape == (1, 64, 24, 25)
    assert_compiled_matches(polyc.compile(model), model)


def test_transposed_direct_conv_sums_in_im2cols_order(monkeypatch):
    """Without fast-math the transposed direct conv gives im2col's sums bit for bit."""
    model = single_node_model("Conv", (1, 8, 23, 24), [weight("w", (64, 8, 3, 3), 1),
                                                         weight("b", (64,), 2)],
                              pads=[1, 1, 1, 1])
    assert_same_sums_without(model, monkeypatch, "_direct_lowering", lambda *a, **k: None)


def assert_same_sums_without(model, monkeypatch, name: str, value) -> None:
    """Without fast-math, ``model`` compiles to the same results bit for bit with
    ``polyc.frontend.ops.conv.<name>`` set to ``value`` (the other lowering)."""
    from polyc.frontend.ops import conv

    inputs = random_inputs(model, 5)
    first = polyc.compile(model, fast_math=False).run(inputs)["y"]
    monkeypatch.setattr(conv, name, value)
    np.testing.assert_array_equal(first, polyc.compile(model, fast_math=False).run(inputs)["y"])


def test_direct_conv_sums_in_im2cols_order(monkeypatch):
    """Without fast-math the direct conv gives im2col's sums bit for bit."""
    model = single_node_model("Conv", (1, 8, 13, 21), [weight("w", (16, 8, 3, 3), 1),
                                                         weight("b", (16,), 2)],
                              pads=[1, 1, 1, 1])
    assert_same_sums_without(model, monkeypatch, "_direct_lowering", lambda *a, **k: None)


def test_depthwise_conv_is_one_map_with_its_window_summed():
    """A 3x3 depthwise conv: one Map (no padded copy, no Reduce), the nine products
    summed in its body; the reads that may leave X are bounded (padding 1 all round,
    stride 2 on a 6x6 input: the windows of the last row and column end inside)."""
    x_shape, w_shape, attrs = CONV_CASES["depthwise"]
    model = single_node_model("Conv", x_shape, [weight("w", w_shape, 1)], **attrs)
    (op,) = [op for op in import_model(model).ops if not hasattr(op, "src")]  # no Views
    assert isinstance(op, Map) and op.label == "depthwise_conv" and op.shape == (2, 4, 3, 3)
    reads = [r for r in _reads(op.expr) if r.tensor == "x"]
    assert len(reads) == 9 and sum(r.bounded for r in reads) == 5  # row 0 or column 0


def test_long_window_sums_keep_their_partial_sums():
    """A 5x5 depthwise conv's 25 taps are summed as 4 interleaved partial sums whose
    adds carry no ``reassoc`` flag (LLVM would chain them again), FMA contraction
    allowed; the result matches onnxruntime."""
    model = single_node_model("Conv", (1, 4, 12, 20), [weight("w", (4, 1, 5, 5), 1)],
                              group=4, pads=[2, 2, 2, 2])
    adds = re.findall(r"= fadd ([a-z ]*)<", polyc.compile(model).compilation.llvm_ir)
    assert len(adds) >= 24 and all("reassoc" not in a and "contract" in a for a in adds)
    assert_matches(model)


def _reads(expr):
    if hasattr(expr, "tensor"):
        return [expr]
    return [r for arg in getattr(expr, "args", ()) for r in _reads(arg)]


def test_large_depthwise_kernel_stays_a_reduce():
    """Past 49 kernel positions (9x9) the window is a reduction loop."""
    model = single_node_model("Conv", (1, 4, 12, 12), [weight("w", (4, 1, 9, 9), 1)],
                              group=4, pads=[4, 4, 4, 4])
    reduces = [op for op in import_model(model).ops if isinstance(op, Reduce)]
    assert len(reduces) == 1 and reduces[0].label == "depthwise_conv"
    assert reduces[0].extents == (1, 4, 12, 12, 9, 9)
    assert_matches(model)


DEPTHWISE_CASES = {  # rows long enough for whole vectors, a masked rest and border cells
    "3x3": ((2, 5, 23, 37), {"pads": [1, 1, 1, 1]}),
    "5x5_narrow": ((1, 6, 7, 7), {"pads": [2, 2, 2, 2], "kernel_shape": [5, 5]}),
    "5x5_asymmetric": ((1, 3, 14, 21), {"pads": [1, 2, 3, 0], "kernel_shape": [5, 5]}),
    "3x3_stride2_asymmetric": ((1, 6, 22, 41), {"pads": [0, 1, 1, 0], "strides": [2, 2]}),
    "5x5_dilation2": ((1, 3, 19, 35), {"pads": [4, 4, 4, 4], "dilations": [2, 2],
                                       "kernel_shape": [5, 5]}),
    "7x7_same_upper": ((1, 4, 17, 33), {"auto_pad": "SAME_UPPER", "kernel_shape": [7, 7]}),
}


@pytest.mark.parametrize("case", sorted(DEPTHWISE_CASES))
def test_depthwise_interior_and_border(case):
    """Depthwise convs whose interior is split from border cells (tiling) and runs 16
    lanes at a time with a masked rest (codegen), against onnxruntime. With stride 1
    only rows are split: a row runs as vectors whose lanes outside the input are
    masked loads of the fill (narrower rows than 16 lanes too); a strided window keeps
    its border columns apart."""
    x_shape, attrs = DEPTHWISE_CASES[case]
    kernel = attrs.get("kernel_shape", [3, 3])
    c = x_shape[1]
    weights = [weight("w", (c, 1, *kernel), 1), weight("b", (c,), 2)]
    model = single_node_model("Conv", x_shape, weights, group=c, **attrs)
    compiled = polyc.compile(model)
    strided = attrs.get("strides", [1, 1]) != [1, 1]
    split = "interior split from" if strided else "interior rows split from"
    assert any(split in d for d in compiled.schedule.decisions)
    assert strided or "llvm.masked.load" in compiled.compilation.llvm_ir
    assert_compiled_matches(compiled, model)


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_conv_with_narrow_rows_over_an_nchw_input_runs_channels_last(stride):
    """32 channels at 7x7 (or 13x13 to 7x7 at stride 2) over the NCHW graph input: rows
    narrower than NARROW_ROWS, so the input is copied channels-last and the window
    summed along channels; 14-wide rows (or 24 channels) stay NCHW."""
    def model(channels, size):
        weights = [weight("w", (channels, 1, 5, 5), 1), weight("b", (channels,), 2)]
        return single_node_model("Conv", (1, channels, size, size), weights, group=channels,
                                 pads=[2, 2, 2, 2], kernel_shape=[5, 5],
                                 strides=[stride, stride])

    def labels(m):
        return {op.label for op in import_model(m).ops}

    narrow = model(32, 7 if stride == 1 else 13)
    assert "depthwise_nhwc" in labels(narrow)
    assert_matches(narrow)
    assert "depthwise_nhwc" not in labels(model(32, 14 * stride))
    assert "depthwise_nhwc" not in labels(model(24, 7))


def test_depthwise_map_sums_in_the_reduce_order(monkeypatch):
    """Without fast-math the Map gives the Reduce's sums bit for bit (same order)."""
    model = single_node_model("Conv", (1, 3, 21, 19), [weight("w", (3, 1, 3, 3), 1),
                                                         weight("b", (3,), 2)],
                              group=3, pads=[1, 1, 1, 1])
    assert_same_sums_without(model, monkeypatch, "UNROLLED_KERNEL", 0)


# -- ConvTranspose --------------------------------------------------------------------

CONV_TRANSPOSE_CASES = {
    "default": ((2, 3, 4, 4), (3, 2, 3, 3), {}),
    "stride2_output_padding": ((2, 3, 4, 4), (3, 2, 3, 3),
                               {"strides": [2, 2], "output_padding": [1, 1]}),
    "group2_pads": ((2, 4, 4, 5), (4, 2, 3, 3),
                    {"group": 2, "strides": [2, 3], "pads": [1, 0, 1, 2]}),
    "output_shape": ((2, 3, 4, 4), (3, 2, 3, 3), {"strides": [2, 2], "output_shape": [7, 8]}),
    "output_shape_beyond_full": ((2, 3, 4, 4), (3, 2, 3, 3),
                                 {"strides": [2, 2], "output_shape": [9, 10]}),
    "same_upper": ((2, 3, 4, 4), (3, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    "same_lower": ((2, 3, 4, 4), (3, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    "dilations_no_bias": ((2, 3, 4, 4), (3, 2, 3, 3), {"strides": [2, 2], "dilations": [2, 2]}),
    "1d": ((2, 3, 5), (3, 2, 3), {"strides": [3], "pads": [1, 1]}),
    "depthwise": ((2, 4, 3, 3), (4, 1, 3, 3), {"group": 4, "strides": [2, 2],
                                                "pads": [2, 1, 2, 1]}),
    "3d": ((1, 2, 3, 3, 3), (2, 2, 2, 2, 2), {"strides": [2, 1, 2]}),
}


@pytest.mark.parametrize("case", sorted(CONV_TRANSPOSE_CASES))
def test_conv_transpose(case):
    x_shape, w_shape, attrs = CONV_TRANSPOSE_CASES[case]
    weights = [weight("w", w_shape, 4)]
    if "no_bias" not in case:
        weights.append(weight("b", (w_shape[1] * attrs.get("group", 1),), 5))
    assert_matches(single_node_model("ConvTranspose", x_shape, weights, **attrs))


@pytest.mark.parametrize("options", OPTIONS[1:])
def test_conv_transpose_options(options):
    x_shape, w_shape, attrs = CONV_TRANSPOSE_CASES["group2_pads"]
    model = single_node_model("ConvTranspose", x_shape, [weight("w", w_shape, 4)], opset=22,
                              **attrs)
    assert_matches(model, **options)


# -- pooling --------------------------------------------------------------------------

POOL_CASES = {
    "max_default": ("MaxPool", (2, 3, 7, 7), {"kernel_shape": [3, 3]}, 11),
    "max_stride2_asymmetric_pads": ("MaxPool", (2, 3, 7, 7),
                                    {"kernel_shape": [3, 3], "strides": [2, 2],
                                     "pads": [1, 0, 2, 1]}, 12),
    "max_same_upper": ("MaxPool", (2, 3, 8, 7), {"kernel_shape": [3, 2], "strides": [2, 2],
                                                 "auto_pad": "SAME_UPPER"}, 22),
    "max_same_lower": ("MaxPool", (2, 3, 8, 7), {"kernel_shape": [3, 2], "strides": [2, 2],
                                                 "auto_pad": "SAME_LOWER"}, 13),
    "max_valid_dilations": ("MaxPool", (2, 3, 9, 9), {"kernel_shape": [3, 3],
                                                      "dilations": [2, 2],
                                                      "auto_pad": "VALID"}, 13),
    "max_ceil": ("MaxPool", (2, 3, 8, 8), {"kernel_shape": [3, 3], "strides": [2, 2],
                                           "ceil_mode": 1}, 13),
    "max_ceil_last_window_in_pad": ("MaxPool", (2, 3, 6, 6),
                                    {"kernel_shape": [3, 3], "strides": [3, 3],
                                     "pads": [0, 0, 2, 2], "ceil_mode": 1}, 22),
    "max_1d": ("MaxPool", (2, 3, 9), {"kernel_shape": [3], "strides": [2], "pads": [1, 2]}, 13),
    "max_3d": ("MaxPool", (1, 2, 5, 6, 5), {"kernel_shape": [2, 3, 2], "strides": [2, 1, 2]},
               13),
    "avg_default": ("AveragePool", (2, 3, 7, 7), {"kernel_shape": [3, 3]}, 11),
    "avg_pads": ("AveragePool", (2, 3, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2],
                                               "pads": [1, 0, 2, 1]}, 13),
    "avg_pads_count_include_pad": ("AveragePool", (2, 3, 7, 7),
                                   {"kernel_shape": [3, 3], "strides": [2, 2],
                                    "pads": [1, 0, 2, 1], "count_include_pad": 1}, 13),
    "avg_same_upper": ("AveragePool", (2, 3, 8, 7), {"kernel_shape": [3, 2], "strides": [2, 2],
                                                     "auto_pad": "SAME_UPPER"}, 19),
    "avg_same_lower_count_include_pad": ("AveragePool", (2, 3, 8, 7),
                                         {"kernel_shape": [3, 2], "strides": [2, 2],
                                          "auto_pad": "SAME_LOWER",
                                          "count_include_pad": 1}, 22),
    "avg_ceil": ("AveragePool", (2, 3, 8, 8), {"kernel_shape": [3, 3], "strides": [2, 2],
                                               "ceil_mode": 1}, 13),
    "avg_ceil_pads_count_include_pad": ("AveragePool", (2, 3, 8, 8),
                                        {"kernel_shape": [3, 3], "strides": [2, 2],
                                         "pads": [1, 1, 1, 1], "ceil_mode": 1,
                                         "count_include_pad": 1}, 13),
    "avg_dilations_pads": ("AveragePool", (2, 3, 9, 9), {"kernel_shape": [3, 3],
                                                         "dilations": [2, 2],
                                                         "pads": [1, 2, 2, 1]}, 19),
    "avg_dilations_pads_count_include_pad": ("AveragePool", (2, 3, 9, 9),
                                             {"kernel_shape": [3, 3], "dilations": [2, 2],
                                              "pads": [1, 2, 2, 1],
                                              "count_include_pad": 1}, 19),
    "avg_1d": ("AveragePool", (2, 3, 9), {"kernel_shape": [3], "strides": [2],
                                          "pads": [1, 2]}, 13),
    "avg_3d": ("AveragePool", (1, 2, 5, 6, 5), {"kernel_shape": [2, 3, 2],
                                                "strides": [2, 1, 2],
                                                "pads": [1, 1, 1, 0, 0, 0]}, 13),
    "lp2_pads": ("LpPool", (2, 3, 7, 7), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, 11),
    "lp1_strides": ("LpPool", (2, 3, 7, 7), {"kernel_shape": [3, 3], "p": 1,
                                             "strides": [2, 2]}, 11),
    "lp3": ("LpPool", (2, 3, 7, 7), {"kernel_shape": [3, 3], "p": 3}, 13),
    "lp2_ceil_dilations": ("LpPool", (2, 3, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2],
                                                    "dilations": [1, 2], "ceil_mode": 1}, 18),
    "global_avg": ("GlobalAveragePool", (2, 3, 7, 6), {}, 13),
    "global_avg_3d": ("GlobalAveragePool", (2, 3, 4, 3, 2), {}, 22),
    "global_max": ("GlobalMaxPool", (2, 3, 7, 6), {}, 13),
    "global_max_1d": ("GlobalMaxPool", (2, 3, 5), {}, 22),
    "global_lp3": ("GlobalLpPool", (2, 3, 7, 6), {"p": 3}, 13),
}


@pytest.mark.parametrize("case", sorted(POOL_CASES))
def test_pool(case):
    op, x_shape, attrs, opset = POOL_CASES[case]
    assert_matches(single_node_model(op, x_shape, opset=opset, **attrs), seed=len(case))


@pytest.mark.parametrize("options", OPTIONS[1:])
@pytest.mark.parametrize("case", ["max_stride2_asymmetric_pads", "avg_pads"])
def test_pool_options(case, options):
    op, x_shape, attrs, opset = POOL_CASES[case]
    assert_matches(single_node_model(op, x_shape, opset=opset, **attrs), **options)


@pytest.mark.parametrize("case,storage_order", [
    (case, order) for case in ["max_default", "max_stride2_asymmetric_pads",
                               "max_valid_dilations", "max_ceil_last_window_in_pad",
                               "max_1d", "max_3d"]
    for order in ((0, 1) if len(POOL_CASES[case][1]) == 4 else (0,))])
def test_max_pool_indices(case, storage_order):
    """MaxPool's second output: the flat index of each window's first max (ties: the
    values are rounded to a few levels), as onnxruntime numbers it, row- or (2-D)
    column-major."""
    op, x_shape, attrs, opset = POOL_CASES[case]
    x = np.round(np.random.default_rng(len(case)).standard_normal(x_shape) * 2)
    x = x.astype(np.float32)
    model = make_model([helper.make_node(op, ["x"], ["y", "i"], storage_order=storage_order,
                                         **attrs)],
                       [("x", x_shape)], ["y", ("i", None, TensorProto.INT64)], opset=opset)
    want = run_onnxruntime(model, {"x": x})
    got = polyc.compile(model).run({"x": x})
    np.testing.assert_array_equal(got["y"], want["y"])
    np.testing.assert_array_equal(got["i"], want["i"])


@pytest.mark.parametrize("kernel", [2, 5, 20])  # one Map; a Reduce per dim past 16
def test_max_pool_windows_with_nan_give_nan(kernel):
    """polyc's MaxPool propagates NaN, as numpy's max and PyTorch's max_pool2d do (and
    polyc's ReduceMax and Max); onnxruntime's MaxPool drops a NaN unless it is the last
    element its kernel scans, which this test shows rather than follows."""
    x = np.random.default_rng(7).standard_normal((1, 2, 20, 20), dtype=np.float32)
    x[0, 0, 0, 0] = x[0, 1, 7, 3] = x[0, 1, 19, 19] = np.nan
    model = single_node_model("MaxPool", x.shape, opset=13, kernel_shape=[kernel, kernel],
                              strides=[kernel, kernel])
    windows = x.reshape(1, 2, 20 // kernel, kernel, 20 // kernel, kernel)
    expected = windows.max(axis=(3, 5))  # NaN wherever a window holds one
    got = polyc.compile(model).run({"x": x})["y"]
    np.testing.assert_array_equal(got, expected)
    assert np.isnan(got).sum() == (3 if kernel < 10 else 2)
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(
        got, torch.nn.functional.max_pool2d(torch.from_numpy(x), kernel).numpy())
    ort = run_onnxruntime(model, {"x": x})["y"]
    assert not np.isnan(ort[0, 0, 0, 0])  # the first element of its window: dropped


@pytest.mark.parametrize("options", OPTIONS)
def test_max_pool_windows_wholly_in_the_padding_give_the_lowest_float(options):
    """A window wholly in the padding (rows -1 and 1 of a one-row input, dilation 2)
    gives the lowest float32, as onnxruntime's MaxPool does (polyc gave -inf: graph
    fuzzer seed 2795); a window of -inf elements gives -inf."""
    x = np.random.default_rng(8).standard_normal((1, 2, 1, 6), dtype=np.float32)
    x[0, 1, 0, :3] = -np.inf
    in_padding = single_node_model("MaxPool", x.shape, opset=13, kernel_shape=[2, 2],
                                   dilations=[2, 1], pads=[1, 0, 1, 0])
    unpadded = single_node_model("MaxPool", x.shape, opset=13, kernel_shape=[1, 2])
    lowest = np.finfo(np.float32).min
    for model, extreme in ((in_padding, lowest), (unpadded, -np.inf)):
        expected = run_onnxruntime(model, {"x": x})["y"]
        assert (expected == extreme).any()
        np.testing.assert_array_equal(polyc.compile(model, **options).run({"x": x})["y"],
                                      expected)


def test_short_pool_window_is_one_map():
    """A window of a few elements is combined in the body of one Map over the output,
    in row-major order; only the elements that may leave X are bounded reads."""
    op, x_shape, attrs, opset = POOL_CASES["max_stride2_asymmetric_pads"]
    graph = import_model(single_node_model(op, x_shape, opset=opset, **attrs))
    maps = [op for op in graph.ops if isinstance(op, Map)]
    assert [m.shape for m in maps] == [(2, 3, 4, 3)]
    assert not any(isinstance(op, Reduce) for op in graph.ops)
    reads = list(_reads(maps[0].expr))
    assert len(reads) == 9
    # pads 1 and 2 on 7 rows, stride 2: row offset -1 reads the top pad, offset 1 of the
    # last window (row 7) the bottom one; pads [0, 1] on the columns are never read
    assert [r.outside for r in reads[::3]] == ["fill", "error", "fill"]
    assert all(r.outside == reads[3 * (n // 3)].outside for n, r in enumerate(reads))
    assert reads[0].fill == float(np.finfo(np.float32).min)  # as onnxruntime


@pytest.mark.parametrize("kernel,shapes", [([8, 8], [(1, 2, 10, 3), (1, 2, 3, 3)]),
                                           ([3, 20], None)])
def test_larger_pool_window_is_one_pass_per_spatial_dim(kernel, shapes):
    """Past 49 elements in all (or 16 along a dim) the window is pooled one spatial
    dim at a time, the last first: a Map each, or a Reduce along a dim past 16."""
    model = single_node_model("AveragePool", (1, 2, 10, 24), opset=11, kernel_shape=kernel,
                              strides=[1, 8])
    graph = import_model(model)
    maps = [op for op in graph.ops if isinstance(op, Map) and op.label == "average_pool"]
    reduces = [op for op in graph.ops if isinstance(op, Reduce)]
    if shapes is not None:
        assert [m.shape for m in maps] == shapes and not reduces
    else:
        assert [r.extents for r in reduces] == [(1, 2, 10, 1, 20)]
        assert [m.shape for m in maps] == [(1, 2, 8, 1)]
    assert_matches(model)


def test_wide_pool_window_stays_a_reduce():
    """Past 16 elements along a dim the window is a reduction loop."""
    model = single_node_model("MaxPool", (1, 2, 5, 40), opset=12, kernel_shape=[1, 20],
                              pads=[0, 3, 0, 3])
    reduces = [op for op in import_model(model).ops if isinstance(op, Reduce)]
    assert [r.extents for r in reduces] == [(1, 2, 5, 27, 20)]
    assert_matches(model)


# -- normalizations -------------------------------------------------------------------

def batch_norm_weights(channels: int):
    return [weight("scale", (channels,), 6), weight("bias", (channels,), 7),
            weight("mean", (channels,), 8), weight("var", (channels,), 9, low=0.1)]


@pytest.mark.parametrize("x_shape,opset", [((2, 4, 5, 5), 11), ((2, 4, 5, 5), 14),
                                           ((3, 4), 15), ((2, 4, 3, 4, 5), 15)])
def test_batch_normalization(x_shape, opset):
    model = single_node_model("BatchNormalization", x_shape, batch_norm_weights(4),
                              opset=opset, epsilon=1e-3)
    assert_matches(model)


@pytest.mark.parametrize("x_shape,opset", [((2, 4, 5, 6), 13), ((2, 4, 7), 13),
                                           ((2, 4, 3, 4, 2), 22)])
def test_instance_normalization(x_shape, opset):
    weights = [weight("scale", (4,), 10), weight("bias", (4,), 11)]
    model = single_node_model("InstanceNormalization", x_shape, weights, opset=opset,
                              epsilon=1e-2)
    assert_matches(model)


@pytest.mark.parametrize("attrs", [{"size": 3}, {"size": 5, "alpha": 0.01, "beta": 0.5,
                                                 "bias": 2.0}])
def test_lrn(attrs):
    assert_matches(single_node_model("LRN", (2, 6, 5, 5), **attrs))


def lrn_numpy(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    """The ONNX definition: the window [c - floor((size-1)/2), c + ceil((size-1)/2)]."""
    before, after = (size - 1) // 2, -(-(size - 1) // 2)
    squares = np.zeros_like(x)
    for c in range(x.shape[1]):
        squares[:, c] = (x[:, max(0, c - before):c + after + 1] ** 2).sum(axis=1)
    return x / (bias + alpha / size * squares) ** beta


@pytest.mark.parametrize("x_shape,size", [((2, 6, 5, 5), 4), ((2, 5, 4), 2),
                                          ((1, 5, 3, 2, 3), 3)])
def test_lrn_even_size_and_other_ranks_match_the_onnx_definition(x_shape, size):
    model = single_node_model("LRN", x_shape, size=size, alpha=0.01, beta=0.5, bias=2.0)
    assert_matches(model, expected=lambda inputs: lrn_numpy(inputs["x"], size, 0.01, 0.5, 2.0))


@pytest.mark.parametrize("options", OPTIONS)
def test_small_cnn(options):
    """Conv-BN-Relu-MaxPool-Conv-GlobalAveragePool-Flatten-Gemm."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "scale", "bias", "mean", "var"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p", "w2"], ["c2"], kernel_shape=[3, 3], auto_pad="SAME_UPPER"),
        helper.make_node("GlobalAveragePool", ["c2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1),
    ]
    weights = [weight("w1", (8, 3, 3, 3), 12), weight("b1", (8,), 13), *batch_norm_weights(8),
               weight("w2", (16, 8, 3, 3), 14), weight("w3", (10, 16), 15),
               weight("b3", (10,), 16)]
    model = make_model(nodes, [("x", (2, 3, 12, 12))], ["y"], initializers=weights)
    assert_matches(model, seed=17, **options)


# -- errors ---------------------------------------------------------------------------

def lowering_error(op, x_shape, weights=(), *, outputs=None, opset=13, **attrs):
    """A function calling ``import_model`` on a model the ONNX checker is not asked about;
    ``outputs`` are (name, rank, dtype) triples (default: y like x), of unknown dims."""
    outputs = outputs or [("y", len(x_shape), TensorProto.FLOAT)]
    node = helper.make_node(op, ["x"] + [name for name, _ in weights],
                            [name for name, _, _ in outputs], **attrs)
    infos = [(name, [None] * rank, dtype) for name, rank, dtype in outputs]
    model = make_model([node], [("x", x_shape)], infos, initializers=weights, opset=opset,
                       check=False)
    return lambda: import_model(model)


@pytest.mark.parametrize("op,x_shape,weights,attrs,message", [
    ("Conv", (1, 2, 5, 5), [weight("w", (3, 2, 3, 3), 1)], {"auto_pad": "SAME"},
     "auto_pad 'SAME'"),
    ("ConvTranspose", (1, 2, 5, 5), [weight("w", (2, 3, 3, 3), 1)], {"auto_pad": "FULL"},
     "auto_pad 'FULL'"),
    ("MaxPool", (1, 2, 5, 5), [], {"kernel_shape": [2, 2], "ceil_mode": 2}, "ceil_mode=2"),
    ("AveragePool", (1, 2, 5, 5), [], {"kernel_shape": [2, 2], "count_include_pad": 2},
     "count_include_pad=2"),
    ("LpPool", (1, 2, 5, 5), [], {"kernel_shape": [2, 2], "p": 0}, "p=0"),
])
def test_unsupported_attribute_values(op, x_shape, weights, attrs, message):
    with pytest.raises(UnsupportedOpError, match=message):
        lowering_error(op, x_shape, weights, **attrs)()


def test_batch_normalization_training_mode_is_unsupported():
    outputs = [("y", 4, TensorProto.FLOAT), ("running_mean", 1, TensorProto.FLOAT),
               ("running_var", 1, TensorProto.FLOAT)]
    with pytest.raises(UnsupportedOpError, match="training_mode=1"):
        lowering_error("BatchNormalization", (1, 2, 5, 5), batch_norm_weights(2),
                       outputs=outputs, opset=15, training_mode=1)()


def test_max_pool_indices_in_column_major_order_need_2d_pooling():
    outputs = [("y", 3, TensorProto.FLOAT), ("indices", 3, TensorProto.INT64)]
    with pytest.raises(UnsupportedOpError, match="storage_order=1"):
        lowering_error("MaxPool", (1, 2, 6), outputs=outputs, kernel_shape=[2],
                       storage_order=1)()


@pytest.mark.parametrize("op,x_shape,weights,attrs,message", [
    ("Conv", (1, 2, 5, 5), [weight("w", (3, 4, 3, 3), 1)], {}, "X has 2 channels"),
    ("Conv", (1, 2, 5, 5), [weight("w", (3, 2, 3, 3), 1)], {"kernel_shape": [2, 2]},
     "kernel_shape"),
    ("Conv", (1, 2, 5, 5), [weight("w", (3, 2, 3, 3), 1), weight("b", (2,), 2)], {},
     r"B \[2\] must be \[3\]"),
    ("ConvTranspose", (1, 4, 5, 5), [weight("w", (4, 3, 3, 3), 1), weight("b", (4,), 2)],
     {"group": 2}, r"B \[4\] must be \[6\]"),
])
def test_shape_errors(op, x_shape, weights, attrs, message):
    with pytest.raises(ShapeError, match=message):
        lowering_error(op, x_shape, weights, **attrs)()


def test_pointwise_conv_with_few_output_channels_reads_its_input_in_place():
    """A 1x1 conv to few channels over many pixels (MobileNet's projections): its input
    is read as it is, not packed; results match onnxruntime."""
    model = single_node_model("Conv", (1, 48, 40, 40), [weight("w", (16, 48, 1, 1), 1),
                                                         weight("b", (16,), 2)])
    compiled = polyc.compile(model)
    assert any("x read in place (few rows)" in d for d in compiled.schedule.decisions)
    assert "_pack" not in str(compiled.compilation.program)
    assert_compiled_matches(compiled, model)


def _relu_conv(x_shape, w_shape, group, **attrs):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=group, **attrs),
             helper.make_node("Relu", ["c"], ["y"])]
    return make_model(nodes, [("x", x_shape)], ["y"], initializers=[
        weight("w", w_shape, 1), weight("b", (w_shape[0],), 2)])


@pytest.mark.parametrize("x_shape, w_shape, group, padded", [
    ((1, 32, 14, 14), (24, 32, 1, 1), 1, 208),   # 196 pixels as 13 vectors
    ((2, 8, 10, 10), (16, 4, 1, 1), 2, 112),     # grouped, a batch of 2: 100 as 112
    ((1, 16, 7, 7), (24, 16, 1, 1), 1, 49),      # 64 would be 1.3x the work, 24 channels
])                                               # are no whole vectors: as it is
def test_pointwise_conv_pixels_padded_to_whole_vectors(x_shape, w_shape, group, padded):
    """A product over a pixel count that is not a multiple of 16 runs over it rounded up
    (reading 0 past the input's end, packed from that guarded read) and a crop writes
    Y, in the register tiles with the Relu after it; results match onnxruntime."""
    model = _relu_conv(x_shape, w_shape, group)
    ops = [op for op in import_model(model).ops if not hasattr(op, "src")]  # no Views
    product = next(op for op in ops if isinstance(op, Reduce))
    assert product.extents[3] == padded
    compiled = polyc.compile(model)
    if padded % 16 == 0:
        assert [type(op) for op in ops] == [Reduce, Map, Map]  # product, crop, Relu
        assert any(d.startswith("tiling: contraction") and "x packed into" in d
                   and "_relu in its register tiles" in d for d in compiled.schedule.decisions)
    assert_compiled_matches(compiled, model)


@pytest.mark.parametrize("x_shape, w_shape, group, attrs", [
    ((1, 16, 7, 7), (32, 16, 1, 1), 1, {}),                       # 49 pixels
    ((1, 64, 14, 14), (32, 64, 1, 1), 1, {}),                     # 196, no whole vectors
    ((2, 64, 5, 5), (64, 32, 1, 1), 2, {}),                       # grouped, batch of 2
    ((1, 64, 4, 4), (64, 32, 3, 3), 2, {"strides": [2, 2], "pads": [1, 1, 1, 1]}),  # 2x2
])
def test_conv_over_few_pixels_is_a_transposed_product(x_shape, w_shape, group, attrs):
    """Pixels that are no whole vectors (or fewer than 64) and output channels in whole
    vectors: the product is computed with the channels along its rows
    (``Yt[n, g, p, m]``, the contraction's vector lanes) and a Map writes Y with the
    Relu, in a pass of its own (in the register tile its stores would be scalar, a lane
    ``pixels`` elements from the next); results match onnxruntime."""
    model = _relu_conv(x_shape, w_shape, group, **attrs)
    ops = [op for op in import_model(model).ops if not hasattr(op, "src")]  # no Views
    product = next(op for op in ops if isinstance(op, Reduce))
    n, c = x_shape[:2]
    m = w_shape[0]
    pixels = product.out_shape[2]
    assert product.out_shape == (n, group, pixels, m // group)
    assert product.extents == (n, group, pixels, m // group, c // group * w_shape[2] * w_shape[3])
    compiled = polyc.compile(model)
    # the weights as a matrix are a view with divisions, packed at compile time through
    # their flat offset
    assert any(re.match(r"tiling: contraction S\d_conv_transposed_update: w packed into "
                        "w_packed at compile time", d)
               and "_relu" not in d for d in compiled.schedule.decisions)
    assert_compiled_matches(compiled, model)


@pytest.mark.parametrize("image,block,attrs", [
    ((5, 5), (2, 2), {}),
    ((6, 7), (3, 2), {"strides": [2, 1], "pads": [1, 0, 2, 1]}),
    ((9, 8), (2, 3), {"dilations": [2, 1], "strides": [1, 2], "pads": [0, 1, 1, 0]}),
    ((4, 5, 6), (2, 2, 3), {"strides": [1, 2, 1]}),
])
def test_col2im_matches_onnxruntime(image, block, attrs):
    """Col2Im (PyTorch's fold): columns of every block size, stride, dilation and pad,
    2-D and 3-D, summed back where blocks overlap."""
    rank = len(image)
    strides = attrs.get("strides", [1] * rank)
    dilations = attrs.get("dilations", [1] * rank)
    pads = attrs.get("pads", [0] * 2 * rank)
    blocks = [(image[d] + pads[d] + pads[rank + d] - dilations[d] * (block[d] - 1) - 1)
              // strides[d] + 1 for d in range(rank)]
    x = np.random.default_rng(rank).standard_normal(
        (2, 3 * int(np.prod(block)), int(np.prod(blocks)))).astype(np.float32)
    model = make_model([helper.make_node("Col2Im", ["x", "image", "block"], ["y"], **attrs)],
                       [("x", x.shape)], ["y"],
                       initializers=[("image", np.array(image, np.int64)),
                                     ("block", np.array(block, np.int64))], opset=18)
    got = polyc.compile(model).run({"x": x})["y"]
    np.testing.assert_allclose(got, run_onnxruntime(model, {"x": x})["y"], rtol=1e-5,
                               atol=1e-6)
