"""The float8 types (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz) and float4_e2m1fn (float32 in
registers, a byte in memory) against ml_dtypes' conversions: every byte decoded, floats
at, between (ties) and around every float8 value, tiny and huge ones, infinities and
NaN encoded, saturating (Cast's default: clamped to the largest value first) or not;
QuantizeLinear to float8; the codegen's in-register rounding and its stores agree."""

from __future__ import annotations

import ml_dtypes  # noqa: F401 - numpy's float8 dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

from onnx_helpers import make_model, run_polyc, run_reference

T = TensorProto
FLOAT8 = {"float8_e4m3fn": T.FLOAT8E4M3FN, "float8_e4m3fnuz": T.FLOAT8E4M3FNUZ,
          "float8_e5m2": T.FLOAT8E5M2, "float8_e5m2fnuz": T.FLOAT8E5M2FNUZ,
          "float4_e2m1fn": T.FLOAT4E2M1}


def codes(dtype: str) -> np.ndarray:
    """Every value of ``dtype`` as its bytes (16 of them for the 4-bit float)."""
    return np.arange(16 if dtype.startswith("float4") else 256, dtype=np.uint8).view(dtype)
node = helper.make_node


def same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Equal as floats, NaN where NaN, zeros of the same sign."""
    got, want = got.astype(np.float32), want.astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(want)), what
    finite = ~np.isnan(want)
    np.testing.assert_array_equal(got[finite], want[finite], err_msg=what)
    np.testing.assert_array_equal(np.signbit(got[finite]), np.signbit(want[finite]),
                                  err_msg=what)


def probes(dtype: str) -> np.ndarray:
    """Every float8 value, the midpoints of neighbours (ties to even), values just
    around them, tiny, huge and special floats."""
    values = codes(dtype).astype(np.float32)
    finite = np.unique(values[np.isfinite(values)])
    middle = (finite[:-1] + finite[1:]) / 2
    around = np.concatenate([np.nextafter(middle, np.inf), np.nextafter(middle, -np.inf)])
    specials = np.array([1e-30, -1e-30, 1e30, -1e30, 3e38, np.inf, -np.inf, np.nan,
                         -np.nan], np.float32)
    return np.concatenate([finite, middle, around, specials]).astype(np.float32)


@pytest.mark.parametrize("dtype", sorted(FLOAT8))
def test_every_byte_decodes_as_ml_dtypes(dtype):
    x = codes(dtype)
    model = make_model([node("Cast", ["x"], ["y"], to=T.FLOAT)], [("x", x.shape, FLOAT8[dtype])],
                       [("y", x.shape)], opset=23)
    for got in (run_polyc(model, {"x": x})["y"], run_reference(model, {"x": x})["y"]):
        same(got, x.astype(np.float32), dtype)


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("dtype", sorted(FLOAT8))
def test_floats_encode_as_ml_dtypes(dtype, saturate):
    """Cast float32 -> float8 written to a float8 output (the store) and -> float8 ->
    float32 (the rounding in registers), both against ml_dtypes' nearest-even."""
    x = probes(dtype)
    model = make_model([node("Cast", ["x"], ["q"], to=FLOAT8[dtype], saturate=saturate),
                        node("Cast", ["q"], ["back"], to=T.FLOAT)],
                       [("x", x.shape)], [("q", x.shape, FLOAT8[dtype]), ("back", x.shape)],
                       opset=23)
    largest = float(ml_dtypes.finfo(dtype).max)
    source = np.clip(x, -largest, largest) if saturate else x
    with np.errstate(all="ignore"):
        want = source.astype(dtype)
    for got in (run_polyc(model, {"x": x}), run_reference(model, {"x": x})):
        assert got["q"].dtype == np.dtype(dtype)
        same(got["q"], want, f"{dtype} store")
        same(got["back"], want, f"{dtype} in registers")


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_quantize_to_float8_rounds_to_the_float8_not_to_an_integer(dtype):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 16)).astype(np.float32) * 40
    model = make_model([node("QuantizeLinear", ["x", "s", "z"], ["q"])], [("x", x.shape)],
                       [("q", x.shape, FLOAT8[dtype])],
                       initializers=[("s", np.array(0.5, np.float32)),
                                     ("z", np.zeros((), dtype))], opset=21)
    largest = float(ml_dtypes.finfo(dtype).max)
    want = np.clip(x / np.float32(0.5), -largest, largest).astype(dtype)
    same(run_polyc(model, {"x": x})["q"], want, dtype)
