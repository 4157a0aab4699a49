"""What one call of a model needs (inputs, outputs, constants, scratch) is checked at
compile time against ``memory_limit`` (default: this machine's memory), and a tensor
too large for 64-bit offsets is refused whatever the limit (``polyc.limits``)."""

import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper
from test_cli import assert_one_line_error
from test_cli import polyc as cli

import polyc
from polyc import limits
from polyc.errors import PolycError, ResourceError, ShapeError

GIB = 1 << 30


def relu(shape):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def test_a_model_larger_than_the_machine_is_refused_with_its_sizes(monkeypatch):
    """[65536, 65536] floats: 16 GiB in, 16 GiB out. It compiled and failed in its first
    call; now the compile says so (the machine's memory is made 24 GiB here)."""
    monkeypatch.setattr(limits, "machine_memory", lambda: 24 * GIB)
    with pytest.raises(ResourceError, match=r"needs 32\.0 GiB per call \(inputs 16\.0 GiB, "
                                            r"outputs 16\.0 GiB, constants 0 B\), more than "
                                            r"24\.0 GiB \(this machine's memory\)"):
        polyc.compile(relu([65536, 65536]))
    with pytest.raises(ResourceError, match=r"more than 16\.0 GiB \(memory_limit\)"):
        polyc.compile(relu([65536, 65536]), memory_limit=16 * GIB)


def test_the_limit_is_what_a_call_needs():
    """1000 floats in and out: 8000 bytes (no scratch, no constants)."""
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    compiled = polyc.compile(relu([1000]), memory_limit=8000)
    np.testing.assert_array_equal(compiled.run({"x": x})["y"], np.maximum(x, 0))
    with pytest.raises(ResourceError, match="needs 8000 B per call .* more than 7999 B"):
        polyc.compile(relu([1000]), memory_limit=7999)
    with pytest.raises(PolycError, match="memory_limit must be a positive number of bytes"):
        polyc.compile(relu([1000]), memory_limit=-1)


def test_a_tensor_past_64_bit_offsets_is_refused():
    with pytest.raises(ShapeError, match=r"tensor 'x' of shape \[1099511627776, "
                                         r"1099511627776\] .*more than 64-bit offsets"):
        polyc.compile(relu([1 << 40, 1 << 40]), memory_limit=1 << 62)


ARGMAX = """
import resource
import polyc
from onnx import TensorProto, helper
graph = helper.make_graph([helper.make_node("ArgMax", ["x"], ["y"], axis=0, keepdims=0)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1 << 31])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, [])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 9
compiled = polyc.compile(model, memory_limit=16 << 30)
arrays = compiled.compilation.scop.arrays
print(sum(a.nbytes for a in arrays if a.kind == "constant"), "constant bytes")
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, "MiB")
"""


def test_argmax_over_a_huge_axis_makes_no_table():
    """ArgMax over 2^31 elements built a 16 GiB table of positions (the machine ran out
    of memory): a position is now the loop iterator's value, so the compile needs no
    constant and little memory."""
    done = subprocess.run([sys.executable, "-c", ARGMAX], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    constants, peak = done.stdout.strip().splitlines()
    assert constants == "0 constant bytes"
    assert int(peak.split()[0]) < 1024


@pytest.mark.parametrize("last", [0, 1])
def test_argmax_over_a_long_axis_is_a_small_artifact(tmp_path, last):
    """ArgMax over an axis of 2^24 wrote a 134 MB artifact (the positions table); the
    artifact is now small and its answer numpy's (ties, with select_last_index, at the
    last position)."""
    n = 1 << 24
    node = helper.make_node("ArgMax", ["x"], ["y"], axis=1, keepdims=1, select_last_index=last)
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, n])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [2, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "argmax.so"
    polyc.compile(model).save(path)
    assert path.stat().st_size < 1 << 20
    x = np.random.default_rng(3).standard_normal((2, n), dtype=np.float32)
    x[1, [5, n - 7]] = 100.0  # a tie
    (y,) = polyc.load(path).run({"x": x}).values()
    want = np.argmax(x, axis=1)
    if last:
        want[1] = n - 7
    np.testing.assert_array_equal(y[:, 0], want)


def test_cli_memory_limit(tmp_path):
    path = tmp_path / "relu.onnx"
    path.write_bytes(relu([1000]).SerializeToString())
    assert_one_line_error(cli("compile", path, "--memory-limit", "1K", "-o", tmp_path / "r.so"),
                          r"needs 7\.8 KiB per call .*more than 1\.0 KiB \(memory_limit\)")
    done = cli("compile", path, "--memory-limit", "1M", "-o", tmp_path / "r.so")
    assert done.returncode == 0, done.stderr
    done = cli("compile", path, "--memory-limit", "lots")
    assert done.returncode == 2 and "expected a size such as 512M or 64G" in done.stderr
