"""The runtime on hand-written LLVM modules: JIT, AOT artifacts, input checks.

The test model follows the polyc ABI (see ``polyc.runtime.abi``)::

    polyc_main(x[1000], w[4, 250], y[1000], z[1000], scratch[4000 bytes])
        scratch[i] = expf(x[i])
        y[i] = x[i] * 2 + scratch[i]
        z[i] = x[i] - w_flat[i]
"""

import ctypes.util
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from llvmlite import ir

import polyc
from polyc.codegen import target
from polyc.errors import ArtifactError, CodegenError, InputError
from polyc.runtime import abi, aot, native, seal
from polyc.runtime.aot import write_artifact
from polyc.runtime.artifact import load_artifact
from polyc.runtime.jit import JitModule

N = 1000
RTOL = 1e-6  # expf from libm against numpy's exp: a few ulp

MANIFEST = {
    "format": "polyc-1",
    "entry": "polyc_main",
    "inputs": [{"name": "x", "shape": [N], "dtype": "float32"},
               {"name": "w", "shape": [4, N // 4], "dtype": "float32"}],
    "outputs": [{"name": "y", "shape": [N], "dtype": "float32"},
                {"name": "z", "shape": [N], "dtype": "float32"}],
    "scratch_bytes": 4 * N,
    "model_hash": "test-scale-exp",
    "options": {"fuse": "none"},
    "polyc_version": polyc.__version__,
}


def scale_exp_ir(n: int = N, *, exp: bool = True) -> str:
    """The test model's LLVM IR, built with llvmlite.ir (see the module docstring).

    With ``exp=False``, ``-x`` replaces ``expf(x)`` so that the loop vectorizes.
    """
    f32, i64, ptr = ir.FloatType(), ir.IntType(64), ir.PointerType()
    module = ir.Module(name="scale_exp")
    expf = ir.Function(module, ir.FunctionType(f32, [f32]), "expf")
    main = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr] * 5), "polyc_main")
    for arg in main.args:
        arg.add_attribute("noalias")
    x, w, y, z, scratch = main.args
    entry, loop, done = (main.append_basic_block(name) for name in ("entry", "loop", "done"))
    builder = ir.IRBuilder(entry)
    builder.branch(loop)
    builder.position_at_end(loop)
    i = builder.phi(i64, name="i")
    i.add_incoming(ir.Constant(i64, 0), entry)

    def at(base, name):
        return builder.gep(base, [i], inbounds=True, name=name, source_etype=f32)

    xi = builder.load(at(x, "px"), name="x", typ=f32)
    e = builder.call(expf, [xi], name="e") if exp else builder.fneg(xi, name="e")
    builder.store(e, at(scratch, "ps"))
    ei = builder.load(at(scratch, "ps2"), name="e2", typ=f32)
    twice = builder.fmul(xi, ir.Constant(f32, 2.0), name="twice")
    builder.store(builder.fadd(twice, ei, name="y"), at(y, "py"))
    wi = builder.load(at(w, "pw"), name="w", typ=f32)
    builder.store(builder.fsub(xi, wi, name="z"), at(z, "pz"))
    following = builder.add(i, ir.Constant(i64, 1), name="next")
    i.add_incoming(following, loop)
    builder.cbranch(builder.icmp_signed("<", following, ir.Constant(i64, n)), loop, done)
    builder.position_at_end(done)
    builder.ret_void()
    return str(module)


