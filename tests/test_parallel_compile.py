"""Compiling on several cores (polyc.workers: forked processes): fusion groups
scheduled apart, and LLVM's work split into units (polyc.runtime.units), each
optimised and emitted in a process of its own, the objects linked by MCJIT, into
artifacts and kept in the compile cache."""

from __future__ import annotations

import os
import re
import signal

import numpy as np
import pytest
from onnx import helper
from test_channels_last import Net

import polyc
from polyc import cache, workers
from polyc.codegen import target
from polyc.errors import CodegenError, PolycError
from polyc.pipeline import Options, lower, native_code
from polyc.runtime import native, units
from polyc.runtime.artifact import load_artifact

from onnx_helpers import random_inputs

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="units compile in forks")


def convs():
    """Six convs and their Relus: nests whose loops run on threads (outlined bodies)."""
    net = Net(8, 14)
    x, channels = "x", 8
    for width in (16, 16, 24, 24, 32, 32):
        x, channels = net.node("Relu", net.conv(x, channels, width, 3)), width
    return net.model(x)


@pytest.fixture
def small_units(monkeypatch):
    monkeypatch.setattr(units, "UNIT_BYTES", 1000)
    monkeypatch.setenv("POLYC_JOBS", "3")


def defined(text: str) -> set[str]:
    return set(re.findall(r'^define [^@]*@"([^"]+)"', text, re.M))


def test_units_define_each_function_once_and_parse(small_units):
    llvm_ir = lower(convs(), Options(threads=2)).llvm_ir
    texts = units.split(llvm_ir, 3)
    assert len(texts) == 3
    names = [defined(text) for text in texts]
    assert set().union(*names) == defined(llvm_ir)
    assert sum(map(len, names)) == len(defined(llvm_ir))
    assert {"polyc_main", "polyc_kernel"} <= names[0]
    tm = target.host_target_machine(reloc="pic")
    for text in texts:
        target.parse(text, tm)  # verifies
    # the nests the kernel calls from another unit are linked, not exported
    assert re.search(r'^define hidden void @"polyc_kernel\.part', texts[1], re.M)
    assert re.search(r'^declare void @"polyc_kernel\.part', texts[0], re.M)


def test_a_split_module_runs_as_one_unit_does(small_units, tmp_path, monkeypatch):
    model = convs()
    inputs = random_inputs(model, seed=4)
    compilation = lower(model, Options(threads=2))
    split = native_code(compilation)
    assert len(split.code.objects) > 2
    monkeypatch.setenv("POLYC_JOBS", "1")
    whole = native_code(compilation)
    assert len(whole.code.objects) == 1
    expected = polyc.pipeline.CompiledModel(whole, compilation).run(inputs)
    got = polyc.pipeline.CompiledModel(split, compilation).run(inputs)
    saved = polyc.pipeline.CompiledModel(split, compilation)
    saved.save(tmp_path / "split.so")
    from_artifact = load_artifact(tmp_path / "split.so").run(inputs)
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value)
        np.testing.assert_array_equal(from_artifact[name], value)


def test_the_compile_cache_keeps_every_object(small_units, tmp_path, monkeypatch):
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path / "cache"))
    model = convs()
    inputs = random_inputs(model, seed=5)
    first = polyc.pipeline.build(model, threads=2, cache=True)
    count = len(first.native.code.objects)
    assert count > 2 and not first.cached
    again = polyc.pipeline.build(model, threads=2, cache=True)
    assert again.cached and again.native.code.objects == first.native.code.objects
    (entry,) = (tmp_path / "cache").glob(f"entries-{cache.FORMAT}/*")
    assert {p.name for p in entry.glob("object*.o")} == {
        "object.o", *(f"object{k}.o" for k in range(1, count))}
    expected = first.loaded().run(inputs)
    for name, value in again.loaded().run(inputs).items():
        np.testing.assert_array_equal(value, expected[name])


def test_a_module_with_a_global_value_stays_one_unit(small_units):
    profiled = lower(convs(), Options(threads=1, profile=True)).llvm_ir
    assert re.search(r"^@\S+ = internal global", profiled, re.M)
    assert units.split(profiled, 3) == [profiled]


def test_small_modules_stay_one_unit(monkeypatch):
    monkeypatch.setenv("POLYC_JOBS", "4")
    llvm_ir = lower(convs(), Options(threads=1)).llvm_ir
    assert len(llvm_ir) < units.UNIT_BYTES * 2
    assert units.split(llvm_ir, 4) == [llvm_ir]


