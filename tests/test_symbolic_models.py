"""Models compiled once with a symbolic dim (``symbolic=["batch"]``) and run at many
values, against onnxruntime; the artifact round trip, the CLI and the errors."""

import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper
from symbolic_models import cnn, encoder, inputs, mlp

import polyc
from polyc.errors import InputError, ShapeError

RTOL, ATOL = 1e-4, 1e-5
VALUES = (1, 3, 17)


def _reference(model: onnx.ModelProto, feeds) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _check(model, runner, values, seed=0):
    for value in values:
        feeds = inputs(model, value, seed=seed + value)
        np.testing.assert_allclose(runner.run(feeds)["y"], _reference(model, feeds),
                                   rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("build", [mlp, cnn], ids=["mlp", "cnn"])
def test_symbolic_batch_runs_every_batch_size_from_one_compilation(build):
    model = build()
    compiled = polyc.compile(model, symbolic=["batch"])
    manifest = compiled.manifest
    assert manifest["params"] == ["batch"]
    assert manifest["inputs"][0]["shape"][0] == "batch"
    assert manifest["outputs"][0]["shape"][0] == "batch"
    assert manifest["options"]["symbolic"] == ["batch"]
    _check(model, compiled, VALUES)


def test_symbolic_batch_artifact_round_trip(tmp_path):
    model = cnn()
    path = tmp_path / "cnn.so"
    polyc.compile(model, symbolic=["batch"], threads=2).save(path)
    loaded = polyc.load(path)
    _check(model, loaded, VALUES + (8,), seed=10)
    with pytest.raises(InputError, match=r"shape \(2, 3, 31, 32\), expected \(2, 3, 32, 32\)"):
        loaded.run({"x": np.zeros((2, 3, 31, 32), np.float32)})


def test_inputs_that_disagree_on_a_symbolic_dim_are_refused():
    model = onnx.helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"])], "add2",
        [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, ["batch", 16]) for n in "ab"],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 16])]),
        opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    compiled = polyc.compile(model, symbolic=["batch"])
    a, b = np.ones((4, 16), np.float32), np.ones((5, 16), np.float32)
    with pytest.raises(InputError, match="inputs must agree on batch"):
        compiled.run({"a": a, "b": b})
    np.testing.assert_array_equal(compiled.run({"a": a, "b": a})["y"], a + a)


def test_transformer_encoder_with_symbolic_sequence_length():
    model = encoder()
    compiled = polyc.compile(model, symbolic=["seq"])
    assert compiled.manifest["inputs"][0]["shape"] == [1, "seq", 64]
    _check(model, compiled, (1, 5, 33))


def test_a_dim_that_must_have_a_value_names_the_node():
    model = onnx.helper.make_model(helper.make_graph(
        [helper.make_node("Reshape", ["x", "to"], ["y"], name="merge_rows")], "r",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 4, 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None])],
        initializer=[onnx.numpy_helper.from_array(np.array([-1], np.int64), "to")]),
        opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    with pytest.raises(ShapeError, match=r"Reshape node .merge_rows.*dim .batch.") as error:
        polyc.compile(model, symbolic=["batch"])
    assert "--dim batch=N" in str(error.value)
    compiled = polyc.compile(model, dims={"batch": 2})  # the fix the message names
    x = np.arange(32, dtype=np.float32).reshape(2, 4, 4)
    np.testing.assert_array_equal(compiled.run({"x": x})["y"], x.reshape(-1))


def test_cli_symbolic_option(tmp_path):
    path, artifact = tmp_path / "mlp.onnx", tmp_path / "mlp.so"
    model = mlp(32, 64, 8)
    onnx.save(model, path)
    done = subprocess.run([sys.executable, "-m", "polyc.cli", "compile", str(path),
                           "--symbolic", "batch", "-o", str(artifact)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    _check(model, polyc.load(artifact), (2, 9))


@pytest.mark.parametrize("name, axes", [
    ("resnet18", {"x": {0: "batch"}, "y": {0: "batch"}}),
    ("bert_layer", {"x": {0: "batch", 1: "seq"}, "mask": {0: "batch", 3: "seq"},
                    "y": {0: "batch", 1: "seq"}}),
])
def test_pytorch_exports_with_dynamic_axes(name, axes):
    """PyTorch writes shape computations (Shape -> Gather -> Concat -> Reshape) over the
    dynamic dims: lowering evaluates them with the dims kept symbolic."""
    from torch_models import export
    model, example = export(name, dynamic_axes=axes)
    names = sorted({dim for spec in axes.values() for dim in spec.values()})
    compiled = polyc.compile(model, symbolic=names)
    assert compiled.manifest["params"] == [n for n in ("batch", "seq") if n in names]
    for batch, seq in ((1, 32), (3, 11)):
        feeds = {}
        for key, value in example.items():
            value = np.concatenate([value[:1]] * batch)
            if key == "x" and "seq" in names:
                value = value[:, :seq]
            elif key == "mask":
                value = value[..., :seq]
            feeds[key] = np.ascontiguousarray(value)
        np.testing.assert_allclose(compiled.run(feeds)["y"], _reference(model, feeds),
                                   rtol=RTOL, atol=ATOL)
