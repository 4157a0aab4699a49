"""Resize-11/13/18/19: polyc (and the frontend's reference interpreter) against
onnxruntime on seeded random inputs in [-2, 2), and the periodic filters the lowering
builds.

Tolerances: nearest is exact; rtol 1e-5, atol 1e-6 (onnx_helpers) elsewhere, except
linear and cubic at atol 5e-6: onnxruntime computes source coordinates in float32, off
by up to half an ulp of ``x`` (5e-7 for x < 8, 1e-6 for x < 16), which moves an output by
that times the difference of neighbouring inputs (up to 4); polyc's weights are exact.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnxruntime
import pytest
from onnx import helper

from polyc.backend import PolycBackend
from polyc.errors import UnsupportedOpError
from polyc.frontend import import_model
from polyc.frontend.ops.resize_filter import (
    Axis,
    coordinates_exact,
    linear_filter,
    nearest_filter,
    periodic,
)

from onnx_helpers import (
    ATOL,
    RTOL,
    make_model,
    random_inputs,
    run_onnxruntime,
    run_polyc,
    run_reference,
)

onnxruntime.set_default_logger_severity(3)  # tf_half_pixel_for_nn is deprecated: quiet

COORDINATE_MODES = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                    "half_pixel_symmetric", "tf_half_pixel_for_nn")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
# (H, W) scales for a 10x10 image: up and down, integer and not (every length integral,
# as align_corners needs)
SCALE_PAIRS = ((1.5, 0.6), (2.2, 0.5), (0.6, 2.0), (3.0, 0.4))


# onnxruntime's float32 coordinates (see the module docstring)
INTERPOLATING_ATOL = 5e-6


def check(model, inputs=None):
    """polyc and the reference interpreter against onnxruntime; polyc's outputs."""
    inputs = random_inputs(model, 0) if inputs is None else inputs
    attrs = {a.name: a for a in model.graph.node[0].attribute}
    exact = "mode" not in attrs or attrs["mode"].s == b"nearest"
    atol = ATOL if exact else INTERPOLATING_ATOL
    want = run_onnxruntime(model, inputs)["y"]
    compiled = run_polyc(model, inputs)["y"]
    for got in (compiled, run_reference(model, inputs)["y"]):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=atol)
    return compiled


def resize_model(shape, *, scales=None, sizes=None, opset=19, name="resize_node",
                 runtime_scales=False, check=True, **attrs):
    """A model resizing the input ``x`` of ``shape`` with constant scales or sizes."""
    inputs, initializers = [("x", shape)], []
    node_inputs = ["x", "roi" if opset < 13 else ""]
    if opset < 13:
        initializers.append(("roi", np.zeros(0, np.float32)))
    if scales is not None:
        node_inputs.append("scales")
        if runtime_scales:
            inputs.append(("scales", [len(scales)]))
        else:
            initializers.append(("scales", np.array(scales, np.float32)))
    else:
        node_inputs += ["empty" if opset < 13 else "", "sizes"]
        initializers.append(("sizes", np.array(sizes, np.int64)))
        if opset < 13:  # scales is a required input: empty when sizes is given
            initializers.append(("empty", np.zeros(0, np.float32)))
    node = helper.make_node("Resize", node_inputs, ["y"], name=name, **attrs)
    return make_model([node], inputs, ["y"], initializers=initializers, opset=opset,
                      check=check)


def _cases() -> list:
    """Every supported mode x coordinate mode (x nearest mode), cycling the scales."""
    combos = [("nearest", c, n) for c, n in itertools.product(COORDINATE_MODES, NEAREST_MODES)]
    combos += [(m, c, None) for m in ("linear", "cubic") for c in COORDINATE_MODES]
    return [pytest.param(mode, coordinate, nearest, SCALE_PAIRS[k % len(SCALE_PAIRS)],
                         id=f"{mode}-{coordinate}-{nearest or ''}-{k % len(SCALE_PAIRS)}")
            for k, (mode, coordinate, nearest) in enumerate(combos)]


@pytest.mark.parametrize(("mode", "coordinate", "nearest", "hw"), _cases())
def test_modes_nchw(mode, coordinate, nearest, hw):
    attrs = {"mode": mode, "coordinate_transformation_mode": coordinate}
    if nearest:
        attrs["nearest_mode"] = nearest
    check(resize_model((1, 2, 10, 10), scales=[1, 1, *hw], **attrs))


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize(("shape", "sizes"), [((2, 7), (2, 10)), ((1, 1, 7, 9), (1, 1, 10, 5)),
                                              ((1, 1, 9, 6), (1, 1, 4, 13))])
def test_sizes(mode, shape, sizes):
    check(resize_model(shape, sizes=sizes, mode=mode))


@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_opsets(opset, mode):
    check(resize_model((1, 3, 6, 8), scales=[1, 1, 2.5, 0.75],
                                            opset=opset, mode=mode))
    check(resize_model((1, 3, 6, 8), sizes=[1, 3, 11, 5], opset=opset,
                                            mode=mode))


@pytest.mark.parametrize(("axes", "values"), [([2, 3], [1.5, 2.0]), ([3], [0.6]),
                                              ([-1, -2], [2.2, 0.5])])
