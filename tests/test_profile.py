"""Per-nest profiling: timers compiled in on request, counters read by the runtime, rows
matched to onnxruntime's own profile. Tests check what is counted and matched, and
that profiled code computes the same as the plain build; they assert no speeds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import islpy as isl
import numpy as np
import onnx
import pytest
from onnx import helper

import polyc
from polyc.codegen.profile import instances
from polyc.errors import PolycError
from polyc.runtime.profile import _onnx_node, _rows, onnxruntime_times
from polyc.scop.nest import LoopNest

from onnx_helpers import ATOL, RTOL, make_model, random_inputs, run_onnxruntime

M, K, N = 24, 40, 32


def conv_matmul_model() -> onnx.ModelProto:
    """Conv 3x3 + Relu, then a MatMul + Add (named nodes; seeded random weights)."""
    rng = np.random.default_rng(0)
    weights = [("w", rng.standard_normal((8, 3, 3, 3)).astype(np.float32)),
               ("b", rng.standard_normal(8).astype(np.float32)),
               ("m", rng.standard_normal((K, N)).astype(np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MatMul", ["a", "m"], ["p"], name="matmul"),
             helper.make_node("Add", ["p", "a2"], ["q"], name="add")]
    return make_model(nodes, [("x", [1, 3, 16, 16]), ("a", [M, K]), ("a2", [M, N])],
                      ["r", "q"], initializers=weights)


@pytest.fixture(scope="module")
def model():
    return conv_matmul_model()


@pytest.fixture(scope="module")
def compiled(model):
    return polyc.compile(model, profile=True, threads=1)


def test_profiled_code_matches_onnxruntime(model, compiled):
    inputs = random_inputs(model, 0)
    expected = run_onnxruntime(model, inputs)
    for name, value in compiled.run(inputs).items():
        np.testing.assert_allclose(value, expected[name], rtol=RTOL * 10, atol=ATOL * 10)


def test_timers_only_when_asked(model, compiled):
    plain = polyc.compile(model, threads=1)
    assert "clock_gettime" not in plain.compilation.llvm_ir
    assert "profile" not in plain.manifest
    assert "clock_gettime" in compiled.compilation.llvm_ir
    parts = compiled.manifest["profile"]
    assert parts and all(set(p) == {"statements", "nodes", "inlined", "flops", "bytes"}
                         for p in parts)


def test_rows_name_nodes_and_count_flops(model, compiled):
    profile = compiled.profile(random_inputs(model, 1), repeat=3, onnxruntime=False)
    by_node = {node: row for row in profile.rows for node in row.nodes}
    assert set(by_node) == {"conv", "relu", "matmul", "add"}
    matmul = by_node["matmul"]
    # the product: a multiply and an add per (i, j, k); the Add epilogue: one per (i, j)
    assert matmul.flops == 2 * M * N * K + (M * N if "add" in matmul.nodes else 0)
    assert by_node["conv"].flops >= 2 * 8 * 3 * 9 * 16 * 16  # multiply-adds, bias, relu
    assert all(row.seconds >= 0 for row in profile.rows) and profile.total > 0
    assert profile.runs == 3 and profile.wall > 0
    assert sum(len(r.parts) for r in profile.rows) == len(compiled.manifest["profile"])
    text = str(profile)
    assert "matmul" in text and "GFLOP/s" in text and "ort ms" not in text
    assert json.loads(json.dumps(profile.as_dict()))["runs"] == 3


def test_profile_without_a_profiled_build(model):
    """profile() on a model compiled without timers compiles a timed twin once."""
    plain = polyc.compile(model, threads=1)
    inputs = random_inputs(model, 2)
    profile = plain.profile(inputs, repeat=2)
    assert {n for r in profile.rows for n in r.nodes} == {"conv", "relu", "matmul", "add"}
    assert profile.onnxruntime_wall is not None
    matched = [r for r in profile.rows if r.onnxruntime is not None]
    assert matched, str(profile)  # onnxruntime's nodes keep these names or their outputs'
    expected = run_onnxruntime(model, inputs)
    for name, value in plain.run(inputs).items():  # the plain build is untouched
        np.testing.assert_allclose(value, expected[name], rtol=RTOL * 10, atol=ATOL * 10)


def test_artifact_keeps_timers(model, compiled, tmp_path):
    compiled.save(tmp_path / "p.so")
    loaded = polyc.load(tmp_path / "p.so")
    profile = loaded.profile(random_inputs(model, 3), repeat=2)
    assert {n for r in profile.rows for n in r.nodes} == {"conv", "relu", "matmul", "add"}
    polyc.compile(model, threads=1).save(tmp_path / "plain.so")
    with pytest.raises(PolycError, match="compiled without profile=True"):
        polyc.load(tmp_path / "plain.so").profile(random_inputs(model, 3))


def test_repeat_must_be_positive(model, compiled):
    with pytest.raises(PolycError, match="repeat must be at least 1"):
        compiled.profile(random_inputs(model, 0), repeat=0)


def test_loop_nest_profile():
    nest = LoopNest("scale", params=["N"])
    A = nest.array("A", ("N",))
    nest.statement("S", "{ [i] : 0 <= i < N }", write=A["i"], expr=A["i"] * 2.0 + 1.0)
    compiled = nest.compile(params={"N": 1000}, profile=True)
    profile = compiled.profile({"A": np.ones(1000, np.float32)}, repeat=2)
    assert [r.flops for r in profile.rows] == [2000]
    assert profile.rows[0].bytes == 4000
    head, row = str(profile).splitlines()[:2]
    assert head.endswith("  statements") and row.endswith("  S (1 st.)")  # no ONNX nodes


def test_a_repeated_subexpression_counts_once():
    """A depthwise 3x3 conv + Clip is one statement whose body reads the conv's sum
    three times (Clip is two selects around it); the code computes equal subtrees
    once, and so does the count: 9 multiplies, 9 adds (onto the bias) and 2 selects
    per output element, 20, where 75 had been counted."""
    rng = np.random.default_rng(0)
    weights = [("w", rng.standard_normal((8, 1, 3, 3)).astype(np.float32)),
               ("b", rng.standard_normal(8).astype(np.float32)),
               ("lo", np.array(0.0, np.float32)), ("hi", np.array(6.0, np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="dw", group=8,
                              pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["c", "lo", "hi"], ["y"], name="clip")]
    model = make_model(nodes, [("x", [1, 8, 12, 12])], ["y"], initializers=weights)
    compiled = polyc.compile(model, profile=True, threads=1)
    [part] = compiled.manifest["profile"]
    assert part["flops"] == 20 * 8 * 12 * 12
    inputs = random_inputs(model, 0)
    np.testing.assert_allclose(compiled.run(inputs)["y"], run_onnxruntime(model, inputs)["y"],
                               rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("text", ["{ [i, j] : 0 <= i < 7 and 0 <= j < 5 }",
                                  "{ [i, j] : 0 <= i < 9 and 0 <= j <= i }",
                                  "[N] -> { [i, j] : 0 <= i < N and i <= j < 2 * i }"])
def test_instances_counts_points(text):
    nest = LoopNest("count", params=["N"])
    A = nest.array("A", (1,))
    nest.statement("S", text.split("->")[-1].strip(), write=A["0"], expr=A["0"] + 1.0)
    scop = nest.compile(params={"N": 11}, tile=False).compilation.scop
    domain = scop.statement("S").domain
    points = isl.Set(text).intersect_params(isl.Set("[N] -> { : N = 11 }")) if "N" in text \
        else isl.Set(text)
    assert instances(domain, scop) == points.count_val().to_python()


def test_parts_sharing_nodes_are_one_row():
    parts = [{"statements": ["S0"], "nodes": ["conv"], "flops": 0, "bytes": 10},
             {"statements": ["S1"], "nodes": ["relu"], "flops": 5, "bytes": 10},
             {"statements": ["S2", "S3"], "nodes": ["conv", "relu"], "flops": 7, "bytes": 1},
             {"statements": ["S4"], "nodes": ["add"], "flops": 1, "bytes": 1}]
    rows = _rows(parts, np.array([1.0, 2.0, 3.0, 4.0]), {"conv": 0.5, "add": 0.25})
    assert [(r.parts, r.nodes, r.seconds, r.flops, r.onnxruntime) for r in rows] == [
        ((0, 1, 2), ("conv", "relu"), 6.0, 12, 0.5), ((3,), ("add",), 4.0, 1, 0.25)]


def test_inlined_nodes_join_the_row_that_alone_computes_them():
    """A producer inlined into one row's statements is that row's node too (onnxruntime
    times it); one inlined into two rows, or computed by a row of its own, is not added."""
    parts = [{"statements": ["S0"], "nodes": ["mul"], "inlined": ["dw", "sigmoid"],
              "flops": 3, "bytes": 1},
             {"statements": ["S1"], "nodes": ["add"], "inlined": ["bias", "sigmoid"],
              "flops": 1, "bytes": 1},
             {"statements": ["S2"], "nodes": ["bias"], "flops": 1, "bytes": 1}]
    times = {"dw": 0.5, "sigmoid": 0.25, "mul": 0.125, "add": 0.0625, "bias": 1.0}
    rows = _rows(parts, np.array([1.0, 2.0, 3.0]), times)
    assert [(r.nodes, r.onnxruntime) for r in rows] == [
        (("dw", "mul"), 0.625), (("add",), 0.0625), (("bias",), 1.0)]


def test_a_depthwise_conv_inlined_into_silu_is_matched_to_its_nodes():
    """Depthwise conv, Sigmoid and Mul (SiLU) are one statement: its profile row names
    all three nodes and carries onnxruntime's time for them; results match."""
    rng = np.random.default_rng(4)
    weights = [("w", rng.standard_normal((16, 1, 3, 3)).astype(np.float32)),
               ("b", rng.standard_normal(16).astype(np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="dw", group=16,
                              pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c"], ["s"], name="sigmoid"),
             helper.make_node("Mul", ["c", "s"], ["y"], name="mul")]
    model = make_model(nodes, [("x", [1, 16, 20, 20])], ["y"], initializers=weights)
    compiled = polyc.compile(model, profile=True, threads=1)
    inputs = random_inputs(model, 5)
    np.testing.assert_allclose(compiled.run(inputs)["y"], run_onnxruntime(model, inputs)["y"],
                               rtol=RTOL * 10, atol=ATOL * 10)
    (part,) = compiled.manifest["profile"]
    assert (part["nodes"], part["inlined"]) == (["mul"], ["dw", "sigmoid"])
    (row,) = compiled.profile(inputs, repeat=2).rows
    assert row.nodes == ("dw", "sigmoid", "mul") and row.onnxruntime is not None


def test_onnxruntime_names_map_to_onnx_nodes():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Gemm", ["r", "g"], ["y"], name="gemm")]
    by_name = {n.name: n for n in nodes}
    producer = {out: n for n in nodes for out in n.output}
    assert _onnx_node("gemm", "Gemm", by_name, producer) == "gemm"
    assert _onnx_node("fused gemm", "FusedGemm", by_name, producer) == "gemm"
    # a Conv with its Relu fused in, renamed after the Relu's output by the NCHWc pass
    assert _onnx_node("r_nchwc", "Conv", by_name, producer) == "conv"
    assert _onnx_node("gemm/MatMulAddFusion", "Gemm", by_name, producer) == "gemm"
    assert _onnx_node("ReorderOutput", "ReorderOutput", by_name, producer) == "ReorderOutput"


def test_onnxruntime_times_per_node(model):
    times = onnxruntime_times(model, random_inputs(model, 0), repeat=3, threads=1)
    assert times["wall"] > 0
    assert set(times["nodes"]) & {"conv", "relu", "matmul", "add"}


ROOT = Path(__file__).resolve().parent.parent


def test_cli_bench_profile(tmp_path):
    out = tmp_path / "profile.json"
    done = subprocess.run([sys.executable, "-m", "polyc.cli", "bench", ROOT / "examples/mlp.onnx",
                           "--profile", "--repeat", "3", "--json", out],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "GFLOP/s" in done.stdout and "gemm1" in done.stdout and "onnxruntime" in done.stdout
    data = json.loads(out.read_text())
    assert {n for row in data["rows"] for n in row["nodes"]} == {"gemm1", "relu", "gemm2",
                                                                "softmax"}
    done = subprocess.run([sys.executable, "-m", "polyc.cli", "bench", ROOT / "examples/mlp.onnx",
                           "--json", out], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "give --profile too" in done.stderr