def test_an_error_in_a_worker_reaches_the_caller(monkeypatch):
    monkeypatch.setenv("POLYC_JOBS", "2")
    def fails():
        raise CodegenError("LLVM could not emit code: out of registers")

    with pytest.raises(CodegenError, match="out of registers"):
        workers.run_all([lambda: 1, fails], "LLVM")


def test_a_worker_that_dies_is_an_error_naming_its_signal(monkeypatch):
    monkeypatch.setenv("POLYC_JOBS", "2")
    def dies():
        os.kill(os.getpid(), signal.SIGKILL)

    with pytest.raises(PolycError, match=r"LLVM: a worker process died of signal 9 \(SIGKILL\)"):
        workers.run_all([lambda: 1, dies], "LLVM")
    assert workers.run_all([lambda: 1, lambda: 2, lambda: 3], "LLVM") == [1, 2, 3]


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_polyc_jobs_must_be_a_positive_number(monkeypatch, value):
    monkeypatch.setenv("POLYC_JOBS", value)
    with pytest.raises(PolycError, match="POLYC_JOBS must be a positive number"):
        workers.jobs()


def test_one_job_runs_in_this_process(monkeypatch):
    monkeypatch.setenv("POLYC_JOBS", "1")
    pids = workers.run_all([os.getpid, os.getpid], "test")
    assert pids == [os.getpid(), os.getpid()]


def test_seconds_of_a_split_module_are_wall_clock(small_units):
    code = native.emit_object(lower(convs(), Options(threads=2)).llvm_ir,
                              {"entry": "polyc_main", "format": "polyc-1"})
    assert len(code.objects) > 2
    assert set(code.seconds) == {"parse", "optimize", "object"}
    assert all(value >= 0 for value in code.seconds.values())


def test_groups_scheduled_on_several_processes_get_the_same_schedule(monkeypatch):
    from polyc.scheduler import base

    model = convs()
    monkeypatch.setenv("POLYC_JOBS", "1")
    serial = lower(model, Options(threads=2))
    monkeypatch.setattr(base, "PARALLEL_GROUPS", 2)
    monkeypatch.setenv("POLYC_JOBS", "3")
    forked = []
    real_fork = os.fork

    def counting_fork():
        pid = real_fork()
        if pid:
            forked.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", counting_fork)
    parallel = lower(model, Options(threads=2))
    assert len(serial.groups.groups) >= 6 and forked
    assert str(parallel.schedule.schedule) == str(serial.schedule.schedule)
    assert parallel.schedule.decisions == serial.schedule.decisions
    assert parallel.llvm_ir == serial.llvm_ir


@pytest.fixture
def nests_apart(monkeypatch):
    from polyc.codegen import apart

    monkeypatch.setattr(apart, "MIN_GROUPS", 1)
    monkeypatch.setenv("POLYC_JOBS", "2")


def test_nests_generated_apart_make_the_program_one_process_makes(nests_apart, monkeypatch,
                                                                   tmp_path):
    """Groups dealt out to processes, each building its groups' AST and a module of
    their nests: the kernel calls them in the schedule's order, the buffer plan is the
    same, the whole AST (built when asked for) is the same, and the code computes the
    same, in process and as an artifact."""
    model = convs()
    inputs = random_inputs(model, seed=6)
    apart = lower(model, Options(threads=2))
    assert apart.loops is None
    assert "nests" in dict(apart.times) and "ast" not in dict(apart.times)
    assert apart.llvm_ir.count("; ModuleID = ") == 5  # the kernel's and 4 shares'
    monkeypatch.setenv("POLYC_JOBS", "1")
    whole = lower(model, Options(threads=2))
    assert whole.loops is not None and whole.llvm_ir.count("; ModuleID = ") == 1
    assert apart.plan == whole.plan
    assert str(apart.program) == str(whole.program)
    expected = polyc.pipeline.CompiledModel(native_code(whole), whole).run(inputs)
    compiled = polyc.pipeline.CompiledModel(native_code(apart), apart)
    assert len(compiled.native.code.objects) == 5
    compiled.save(tmp_path / "apart.so")
    for got in (compiled.run(inputs), load_artifact(tmp_path / "apart.so").run(inputs)):
        for name, value in expected.items():
            np.testing.assert_array_equal(got[name], value)
    assert "ms" in str(compiled.profile(inputs, repeat=1, onnxruntime=False))


