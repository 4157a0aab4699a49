"""Parallel loops: marks in the schedule tree, their legality, OpenMP regions in the code.

A parallel loop carries no dependence, so each thread's iterations compute exactly
what they compute on one thread: without fast-math every thread count must reproduce
``threads=1`` bit for bit; with fast-math results are compared with numpy or
onnxruntime. Most models here are small, so the work threshold below which loops stay
serial is lowered to one instance (fixture ``every_loop``) to get regions at all.
"""

import ctypes
import ctypes.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import islpy as isl
import numpy as np
import onnx
import pytest
from onnx import helper

import polyc
from polyc import config
from polyc.cli import main
from polyc.codegen.ast import build_ast
from polyc.codegen.llvm import emit_module
from polyc.codegen.parallel import MARK
from polyc.errors import IllegalScheduleError, PolycError
from polyc.islutil import statement_names
from polyc.pipeline import compile_scop
from polyc.runtime import openmp
from polyc.runtime.jit import JitModule
from polyc.scheduler.legality import check_parallel
from polyc.scop.polybench import KERNELS
from polyc.tiling import parallel as parallel_stage

from onnx_helpers import ATOL, RTOL, make_model, random_inputs, run_onnxruntime

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
THREADS = [1, 2, 3]
# Partial register tiles in both directions; 7 column blocks of 48 run in parallel.
MATMUL_SHAPES = [(203, 130, 290), (257, 64, 300)]
# Kernels whose Pluto schedule has a parallel loop in an outermost band (or right below
# one); the stencils, lu and doitgen have none.
PARALLEL_KERNELS = ["gemver", "fusion", "independent", "matmul", "2mm", "3mm", "mvt",
                    "trisolv"]


@pytest.fixture
def every_loop(monkeypatch):
    """Mark parallel loops however little work they (and the program) hold."""
    monkeypatch.setattr(parallel_stage, "MIN_INSTANCES", 1)
    monkeypatch.setattr(parallel_stage, "MIN_PROGRAM_INSTANCES", 1)


def matmul_model(m, k, n):
    return make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                      [("a", [m, k]), ("b", [k, n])], ["y"])


def elementwise_model():
    nodes = [helper.make_node("Mul", ["x", "y"], ["t0"]),
             helper.make_node("Add", ["t0", "x"], ["t1"]),
             helper.make_node("Sub", ["t1", "y"], ["t2"]),
             helper.make_node("Relu", ["t2"], ["t3"]),
             helper.make_node("Tanh", ["t3"], ["z"])]
    return make_model(nodes, [("x", [37, 300]), ("y", [37, 300])], ["z"])


def softmax_model():
    return make_model([helper.make_node("Softmax", ["x"], ["y"], axis=1)],
                      [("x", [129, 300])], ["y"])


def reductions_model():
    axes = onnx.numpy_helper.from_array(np.array([0], np.int64), "axes0")
    nodes = [helper.make_node("ReduceSum", ["x", "axes0"], ["s0"], keepdims=0),
             helper.make_node("ReduceMax", ["x"], ["m1"], axes=[1], keepdims=0)]
    return make_model(nodes, [("x", [130, 257])], ["s0", "m1"], initializers=[axes])


def mlp_example():
    return onnx.load(EXAMPLES / "mlp.onnx"), {"x": np.load(EXAMPLES / "mlp_input.npy")}


MODELS = {"elementwise": elementwise_model, "softmax": softmax_model,
          "reductions": reductions_model}


def regions(compiled) -> int:
    """How many parallel regions the LLVM IR starts."""
    return _calls(compiled.compilation.llvm_ir)


def _calls(llvm_ir: str) -> int:
    return llvm_ir.count('call void @"GOMP_parallel"(')


def marks(schedule: isl.Schedule) -> int:
    found = []

    def visit(node):
        if (node.get_type() == isl.schedule_node_type.mark
                and node.mark_get_id().get_name() == MARK):
            found.append(node.get_tree_depth())
        return True

    schedule.get_root().foreach_descendant_top_down(visit)
    return len(found)


def assert_parallel_legal(compiled) -> None:
    compilation = compiled.compilation
    assert marks(compilation.schedule.schedule) > 0
    check_parallel(compilation.scop, compilation.schedule.schedule)


