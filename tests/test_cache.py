"""The compile cache (polyc.cache): hits, keys, damaged entries, size bound, concurrent
compiles, the CLI's --no-cache and `polyc cache`, and one LLVM run per compile."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import polyc
from polyc import cache as compile_cache
from polyc.cli import main as cli_main
from polyc.runtime import native

from onnx_helpers import make_model

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A cache of its own, on (conftest turns it off for the other tests)."""
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("POLYC_CACHE", "1")
    monkeypatch.delenv("POLYC_CACHE_SIZE", raising=False)
    return tmp_path / "cache"


def weights_model(scale: float):
    w = (np.arange(64 * 48, dtype=np.float32).reshape(64, 48) % 5 - 2) * scale
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["t"]),
                        helper.make_node("Relu", ["t"], ["y"])],
                       [("x", [4, 64])], ["y"], initializers=[("w", w)])
    return model, w


def expected(x, w):
    return np.maximum(x @ w, 0)


X = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)


def entries(folder: Path) -> list[Path]:
    root = folder / f"entries-{compile_cache.FORMAT}"
    return sorted(root.iterdir()) if root.is_dir() else []


def test_a_second_compile_is_read_from_the_cache(folder, tmp_path):
    model, w = weights_model(1.0)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    first = polyc.compile(path)
    second = polyc.compile(path)
    assert not first.cached and second.cached
    assert len(entries(folder)) == 1
    np.testing.assert_allclose(second.run({"x": X})["y"], expected(X, w), rtol=1e-5, atol=1e-5)
    assert "read from the compile cache" in second.report()
    assert second.manifest == first.manifest
    # what the cache does not hold is made again when asked for
    assert second.schedule.decisions == first.schedule.decisions
    # the same model as bytes and as a ModelProto: keys of their own, each hit the second time
    for source in (path.read_bytes(), model):
        assert not polyc.compile(source).cached
        assert polyc.compile(source).cached
    assert len(entries(folder)) == 3


def test_options_and_weights_are_part_of_the_key(folder):
    (model, _), (other, w2) = weights_model(1.0), weights_model(-0.5)
    polyc.compile(model)
    assert not polyc.compile(model, threads=1).cached
    assert not polyc.compile(model, fast_math=False).cached
    changed = polyc.compile(other)  # same graph, other weights
    assert not changed.cached
    np.testing.assert_allclose(changed.run({"x": X})["y"], expected(X, w2), rtol=1e-5,
                               atol=1e-5)
    assert len(entries(folder)) == 4
    key = compile_cache.model_key(model, {"threads": None})
    assert key != compile_cache.model_key(model, {"threads": 1})
    assert key == compile_cache.model_key(model, {"threads": None})


