"""Careless input gets a PolycError naming what is wrong, never a bare Python, onnx or
LLVM error: misspelled options, external data that cannot be read, two outputs of
one name; and names no reader expects (2,000 characters) simply work."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_cli import assert_one_line_error
from test_cli import polyc as cli
from test_cli_pipeline import MLP

import polyc
from polyc.errors import ModelError, PolycError
from polyc.scop.polybench import KERNELS


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                                           for n, s in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                               for n, s in outputs], list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def test_a_misspelled_option_names_the_nearest_one():
    with pytest.raises(PolycError, match="unknown option 'fusee'; did you mean 'fuse'"):
        polyc.compile(MLP, fusee="max")
    kernel = KERNELS["matmul"]
    with pytest.raises(PolycError, match="unknown option 'tilesize'; did you mean 'tile_size'"):
        kernel.build().compile(params=kernel.params, tilesize=3)
    with pytest.raises(PolycError, match="unknown option 'colour' .*the options are scheduler"):
        polyc.compile(MLP, colour="blue")


@pytest.fixture
def external(tmp_path):
    """A MatMul whose weight lies in w.bin next to the model; ``edit(location)`` saves a
    copy that points elsewhere and returns its path."""
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "w")
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", [2, 4])],
                   [("y", [2, 4])], [w])
    path = tmp_path / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, location="w.bin", size_threshold=0)

    def edit(location: str):
        edited = onnx.load(path, load_external_data=False)
        for entry in edited.graph.initializer[0].external_data:
            if entry.key == "location":
                entry.value = location
        onnx.save(edited, tmp_path / "edited.onnx")
        return tmp_path / "edited.onnx"

    return path, edit


@pytest.mark.parametrize("location, reason", [
    ("../outside.bin", "points outside the directory"),
    ("missing.bin", "it is not regular file"),
])
def test_unreadable_external_data_is_a_model_error(external, location, reason):
    path, edit = external
    x = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(polyc.compile(str(path)).run({"x": x})["y"],
                                  x @ np.arange(16, dtype=np.float32).reshape(4, 4))
    edited = edit(location)
    with pytest.raises(ModelError, match=f"cannot read external data of .*edited.onnx: .*{reason}"):
        polyc.compile(str(edited))
    assert_one_line_error(cli("run", edited), f"cannot read external data .*{reason}")


def test_two_outputs_of_one_name_are_refused():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", [3])],
                   [("y", [3]), ("y", [3])])
    with pytest.raises(ModelError, match="graph output 'y' is listed 2 times"):
        polyc.compile(model)


@pytest.mark.parametrize("threads", [1, 2])
def test_names_of_thousands_of_characters(tmp_path, threads):
    """Two inputs and an output whose names share their first 1,999 characters (LLVM cuts
    local names at 1,024: the arguments were one name twice)."""
    a, b, out = "x" * 2000, "x" * 1999 + "y", "z" * 3000
    model = _model([helper.make_node("Relu", [a], ["y"]), helper.make_node("Neg", [b], [out])],
                   [(a, [64, 64]), (b, [64, 64])], [("y", [64, 64]), (out, [64, 64])])
    rng = np.random.default_rng(2)
    inputs = {a: rng.standard_normal((64, 64), dtype=np.float32),
              b: rng.standard_normal((64, 64), dtype=np.float32)}
    compiled = polyc.compile(model, threads=threads)
    compiled.save(tmp_path / "long.so")
    for runner in (compiled, polyc.load(tmp_path / "long.so")):
        results = runner.run(inputs)
        np.testing.assert_array_equal(results["y"], np.maximum(inputs[a], 0))
        np.testing.assert_array_equal(results[out], -inputs[b])