# --- ONNX models --------------------------------------------------------------------


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("shape", MATMUL_SHAPES)
def test_matmul_matches_numpy_on_threads(shape, threads):
    m, k, n = shape
    model = matmul_model(m, k, n)
    inputs = random_inputs(model, seed=1)
    compiled = polyc.compile(model, threads=threads)
    expected = inputs["a"].astype(np.float64) @ inputs["b"].astype(np.float64)
    np.testing.assert_allclose(compiled.run(inputs)["y"], expected, rtol=1e-4, atol=1e-4)
    assert (regions(compiled) > 0) == (threads != 1)
    if threads != 1:
        assert_parallel_legal(compiled)


@pytest.mark.parametrize("shape", MATMUL_SHAPES)
def test_matmul_threads_are_bit_identical_without_fast_math(shape):
    model = matmul_model(*shape)
    inputs = random_inputs(model, seed=2)
    serial = polyc.compile(model, threads=1, fast_math=False).run(inputs)["y"]
    for threads in (2, 3, None):
        compiled = polyc.compile(model, threads=threads, fast_math=False)
        np.testing.assert_array_equal(compiled.run(inputs)["y"], serial)


def test_matmul_marks_a_block_loop_of_the_register_tile_band():
    compiled = polyc.compile(matmul_model(203, 130, 290), threads=2)
    notes = [d for d in compiled.schedule.decisions if d.startswith("parallel:")]
    # a block loop over i: where i/mc has one block at this size, the row tiles i/mr
    # (26 of 8 rows) run in parallel; where the host's caches make mc smaller (56 on a
    # Zen 3 host with 1 MB of L2), the blocks i/mc do
    (note,) = notes  # statements fused into the register tile (its init) may join it
    assert re.fullmatch(r"parallel: ([\w, ]+, )?S1_matmul_update(, [\w, ]+)?: "
                        r"loop i0/(8 \(c3\)|\d+ \(c2\))", note), note
    assert "// parallel\n" in str(compiled.compilation.program)


def test_loop_bodies_take_noalias_pointers_and_keep_their_vector_code():
    compiled = polyc.compile(matmul_model(203, 130, 290), threads=2)
    text = compiled.compilation.llvm_ir
    bodies = re.findall(r"define internal void @\"?polyc_kernel[.\w]*\.loop\w+\"?\((.*?)\)\s*\w*"
                        r"\s*\{(.*?)\n\}", text, re.S)
    assert bodies
    for params, _ in bodies:
        pointers = [p for p in params.split(", ") if p.startswith("ptr")]
        assert pointers and all(p.startswith("ptr noalias") for p in pointers)
    assert any("<16 x float>" in body for _, body in bodies)


def test_partial_register_tiles_are_unrolled_like_full_ones():
    """A partial register tile (49 columns: tiles of 48, or of 16 on AVX2, and one of 1)
    has its rows and
    vectors unrolled by isl, as a full tile has (by codegen): a loop of them kept its
    accumulators in memory (a 3x3 conv 64->256 at 13x13, 7 + 6 rows, 2 threads: 0.52
    ms, 0.15 ms unrolled). Loops of such updates carry a hint that disables LLVM's vectorizer,
    which had vectorized them with gathers and scatters in a parallel loop's body (0.30
    against 0.11 ms serial); no gather is left, and the product still matches numpy on
    two threads."""
    compiled = polyc.compile(matmul_model(192, 1152, 49), threads=2)
    program = str(compiled.compilation.program)
    assert re.search(r"S1_matmul_update\([5-8] \* c", program)  # rows: mr * tile + row
    # a loop over rows is a full tile's, which codegen unrolls (an unroll mark names it)
    unrolled = {c for mark in re.findall(r"// unroll (c\d+ c\d+)", program)
                for c in mark.split()}
    rows = set(re.findall(r"S1_matmul_update\((c\d+),", program))
    assert rows and rows <= unrolled
    text = compiled.compilation.llvm_ir
    assert '!{ !"llvm.loop.vectorize.enable", i1 0 }' in text.replace("!{!", "!{ !")
    optimized = JitModule(text, compiled.manifest, compiled.compilation.constants).optimized_ir
    assert not re.search(r"call .*@llvm\.masked\.gather", optimized)
    a, b = (np.random.default_rng(0).standard_normal(s).astype(np.float32)
            for s in ((192, 1152), (1152, 49)))
    (got,) = compiled.run({"a": a, "b": b}).values()
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_match_onnxruntime_on_threads(every_loop, name, threads):
    model = MODELS[name]()
    inputs = random_inputs(model, seed=3)
    expected = run_onnxruntime(model, inputs)
    compiled = polyc.compile(model, threads=threads)
    actual = compiled.run(inputs)
    for key, value in expected.items():
        np.testing.assert_allclose(actual[key], value, rtol=RTOL, atol=ATOL, err_msg=key)
    assert (regions(compiled) > 0) == (threads != 1)
    if threads != 1:
        assert_parallel_legal(compiled)
        strict = polyc.compile(model, threads=threads, fast_math=False).run(inputs)
        serial = polyc.compile(model, threads=1, fast_math=False).run(inputs)
        for key, value in serial.items():
            np.testing.assert_array_equal(strict[key], value, err_msg=key)