def test_external_data_is_part_of_the_key(folder, tmp_path):
    model, w = weights_model(1.0)
    path = tmp_path / "ext.onnx"
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
              location="ext.data", size_threshold=0)
    assert polyc.compile(path).run({"x": X})["y"].shape == (4, 48)
    # other weights in the data file, the .onnx file unchanged: a miss, and the new values
    _, w2 = weights_model(3.0)
    reloaded = onnx.load(path)
    reloaded.graph.initializer[0].CopyFrom(numpy_helper.from_array(w2, "w"))
    onnx.save(reloaded, tmp_path / "scratch.onnx", save_as_external_data=True,
              location="scratch.data", size_threshold=0)
    (tmp_path / "ext.data").write_bytes((tmp_path / "scratch.data").read_bytes())
    again = polyc.compile(path)
    assert not again.cached
    np.testing.assert_allclose(again.run({"x": X})["y"], expected(X, w2), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("damage", ["cut constants", "flip object", "drop manifest",
                                    "bad index"])
def test_a_damaged_entry_is_detected_and_rebuilt(folder, damage):
    model, w = weights_model(2.0)
    polyc.compile(model)
    (entry,) = entries(folder)
    if damage == "cut constants":
        data = (entry / "constants.bin").read_bytes()
        (entry / "constants.bin").write_bytes(data[:-100])
    elif damage == "flip object":
        data = bytearray((entry / "object.o").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (entry / "object.o").write_bytes(bytes(data))
    elif damage == "drop manifest":
        (entry / "manifest.json").unlink()
    else:
        (entry / "entry.json").write_text("{not json")
    rebuilt = polyc.compile(model)
    assert not rebuilt.cached
    np.testing.assert_allclose(rebuilt.run({"x": X})["y"], expected(X, w), rtol=1e-5,
                               atol=1e-5)
    assert polyc.compile(model).cached  # stored again, whole


def test_no_cache_reads_and_writes_nothing(folder, monkeypatch):
    model, _ = weights_model(1.0)
    assert not polyc.compile(model, cache=False).cached
    assert entries(folder) == []
    monkeypatch.setenv("POLYC_CACHE", "0")
    polyc.compile(model)
    assert entries(folder) == []
    polyc.compile(model, cache=True)  # the argument wins over the environment
    assert len(entries(folder)) == 1


def test_the_least_recently_used_entries_go_past_the_bound(folder, monkeypatch):
    models = [weights_model(s)[0] for s in (1.0, 2.0, 3.0)]
    polyc.compile(models[0])
    (entry,) = entries(folder)
    size = sum(f.stat().st_size for f in entry.iterdir())
    monkeypatch.setenv("POLYC_CACHE_SIZE", str(2 * size + size // 2))  # room for two
    polyc.compile(models[1])
    os.utime(entries(folder)[0] / "entry.json", (1, 1))  # make the order certain
    os.utime(entries(folder)[1] / "entry.json", (1, 1))
    assert polyc.compile(models[0]).cached  # used again: now the most recent
    polyc.compile(models[2])
    assert len(entries(folder)) == 2
    assert polyc.compile(models[0]).cached
    assert polyc.compile(models[2]).cached
    assert not polyc.compile(models[1]).cached  # the one left unused went


def test_an_unwritable_cache_warns_and_compiles(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("POLYC_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setenv("POLYC_CACHE", "1")
    model, w = weights_model(1.0)
    with pytest.warns(RuntimeWarning, match="cannot write the compile cache"):
        compiled = polyc.compile(model)
    np.testing.assert_allclose(compiled.run({"x": X})["y"], expected(X, w), rtol=1e-5,
                               atol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled.save(tmp_path / "m.so")  # no entry: linked directly
    assert polyc.load(tmp_path / "m.so").run({"x": X})["y"].shape == (4, 48)


CONCURRENT = textwrap.dedent("""
    import sys, time, numpy as np, polyc
    start = float(sys.argv[2])
    while time.time() < start:
        time.sleep(0.001)
    compiled = polyc.compile(sys.argv[1])
    x = np.ones((4, 64), np.float32)
    print(compiled.cached, float(compiled.run({"x": x})["y"].sum()))
""")


def test_two_processes_compiling_one_model_both_succeed(folder, tmp_path):
    import time

    model, w = weights_model(1.5)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    start = str(time.time() + 3)  # after both have imported polyc
    runs = [subprocess.Popen([sys.executable, "-c", CONCURRENT, str(path), start],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    outputs = [run.communicate(timeout=300) for run in runs]
    want = float(expected(np.ones((4, 64), np.float32), w).sum())
    for run, (out, err) in zip(runs, outputs):
        assert run.returncode == 0, err
        assert float(out.split()[1]) == pytest.approx(want, rel=1e-5)
    assert len(entries(folder)) == 1
    assert list((folder / "tmp").iterdir()) == []  # the loser's copy was dropped
    assert polyc.compile(path).cached


def test_cli_compile_copies_the_cached_artifact(folder, tmp_path, capsys):
    model = str(EXAMPLES / "mlp.onnx")
    assert cli_main(["compile", model, "-o", str(tmp_path / "a.so")]) == 0
    assert "from the compile cache" not in capsys.readouterr().out
    assert cli_main(["compile", model, "-o", str(tmp_path / "b.so")]) == 0
    assert "(from the compile cache)" in capsys.readouterr().out
    (entry,) = entries(folder)
    assert (tmp_path / "b.so").read_bytes() == (entry / "artifact.so").read_bytes()
    x = np.load(EXAMPLES / "mlp_input.npy")
    np.testing.assert_array_equal(polyc.load(tmp_path / "a.so").run({"x": x})["y"],
                                  polyc.load(tmp_path / "b.so").run({"x": x})["y"])
    # a damaged artifact in the entry is linked again from the entry's object file
    data = bytearray((entry / "artifact.so").read_bytes())
    data[100] ^= 1
    (entry / "artifact.so").write_bytes(bytes(data))
    assert cli_main(["compile", model, "-o", str(tmp_path / "c.so")]) == 0
    assert polyc.load(tmp_path / "c.so").run({"x": x})["y"].shape == (4, 10)
    assert cli_main(["compile", model, "-o", str(tmp_path / "d.so"), "--threads", "1",
                     "--no-cache"]) == 0
    assert len(entries(folder)) == 1
    capsys.readouterr()
    assert cli_main(["cache", "info"]) == 0
    info = capsys.readouterr().out
    assert str(folder) in info and "1 entry," in info
    assert cli_main(["cache", "clear"]) == 0
    assert "removed 1 entry" in capsys.readouterr().out
    assert entries(folder) == []


def test_llvm_runs_once_for_the_jit_and_the_artifact(folder, tmp_path, monkeypatch):
    calls = []
    emit = native.emit_object

    def counted(*args, **kwargs):
        calls.append(1)
        return emit(*args, **kwargs)

    monkeypatch.setattr(native, "emit_object", counted)
    model, w = weights_model(1.0)
    compiled = polyc.compile(model, cache=False)
    compiled.save(tmp_path / "m.so")
    assert len(calls) == 1
    np.testing.assert_allclose(polyc.load(tmp_path / "m.so").run({"x": X})["y"],
                               compiled.run({"x": X})["y"], rtol=0, atol=0)


def test_entry_index_lists_the_files_with_checksums(folder):
    polyc.compile(weights_model(1.0)[0])
    (entry,) = entries(folder)
    index = json.loads((entry / "entry.json").read_text())
    assert set(index["files"]) == {"object.o", "constants.bin", "manifest.json"}
    assert index["constants"], "the MatMul's packed weights"
    for item in index["constants"]:
        assert item["name"].startswith("polyc.const.") and item["offset"] % 64 == 0
    sizes = {name: size for name, (size, _) in index["files"].items()}
    assert sizes["object.o"] == (entry / "object.o").stat().st_size


def test_save_works_when_the_entry_went_meanwhile(folder, tmp_path):
    model, w = weights_model(1.0)
    compiled = polyc.compile(model)
    assert compile_cache.open_cache(True).clear() == 1  # e.g. another process trimmed it
    compiled.save(tmp_path / "m.so")
    np.testing.assert_allclose(polyc.load(tmp_path / "m.so").run({"x": X})["y"],
                               expected(X, w), rtol=1e-5, atol=1e-5)


def test_a_model_file_rewritten_in_place_is_a_miss(folder, tmp_path):
    """The digest of a model file is remembered by its path and status (size, times,
    inode): rewriting it with other weights of the same size changes the status, and
    the compile misses and runs the new weights."""
    path = tmp_path / "m.onnx"
    (model, _), (other, w2) = weights_model(1.0), weights_model(-2.0)
    onnx.save(model, path)
    assert not polyc.compile(path).cached
    assert polyc.compile(path).cached  # the remembered digest
    assert len(list((folder / "files").iterdir())) == 1
    data = other.SerializeToString()
    assert len(data) == path.stat().st_size
    with open(path, "r+b") as file:  # the same inode, the same size
        file.write(data)
    again = polyc.compile(path)
    assert not again.cached
    np.testing.assert_allclose(again.run({"x": X})["y"], expected(X, w2), rtol=1e-5, atol=1e-5)
    digest, external = compile_cache.file_digest(path)
    assert digest == hashlib.sha256(data).hexdigest() and not external
