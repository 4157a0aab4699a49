"""The ``polyc`` command line on a hand-made artifact (no ONNX pipeline needed).

Commands run in subprocesses (``python -m polyc.cli``), exactly as a user runs them;
the artifact is the test model of ``test_runtime.py``. Tests of compiling ONNX models
live in ``test_cli_pipeline.py``.
"""

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from polyc.frontend.ops import OPS
from polyc.runtime.aot import write_artifact

from test_runtime import MANIFEST, N, expected, random_inputs, scale_exp_ir

COMMANDS = ("compile", "run", "inspect", "bench", "ops")


def polyc(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polyc.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=False)


def assert_one_line_error(done, pattern: str, code: int = 1) -> None:
    assert done.returncode == code, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("polyc: error: ")
    assert re.search(pattern, lines[0]), lines[0]


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    return write_artifact(scale_exp_ir(), MANIFEST, tmp_path_factory.mktemp("cli") / "model.so")


@pytest.fixture(scope="module")
def input_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inputs")
    inputs = random_inputs(7)
    for name, array in inputs.items():
        np.save(folder / f"{name}.npy", array)
    return folder, inputs


# --- help -------------------------------------------------------------------------------


def test_help_lists_commands_and_examples():
    done = polyc("--help")
    assert done.returncode == 0
    for command in COMMANDS:
        assert command in done.stdout
    assert "polyc compile examples/mlp.onnx -o mlp.so" in done.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_command_help(command):
    done = polyc(command, "--help")
    assert done.returncode == 0, done.stderr
    assert f"usage: polyc {command}" in done.stdout
    assert "examples:" in done.stdout


# --- run and inspect an artifact --------------------------------------------------------


def test_run_artifact_with_input_files(artifact, input_files):
    folder, inputs = input_files
    done = polyc("run", artifact, "--input", f"x={folder / 'x.npy'}",
                 "--input", f"w={folder / 'w.npy'}")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["y", "z"]
    assert lines[0].startswith(f"y: float32[{N}] = [")
    first = float(lines[0].split("[")[2].split(",")[0])
    assert first == pytest.approx(float(expected(inputs)["y"][0]), rel=1e-5)


def test_run_artifact_to_npz(artifact, input_files, tmp_path):
    folder, inputs = input_files
    out = tmp_path / "out.npz"
    done = polyc("run", artifact, "--input", f"x={folder / 'x.npy'}",
                 "--input", f"w={folder / 'w.npy'}", "-o", out)
    assert done.returncode == 0, done.stderr
    with np.load(out) as saved:
        assert sorted(saved.files) == ["y", "z"]
        for name, value in expected(inputs).items():
            np.testing.assert_allclose(saved[name], value, rtol=1e-6, atol=1e-6)


def test_run_artifact_with_seeded_random_inputs(artifact):
    first, second = polyc("run", artifact, "--seed", 3), polyc("run", artifact, "--seed", 3)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    assert polyc("run", artifact, "--seed", 4).stdout != first.stdout


