"""DFT (polyc/frontend/ops/dft.py) against numpy's FFT in float64 on seeded signals:
real and complex input, inverse, onesided (rfft) and its inverse (irfft), dft_length
cutting and padding, the signal axis, opsets 17 and 20; against onnxruntime once."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnx_helpers import make_model, run_onnxruntime, run_polyc

T = TensorProto


def dft_model(shape, opset=20, axis=1, dft_length=None, **attrs):
    inputs = ["x", "n" if dft_length else ""]
    inits = [("n", np.array(dft_length, np.int64))] if dft_length else []
    if opset >= 20:
        inputs.append("axis")
        inits.append(("axis", np.array(axis, np.int64)))
    else:
        attrs["axis"] = axis
    node = helper.make_node("DFT", inputs, ["y"], **attrs)
    return make_model([node], [("x", shape)], ["y"], initializers=inits, opset=opset)


def close(got, want):
    """Within float32 sums of N terms: 1e-5 of the largest magnitude."""
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def as_complex(x):
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0]


def stacked(y):
    return np.stack([y.real, y.imag], axis=-1)


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("complex_in", [False, True])
@pytest.mark.parametrize("inverse", [0, 1])
def test_dft_along_each_axis(opset, complex_in, inverse):
    rng = np.random.default_rng(opset + 2 * complex_in + inverse)
    x = rng.standard_normal((2, 12, 7, 2 if complex_in else 1)).astype(np.float32)
    fft = np.fft.ifft if inverse else np.fft.fft
    for axis in (1, 2):
        got = run_polyc(dft_model(x.shape, opset, axis, inverse=inverse), {"x": x})["y"]
        close(got, stacked(fft(as_complex(x).astype(np.complex128), axis=axis)))


@pytest.mark.parametrize("length", [8, 16])
def test_dft_length_cuts_or_pads_the_signal(length):
    x = np.random.default_rng(length).standard_normal((1, 12, 3, 1)).astype(np.float32)
    got = run_polyc(dft_model(x.shape, dft_length=length), {"x": x})["y"]
    close(got, stacked(np.fft.fft(x[..., 0].astype(np.float64), n=length, axis=1)))


def test_onesided_and_its_inverse():
    """rfft of a real signal, then the inverse of the half spectrum (irfft)."""
    x = np.random.default_rng(5).standard_normal((3, 10, 4, 1)).astype(np.float32)
    half = run_polyc(dft_model(x.shape, onesided=1), {"x": x})["y"]
    close(half, stacked(np.fft.rfft(x[..., 0].astype(np.float64), axis=1)))
    back = run_polyc(dft_model(half.shape, onesided=1, inverse=1), {"x": half})["y"]
    close(back[..., 0], x[..., 0])


def test_dft_matches_onnxruntime():
    x = np.random.default_rng(6).standard_normal((2, 16, 5, 2)).astype(np.float32)
    model = dft_model(x.shape, axis=1)
    close(run_polyc(model, {"x": x})["y"], run_onnxruntime(model, {"x": x})["y"])
