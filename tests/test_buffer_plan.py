"""Buffer planning: temporaries share scratch by liveness over the program's parts, and
elementwise statements write in place where the legality checker allows.

Unit tests of the interval assignment (random lifetimes with hypothesis), then models
run against onnxruntime with reuse happening (JIT and artifacts), the LLVM IR's
``noalias`` parameters, what is written in place and what must not be."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

import polyc
from polyc.codegen.layout import ALIGN, aligned
from polyc.codegen.liveness import Lifetime, assign_offsets, peak

from onnx_helpers import make_model, random_inputs, run_onnxruntime
from real_models import ATOL, RTOL, load
from real_models import run_onnxruntime as run_onnxruntime_list

lifetime = st.builds(lambda nbytes, first, length: Lifetime(nbytes, first, first + length),
                     st.integers(0, 5000), st.integers(0, 12), st.integers(0, 6))


def assert_valid(offsets, lives):
    """Aligned offsets; no two temporaries alive in one part share a byte; never more
    than one slot each."""
    assert set(offsets) == set(lives)
    assert all(off % ALIGN == 0 for off in offsets.values())
    names = sorted(lives)
    for k, a in enumerate(names):
        for b in names[k + 1:]:
            if lives[a].overlaps(lives[b]) and lives[a].nbytes and lives[b].nbytes:
                assert (offsets[a] + lives[a].nbytes <= offsets[b]
                        or offsets[b] + lives[b].nbytes <= offsets[a]), (a, b)
    assert peak(offsets, lives) <= sum(aligned(life.nbytes) for life in lives.values())


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.dictionaries(st.from_regex(r"t[0-9]{1,3}", fullmatch=True), lifetime, max_size=30))
def test_random_lifetimes_get_valid_offsets(lives):
    offsets = assign_offsets(lives, ALIGN)
    assert_valid(offsets, lives)
    busiest = max((sum(life.nbytes for life in lives.values() if life.first <= k <= life.last)
                   for k in range(20)), default=0)
    assert peak(offsets, lives) >= busiest
    assert assign_offsets(dict(reversed(lives.items())), ALIGN) == offsets  # deterministic


def test_temporaries_alive_at_different_times_share_bytes():
    lives = {"a": Lifetime(1000, 0, 1), "b": Lifetime(1000, 1, 2), "c": Lifetime(1000, 2, 3),
             "d": Lifetime(64, 4, 4)}
    offsets = assign_offsets(lives, ALIGN)
    assert_valid(offsets, lives)
    assert offsets["a"] == offsets["c"] and offsets["d"] == 0
    assert peak(offsets, lives) == aligned(1000) + 1000


def test_no_temporaries_need_no_scratch():
    assert assign_offsets({}, ALIGN) == {} and peak({}, {}) == 0


def matmul_chain(n: int = 96, layers: int = 4):
    """``x @ W0 @ W1 ...`` with a Softmax between (no elementwise producer to inline):
    each product a temporary alive in two parts."""
    rng = np.random.default_rng(3)
    nodes, weights, current = [], [], "x"
    for k in range(layers):
        weights.append((f"w{k}", (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)))
        out = "y" if k == layers - 1 else f"s{k}"
        nodes.append(helper.make_node("MatMul", [current, f"w{k}"], [f"m{k}"]))
        nodes.append(helper.make_node("Softmax", [f"m{k}"], [out], axis=-1))
        current = out
    return make_model(nodes, [("x", [n, n])], [("y", [n, n])], initializers=weights)


def mlp_with_residual(n: int = 64):
    """``h = x @ W1; r = relu(h); y = r @ W2 + h``: ``h`` is read after the Relu, so the
    Relu may not write into ``h``'s memory."""
    rng = np.random.default_rng(5)
    w1, w2 = (rng.standard_normal((n, n)).astype(np.float32) / 8 for _ in range(2))
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["p"]),
             helper.make_node("Add", ["p", "h"], ["y"])]
    return make_model(nodes, [("x", [n, n])], [("y", [n, n])],
                      initializers=[("w1", w1), ("w2", w2)])