def test_run_artifact_imports_no_compiler(artifact):
    code = ("import sys; from polyc.cli import main; main(['run', sys.argv[1]]); "
            "print(sorted(m for m in ('islpy', 'llvmlite', 'onnx') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code, str(artifact)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"


def test_inspect_artifact_prints_manifest(artifact):
    done = polyc("inspect", artifact)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == MANIFEST


def test_bench_artifact(artifact):
    done = polyc("bench", artifact, "--repeat", 5)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("polyc ") and "median of 5" in done.stdout


# --- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "inspect", "bench"])
def test_missing_artifact(command, tmp_path):
    assert_one_line_error(polyc(command, tmp_path / "absent.so"), r"no such artifact: .*absent\.so")


@pytest.mark.parametrize("command", ["compile", "run", "inspect", "bench"])
def test_missing_model(command, tmp_path):
    assert_one_line_error(polyc(command, tmp_path / "absent.onnx"),
                          r"no such model file: .*absent\.onnx")


def test_not_an_artifact(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    assert_one_line_error(polyc("run", path), r"notes\.txt has no polyc seal at its end")


def test_missing_input_file(artifact, tmp_path):
    done = polyc("run", artifact, "--input", f"x={tmp_path / 'nope.npy'}")
    assert_one_line_error(done, r"no such input file for 'x': .*nope\.npy")


def test_bad_input_file(artifact, tmp_path):
    bad = tmp_path / "bad.npy"
    bad.write_text("this is not numpy\n")
    assert_one_line_error(polyc("run", artifact, "--input", f"x={bad}"),
                          r"cannot read input 'x' from .*bad\.npy")


def test_input_of_wrong_shape(artifact, input_files, tmp_path):
    folder, _ = input_files
    np.save(tmp_path / "small.npy", np.zeros(3, dtype=np.float32))
    done = polyc("run", artifact, "--input", f"x={tmp_path / 'small.npy'}",
                 "--input", f"w={folder / 'w.npy'}")
    assert_one_line_error(done, r"input 'x' has shape \(3,\), expected \(1000,\)")


def test_missing_input_name(artifact, input_files):
    folder, _ = input_files
    done = polyc("run", artifact, "--input", f"x={folder / 'x.npy'}")
    assert_one_line_error(done, r"missing input 'w'; this model takes x: float32\[1000\]")


def test_unwritable_output(artifact, tmp_path):
    done = polyc("run", artifact, "-o", tmp_path / "no" / "such" / "out.npz")
    assert_one_line_error(done, r"cannot write .*out\.npz: directory .*such does not exist")


def test_usage_error_exits_2():
    done = polyc("compile")
    assert done.returncode == 2
    assert "usage: polyc compile" in done.stderr


def test_bad_shape_option():
    done = polyc("inspect", "m.onnx", "--shape", "x=4,b")
    assert done.returncode == 2
    assert "expected NAME=D0,D1,..." in done.stderr


def test_internal_error_and_debug(monkeypatch, capsys):
    from polyc import cli

    def broken(path):
        raise ZeroDivisionError("boom\nsecond line")

    monkeypatch.setattr("polyc.runtime.artifact.load_artifact", broken)
    assert cli.main(["inspect", "x.so"]) == 2
    assert capsys.readouterr().err == (
        "polyc: internal error: ZeroDivisionError: boom | second line "
        "(rerun with --debug for a traceback)\n")
    for argv in (["--debug", "inspect", "x.so"], ["inspect", "x.so", "--debug"]):
        with pytest.raises(ZeroDivisionError):
            cli.main(argv)


@pytest.mark.parametrize(("argv", "options"), [
    (["compile", "m.onnx"], {}),
    (["compile", "m.onnx", "--check", "--fuse", "max"], {"check": True, "fuse": "max"}),
    (["compile", "m.onnx", "--no-check", "--shape", "x=1,2", "--shape", "s="],
     {"check": False, "shapes": {"x": (1, 2), "s": ()}}),
    (["run", "m.onnx", "--scheduler", "isl"], {"scheduler": "isl"}),
])
def test_only_given_options_reach_the_pipeline(argv, options):
    from polyc import cli
    assert cli.compile_options(cli.build_parser().parse_args(argv)) == options


def test_ops_lists_every_lowered_op_with_its_versions():
    done = polyc("ops")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-4] == f"{len({op for op, _ in OPS})} ops"
    bodies = lines[-3].split(": ", 1)[1].split(", ")
    assert lines[-2].startswith("and onnxruntime's com.microsoft ops its quantizer writes: "
                                "QGemm, QLinearAdd")
    assert lines[-1].endswith("after the compiled code when only the graph's outputs take "
                              "theirs (their length depends on the values): Compress 9, 11, "
                              "28, NonMaxSuppression 10, 11, Unique 11, 28")
    assert "Attention" in bodies and "SoftmaxCrossEntropyLoss" in bodies
    assert "AffineGrid" not in bodies and not {op for op, _ in OPS} & set(bodies)
    assert re.search(r"^Conv +(\d+, )*11, 22$", done.stdout, re.M)
    versions = sorted(v for op, v in OPS if op == "Gemm")
    assert polyc("ops", "Gemm").stdout.split() == ["Gemm"] + ", ".join(map(str, versions)).split()
    assert_one_line_error(polyc("ops", "NoSuchOp"), r"polyc lowers no op named NoSuchOp")