def test_symbolic_and_profiled_programs_are_generated_in_one_piece(nests_apart):
    model = convs()
    assert lower(model, Options(threads=2, profile=True)).loops is not None
    from test_symbolic_dims import _model

    nodes = [helper.make_node(op, [f"t{k}"], [f"t{k + 1}"])
             for k, op in enumerate(["Relu", "Exp", "Relu", "Neg"] * 3)]
    symbolic = _model(nodes, [("t0", ["batch", 16])], [("t12", ["batch", 16])])
    compiled = lower(symbolic, Options(threads=2, symbolic=("batch",), fuse="none"))
    assert len(compiled.groups.groups) >= 2 and compiled.scop.symbolic_params
    assert compiled.loops is not None


def test_dependences_analysed_on_several_processes_are_the_same(monkeypatch):
    from polyc.frontend import import_model
    from polyc.scop import dependences
    from polyc.scop.build import build_scop

    scop = build_scop(import_model(convs()))
    monkeypatch.setenv("POLYC_JOBS", "1")
    one = dependences.compute_dependences(scop).dependences
    monkeypatch.setattr(dependences, "PARALLEL_ARRAYS", 2)
    monkeypatch.setenv("POLYC_JOBS", "3")
    apart = dependences.compute_dependences(scop).dependences
    assert len(one.by_array) >= 6 and one.by_array.keys() == apart.by_array.keys()
    for got, want in zip((apart.raw, apart.war, apart.waw), (one.raw, one.war, one.waw)):
        assert got.is_equal(want)
    for array, relations in one.by_array.items():
        assert all(a.is_equal(b) for a, b in zip(apart.by_array[array], relations))


def test_queued_calls_run_at_most_jobs_at_once_and_keep_their_order(monkeypatch, tmp_path):
    monkeypatch.setenv("POLYC_JOBS", "2")

    def call(k):
        def run():
            mark = tmp_path / f"running-{os.getpid()}"
            mark.touch()
            seen = len(list(tmp_path.glob("running-*")))
            import time
            time.sleep(0.05)
            mark.unlink()
            return k, seen, os.getpid()
        return run

    results = workers.run_queued([call(k) for k in range(6)], "test")
    assert [k for k, _, _ in results] == list(range(6))
    assert max(seen for _, seen, _ in results) <= 2
    assert os.getpid() not in {pid for _, _, pid in results}

    def fails():
        raise CodegenError("LLVM could not emit code: out of registers")

    with pytest.raises(CodegenError, match="out of registers"):
        workers.run_queued([call(0), fails, call(1)], "LLVM")
    with pytest.raises(PolycError, match=r"died of signal 9"):
        workers.run_queued([call(0), lambda: os.kill(os.getpid(), signal.SIGKILL)], "LLVM")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_background_call_returns_or_raises_what_the_call_did(monkeypatch, jobs):
    monkeypatch.setenv("POLYC_JOBS", jobs)
    running = workers.Background(os.getpid, "test")
    assert (running.wait() == os.getpid()) == (jobs == "1")  # a child with two jobs
    assert running.waited >= 0

    def fails():
        raise CodegenError("LLVM could not emit code: out of registers")

    with pytest.raises(CodegenError, match="out of registers"):
        workers.Background(fails, "LLVM").wait()
    if jobs == "2":  # (with one job, the call runs in this process)
        with pytest.raises(PolycError, match=r"legality check: a worker process died of signal 9"):
            workers.Background(lambda: os.kill(os.getpid(), signal.SIGKILL),
                               "legality check").wait()


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_tiled_schedules_legality_error_is_reported_before_a_later_failure(monkeypatch,
                                                                              jobs):
    """The tiled schedule is checked on another process while in place and code
    generation go on: when it is illegal, that is the error the compile raises, even
    if a later stage fails meanwhile (an illegal schedule can make it fail)."""
    from polyc import pipeline
    from polyc.errors import IllegalScheduleError

    monkeypatch.setenv("POLYC_JOBS", jobs)
    calls = []

    def check(scop, schedule):  # the SCoP's own schedule passes, the tiled one not
        calls.append(1)
        if len(calls) > 1:
            raise IllegalScheduleError("RAW dependence S1 -> S2 is not respected")

    def in_place(scop, schedule):
        raise CodegenError("in place: a buffer is read after it is written")

    monkeypatch.setattr(pipeline, "check_legality", check)
    monkeypatch.setattr(pipeline, "write_in_place", in_place)
    with pytest.raises(IllegalScheduleError, match="S1 -> S2 is not respected"):
        lower(convs(), Options(threads=2))
    monkeypatch.setattr(pipeline, "check_legality", lambda scop, schedule: None)
    with pytest.raises(CodegenError, match="read after it is written"):
        lower(convs(), Options(threads=2))