@pytest.mark.parametrize("threads", THREADS)
def test_mlp_example_matches_onnxruntime_on_threads(every_loop, threads):
    model, inputs = mlp_example()
    compiled = polyc.compile(model, threads=threads)
    (expected,) = run_onnxruntime(model, inputs).values()
    np.testing.assert_allclose(compiled.run(inputs)["y"], expected, rtol=RTOL, atol=ATOL)
    assert (regions(compiled) > 0) == (threads != 1)


def test_loops_of_few_iterations_stay_serial():
    # two column blocks (64 + 26 columns), three row tiles: too few to share out evenly
    model = matmul_model(18, 130, 90)
    compiled = polyc.compile(model, threads=2)
    assert regions(compiled) == 0
    inputs = random_inputs(model, seed=1)
    np.testing.assert_allclose(compiled.run(inputs)["y"], inputs["a"] @ inputs["b"],
                               rtol=1e-4, atol=1e-4)


def test_small_loop_nests_stay_serial(monkeypatch):
    monkeypatch.setattr(parallel_stage, "MIN_PROGRAM_INSTANCES", 1)
    model, _ = mlp_example()  # x[4, 64]: no loop nest is worth a region
    compiled = polyc.compile(model, threads=2)
    assert regions(compiled) == 0
    assert not any(d.startswith("parallel:") for d in compiled.schedule.decisions)


def test_small_programs_stay_serial(monkeypatch):
    model = matmul_model(257, 64, 300)  # 4.9M multiply-adds: a region per loop nest
    inputs = random_inputs(model, seed=2)
    assert regions(polyc.compile(model, threads=2)) > 0
    monkeypatch.setattr(parallel_stage, "MIN_PROGRAM_INSTANCES", 257 * 64 * 300 * 2)
    compiled = polyc.compile(model, threads=2)
    assert regions(compiled) == 0
    (note,) = [d for d in compiled.schedule.decisions if d.startswith("parallel:")]
    assert note.startswith("parallel: off (") and "statement instances in all" in note
    np.testing.assert_allclose(compiled.run(inputs)["y"], inputs["a"] @ inputs["b"],
                               rtol=1e-4, atol=1e-4)


def test_threads_1_emits_no_regions_and_says_so():
    compiled = polyc.compile(matmul_model(257, 64, 300), threads=1)
    assert "GOMP_parallel" not in compiled.compilation.llvm_ir
    assert "omp_get" not in compiled.compilation.llvm_ir
    assert "parallel: off (threads=1)" in compiled.schedule.decisions
    assert marks(compiled.schedule.schedule) == 0


def test_untiled_schedules_get_parallel_loops_too(every_loop):
    model = softmax_model()
    inputs = random_inputs(model, seed=4)
    compiled = polyc.compile(model, tile=False, threads=2)
    assert "tiling: off" in compiled.schedule.decisions
    assert regions(compiled) > 0
    assert_parallel_legal(compiled)
    (expected,) = run_onnxruntime(model, inputs).values()
    np.testing.assert_allclose(compiled.run(inputs)["y"], expected, rtol=RTOL, atol=ATOL)


# --- thread count at run time ---------------------------------------------------------


@pytest.fixture
def libgomp():
    """libgomp through ctypes (loaded by polyc first, with its wait policy); the thread
    count it had is restored afterwards."""
    openmp.load_libgomp()
    gomp = ctypes.CDLL(ctypes.util.find_library("gomp"))
    before = gomp.omp_get_max_threads()
    yield gomp
    gomp.omp_set_num_threads(before)


def test_default_follows_omp_set_num_threads(libgomp):
    model = matmul_model(257, 64, 300)
    inputs = random_inputs(model, seed=5)
    serial = polyc.compile(model, threads=1, fast_math=False).run(inputs)["y"]
    compiled = polyc.compile(model, fast_math=False)  # threads=None: the OpenMP default
    assert regions(compiled) > 0
    for count in (1, 2, 3):
        libgomp.omp_set_num_threads(count)
        np.testing.assert_array_equal(compiled.run(inputs)["y"], serial)