def test_axes(axes, values):
    check(resize_model((1, 2, 10, 10), scales=values, axes=axes,
                                            mode="linear"))


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_keep_aspect_ratio_policy(policy, mode):
    model = resize_model((1, 2, 6, 9), sizes=[10, 12], axes=[2, 3], mode=mode,
                         keep_aspect_ratio_policy=policy)
    check(model)


def test_long_period_is_a_reduce_over_a_window():
    """41 outputs from 30 inputs: the period is the whole axis; the window is too wide to
    write out, so it is a Reduce over the window reading a weight table."""
    model = resize_model((2, 30), sizes=[2, 41], mode="linear")
    graph = import_model(model)
    assert any(type(op).__name__ == "Reduce" for op in graph.ops)
    check(model)


def test_same_shape_is_a_copy():
    """onnxruntime copies the input when the output shape equals it (scale 1.1 on 8)."""
    check(resize_model((1, 8), scales=[1, 1.1], mode="linear"))


def test_infinity_stays_where_it_is_read():
    """A weight-0 tap of the window is selected away, not multiplied: inf * 0 is no NaN."""
    model = resize_model((1, 1, 6, 6), scales=[1, 1, 1.5, 1.5], mode="nearest")
    x = np.random.default_rng(3).uniform(-2, 2, (1, 1, 6, 6)).astype(np.float32)
    x[0, 0, 2, 3] = np.inf
    got = check(model, {"x": x})
    assert not np.isnan(got).any()


def test_graph_input_scales_through_the_backend():
    """The ONNX backend binds a graph input used only as Resize's scales, as it binds
    int64 inputs, and compiles once per value."""
    model = resize_model((1, 1, 4, 5), scales=[1, 1, 2, 1.5], runtime_scales=True,
                         mode="linear")
    x = np.random.default_rng(0).uniform(-2, 2, (1, 1, 4, 5)).astype(np.float32)
    scales = np.array([1, 1, 2, 1.5], np.float32)
    got = PolycBackend.prepare(model).run({"x": x, "scales": scales})[0]
    want = run_onnxruntime(model, {"x": x, "scales": scales})["y"]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


# -- errors -------------------------------------------------------------------------------

@pytest.mark.parametrize(("model", "match"), [
    (lambda: resize_model((1, 1, 4, 4), scales=[1, 1, 2, 2], runtime_scales=True),
     r"resize_node.*input 'scales' must be a constant"),
    (lambda: resize_model((1, 1, 4, 4), scales=[1, 1, 2, 2], mode="linear",
                          coordinate_transformation_mode="tf_crop_and_resize"),
     r"resize_node.*tf_crop_and_resize.*not supported"),
    (lambda: resize_model((1, 1, 4, 4), scales=[1, 1, 0.5, 0.5], mode="linear", antialias=1),
     r"resize_node.*antialias=1 is not supported"),
    (lambda: resize_model((1, 1, 4, 4), scales=[1, 1, 0.6, 0.6], mode="linear",
                          coordinate_transformation_mode="align_corners"),
     r"resize_node.*align_corners.*axis 2 resized from 4 to 2.*ONNX and onnxruntime"),
    (lambda: resize_model((1, 1, 10, 4), scales=[1, 1, 2.3, 1]),
     r"resize_node.*scale 2.3 on axis 2 of size 10: onnxruntime makes 23 elements.*ONNX 22"),
])
def test_unsupported(model, match):
    with pytest.raises(UnsupportedOpError, match=match):
        import_model(model())


# -- the filters --------------------------------------------------------------------------

def test_bilinear_2x_filter_is_two_taps_per_phase():
    """half_pixel 2x: o = 2t reads X[t-1], X[t] weighted 0.25, 0.75; o = 2t+1 reads
    X[t], X[t+1] weighted 0.75, 0.25: one window of width 2 sliding with the phase."""
    axis = Axis(224, 448, np.float32(2))
    f = periodic(linear_filter(coordinates_exact(axis, "half_pixel")))
    assert (f.period, f.step, f.slope, f.offset) == (2, 1, 1, -1)
    np.testing.assert_array_equal(f.table, [[0.25, 0.75], [0.75, 0.25]])


def test_downsampling_filter_has_period_one():
    axis = Axis(12, 4, np.float32(1 / 3))
    f = periodic(linear_filter(coordinates_exact(axis, "asymmetric")))
    assert (f.period, f.step, f.offset) == (1, 3, 0)
    np.testing.assert_array_equal(f.table, [[1, 0]])  # the 0 tap is not read


def test_rational_scale_period():
    """Scale 0.6 is 3/5: three phases, each five input elements further per period."""
    axis = Axis(25, 15, np.float32(0.6))
    f = periodic(linear_filter(coordinates_exact(axis, "half_pixel")))
    assert (f.period, f.step) == (3, 5)


def test_nearest_ties_within_tolerance():
    """14.499999 is a tie (onnxruntime rounds it as 14.5); 27.4999981 is not."""
    x = np.array([14.499999, 14.500001, 27.4999981], np.float32)
    assert nearest_filter(x, "round_prefer_ceil").base.tolist() == [15, 15, 27]
    assert nearest_filter(x, "round_prefer_floor").base.tolist() == [14, 14, 27]
