"""Files polyc writes replace their target whole or not at all, and never a file the
command reads, a directory or a device (``polyc.runtime.output``).

Every case checks that nothing was touched: the target's bytes (or its kind) are as
before and no temporary file is left in the folder.
"""

import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest
from test_cli import assert_one_line_error
from test_cli import polyc as cli
from test_cli_pipeline import MLP, MLP_INPUT

import polyc
from polyc.errors import CodegenError, OutputError
from polyc.runtime.aot import write_artifact

from test_runtime import MANIFEST, scale_exp_ir


@pytest.fixture
def model(tmp_path) -> Path:
    """A copy of the example model in a folder of its own."""
    path = tmp_path / "mlp.onnx"
    shutil.copy(MLP, path)
    return path


def assert_untouched(folder: Path, before: dict[str, bytes]) -> None:
    """``folder`` holds exactly the files of ``before``, with the same bytes."""
    now = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    assert now == before


@pytest.mark.parametrize("spelling", ["{model}", "{folder}/./x/../mlp.onnx"])
def test_compile_refuses_to_overwrite_the_model(model, spelling):
    """``-o`` naming the model (however spelled) is refused before compiling."""
    (model.parent / "x").mkdir()
    before = {model.name: model.read_bytes()}
    target = spelling.format(model=model, folder=model.parent)
    done = cli("compile", model, "-o", target)
    assert_one_line_error(done, r"cannot write .*mlp\.onnx: it is .*mlp\.onnx, which this "
                                r"command reads")
    assert_untouched(model.parent, before)


def test_compile_refuses_a_directory_and_leaves_no_temporary(model):
    folder = model.parent / "out"
    folder.mkdir()
    done = cli("compile", model, "-o", folder)
    assert_one_line_error(done, r"cannot write .*out: it is a directory")
    assert list(folder.iterdir()) == []
    assert_untouched(model.parent, {model.name: model.read_bytes()})


def test_compile_refuses_devices_and_fifos(model):
    done = cli("compile", model, "-o", "/dev/null")
    assert_one_line_error(done, r"cannot write /dev/null: not a regular file")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    fifo = model.parent / "pipe"
    os.mkfifo(fifo)
    done = cli("compile", model, "-o", fifo)  # (opening it would block: never opened)
    assert_one_line_error(done, r"cannot write .*pipe: not a regular file")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_failed_link_keeps_the_old_artifact(tmp_path, monkeypatch):
    target = tmp_path / "model.so"
    target.write_bytes(b"the previous artifact")
    monkeypatch.setenv("POLYC_CC", "false")
    with pytest.raises(CodegenError, match="linking model.so with 'false' failed"):
        write_artifact(scale_exp_ir(), MANIFEST, target)
    assert_untouched(tmp_path, {"model.so": b"the previous artifact"})


def test_save_refuses_the_source_model(model):
    compiled = polyc.compile(str(model))
    with pytest.raises(OutputError, match="which this command reads"):
        compiled.save(model)
    assert model.read_bytes() == MLP.read_bytes()
    compiled.save(model.with_suffix(".so"))  # another path is fine
    assert polyc.load(model.with_suffix(".so")).run({"x": np.load(MLP_INPUT)})["y"].shape


def test_run_writes_exactly_the_path_given(model):
    """``-o out`` writes ``out`` (numpy's savez of a path would add ``.npz``)."""
    out = model.parent / "out"
    done = cli("run", model, "--input", f"x={MLP_INPUT}", "-o", out)
    assert done.returncode == 0, done.stderr
    assert not out.with_suffix(".npz").exists()
    with np.load(out) as saved:
        np.testing.assert_allclose(saved["y"], polyc.compile(str(model)).run(
            {"x": np.load(MLP_INPUT)})["y"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("which", ["model", "input"])
def test_run_refuses_to_overwrite_what_it_reads(model, which):
    given = model.parent / "x.npy"
    shutil.copy(MLP_INPUT, given)
    before = {p.name: p.read_bytes() for p in model.parent.iterdir()}
    target = model if which == "model" else given
    done = cli("run", model, "--input", f"x={given}", "-o", target)
    assert_one_line_error(done, rf"cannot write .*{target.name}: it is .*which this command")
    assert_untouched(model.parent, before)