def transposed_relu(n: int = 64):
    """``y = relu(transpose(x @ W1)) @ W2``: the Relu reads the element its transpose
    writes, not its own, so it may not write in place."""
    rng = np.random.default_rng(6)
    w1, w2 = (rng.standard_normal((n, n)).astype(np.float32) / 8 for _ in range(2))
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Transpose", ["h"], ["t"], perm=[1, 0]),
             helper.make_node("Relu", ["t"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    return make_model(nodes, [("x", [n, n])], [("y", [n, n])],
                      initializers=[("w1", w1), ("w2", w2)])


def assert_jit_and_artifact_match(model, inputs, expected, path, **options):
    """Compiled in process and saved as an artifact, both match ``expected``; the model."""
    compiled = polyc.compile(model, **options)
    compiled.save(path)
    for runner in (compiled, polyc.load(path)):
        outputs = runner.run(inputs)
        for name, want in expected.items():
            np.testing.assert_allclose(outputs[name], want, rtol=RTOL, atol=ATOL, err_msg=name)
    return compiled


@pytest.mark.parametrize("threads", [1, 2])
def test_a_chain_shares_scratch_and_matches_onnxruntime(tmp_path, threads):
    model = matmul_chain()
    inputs = random_inputs(model, seed=1)
    compiled = assert_jit_and_artifact_match(model, inputs, run_onnxruntime(model, inputs),
                                             tmp_path / "chain.so", threads=threads)
    plan = compiled.compilation.plan
    assert plan.scratch_bytes < plan.unshared_bytes
    assert len(set(plan.scratch.values())) < len(plan.scratch)  # some offsets shared
    assert compiled.manifest["scratch_bytes"] == plan.scratch_bytes
    assert polyc.load(tmp_path / "chain.so").manifest["scratch_bytes"] == plan.scratch_bytes


def test_the_kernel_takes_no_noalias_pointers_and_each_part_one_per_memory():
    compiled = polyc.compile(load("mlp2")[0], threads=1)
    llvm_ir, plan = compiled.compilation.llvm_ir, compiled.compilation.plan
    kernel = re.search(r"define internal void @\"polyc_kernel\"\((.*)\)", llvm_ir).group(1)
    assert "ptr" in kernel and "noalias" not in kernel
    in_place = {done.array for done in plan.in_place}
    assert in_place  # the Relu writes into the first Gemm's output
    for params in re.findall(r"define internal void @\"polyc_kernel\.part[.\d]*\"\((.*)\)",
                             llvm_ir):
        names = re.findall(r"ptr noalias %\"([^\"]+)\"", params)
        assert names and not in_place & set(names)  # aliases pass as their memory
        assert len(names) == len(set(names))


def test_report_and_inspect_show_scratch_with_and_without_reuse():
    compiled = polyc.compile(matmul_chain(layers=3), threads=1)
    plan = compiled.compilation.plan
    assert (f"scratch {plan.scratch_bytes} bytes ({plan.unshared_bytes} without reuse)"
            in compiled.report())
    buffers = compiled.inspect().split("== BUFFERS ==")[1]
    assert f"scratch bytes: {plan.scratch_bytes} ({plan.unshared_bytes} without reuse)" in buffers
    assert re.search(r"scratch\+\d+: \w+ \(\d+ bytes, parts \d+-\d+\)", buffers)


def test_an_elementwise_statement_writes_into_the_temporary_it_reads(tmp_path):
    model, inputs = load("mlp2")
    expected, _ = run_onnxruntime_list(model, inputs)
    compiled = assert_jit_and_artifact_match(model, inputs,
                                             {model.graph.output[0].name: expected[0]},
                                             tmp_path / "mlp2.so")
    plan = compiled.compilation.plan
    (done,) = plan.in_place
    assert plan.scratch[done.array] == plan.scratch[done.buffer]
    assert f"in place: {done.statement} writes it into {done.buffer}" in str(plan)


@pytest.mark.parametrize("make, kept", [(mlp_with_residual, "h"), (transposed_relu, "h")])
def test_no_write_in_place_where_the_old_value_is_still_needed(make, kept):
    model = make()
    inputs = random_inputs(model, seed=2)
    compiled = polyc.compile(model)
    in_place = compiled.compilation.plan.in_place
    assert kept in compiled.compilation.plan.scratch
    assert all(kept not in (done.array, done.buffer) for done in in_place), in_place
    np.testing.assert_allclose(compiled.run(inputs)["y"], run_onnxruntime(model, inputs)["y"],
                               rtol=RTOL, atol=ATOL)


def real_model_case(name, tmp_path):
    model, inputs = load(name, random_weights=True)
    expected, _ = run_onnxruntime_list(model, inputs)
    outputs = {o.name: want for o, want in zip(model.graph.output, expected)}
    compiled = assert_jit_and_artifact_match(model, inputs, outputs, tmp_path / f"{name}.so")
    plan = compiled.compilation.plan
    # direct convolutions left few large temporaries to share (resnet18: 2.7 MB in all,
    # the stem's im2col the largest): at most half of them at once
    assert plan.in_place and plan.scratch_bytes < plan.unshared_bytes / 2
    return plan


def test_resnet18_shares_scratch(tmp_path):
    real_model_case("resnet18", tmp_path)


@pytest.mark.slow
def test_squeezenet_shares_scratch(tmp_path):
    real_model_case("squeezenet", tmp_path)


def softmax_then_matmul(n: int = 64):
    """Outputs ``y = softmax(x @ W)`` and ``z = relu(x @ W) @ W``: Softmax's last pass
    writes the graph output reading its exponentials; ``z``'s product reads a temporary
    that the Relu could write into an output were it not read again."""
    rng = np.random.default_rng(8)
    w = (rng.standard_normal((n, n)) / 8).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Softmax", ["h"], ["y"], axis=-1),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Add", ["r", "x"], ["a"]),
             helper.make_node("MatMul", ["r", "w"], ["m"]),
             helper.make_node("Add", ["m", "a"], ["z"])]
    return make_model(nodes, [("x", [n, n])], [("y", [n, n]), ("z", [n, n])],
                      initializers=[("w", w)])