RUN_ARTIFACT = """
import json, os, sys
import numpy as np
import polyc
model = polyc.load(sys.argv[1])
a, b = np.load(sys.argv[2]), np.load(sys.argv[3])
before = len(os.listdir("/proc/self/task"))
y = model.run({"a": a, "b": b})["y"]
np.save(sys.argv[4], y)
print(json.dumps({"new_threads": len(os.listdir("/proc/self/task")) - before}))
"""


@pytest.mark.parametrize("omp_threads", ["1", "3"])
def test_artifact_follows_omp_num_threads_in_a_fresh_process(tmp_path, omp_threads):
    model = matmul_model(257, 64, 300)
    inputs = random_inputs(model, seed=6)
    # AVX-512's tiles on every host: row blocks of 128, 128 and 1 rows, regions of 16,
    # 16 and 1 iterations (AVX2's last block of 7 rows is a region of 2, which shrinks
    # libgomp's team to 2 threads, so the count below would not see OMP_NUM_THREADS)
    compiled = polyc.compile(model, fast_math=False, vector_bits=512)
    serial = polyc.compile(model, threads=1, fast_math=False).run(inputs)["y"]
    compiled.save(tmp_path / "mm.so")
    np.save(tmp_path / "a.npy", inputs["a"])
    np.save(tmp_path / "b.npy", inputs["b"])
    env = dict(os.environ, OMP_NUM_THREADS=omp_threads)
    done = subprocess.run([sys.executable, "-c", RUN_ARTIFACT, str(tmp_path / "mm.so"),
                           str(tmp_path / "a.npy"), str(tmp_path / "b.npy"),
                           str(tmp_path / "y.npy")],
                          capture_output=True, text=True, env=env, check=True)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), serial)
    # libgomp keeps its team: the region started OMP_NUM_THREADS - 1 threads (none for 1)
    assert json.loads(done.stdout)["new_threads"] == int(omp_threads) - 1


def test_aot_round_trip_with_threads(tmp_path):
    model = matmul_model(257, 64, 300)
    inputs = random_inputs(model, seed=7)
    compiled = polyc.compile(model, threads=2)
    compiled.save(tmp_path / "mm.so")
    loaded = polyc.load(tmp_path / "mm.so")
    assert loaded.manifest["options"]["threads"] == 2
    np.testing.assert_array_equal(loaded.run(inputs)["y"], compiled.run(inputs)["y"])


# --- wait policy: idle threads sleep instead of spinning -----------------------------

# In a fresh process: run the model argv[2] through the JIT on 2 threads (argv[1] "jit")
# or load it as an artifact ("artifact"), save its output for the inputs argv[3] to
# argv[4] and print what polyc says of libgomp's wait policy and what the environment
# holds afterwards. With OMP_DISPLAY_ENV=verbose, libgomp prints its settings on stderr
# when it is loaded.
RUN_WAITING = """
import json, os, sys
import numpy as np
import polyc
from polyc.runtime import openmp
how, target, inputs, out = sys.argv[1:]
model = polyc.compile(target, threads=2) if how == "jit" else polyc.load(target)
np.save(out, model.run(dict(np.load(inputs)))["y"])
print(json.dumps({"source": openmp.load_libgomp().source,
                  "compiler_loaded": "llvmlite" in sys.modules,
                  "environment": {name: os.environ.get(name)
                                  for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}}))
"""
WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def libgomp_settings(stderr: str) -> dict[str, str]:
    """``{name: value}`` of what libgomp printed with OMP_DISPLAY_ENV=verbose."""
    return dict(re.findall(r"^\s*([A-Z_]+) = '([^']*)'", stderr, flags=re.M))


def spin_count(variables: dict[str, str]) -> str:
    """The spin count libgomp derives from these variables (libgomp's documentation)."""
    if "GOMP_SPINCOUNT" in variables:
        return variables["GOMP_SPINCOUNT"]
    return {"passive": "0", "active": "30000000000"}.get(
        variables.get("OMP_WAIT_POLICY", "").lower(), "300000")


