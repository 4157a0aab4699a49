"""One options object (polyc.options.Options) from the command line down: every option
has its help, stage and flag in one place; the entry points, the CLI, traces and
docstrings come from it; bad names and values are PolycErrors; ``caches`` pins the
tiling decisions a trace replays on another host."""

import dataclasses
import json
from dataclasses import fields

import numpy as np
import pytest

import polyc
from polyc import cli, options
from polyc.errors import PolycError
from polyc.options import MODEL, NEST, REST, START, Options
from polyc.pipeline import build, compile_scop
from polyc.scop.polybench import KERNELS
from polyc.steer import Schedule
from polyc.tiling import cache
from polyc.trace import Trace, trace_of

JACOBI = {"T": 20, "N": 600}


def test_every_option_says_what_it_is_and_has_a_flag():
    for f in fields(Options):
        meta = f.metadata
        assert meta["stage"] in (START, REST) and meta["help"], f.name
        assert set(meta["kinds"]) <= {MODEL, NEST} and meta["kinds"], f.name
        assert meta["flag"] is not None, f.name


@pytest.mark.parametrize(("command", "kind"), [("compile", MODEL), ("cc", NEST)])
def test_the_command_lines_flags_come_from_the_options(command, kind, capsys):
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    text = capsys.readouterr().out
    skipped = {"symbolic"} if command == "cc" else set()
    for f in fields(Options):
        if kind in f.metadata["kinds"] and f.name not in skipped:
            flag = f.metadata["flag"].flag(f.name)
            assert flag in text, (command, flag)


def test_the_docstrings_list_every_option_of_their_kind():
    for name in options.option_names(MODEL):
        assert f"``{name}``" in build.__doc__
    for name in options.option_names(NEST):
        assert f"``{name}``" in compile_scop.__doc__
    assert "``scheduler``" not in Schedule.compile.__doc__  # a start option: Schedule()'s
    assert "``tile`` (default ``False``)" in Schedule.compile.__doc__


@pytest.mark.parametrize(("argv", "expected"), [
    (["--tile-size", "S1=8,64", "--tile-size", "S2=16", "--no-fast-math", "--threads", "2",
      "--without", "diamond,inward", "--caches", "l2=256K", "--param", "N=600",
      "--no-split"],
     {"tile_size": {"S1": (8, 64), "S2": 16}, "fast_math": False, "threads": 2,
      "without": ("diamond", "inward"), "caches": {"l2": 256 * 1024},
      "params": {"N": 600}, "split": False}),
    (["--blocking", "6,16,48,128,256", "--autoselect", "off", "--no-parallel-hints",
      "--tile2", "4"],
     {"blocking": (6, 16, 48, 128, 256), "autoselect": None, "parallel_hints": False,
      "tile2": 4}),
    (["--tile2", "on"], {"tile2": True}),
])
def test_a_flag_gives_the_same_options_as_its_keyword(argv, expected):
    args = cli.build_parser().parse_args(["cc", "k.c", *argv])
    from_flags = Options.of(NEST, options.given(args))
    assert from_flags == Options.of(NEST, expected)
    for name, value in expected.items():
        assert getattr(from_flags, name) == value


def test_defaults_differ_by_kind_where_the_field_says():
    model, nest = Options.of(MODEL), Options.of(NEST)
    assert (model.split, model.expand, model.parallel_hints) == (False, False, False)
    assert (nest.split, nest.expand, nest.parallel_hints) == (True, True, True)
    assert Options.of(MODEL, {"split": True}).split is True


@pytest.mark.parametrize(("kind", "given", "message"), [
    (NEST, {"tile_sise": 32}, "unknown option 'tile_sise'; did you mean 'tile_size'"),
    (NEST, {"shapes": {"x": (1,)}}, "'shapes' is an option of ONNX models, not of loop nests"),
    (MODEL, {"params": {"N": 3}}, "'params' is an option of loop nests, not of ONNX models"),
    (NEST, {"threads": 0}, "threads must be a positive int"),
    (NEST, {"caches": {"l4": 1 << 20}}, "'l4'"),
    (NEST, {"caches": {"l2": -1}}, "is not a cache level"),
    (NEST, {"autoselect": "fastest"}, "autoselect must be one of"),
    (MODEL, {"winograd": "8x8"}, "winograd must be one of"),
    (NEST, {"without": ["tiling"]}, "tiling"),
])
def test_bad_options_name_what_is_wrong(kind, given, message):
    with pytest.raises(PolycError, match=message.replace("(", r"\(")):
        Options.of(kind, given)


def test_entry_points_refuse_what_is_not_theirs():
    nest = KERNELS["jacobi-1d"].build()
    with pytest.raises(PolycError, match="'winograd' is an option of ONNX models"):
        nest.compile(params={"T": 2, "N": 40}, winograd="off")
    with pytest.raises(PolycError, match="unknown option 'threads'"):
        Schedule(nest, params={"T": 2, "N": 40}, threads=2)  # Schedule.compile's
    schedule = Schedule(nest, params={"T": 2, "N": 40})
    with pytest.raises(PolycError, match="unknown option 'fuse'"):
        schedule.compile(fuse="max")  # Schedule()'s: the stages before the schedule


def _jacobi(**chosen):
    return KERNELS["jacobi-2d"].build().compile(params=JACOBI, threads=1, **chosen)


def _sizes(compiled) -> str:
    return next(d for d in compiled.schedule.decisions if "stencil sizes" in d)


def test_caches_size_the_tiles_and_the_results_stay_right():
    kernel = KERNELS["jacobi-2d"]
    small = _jacobi(caches={"l2": 64 * 1024})
    large = _jacobi(caches={"l2": 4 << 20})
    assert _sizes(small) != _sizes(large)
    arrays = kernel.inputs(seed=0, params=JACOBI)
    expected = kernel.reference(JACOBI, {k: v.copy() for k, v in arrays.items()})
    for compiled in (small, large):
        got = compiled.run(arrays)
        for name, value in expected.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-5)


def test_a_trace_replays_the_same_tiles_on_a_host_with_other_caches(monkeypatch):
    compiled = _jacobi()
    trace = trace_of(compiled.compilation)
    assert trace.compile["caches"] == dataclasses.asdict(cache.host_caches())
    host = cache.host_caches()
    other = dataclasses.replace(host, l2=host.l2 // 8)  # another host
    monkeypatch.setattr(cache, "sysfs_caches", lambda root=cache.SYSFS: other)
    assert _sizes(_jacobi()) != _sizes(compiled)  # this host alone would tile otherwise
    again = Trace.from_json(json.loads(json.dumps(trace.to_json()))).compiled(
        KERNELS["jacobi-2d"].build())
    assert _sizes(again) == _sizes(compiled)
    assert again.compilation.llvm_ir == compiled.compilation.llvm_ir


def test_an_onnx_models_options_reach_the_manifest():
    mlp = polyc.compile("examples/mlp.onnx", cache=False, fast_math=False,
                        caches={"l1": 48 * 1024})
    recorded = mlp.manifest["options"]
    assert recorded["fast_math"] is False and recorded["caches"] == {"l1": 48 * 1024}
    assert set(recorded) == {f.name for f in fields(Options)}