@pytest.mark.parametrize("threads", [1, 2])
def test_a_temporary_read_by_the_last_pass_lives_in_the_graph_output(tmp_path, threads):
    """Softmax's exponentials are stored in its output (the last pass divides them in
    place there), not in scratch: the plan says so, and JIT and artifact match
    onnxruntime."""
    model = softmax_then_matmul()
    inputs = random_inputs(model, seed=4)
    compiled = assert_jit_and_artifact_match(model, inputs, run_onnxruntime(model, inputs),
                                             tmp_path / "softmax.so", threads=threads)
    plan = compiled.compilation.plan
    into_y = [done for done in plan.in_place if done.buffer == "y"]
    assert [done.statement.split("_", 1)[1] for done in into_y] == ["softmax_exp"]
    assert f"y: {into_y[0].array} (" in str(plan)
    assert plan.scratch_bytes < plan.unshared_bytes
    assert all(done.buffer != "z" or done.array != "r" for done in plan.in_place)


def test_in_place_holds_when_isl_left_two_statements_unordered():
    """isl's scheduler put the Add writing output t1 and the Concat reading t0 in a set
    node (no order between them). In place then stored t0 in t1's memory, checked with
    the Concat first (the order ``get_map`` gives a set) while the AST ran the Add
    first, overwriting t0 before the Concat read it (graph fuzzer seed 1770). Sets are
    now sequences in that order."""
    nodes = [helper.make_node("ReduceSum", ["x0", "axes"], ["t0"], keepdims=1),
             helper.make_node("Add", ["t0", "x1"], ["t1"]),
             helper.make_node("Concat", ["t0", "x2"], ["t2"], axis=-3)]
    model = make_model(nodes, [("x0", [2, 1, 2, 2]), ("x1", [1, 1, 1, 1]), ("x2", [2, 1, 1, 2])],
                       ["t1", "t2"], initializers=[("axes", np.array([1, 2], np.int64))],
                       opset=17)
    compiled = polyc.compile(model, scheduler="isl", tile=False, threads=1)
    assert "set:" not in str(compiled.schedule.schedule)
    inputs = random_inputs(model, 5)
    expected = run_onnxruntime(model, inputs)
    actual = compiled.run(inputs)
    for name in ("t1", "t2"):
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-6, atol=1e-6)