def random_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal(N, dtype=np.float32),
            "w": rng.standard_normal((4, N // 4), dtype=np.float32)}


def expected(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x, w = inputs["x"], inputs["w"]
    return {"y": x * np.float32(2) + np.exp(x), "z": x - w.reshape(-1)}


def assert_matches(outputs: dict[str, np.ndarray], inputs: dict[str, np.ndarray]) -> None:
    want = expected(inputs)
    assert list(outputs) == ["y", "z"]
    for name, value in want.items():
        assert outputs[name].dtype == np.float32
        np.testing.assert_allclose(outputs[name], value, rtol=RTOL, atol=1e-6)


@pytest.fixture(scope="module")
def jit_model() -> JitModule:
    return JitModule(scale_exp_ir(), MANIFEST)


@pytest.fixture(scope="module")
def artifact_path(tmp_path_factory):
    return write_artifact(scale_exp_ir(), MANIFEST, tmp_path_factory.mktemp("aot") / "model.so")


# --- target -----------------------------------------------------------------------------


def test_target_machine_prefers_512_bit_vectors():
    cpu, features = target.host_cpu()
    assert cpu and features.endswith("-prefer-256-bit")
    if "+avx512f" not in features.split(","):
        pytest.skip(f"host CPU {cpu} has no AVX-512")
    tm = target.host_target_machine()
    module = target.parse(scale_exp_ir(exp=False), tm)
    target.optimize(module, tm)
    assert "zmm" in tm.emit_assembly(module)


def test_bad_ir_is_a_codegen_error():
    tm = target.host_target_machine()
    with pytest.raises(CodegenError, match="LLVM rejected the generated IR"):
        target.parse("define void @f( {", tm)


def test_missing_entry_is_a_codegen_error():
    manifest = dict(MANIFEST, entry="not_there")
    with pytest.raises(CodegenError, match="does not define the entry function @not_there"):
        JitModule(scale_exp_ir(), manifest)


def test_unresolved_symbol_is_a_codegen_error():
    text = scale_exp_ir().replace('"expf"', '"polyc_no_such_function"')
    with pytest.raises(CodegenError, match="polyc_no_such_function"):
        JitModule(text, MANIFEST)


# --- JIT --------------------------------------------------------------------------------


def test_jit_matches_numpy(jit_model):
    inputs = random_inputs(0)
    assert_matches(jit_model.run(inputs), inputs)


def test_jit_describes_its_tensors(jit_model):
    assert [(s.name, s.shape, str(s.dtype)) for s in jit_model.inputs] == \
        [("x", (N,), "float32"), ("w", (4, N // 4), "float32")]
    assert [s.name for s in jit_model.outputs] == ["y", "z"]
    assert "define void @polyc_main" in jit_model.optimized_ir
    assert jit_model.compile_seconds > 0


def test_jit_outputs_are_fresh_arrays(jit_model):
    inputs = random_inputs(1)
    first, second = jit_model.run(inputs), jit_model.run(inputs)
    assert first["y"] is not second["y"]
    np.testing.assert_array_equal(first["y"], second["y"])


def test_read_only_and_offset_inputs_are_read_where_they_are(jit_model):
    """Inputs are passed by the address of their first element, however numpy holds
    them: a read-only array, a view starting inside another's buffer."""
    inputs = random_inputs(11)
    inputs["x"].setflags(write=False)
    padded = np.concatenate([np.zeros(7, np.float32), inputs["w"].reshape(-1)])
    inputs["w"] = padded[7:].reshape(4, N // 4)
    assert_matches(jit_model.run(inputs), inputs)
    for array in (inputs["x"], inputs["w"], np.empty(0, np.float32)):
        assert abi.data_address(array) == array.ctypes.data


@pytest.mark.parametrize("runner", ["jit", "artifact"])
def test_outputs_nothing_references_are_reused(runner, jit_model, artifact_path):
    """A call writes into the previous call's output arrays (same thread) only when no
    caller holds them, a view of them or the dict they came in; every result is
    right and an array the caller holds never changes."""
    model = jit_model if runner == "jit" else polyc.load(artifact_path)
    inputs = [random_inputs(seed) for seed in range(6, 10)]
    held = model.run(inputs[0])
    kept = held["y"].copy()
    second = model.run(inputs[1])  # the dict of the first call is held: new arrays
    assert second["y"] is not held["y"]
    assert_matches(second, inputs[1])
    np.testing.assert_array_equal(held["y"], kept)
    address = second["y"].ctypes.data
    del second
    third = model.run(inputs[2])  # nothing held the second call's arrays: reused
    assert third["y"].ctypes.data == address
    assert_matches(third, inputs[2])
    view = third["y"][3:]
    del third
    fourth = model.run(inputs[3])  # a view of the third call's y is held: a new y
    assert fourth["y"].ctypes.data != address
    assert_matches(fourth, inputs[3])
    np.testing.assert_allclose(view, expected(inputs[2])["y"][3:], rtol=RTOL, atol=1e-6)
    np.testing.assert_array_equal(held["y"], kept)
    z, z_kept = fourth["z"], fourth["z"].copy()
    y_address = fourth["y"].ctypes.data
    del fourth
    fifth = model.run(inputs[0])  # only z is held: z new, y reused
    assert fifth["y"].ctypes.data == y_address and fifth["z"] is not z
    assert_matches(fifth, inputs[0])
    np.testing.assert_array_equal(z, z_kept)


@pytest.mark.parametrize("runner", ["jit", "artifact"])
def test_threads_run_one_model_concurrently(runner, jit_model, artifact_path):
    """Each thread has its own outputs and scratch: two threads calling one model at
    the same time both get their own inputs' results, through the quick path (a dict
    of exactly the model's arrays) and the checked one (another mapping)."""
    import threading
    from types import MappingProxyType

    model = jit_model if runner == "jit" else polyc.load(artifact_path)
    inputs = [random_inputs(seed) for seed in (20, 21)]
    wrong = []

    def calls(k: int) -> None:
        for i in range(200):
            given = inputs[k] if i % 2 else MappingProxyType(inputs[k])
            got = model.run(given)
            want = expected(inputs[k])
            if not all(np.allclose(got[n], want[n], rtol=RTOL, atol=1e-6) for n in want):
                wrong.append((k, i))

    threads = [threading.Thread(target=calls, args=(k,)) for k in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


# --- input checks -----------------------------------------------------------------------


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d | {"q": d["x"]}, r"unknown input 'q'; this model takes x: float32\[1000\]"),
    (lambda d: {"x": d["x"]}, r"missing input 'w'; this model takes .*w: float32\[4, 250\]"),
    (lambda d: d | {"x": d["x"].astype(np.float64)},
     r"input 'x' has dtype float64, expected float32"),
    (lambda d: d | {"w": d["w"].reshape(N)}, r"input 'w' has shape \(1000,\), expected \(4, 250\)"),
    (lambda d: d | {"w": np.asfortranarray(d["w"])},
     r"input 'w' is not C-contiguous; pass np.ascontiguousarray\(w\)"),
    (lambda d: d | {"x": d["x"].tolist()}, r"input 'x' is a list, expected a numpy array"),
])
def test_input_errors(jit_model, change, message):
    with pytest.raises(InputError, match=message):
        jit_model.run(change(random_inputs(2)))


def test_check_inputs_orders_by_manifest():
    inputs = random_inputs(3)
    arrays = abi.check_inputs(MANIFEST, {"w": inputs["w"], "x": inputs["x"]})
    assert arrays[0] is inputs["x"] and arrays[1] is inputs["w"]


def test_scratch_is_aligned():
    for nbytes in (0, 1, 100, 4096):
        buffer = abi.aligned_empty(nbytes)
        assert buffer.nbytes == nbytes and buffer.ctypes.data % abi.SCRATCH_ALIGNMENT == 0


# --- AOT --------------------------------------------------------------------------------


def test_artifact_loads_in_process(artifact_path):
    model = polyc.load(artifact_path)
    assert model.manifest == MANIFEST
    inputs = random_inputs(4)
    assert_matches(model.run(inputs), inputs)


FRESH_PROCESS = textwrap.dedent("""
    import json, sys
    import numpy as np
    import polyc
    model = polyc.load(sys.argv[1])
    rng = np.random.default_rng(5)
    x = rng.standard_normal(1000, dtype=np.float32)
    w = rng.standard_normal((4, 250), dtype=np.float32)
    out = model.run({"x": x, "w": w})
    np.testing.assert_allclose(out["y"], x * np.float32(2) + np.exp(x), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(out["z"], x - w.reshape(-1))
    heavy = sorted(m for m in ("islpy", "llvmlite", "onnx", "polyc.pipeline") if m in sys.modules)
    print(json.dumps({"manifest": model.manifest, "heavy": heavy}))
""")


def test_artifact_round_trip_in_fresh_process(artifact_path):
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(artifact_path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["heavy"] == []
    assert report["manifest"] == MANIFEST


def test_artifact_rewritten_in_place(tmp_path):
    path = tmp_path / "model.so"
    write_artifact(scale_exp_ir(), MANIFEST, path)
    first = load_artifact(path)
    write_artifact(scale_exp_ir(), dict(MANIFEST, model_hash="second"), path)
    assert [p.name for p in tmp_path.iterdir()] == ["model.so"]
    assert load_artifact(path).manifest["model_hash"] == "second"  # not the stale library
    assert first.manifest["model_hash"] == "test-scale-exp"


# An ABI module without inputs: threads[0] = omp_get_max_threads(), from libgomp.
OMP_IR = """
declare i32 @omp_get_max_threads()

define void @polyc_main(ptr noalias %threads, ptr noalias %scratch) {
entry:
  %n = call i32 @omp_get_max_threads()
  %f = sitofp i32 %n to float
  store float %f, ptr %threads
  ret void
}
"""
OMP_MANIFEST = dict(MANIFEST, inputs=[], scratch_bytes=0,
                    outputs=[{"name": "threads", "shape": [1], "dtype": "float32"}])


def test_jit_resolves_libgomp():
    threads = JitModule(OMP_IR, OMP_MANIFEST).run({})["threads"]
    assert threads[0] >= 1


def test_artifact_links_libgomp_and_honours_omp_num_threads(tmp_path):
    path = write_artifact(OMP_IR, OMP_MANIFEST, tmp_path / "omp.so")
    code = "import sys, polyc; print(polyc.load(sys.argv[1]).run({})['threads'][0])"
    env = dict(os.environ, OMP_NUM_THREADS="3")
    done = subprocess.run([sys.executable, "-c", code, str(path)], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "3.0"


def test_missing_artifact(tmp_path):
    with pytest.raises(ArtifactError, match="no such artifact: .*nothing.so"):
        load_artifact(tmp_path / "nothing.so")


def test_text_file_is_not_an_artifact(tmp_path):
    """A text file has no seal; sealed, dlopen still refuses it."""
    path = tmp_path / "notes.so"
    path.write_text("not a library\n")
    with pytest.raises(ArtifactError, match="notes.so has no polyc seal at its end"):
        load_artifact(path)
    seal.seal(path)
    with pytest.raises(ArtifactError, match="notes.so is not a loadable shared library"):
        load_artifact(path)


def test_other_library_is_not_an_artifact(tmp_path):
    libm = ctypes.util.find_library("m")
    found = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True, check=False)
    paths = [line.split("=> ")[-1] for line in found.stdout.splitlines() if f"{libm} (" in line]
    if not paths:
        pytest.skip("ldconfig does not list libm")
    with pytest.raises(ArtifactError, match="has no polyc seal at its end"):
        load_artifact(paths[0])
    copy = tmp_path / "libm.so"
    shutil.copy(paths[0], copy)
    seal.seal(copy)
    with pytest.raises(ArtifactError, match="is not a polyc artifact .*polyc_manifest"):
        load_artifact(copy)


def test_other_format_version(tmp_path):
    # write_artifact refuses other formats, so link a library holding only a manifest.
    path = tmp_path / "old.so"
    tm = target.host_target_machine(reloc="pic")
    manifest = target.parse(native.manifest_ir(dict(MANIFEST, format="polyc-0")), tm)
    aot.link_shared([tm.emit_object(manifest)], path)
    seal.seal(path)
    with pytest.raises(ArtifactError, match="old.so has artifact format 'polyc-0'"):
        load_artifact(path)


def test_bad_manifest_is_refused(tmp_path):
    with pytest.raises(CodegenError, match="bad manifest"):
        write_artifact(scale_exp_ir(), dict(MANIFEST, format="polyc-0"), tmp_path / "x.so")


def test_missing_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYC_CC", "polyc-no-such-cc")
    with pytest.raises(CodegenError, match="cannot run the C compiler 'polyc-no-such-cc'"):
        write_artifact(scale_exp_ir(), MANIFEST, tmp_path / "x.so")


def test_failing_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYC_CC", "false")
    with pytest.raises(CodegenError, match="linking x.so with 'false' failed"):
        write_artifact(scale_exp_ir(), MANIFEST, tmp_path / "x.so")
    assert list(tmp_path.iterdir()) == []


def weight_model(scale: float):
    """y = x @ w with a constant w of 512 x 384 (768 KB) whose entries depend on ``scale``."""
    from onnx import helper

    from onnx_helpers import make_model
    w = (np.arange(512 * 384, dtype=np.float32).reshape(512, 384) % 7 - 3) * scale
    return make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", [3, 512])],
                      ["y"], initializers=[("w", w)]), w


def test_constants_stay_out_of_the_llvm_ir_and_each_module_has_its_own():
    (model_a, w_a), (model_b, w_b) = weight_model(1.0), weight_model(-0.5)
    a, b = polyc.compile(model_a), polyc.compile(model_b)  # the same constant names
    assert len(a.compilation.llvm_ir) < 100_000  # the 768 KB of w are not in the text
    assert "external constant" in a.compilation.llvm_ir  # read through the GOT
    x = np.random.default_rng(0).standard_normal((3, 512)).astype(np.float32)
    for compiled, w in ((a, w_a), (b, w_b), (a, w_a)):
        np.testing.assert_allclose(compiled.run({"x": x})["y"], x @ w, rtol=1e-4, atol=1e-3)


def test_artifact_carries_its_constants(tmp_path):
    model, w = weight_model(0.25)
    polyc.compile(model).save(tmp_path / "w.so")
    assert (tmp_path / "w.so").stat().st_size > w.nbytes
    x = np.random.default_rng(1).standard_normal((3, 512)).astype(np.float32)
    script = textwrap.dedent(f"""
        import sys, numpy as np
        from polyc.runtime.artifact import load_artifact
        artifact = load_artifact({str(tmp_path / 'w.so')!r})
        x = np.load({str(tmp_path / 'x.npy')!r})
        np.save({str(tmp_path / 'y.npy')!r}, artifact.run({{"x": x}})["y"])
        assert "llvmlite" not in sys.modules and "islpy" not in sys.modules
    """)
    np.save(tmp_path / "x.npy", x)
    subprocess.run([sys.executable, "-c", script], check=True)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), x @ w, rtol=1e-4, atol=1e-3)


def test_a_constant_without_a_value_is_a_codegen_error():
    model, _ = weight_model(1.0)
    compilation = polyc.compile(model).compilation
    with pytest.raises(CodegenError, match=r"reads the global polyc\.const\.w.*not given"):
        JitModule(compilation.llvm_ir, compilation.manifest, {})
