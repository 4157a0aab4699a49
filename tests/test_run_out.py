"""run(inputs, out=...): outputs written into the caller's buffers, no allocation and
no copy; a loop nest's arrays updated in place; buffers checked, the JIT and an AOT
artifact alike."""

from pathlib import Path

import numpy as np
import pytest

import polyc
from polyc.errors import InputError
from polyc.scop.polybench import KERNELS

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MLP = EXAMPLES / "mlp.onnx"
X = EXAMPLES / "mlp_input.npy"


@pytest.fixture(scope="module")
def mlp():
    return polyc.compile(MLP)


def test_a_models_output_goes_into_the_given_buffer(mlp, tmp_path):
    x = np.load(X)
    expected = mlp.run({"x": x})["y"]
    y = np.full((4, 10), np.nan, np.float32)
    assert mlp.run({"x": x}, out={"y": y})["y"] is y
    np.testing.assert_array_equal(y, expected)
    mlp.save(tmp_path / "mlp.so")
    artifact = polyc.load(tmp_path / "mlp.so")
    z = np.empty_like(y)
    assert artifact.run({"x": x}, out={"y": z})["y"] is z
    np.testing.assert_array_equal(z, expected)


def test_a_nest_runs_on_its_arrays_in_place():
    kernel = KERNELS["jacobi-2d"]
    params = {"T": 6, "N": 40}
    arrays = kernel.inputs(seed=0, params=params)
    expected = kernel.reference(params, arrays)
    compiled = kernel.build().compile(params=params)
    a, b = arrays["A"].copy(), np.zeros((40, 40), np.float32)
    result = compiled.run({}, out={"A": a, "B": b})  # A starts from its buffer: no copy
    assert result["A"] is a and result["B"] is b
    np.testing.assert_allclose(a, expected["A"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b, expected["B"], rtol=1e-5, atol=1e-6)
    again = arrays["A"].copy()
    fresh = np.full_like(again, 7.0)  # given as an input too: that value copied in
    compiled.run({"A": again}, out={"A": fresh})
    np.testing.assert_allclose(fresh, expected["A"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(again, arrays["A"])  # the input itself untouched


@pytest.mark.parametrize("out, message", [
    ({"z": np.empty((4, 10), np.float32)}, r"out names 'z', not an output; the outputs "
                                           r"are y: float32\[4, 10\]"),
    ({"y": np.empty((4, 9), np.float32)}, r"out 'y' is float32\[4, 9\], expected y"),
    ({"y": np.empty((4, 10), np.float64)}, r"out 'y' is float64\[4, 10\]"),
    ({"y": np.empty((10, 4), np.float32).T}, r"must be a writeable C-contiguous array"),
    ("y", r"out must be a dict of output name -> numpy array, got str"),
])
def test_bad_buffers_are_named(mlp, out, message):
    x = np.load(X)
    with pytest.raises(InputError, match=message):
        mlp.run({"x": x}, out=out)


def test_a_buffer_sharing_memory_with_an_input_is_refused(mlp):
    x = np.zeros((4, 64), np.float32)
    with pytest.raises(InputError, match="out 'y' shares memory with another input"):
        mlp.run({"x": x}, out={"y": x.reshape(-1)[:40].reshape(4, 10)})
    readonly = np.empty((4, 10), np.float32)
    readonly.flags.writeable = False
    with pytest.raises(InputError, match="writeable"):
        mlp.run({"x": x}, out={"y": readonly})
