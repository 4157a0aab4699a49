"""The ``polyc`` command line on real ONNX models, through the whole pipeline.

The CLI expects ``compile_model(path,
scheduler=, fuse=, shapes=, check=)`` (only the options given on the command line are
passed) to return an object with ``.save(path)``, ``.run(inputs) -> dict``,
``.report() -> str``, ``.inspect() -> str`` and ``.inputs`` (``TensorSpec``s as in
``polyc.runtime.abi.Runner``, used for ``--seed`` random inputs).
"""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parent.parent
MLP = ROOT / "examples" / "mlp.onnx"
MLP_INPUT = ROOT / "examples" / "mlp_input.npy"
RTOL, ATOL = 1e-4, 1e-6  # fp32 with reassociated reductions against onnxruntime


def polyc(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polyc.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)


def onnxruntime_outputs(path: Path, inputs: dict) -> dict:
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, inputs)))


def assert_close_to_onnxruntime(npz: Path) -> None:
    want = onnxruntime_outputs(MLP, {"x": np.load(MLP_INPUT)})
    with np.load(npz) as got:
        assert sorted(got.files) == sorted(want)
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value, rtol=RTOL, atol=ATOL)


def assert_one_line_error(done, pattern: str) -> None:
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("polyc: error: "), done.stderr
    assert re.search(pattern, lines[0]), lines[0]


def test_compile_then_run_artifact(tmp_path):
    artifact = tmp_path / "mlp.so"
    done = polyc("compile", MLP, "-o", artifact)
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(rf"wrote {re.escape(str(artifact))} in \d+\.\d\d s\n", done.stdout)
    out = tmp_path / "out.npz"
    done = polyc("run", artifact, "--input", f"x={MLP_INPUT}", "-o", out)
    assert done.returncode == 0, done.stderr
    assert_close_to_onnxruntime(out)


def test_compile_default_output_name(tmp_path):
    done = polyc("compile", MLP, "--check", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "mlp.so").is_file()


@pytest.mark.parametrize("options", [[], ["--fuse", "none"], ["--fuse", "max"],
                                     ["--scheduler", "isl"], ["--tile-size", "3"],
                                     ["--no-tile"]])
def test_run_onnx_directly(tmp_path, options):
    out = tmp_path / "out.npz"
    done = polyc("run", MLP, "--input", f"x={MLP_INPUT}", "-o", out, *options)
    assert done.returncode == 0, done.stderr
    assert_close_to_onnxruntime(out)


def test_run_onnx_prints_outputs():
    done = polyc("run", MLP, "--input", f"x={MLP_INPUT}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("y: float32[4, 10] = [")


def test_run_onnx_with_random_inputs():
    done = polyc("run", MLP, "--seed", 1)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("y: float32[4, 10] = [")


@pytest.mark.parametrize("scheduler", ["pluto", "isl"])
def test_inspect_onnx_prints_pluto_notation_and_loops(scheduler):
    schedules = {}
    for policy in ("nofuse", "smartfuse", "maxfuse"):
        done = polyc("inspect", MLP, "--scheduler", scheduler, "--fuse", policy)
        assert done.returncode == 0, done.stderr
        text = done.stdout
        assert f"scheduler: {scheduler}\n" in text
        schedule = re.findall(r"^T\(S\d+_\w+\): \(.*\)$", text, flags=re.M)
        assert len(schedule) == 11  # one line per statement of the MLP
        assert re.search(r"== LOOPS ==\n(\{\n)?\s*for \(int c\d+ = 0;", text), text
        schedules[policy] = schedule
    if scheduler == "pluto":  # the policies change Pluto's result
        assert schedules["nofuse"] != schedules["maxfuse"]


def test_bad_tile_size_is_refused():
    done = polyc("inspect", MLP, "--tile-size", "0")
    assert done.returncode == 2 and "expected a positive integer, got '0'" in done.stderr


def test_unknown_fusion_policy_is_refused():
    done = polyc("inspect", MLP, "--fuse", "most")
    assert done.returncode == 2 and "invalid choice: 'most'" in done.stderr


def test_compile_report(tmp_path):
    done = polyc("compile", MLP, "-o", tmp_path / "mlp.so", "--report")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) > 1


def test_bench_onnx_compares_with_onnxruntime():
    pytest.importorskip("onnxruntime")
    done = polyc("bench", MLP, "--repeat", 5)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^polyc .* ms", done.stdout, re.MULTILINE)
    assert re.search(r"^onnxruntime .* ms", done.stdout, re.MULTILINE)
    assert re.search(r"^speedup .* x", done.stdout, re.MULTILINE)


def test_bench_times_onnxruntime_on_the_threads_given(monkeypatch, capsys):
    """``--threads 1`` compiles polyc serial and gives onnxruntime one intra-op thread
    too (it had run on every core against serial polyc)."""
    ort = pytest.importorskip("onnxruntime")
    from polyc import cli

    seen = []
    real = ort.InferenceSession

    def session(path, options=None, **kwargs):
        seen.append(options.intra_op_num_threads if options is not None else None)
        return real(path, options, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", session)
    assert cli.main(["bench", str(MLP), "--repeat", "3", "--threads", "1"]) == 0
    assert seen == [1]
    assert cli.main(["bench", str(MLP), "--repeat", "3"]) == 0
    assert seen == [1, 0]  # onnxruntime's default: one thread per core
    assert "speedup" in capsys.readouterr().out


def test_not_an_onnx_file(tmp_path):
    path = tmp_path / "text.onnx"
    path.write_text("not a model\n")
    assert_one_line_error(polyc("compile", path, "-o", tmp_path / "t.so"), r"text\.onnx")


def test_unsupported_op_is_one_line(tmp_path):
    node = helper.make_node("RandomUniformLike", ["x"], ["y"], name="noise")
    graph = helper.make_graph(
        [node], "noise", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    path = tmp_path / "noise.onnx"
    onnx.save(model, path)
    assert_one_line_error(polyc("compile", path, "-o", tmp_path / "u.so"),
                          r"unsupported op RandomUniformLike .*'noise'")
