"""Traces of whole compiles (polyc.steer.trace_of): a loop nest's, a C kernel's and an
ONNX model's automatic compile recorded and compiled again to the same trace and the
same LLVM IR; --trace-in / --trace-out on polyc compile and polyc cc; steering an ONNX
model's schedule; the tuner's best trace."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import polyc
from polyc.cli import main
from polyc.errors import PolycError, RefusedError
from polyc.host import host_vector_bits
from polyc.scop.polybench import KERNELS
from polyc.tiling.cache import host_caches
from polyc.trace import Trace, trace_of

ROOT = Path(__file__).resolve().parents[1]
MLP = ROOT / "examples" / "mlp.onnx"
X = np.load(ROOT / "examples" / "mlp_input.npy")
POLYBENCH = ROOT / "third_party" / "polybench-c-4.2.1"
GEMM = POLYBENCH / "linear-algebra" / "blas" / "gemm" / "gemm.c"


def test_a_nests_compile_replays_to_the_same_code():
    kernel = KERNELS["jacobi-1d"]
    params = {"T": 20, "N": 3000}
    compiled = kernel.build().compile(params=params, tile_size=(8, 64), threads=1)
    trace = trace_of(compiled.compilation)
    assert trace.compile == {"check": True, "fast_math": True, "tile": True,
                             "tile_size": [8, 64], "blocking": None, "threads": 1,
                             "profile": False, "memory_limit": None,
                             "parallel_hints": True, "without": [], "tile2": False,
                             "caches": dataclasses.asdict(host_caches()),
                             "vector_bits": host_vector_bits()}
    again = Trace.from_json(json.loads(json.dumps(trace.to_json()))).compiled(kernel.build())
    assert again.compilation.llvm_ir == compiled.compilation.llvm_ir
    assert trace_of(again.compilation).to_json() == trace.to_json()


def test_a_c_kernels_autoselected_compile_replays_without_the_cost_model(tmp_path):
    kernel = polyc.from_c(GEMM, defines=["MINI_DATASET"], include=[POLYBENCH / "utilities"])
    compiled = kernel.compile(threads=1)  # autoselect="model" by default
    trace = trace_of(compiled.compilation)
    assert trace.start["scheduler"] == compiled.schedule.scheduler
    again = trace.compiled(kernel)
    assert again.compilation.llvm_ir == compiled.compilation.llvm_ir
    first, second = tmp_path / "t1.json", tmp_path / "t2.json"
    args = ["cc", str(GEMM), "-I", str(POLYBENCH / "utilities"), "-D", "MINI_DATASET"]
    assert main([*args, "--trace-out", str(first)]) == 0
    assert main([*args, "--trace-in", str(first), "--trace-out", str(second)]) == 0
    assert json.loads(first.read_text()) == json.loads(second.read_text())


def test_a_models_compile_replays_from_the_command_line(tmp_path):
    trace, artifact = tmp_path / "mlp.json", tmp_path / "mlp.so"
    assert main(["compile", str(MLP), "-o", str(tmp_path / "first.so"), "--no-cache",
                 "--tile-size", "32", "--trace-out", str(trace)]) == 0
    recorded = json.loads(trace.read_text())
    assert recorded["compile"]["tile_size"] == 32 and recorded["start"]["fuse"] == "smart"
    again = tmp_path / "again.json"
    assert main(["compile", str(MLP), "-o", str(artifact), "--trace-in", str(trace),
                 "--trace-out", str(again)]) == 0
    assert json.loads(again.read_text()) == recorded
    np.testing.assert_allclose(polyc.load(artifact).run({"x": X})["y"],
                               polyc.compile(MLP).run({"x": X})["y"], rtol=1e-6)


def test_a_trace_out_never_replaces_the_model(tmp_path, capsys):
    model = tmp_path / "m.onnx"
    model.write_bytes(MLP.read_bytes())
    assert main(["compile", str(model), "-o", str(tmp_path / "m.so"),
                 "--trace-out", str(model)]) == 1
    assert "which this command reads" in capsys.readouterr().err
    assert model.read_bytes() == MLP.read_bytes()


def test_an_onnx_models_schedule_steers_like_a_nests():
    s = polyc.Schedule(MLP)
    assert str(s).splitlines()[1] == "T(S1_gemm_update): (1, i0, i1, i2)"
    with pytest.raises(RefusedError, match="carries the RAW dependence"):
        s.parallel("S1_gemm_update", 2)
    s.interchange("S1_gemm_update", 0, 1)
    assert str(s).splitlines()[1] == "T(S1_gemm_update): (1, i1, i0, i2)"
    compiled = s.compile(threads=1)
    np.testing.assert_allclose(compiled.run({"x": X})["y"],
                               polyc.compile(MLP).run({"x": X})["y"], rtol=1e-5, atol=1e-6)
    replayed = s.trace.compiled(MLP)
    assert replayed.compilation.llvm_ir == compiled.compilation.llvm_ir


def test_the_tuners_best_trace_compiles_again(tmp_path):
    folder = tmp_path / "tuned"
    assert main(["tune", "matmul", "--sizes", "4", "--repeat", "1", "-o", str(folder)]) == 0
    best = json.loads((folder / "best.json").read_text())
    trace = Trace.load(folder / "best.trace.json")
    assert trace.compile["tile"] == best["options"].get("tile", trace.compile["tile"])
    kernel = KERNELS["matmul"]
    arrays = kernel.inputs(seed=0)
    out = trace.compiled(kernel.build()).run(arrays)
    for name, value in kernel.reference(kernel.params, arrays).items():
        np.testing.assert_allclose(out[name], value, rtol=1e-5, atol=1e-5)


def test_a_trace_prints_and_checks_what_tiling_decided():
    kernel, params = KERNELS["jacobi-2d"], {"T": 10, "N": 300}
    compiled = kernel.build().compile(params=params, threads=1)
    trace = trace_of(compiled.compilation)
    assert trace.decided and all(d.startswith(("tiling:", "parallel:")) for d in trace.decided)
    assert [d for d in compiled.schedule.decisions if d in trace.decided] == trace.decided
    assert "\n  # tiling: band of S1, S2: tiles " in str(trace)
    again = Trace.from_json(json.loads(json.dumps(trace.to_json())))
    assert trace_of(again.compiled(kernel.build()).compilation).decided == trace.decided
    changed = Trace.from_json({**trace.to_json(), "decided": ["tiling: something else"]})
    with pytest.raises(PolycError, match=r"decided otherwise than when the trace was made "
                                         r"\(another polyc version\?\): 'tiling: band of S1"):
        changed.compiled(kernel.build())
