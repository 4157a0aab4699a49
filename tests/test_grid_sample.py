"""GridSample and RoiAlign (polyc/frontend/ops/grid_sample.py, roi_align.py) against
onnxruntime: GridSample on seeded grids that reach past the image (every mode, padding
mode and align_corners, 2-D (opsets 16 and 20) and 3-D, float64), RoiAlign on regions
inside and across the map's edges (both modes and coordinate transformations); the
errors."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import polyc
from polyc.errors import UnsupportedOpError

from onnx_helpers import make_model, run_onnxruntime, run_polyc

KINDS = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE}


def grid_model(x_shape, out_spatial, opset=20, dtype="float32", **attrs):
    rank = len(x_shape) - 2
    grid_shape = (x_shape[0], *out_spatial, rank)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], **attrs)
    model = make_model([node], [("x", x_shape, KINDS[dtype]), ("grid", grid_shape, KINDS[dtype])],
                       [("y", None, KINDS[dtype])], opset=opset)
    rng = np.random.default_rng(len(x_shape) + len(attrs))
    feeds = {"x": rng.standard_normal(x_shape).astype(dtype),
             "grid": rng.uniform(-1.3, 1.3, grid_shape).astype(dtype)}
    return model, feeds


def check(model, feeds, tolerance=1e-5):
    want = run_onnxruntime(model, feeds)["y"]
    got = run_polyc(model, feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_2d(mode, padding_mode, align_corners):
    check(*grid_model((2, 3, 5, 6), (4, 7), mode=mode, padding_mode=padding_mode,
                      align_corners=align_corners))


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_16_names(mode):
    check(*grid_model((1, 2, 4, 4), (3, 3), opset=16, mode=mode, padding_mode="border"))


@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "reflection"])
def test_grid_sample_3d(mode, padding_mode):
    check(*grid_model((1, 2, 3, 4, 5), (2, 3, 4), mode=mode, padding_mode=padding_mode,
                      align_corners=1))


def test_grid_sample_float64():
    check(*grid_model((1, 2, 5, 5), (4, 4), dtype="float64", mode="cubic",
                      padding_mode="reflection"), 1e-12)


def test_unknown_padding_mode_is_refused():
    model, _ = grid_model((1, 1, 3, 3), (2, 2), padding_mode="wrap")
    with pytest.raises(UnsupportedOpError, match="padding_mode 'wrap'"):
        polyc.compile(model)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("transform,opset", [("half_pixel", 16), ("output_half_pixel", 16),
                                             ("output_half_pixel", 10)])
def test_roi_align(mode, transform, opset):
    """RoiAlign against onnxruntime: regions inside, across and past the map's edges,
    batch indices given at run time, a sampling ratio of 2."""
    rng = np.random.default_rng(len(mode) + opset)
    x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
    rois = np.array([[0, 0, 5, 4], [2.5, 1.2, 9.7, 8.1], [-3, -2, 4, 3], [8, 6, 14, 12],
                     [1, 1, 1.5, 1.2]], np.float32)
    batch = np.array([0, 1, 1, 0, 1], np.int64)
    attrs = {"mode": mode, "output_height": 3, "output_width": 4, "sampling_ratio": 2,
             "spatial_scale": 0.8}
    if opset >= 16:
        attrs["coordinate_transformation_mode"] = transform
    model = make_model([helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], **attrs)],
                       [("x", x.shape), ("rois", rois.shape), ("b", (5,), TensorProto.INT64)],
                       [("y", (5, 3, 3, 4))], opset=opset)
    feeds = {"x": x, "rois": rois, "b": batch}
    np.testing.assert_allclose(run_polyc(model, feeds)["y"], run_onnxruntime(model, feeds)["y"],
                               rtol=1e-5, atol=1e-6)