def run_waiting(tmp_path, how: str, target, inputs, variables: dict[str, str], code=RUN_WAITING):
    """Run ``code`` in a fresh process whose environment has ``variables`` and neither
    wait variable otherwise; its output, libgomp's settings and its report."""
    np.savez(tmp_path / "inputs.npz", **inputs)
    env = {k: v for k, v in os.environ.items() if k not in WAIT_VARIABLES}
    env.update(variables, OMP_DISPLAY_ENV="verbose")
    done = subprocess.run([sys.executable, "-c", code, how, str(target),
                           str(tmp_path / "inputs.npz"), str(tmp_path / "y.npy")],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return np.load(tmp_path / "y.npy"), libgomp_settings(done.stderr), report, done.stderr


@pytest.mark.parametrize("how, variables", [
    ("jit", {}), ("artifact", {}),
    ("jit", {"GOMP_SPINCOUNT": "12345"}), ("artifact", {"OMP_WAIT_POLICY": "active"})])
def test_libgomp_waits_by_polycs_policy_unless_the_user_set_one(tmp_path, how, variables):
    model = matmul_model(257, 64, 300)
    inputs = random_inputs(model, seed=8)
    (expected,) = run_onnxruntime(model, inputs).values()
    if how == "jit":
        target = tmp_path / "mm.onnx"
        onnx.save(model, target)
    else:
        compiled = polyc.compile(model, threads=2)
        assert regions(compiled) > 0
        target = tmp_path / "mm.so"
        compiled.save(target)
    got, settings, report, _ = run_waiting(tmp_path, how, target, inputs, variables)
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    applied = variables or config.POLYC_WAIT_POLICY
    assert settings["GOMP_SPINCOUNT"] == spin_count(applied)
    assert report["source"] == ("user" if variables else "polyc")
    # polyc's variables were there for libgomp's load only; the user's stay
    assert report["environment"] == {name: variables.get(name) for name in WAIT_VARIABLES}
    assert report["compiler_loaded"] == (how == "jit")


def test_a_libgomp_loaded_before_polyc_keeps_its_policy_and_polyc_warns(tmp_path):
    model = matmul_model(257, 64, 300)
    inputs = random_inputs(model, seed=9)
    onnx.save(model, tmp_path / "mm.onnx")
    code = "import ctypes; ctypes.CDLL('libgomp.so.1')\n" + RUN_WAITING
    got, settings, report, stderr = run_waiting(tmp_path, "jit", tmp_path / "mm.onnx", inputs,
                                                {}, code)
    (expected,) = run_onnxruntime(model, inputs).values()
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    assert settings["GOMP_SPINCOUNT"] == spin_count({})  # libgomp's own default
    assert report["source"] == "preloaded"
    assert re.search(r"RuntimeWarning: .*libgomp.* was loaded before polyc", stderr)


def test_only_libgomp_itself_counts_as_loaded():
    maps = ("7f00-7f10 r-xp 00000000 08:01 42 /usr/lib/libgomp-a34b3233.so.1\n"
            "7f20-7f30 r--p 00000000 00:00 0 \n"
            "7f40-7f50 r-xp 00000000 08:01 43 /usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0\n")
    assert openmp.mapped_libgomp(maps) == "/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0"
    assert openmp.mapped_libgomp(maps.splitlines()[0]) is None  # a wheel's bundled copy


# --- loop nests (PolyBench) -----------------------------------------------------------


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_polybench_kernels_are_bit_identical_on_threads(every_loop, name):
    kernel = KERNELS[name]
    arrays = kernel.inputs(seed=8)
    serial = compile_scop(kernel.build().scop(), params=kernel.params, threads=1,
                          fast_math=False).run(arrays)
    for threads in (2, 3):
        compiled = compile_scop(kernel.build().scop(), params=kernel.params, threads=threads,
                                fast_math=False)
        out = compiled.run(arrays)
        for array, value in serial.items():
            np.testing.assert_array_equal(out[array], value, err_msg=f"{name}: {array}")
        if name in PARALLEL_KERNELS:
            assert regions(compiled) > 0
            assert_parallel_legal(compiled)
    compiled = compile_scop(kernel.build().scop(), params=kernel.params, threads=2)
    for array, value in kernel.reference(kernel.params, arrays).items():
        np.testing.assert_allclose(compiled.run(arrays)[array], value, rtol=1e-5, atol=1e-5)


def _pluto_schedule(name):
    kernel = KERNELS[name]
    compiled = compile_scop(kernel.build().scop(), params=kernel.params, threads=1,
                            tile=False)
    return compiled, compiled.compilation.scop, compiled.schedule.schedule


def _mark_members(schedule: isl.Schedule, statement: str, *members: int) -> isl.Schedule:
    """``schedule`` with the band of ``statement`` split into one band per member and a
    parallel mark above each of ``members``."""
    band = _band_of(schedule.get_root(), statement)
    n = band.band_n_member()
    for _ in range(n - 1):
        band = band.band_split(1).child(0)
    for k in reversed(range(n)):  # innermost first: the outer bands stay where they are
        if k in members:
            band = band.insert_mark(isl.Id(MARK, context=band.get_ctx()))
        band = band.parent() if k else band
    return band.get_schedule()


def _band_of(node: isl.ScheduleNode, statement: str) -> isl.ScheduleNode | None:
    """The outermost band at or below ``node`` that schedules ``statement``."""
    if (node.get_type() == isl.schedule_node_type.band
            and statement in statement_names(node.get_domain())):
        return node
    for k in range(node.n_children()):
        found = _band_of(node.child(k), statement)
        if found is not None:
            return found
    return None


def test_legality_rejects_a_parallel_reduction_loop():
    _, scop, schedule = _pluto_schedule("matmul")  # T(S2): (1, i, j, k)
    check_parallel(scop, _mark_members(schedule, "S2", 1))  # j: fine
    with pytest.raises(IllegalScheduleError, match=r"parallel loop .* of S2 carries a \w+ "
                                                   r"dependence S2 -> S2"):
        check_parallel(scop, _mark_members(schedule, "S2", 2))  # k: the sum


def test_legality_rejects_a_parallel_time_loop():
    _, scop, schedule = _pluto_schedule("jacobi-1d")
    with pytest.raises(IllegalScheduleError, match="carries a RAW dependence"):
        check_parallel(scop, _mark_members(schedule, "S1", 0))


def test_nested_marks_run_serially_inside_a_region():
    compiled, scop, schedule = _pluto_schedule("independent")  # one band [i, j], both parallel
    kernel = KERNELS["independent"]
    nested = _mark_members(schedule, "S1", 0, 1)
    assert marks(nested) == 2
    program = build_ast(scop, nested)
    text = emit_module(scop, program, compiled.compilation.plan, threads=2)
    assert _calls(text) == 1
    arrays = kernel.inputs(seed=9)
    out = JitModule(text, compiled.manifest).run(arrays)
    for array, value in compiled.run(arrays).items():
        np.testing.assert_array_equal(out[array], value)


# --- options --------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_bad_thread_counts_are_refused(bad):
    with pytest.raises(PolycError, match="threads must be a positive int"):
        polyc.compile(matmul_model(4, 4, 4), threads=bad)


def test_compile_scop_refuses_bad_thread_counts():
    kernel = KERNELS["matmul"]
    with pytest.raises(PolycError, match="threads must be a positive int"):
        compile_scop(kernel.build().scop(), params=kernel.params, threads=0)


def test_cli_threads_option(tmp_path, capsys):
    assert main(["compile", str(EXAMPLES / "mlp.onnx"), "-o", str(tmp_path / "m.so"),
                 "--threads", "2"]) == 0
    assert main(["inspect", str(tmp_path / "m.so")]) == 0
    assert '"threads": 2' in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["run", str(EXAMPLES / "mlp.onnx"), "--threads", "0"])
    assert "--threads: expected a positive integer, got '0'" in capsys.readouterr().err


@pytest.mark.parametrize("threads", [None, 2])
def test_a_parallel_loop_that_is_empty_for_some_outer_iterations(every_loop, threads):
    """fdtd-2d's wavefront: the parallel tile loop has no iteration for some values of
    the wavefront loop around it. Its share must stay empty there (regression: a
    clamp turned the empty range init..last into the iterations last..init-1). Tiles of
    8x8x256 (the stencil model's for float32 from a 32 KiB L1) make several tiles
    along i."""
    kernel = KERNELS["fdtd-2d"]
    params = {"T": 18, "NX": 10, "NY": 300}
    arrays = kernel.inputs(seed=5, params=params)
    compiled = compile_scop(kernel.build().scop(), params=params, fast_math=False,
                            threads=threads, tile_size=(8, 8, 256))
    assert any(d.startswith("parallel:") for d in compiled.schedule.decisions)
    serial = compile_scop(kernel.build().scop(), params=params, fast_math=False, threads=1,
                          tile_size=(8, 8, 256))
    expected = serial.run(arrays)
    for name, value in compiled.run(arrays).items():
        np.testing.assert_array_equal(value, expected[name], err_msg=name)
