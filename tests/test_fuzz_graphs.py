"""The graph fuzzer (polyc.fuzz.graphs): its seeds pass, it is deterministic, its
shrinking gives valid smaller cases, its reproducer runs, and its comparison catches
wrong answers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

import polyc
from polyc.fuzz import Config, Mismatch, graphs

SEEDS = range(40)

# ops the first SEEDS draw between them (with every scheduler, fusion policy, tiling and
# thread count)
COVERED = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Relu", "Sigmoid", "Abs", "Neg",
           "Exp", "Log", "Sqrt", "Clip", "LeakyRelu", "HardSwish", "Less", "Greater",
           "Equal", "Where", "Cast", "MatMul", "Gemm", "Conv", "MaxPool", "AveragePool",
           "GlobalAveragePool", "ReduceSum", "ReduceMean", "ReduceMax", "Softmax",
           "LayerNormalization", "Reshape", "Transpose", "Flatten", "Unsqueeze", "Concat",
           "Slice", "Gather", "Expand"}


@pytest.fixture(scope="module")
def cases():
    return [graphs.generate(seed) for seed in SEEDS]


def test_seeds_pass_and_cover_the_ops_and_configs(cases):
    for case in cases:
        graphs.check(case)
    drawn = {node.op for case in cases for node in case.nodes}
    assert COVERED <= drawn, sorted(COVERED - drawn)
    configs = [case.config for case in cases]
    for field, values in [("scheduler", {"pluto", "isl"}), ("fuse", {"none", "smart", "max"}),
                          ("tile", {True, False}), ("threads", {1, 2})]:
        assert {getattr(c, field) for c in configs} == values, field
    dtypes = {leaf.dtype for case in cases for leaf in case.leaves}
    assert dtypes == {"float32", "int64", "bool"}
    assert {len(case.nodes) for case in cases} >= {1, 12}


def test_generate_is_a_function_of_the_seed():
    for seed in (3, 17, 29):
        assert graphs.generate(seed) == graphs.generate(seed)
        a, b = graphs.model(graphs.generate(seed)), graphs.model(graphs.generate(seed))
        assert a.SerializeToString() == b.SerializeToString()
    assert graphs.generate(3) != graphs.generate(4)


@pytest.mark.parametrize("seed", [0, 13, 26, 87])
def test_smaller_cases_are_valid_and_smaller(seed):
    case = graphs.generate(seed)
    candidates = list(graphs.smaller(case))
    assert candidates
    for candidate in candidates:
        assert graphs.size(candidate) < graphs.size(case)
        onnx.checker.check_model(graphs.model(candidate), full_check=True)
        graphs.reference(candidate)  # onnxruntime runs it
    assert any(len(c.nodes) < len(case.nodes) for c in candidates)
    assert any(graphs.size(c)[2] < graphs.size(case)[2] for c in candidates)


def shrink(case, fails):
    """The shrinking loop: keep the first smaller case that still ``fails``."""
    while True:
        for candidate in graphs.smaller(case):
            if fails(candidate):
                case = candidate
                break
        else:
            return case


def test_shrinking_finds_the_one_op_that_fails():
    """A 'bug' in every graph with a Conv shrinks to that Conv alone (its input a graph
    input) under the simplest options."""
    case = next(c for c in map(graphs.generate, range(100))
                if "Conv" in {n.op for n in c.nodes} and len(c.nodes) >= 8)
    small = shrink(case, lambda c: any(n.op == "Conv" for n in c.nodes))
    assert [n.op for n in small.nodes] == ["Conv"]
    assert small.config == graphs.SIMPLEST
    assert [leaf.weight for leaf in small.leaves].count(False) == 1
    assert graphs.size(small)[2] < graphs.size(case)[2]


def test_reproducer_runs_standalone(tmp_path):
    case = graphs.generate(2)
    script = tmp_path / "repro.py"
    script.write_text(graphs.reproducer(case))
    root = str(Path(polyc.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            env=env, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "polyc agrees with onnxruntime" in result.stdout
    namespace = {}
    exec(compile(graphs.reproducer(case), "repro", "exec"), namespace)
    assert namespace["CASE"] == case


def perturbed(monkeypatch, change):
    """polyc.compile whose models return their outputs changed by ``change(outputs)``."""
    real = polyc.compile

    class Wrapped:
        def __init__(self, compiled):
            self.compiled = compiled

        def run(self, inputs):
            outputs = self.compiled.run(inputs)
            change(outputs)
            return outputs

    monkeypatch.setattr(polyc, "compile", lambda *a, **k: Wrapped(real(*a, **k)))


def one_op_case(op="Add", dtype="float32") -> graphs.GraphCase:
    """y = x0 op x1 on [3, 4] inputs."""
    leaves = tuple(graphs.Leaf(f"x{i}", (3, 4), dtype, 1.0, 5.0) for i in range(2))
    return graphs.GraphCase(leaves, (graphs.Node(op, ("x0", "x1"), "t0"),), ("t0",),
                            Config(), 1)


@pytest.mark.parametrize("change,message", [
    (lambda o: o["t0"].__setitem__((1, 2), o["t0"][1, 2] * 1.01), "1 of 12 elements differ"),
    (lambda o: o["t0"].__setitem__((0, 3), np.nan), "first at [0, 3]"),
    (lambda o: o.__setitem__("t0", o["t0"][:2]), "polyc gives float32[2, 4]"),
    (lambda o: o.__setitem__("t0", o["t0"].astype(np.int64)), "polyc gives int64"),
    (lambda o: o.__setitem__("t1", o["t0"]), "polyc's outputs"),
])
def test_check_catches_a_wrong_float_answer(monkeypatch, change, message):
    case = one_op_case()
    graphs.check(case)
    perturbed(monkeypatch, change)
    with pytest.raises(Mismatch, match=message.replace("[", r"\[")):
        graphs.check(case)


def test_check_catches_a_wrong_integer_or_bool_answer(monkeypatch):
    for case in (one_op_case("Add", "int64"), one_op_case("Less")):
        graphs.check(case)
        perturbed(monkeypatch, lambda o: o["t0"].__setitem__((2, 1), ~o["t0"][2, 1]))
        with pytest.raises(Mismatch, match=r"first at \[2, 1\]"):
            graphs.check(case)
        monkeypatch.undo()


def test_check_accepts_rounding_differences(monkeypatch):
    """A relative error of 1e-6 is within the tolerance."""
    case = one_op_case("Mul")
    perturbed(monkeypatch, lambda o: o["t0"].__setitem__(..., o["t0"] * np.float32(1 + 1e-6)))
    graphs.check(case)


def test_tolerance_grows_with_sums_and_magnitudes():
    """A MatMul over K = 30 of values up to 40: atol 1e-4 * max(1, M) * sqrt(30 + 1)."""
    w = graphs.Leaf("w0", (30, 2), low=-1.0, high=1.0, weight=True)
    x = graphs.Leaf("x0", (3, 30), low=-40.0, high=40.0)
    case = graphs.GraphCase((x, w), (graphs.Node("MatMul", ("x0", "w0"), "t0"),
                                     graphs.Node("Relu", ("t0",), "t1")), ("t1",), Config(), 5)
    values = graphs.reference(case)
    magnitude, steps = graphs.error_scales(case, values)["t1"]
    assert steps == 31 and magnitude == np.abs(values["t0"]).max() > 39
    assert graphs.error_scales(case, values)["x0"] == (np.abs(values["x0"]).max(), 0.0)


@pytest.mark.parametrize("seed", [493, 1766, 1770, 2795, 2885, 3573, 5504])
def test_seeds_that_found_bugs(seed):
    """493, 2885: a constant fold of MaxPool with ceil_mode made the wrong shape; 1770,
    3573: in place checked against one order of a set node, run in another; 2795: a
    MaxPool window wholly in the padding gave -inf, not the lowest float; 1766: the
    Farkas dual of a 15-constraint dependence took 62 s in process; 5504: a MaxPool of
    a weight folded by onnx's reference evaluator, which gives 0 for windows wholly in
    the padding."""
    graphs.check(graphs.generate(seed))
