"""The compiler, stage by stage. This is the one place that decides stage order.

    ONNX model -> frontend (core ops) -> SCoP -> producer inlining -> dependences
      -> fusion groups
      -> schedule -> legality check -> bind parameters -> tiling -> parallel marks
      -> legality check (parallel loops included) -> writes in place -> isl AST
      -> buffer plan (scratch shared by liveness) -> LLVM IR
      -> native code: one object file (LLVM runs once), loaded into the process (MCJIT)
         or linked into an AOT shared library

An ONNX model compiled before with the same options comes from the compile cache
(:mod:`polyc.cache`) instead, running no stage; long compiles on a terminal show their
progress (:mod:`polyc.progress`).

A loop nest written in Python (:mod:`polyc.scop.nest`) enters at the SCoP:
:func:`lower` and :func:`compile_scop` share :func:`lower_scop` from inlining on.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping

import islpy as isl
import numpy as np

from polyc import __version__, config, host, progress, workers
from polyc.codegen.apart import Apart, apart_possible, generate_apart
from polyc.codegen.ast import LoopProgram, build_ast, parts
from polyc.codegen.inplace import storage, write_in_place
from polyc.codegen.layout import INITIAL, BufferPlan, constant_data, plan_buffers, plan_for_parts
from polyc.codegen.llvm import ENTRY, emit_module
from polyc.codegen.profile import parts as profile_parts
from polyc.errors import PolycError, ResourceError
from polyc.frontend import import_model
from polyc.frontend.core import Graph
from polyc.fusion.groups import FusionGroups, fuse
from polyc.fusion.inline import inline_temporaries
from polyc.islutil import OverBudget
from polyc.limits import check_memory, tensor_bytes
from polyc.options import MODEL, NEST, Options, describe
from polyc.scheduler import ScheduleResult, check_legality, schedule
from polyc.scop.build import build_scop
from polyc.scop.dependences import compute_dependences
from polyc.scop.expand import expand_scalars
from polyc.scop.model import Scop
from polyc.scop.params import bind_parameters, check_values
from polyc.scop.split import split_index_sets
from polyc.tiling import tile
from polyc.tiling.cache import assumed
from polyc.tiling.parallel import parallelize

if TYPE_CHECKING:
    from polyc.runtime.native import NativeProgram


@dataclass(frozen=True)
class Compilation:
    """Every stage's result, for inspection, reports and artifacts.

    ``scop`` has its dependences and its parameters bound; ``graph`` is None for a
    SCoP that did not come from ONNX (a loop nest).
    """

    options: Options
    scop: Scop
    groups: FusionGroups
    schedule: ScheduleResult
    loops: LoopProgram | None  # None: the nests were generated apart (codegen.apart)
    plan: BufferPlan
    llvm_ir: str  # one module, or the kernel's then those of nests generated apart
    times: tuple[tuple[str, float], ...] = field(default=())
    graph: Graph | None = None
    profile: tuple[dict, ...] = ()  # per timed part, with options.profile
    # the schedule tiling started from (the autoselected one's), for traces
    # (polyc.trace.trace_of; kept as isl's object: its text costs time on large models)
    untiled: isl.Schedule | None = None

    @property
    def program(self) -> LoopProgram:
        """The AST of the whole schedule (built now if the nests were generated apart:
        the same loops)."""
        if self.loops is None:
            object.__setattr__(self, "loops", build_ast(self.scop, self.schedule.schedule,
                                                        storage(self.plan.in_place)))
        return self.loops

    @property
    def manifest(self) -> dict[str, Any]:
        params = {"params": list(self.plan.params)} if self.plan.params else {}
        profile = {"profile": list(self.profile)} if self.options.profile else {}
        host = {"host": list(self.graph.host), "results": list(self.graph.results)} \
            if self.graph is not None and self.graph.host else {}
        return {
            "format": "polyc-1", "entry": ENTRY,
            "inputs": [self._describe(n) for n in self.plan.inputs],
            "outputs": [self._describe(n) for n in self.plan.outputs],
            **params,
            "scratch_bytes": self.plan.manifest_scratch,
            "model_hash": self.graph.model_hash if self.graph is not None else "",
            "options": self.options.as_dict(),
            "polyc_version": __version__,
            **profile,
            **host,
        }

    def profiled(self) -> Compilation:
        """The same program with timers around each loop nest (LLVM IR emitted again)."""
        if self.options.profile:
            return self
        options = replace(self.options, profile=True)
        return replace(self, options=options, llvm_ir=_emit(self.scop, self.program, self.plan,
                                                            options),
                       profile=_profile_parts(self.scop, self.program))

    @property
    def constants(self) -> dict[str, np.ndarray]:
        """The values of the LLVM module's external constants, by symbol."""
        return constant_data(self.scop, self.plan)

    def _describe(self, name: str) -> dict[str, Any]:
        array = self.scop.array(name)
        spec = {"name": array.tensor, "shape": list(array.shape), "dtype": array.dtype}
        if array.kind in INITIAL:
            spec["init"] = INITIAL[array.kind]
        return spec


class _Stages:
    """Runs stages, timing each and printing it at the POLYC_DEBUG levels."""

    def __init__(self):
        self.times: list[tuple[str, float]] = []

    def run(self, name: str, fn: Callable, *args, **kwargs):
        progress.stage(name)
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        seconds = time.perf_counter() - start
        self.times.append((name, seconds))
        config.log(config.STAGES, f"polyc: {name:<12} {seconds * 1e3:9.2f} ms")
        if result is not None and name != "llvm":
            parts = result if isinstance(result, tuple) else (result,)  # tiling: scop, schedule
            config.log_section(config.IR, f"after {name}", lambda: "\n".join(map(str, parts)))
        return result


def lower(model, options: Options) -> Compilation:
    """ONNX model (or a core :class:`Graph`, which skips the frontend) -> LLVM IR,
    keeping every intermediate result."""
    stages = _Stages()
    if isinstance(model, Graph):
        graph = model
    else:
        graph = stages.run("frontend", import_model, model, shapes=options.shapes,
                           dims=options.dims, symbolic=options.symbolic,
                           winograd=options.winograd, memory_limit=options.memory_limit)
    check_memory(_graph_bytes(graph), options.memory_limit)
    scop = stages.run("scop", build_scop, graph)
    symbolic = replace(options, symbolic=graph.params or None)  # as isl parameter names
    return replace(lower_scop(scop, symbolic, stages), options=options, graph=graph)


def _graph_bytes(graph: Graph) -> dict[str, int]:
    """The bytes of a graph's inputs, outputs and constants (static dims only); every
    tensor is checked to be addressable (:func:`polyc.limits.tensor_bytes`)."""
    sizes = {name: tensor_bytes(name, info.shape, np.dtype(info.dtype).itemsize)
             for name, info in graph.tensors.items()}
    return {"inputs": sum(sizes.get(t.name, 0) for t in graph.inputs),
            "outputs": sum(sizes.get(t.name, 0) for t in graph.outputs),
            "constants": sum(value.nbytes for value in graph.constants.values())}


def _call_bytes(scop: Scop, plan: BufferPlan) -> dict[str, int]:
    """What one call needs: its inputs, outputs, constants and scratch."""
    def total(names):
        return sum(tensor_bytes(n, scop.array(n).shape, np.dtype(scop.array(n).dtype).itemsize)
                   for n in names)

    return {"inputs": total(plan.inputs), "outputs": total(plan.outputs),
            "constants": total(plan.constants), "scratch": plan.scratch_bytes}


def lower_scop(scop: Scop, options: Options, stages: _Stages) -> Compilation:
    """SCoP -> LLVM IR: every stage from dependences on; parameters stay symbolic until
    they are bound (``options.params``) for AST generation, but for those kept symbolic
    (``options.symbolic``), which become arguments of the generated code."""
    scop, groups, scheduled = schedule_scop(scop, options, stages)
    return lower_schedule(scop, groups, scheduled, options, stages)


def schedule_scop(scop: Scop, options: Options, stages: _Stages
                  ) -> tuple[Scop, FusionGroups, ScheduleResult]:
    """The stages up to the scheduler's: the SCoP as scheduled (inlined, with its
    dependences, scalars expanded and statements split), its fusion groups and the
    schedule."""
    inlined = ()
    if "inline" not in options.without:
        scop, inlined = stages.run("inline", inline_temporaries, scop, policy=options.fuse)
    scop = stages.run("dependences", compute_dependences, scop)
    if options.expand:
        scop = stages.run("expand", expand_scalars, scop, options.params)
    if options.split:
        scop = stages.run("split", split_index_sets, scop)
    config.log_section(config.SYSTEMS, "dependences", lambda: str(scop.dependences))
    groups = stages.run("fusion", fuse, scop, policy=options.fuse, inlined=inlined)
    scheduled = stages.run("schedule", schedule, scop, groups, scheduler=options.scheduler)
    return scop, groups, scheduled


def lower_schedule(scop: Scop, groups: FusionGroups, scheduled: ScheduleResult,
                   options: Options, stages: _Stages) -> Compilation:
    """A scheduled SCoP (:func:`schedule_scop`) -> LLVM IR: the legality check, the
    parameters bound, autoselection, tiling, parallel marks and code generation;
    tiling sizes for ``options.caches`` and ``options.vector_bits`` (default: the
    host's)."""
    with assumed(options.caches), host.assumed(options.vector_bits):
        return _lowered(scop, groups, scheduled, options, stages)


def _lowered(scop: Scop, groups: FusionGroups, scheduled: ScheduleResult,
             options: Options, stages: _Stages) -> Compilation:
    if options.check:
        stages.run("legality", check_legality, scop, scheduled.schedule)
    unbound = scop
    scop = stages.run("parameters", bind_parameters, scop, options.params,
                      options.symbolic or ())
    chosen = None
    if options.autoselect == "model":
        from polyc.autoselect import modelled
        scheduled, tiled, chosen = stages.run("select", modelled, unbound, scop, groups,
                                              scheduled, options)
        options = replace(options, tile=tiled)
    untiled = scheduled.schedule
    try:
        scop, scheduled, in_place, program = _loops(scop, scheduled, options, stages, chosen)
    except OverBudget as err:
        if not options.tile:
            raise ResourceError(f"{err}: the schedule has too many pieces") from None
        scheduled = replace(scheduled, decisions=scheduled.decisions + (
            f"{err}: loops of the untiled schedule",))
        try:
            scop, scheduled, in_place, program = _loops(scop, scheduled,
                                                        replace(options, tile=False), stages)
        except OverBudget as again:
            raise ResourceError(f"{again}, tiled or not") from None
        options = replace(options, tile=False)
    if isinstance(program, Apart):
        memory = storage(in_place)
        plan = stages.run("buffers", plan_for_parts, scop, program.part_arrays,
                          lambda name: memory.get(name, name), in_place)
    else:
        plan = stages.run("buffers", plan_buffers, scop, program, in_place)
    check_memory(_call_bytes(scop, plan), options.memory_limit)
    llvm_ir = stages.run("llvm", _emit, scop, program, plan, options)
    if isinstance(program, Apart):
        program = None
    config.log_section(config.LLVM, "LLVM IR (before optimisation)", llvm_ir)
    timed = _profile_parts(scop, program) if options.profile else ()
    return Compilation(options, scop, groups, scheduled, program, plan, llvm_ir,
                       tuple(stages.times), profile=timed, untiled=untiled)


def _loops(scop: Scop, scheduled: ScheduleResult, options: Options, stages: _Stages,
           tiled: tuple[Scop, ScheduleResult] | None = None):
    """Tiling (unless ``tiled`` is its result already: the select stage's), parallel
    marks, in place and the AST of a scheduled SCoP: the SCoP (with the orders in place
    needs), the schedule, what is in place and the loop program; :class:`OverBudget`
    when generating the loops takes too long."""
    if tiled is not None:
        scop, scheduled = tiled
    else:
        scop, scheduled = stages.run("tiling", tile, scop, scheduled, enabled=options.tile,
                                     size=options.tile_size, blocking=options.blocking,
                                     without=options.without, tile2=options.tile2,
                                     parallel=options.threads != 1)
    scheduled = stages.run("parallel", parallelize, scop, scheduled, threads=options.threads)
    checking = None
    if options.check and (options.tile or options.threads != 1):
        # on another process while in place and the nests go on (densenet121: 1.2 s);
        # an illegal schedule is the error reported, whatever else then fails
        checked, schedule = scop, scheduled.schedule
        checking = workers.Background(lambda: check_legality(checked, schedule),
                                      "legality check")
    try:
        scop, in_place, program = _generated(scop, scheduled, options, stages)
    finally:
        if checking is not None:
            checking.wait()
            stages.times.append(("legality wait", checking.waited))
    return scop, scheduled, in_place, program


def _generated(scop: Scop, scheduled: ScheduleResult, options: Options, stages: _Stages):
    """In place and the loops: the AST, or the nests generated apart."""
    scop, in_place = stages.run("in place", write_in_place, scop, scheduled.schedule)
    if not options.profile and apart_possible(scop, scheduled.schedule):
        apart = stages.run("nests", generate_apart, scop, scheduled.schedule,
                           storage(in_place), fast_math=options.fast_math,
                           threads=options.threads)
        if apart is not None:
            return scop, in_place, apart
    program = stages.run("ast", build_ast, scop, scheduled.schedule, storage(in_place),
                         hints=options.parallel_hints)
    return scop, in_place, program


def _emit(scop: Scop, program: LoopProgram | Apart, plan: BufferPlan, options: Options
          ) -> str:
    """The LLVM IR: one module, or the kernel's followed by those of the nests
    generated apart."""
    if isinstance(program, Apart):
        kernel = emit_module(scop, None, plan, fast_math=options.fast_math,
                             threads=options.threads, nests=program.nests)
        return "\n".join([kernel, *program.modules])
    return emit_module(scop, program, plan, fast_math=options.fast_math,
                       threads=options.threads, profile=options.profile)


def _profile_parts(scop: Scop, program: LoopProgram) -> tuple[dict, ...]:
    return tuple(profile_parts(scop, program, parts(program.root)))


def compile_model(model, **options) -> "CompiledModel":
    """Compile ``model`` (path, bytes or ModelProto) to native code in this process and
    load it; ``options`` are :func:`build`'s."""
    return build(model, **options).loaded()


def build(model, *, cache: bool | None = None, **options) -> "CompiledModel":
    """Compile ``model`` (path, bytes or ModelProto) to native code, not yet loaded
    (:func:`compile_model` loads it). ``cache`` (default: on unless ``POLYC_CACHE=0``)
    reads and writes the compile cache (:mod:`polyc.cache`): a model compiled before
    with the same options loads without compiling. The options
    (:class:`polyc.options.Options`), with their defaults for ONNX models:

"""
    return build_model(model, Options.of(MODEL, options), cache=cache)


def compile_scop(scop: Scop, **options) -> "CompiledModel":
    """Compile a SCoP (e.g. a :class:`polyc.scop.nest.LoopNest`'s) at the parameter
    values ``params``, but for the parameters in ``symbolic``, which the code takes at
    run time (read from the array shapes that name them); its ``run`` returns every
    array's final value. ``autoselect`` chooses among several schedules
    (:mod:`polyc.autoselect`): ``"model"`` the cheapest by a cost model, ``"measure"``
    the fastest on seeded inputs. The options (:class:`polyc.options.Options`), with
    their defaults for loop nests:

"""
    options = Options.of(NEST, options)
    values = check_values(scop, options.params, options.symbolic or ())  # name a missing one
    options = replace(options, params=values or None)
    measure = options.autoselect == "measure"
    if measure:
        options = replace(options, autoselect=None)

    def compile_with(scheduler: str, tile: bool) -> CompiledModel:
        chosen = replace(options, scheduler=scheduler, tile=tile)
        compilation = lower_scop(scop, chosen, _Stages())
        return CompiledModel(native_code(compilation), compilation).loaded()

    if measure:
        if options.symbolic:
            raise PolycError("autoselect='measure' runs the code at the parameters' values: "
                             "keep no parameter symbolic")
        from polyc.autoselect import measured
        return measured(compile_with, options.scheduler, options.tile)
    return compile_with(options.scheduler, options.tile)


build.__doc__ += describe(MODEL)
compile_scop.__doc__ += describe(NEST)


def build_model(model, options: Options, *, cache: bool | None = None) -> "CompiledModel":
    """``model`` compiled with ``options`` to native code, or read from the compile cache
    (:mod:`polyc.cache`; ``cache`` as for :func:`build`), not yet loaded. ONNX models
    only: a core :class:`Graph` is compiled, never cached."""
    from polyc import cache as compile_cache

    source = None if isinstance(model, Graph) else model
    store = compile_cache.open_cache(cache) if source is not None else None
    key = compile_cache.model_key(model, options.as_dict(), store.files) \
        if store is not None else None
    if key is not None:
        start = time.perf_counter()
        entry = store.entry(key)
        found = entry.load()
        if found is not None:
            seconds = time.perf_counter() - start
            config.log(config.STAGES, f"polyc: {'cache':<12} {seconds * 1e3:9.2f} ms "
                                      f"(entry {key[:16]})")
            return CompiledModel(replace(found, times=(("cache", seconds),)),
                                 source=source, options=options, entry=entry)
    with progress.compile_progress(_description(model)):
        compilation = lower(model, options)
        built = native_code(compilation)
    entry = store.store(key, built, _description(model)) if key is not None else None
    return CompiledModel(built, compilation, source=source, options=options, entry=entry)


def native_code(compilation: Compilation) -> "NativeProgram":
    """LLVM, once: ``compilation``'s IR optimised and emitted as one object file."""
    from polyc.runtime.native import NativeProgram, emit_object

    progress.stage("LLVM (O3, object)")
    code = emit_object(compilation.llvm_ir, compilation.manifest)
    times = (("optimize", code.seconds["parse"] + code.seconds["optimize"]),
             ("object", code.seconds["object"]))
    for name, seconds in times:
        config.log(config.STAGES, f"polyc: {name:<12} {seconds * 1e3:9.2f} ms")
    return NativeProgram(code, compilation.manifest, compilation.constants, times)


def _description(model) -> str:
    if isinstance(model, (str, os.PathLike)):
        return str(model)
    name = getattr(getattr(model, "graph", None), "name", "")
    return f"model '{name}'" if name else "a model"


class CompiledModel:
    """A model compiled in process: run it, report on it, inspect it, save it, profile it.

    Read from the compile cache, it has no :class:`Compilation` until one is asked for
    (``compilation``, ``schedule``, ``report()``, ``inspect()``, ``profile()``): the
    model is then lowered again, which runs every stage but LLVM."""

    def __init__(self, native: "NativeProgram", compilation: Compilation | None = None, *,
                 source=None, options: Options | None = None, entry=None):
        self.native, self._compilation = native, compilation
        self._source = source  # the ONNX model given (path, bytes, ModelProto), if any
        self._options = options if compilation is None else compilation.options
        self._entry = entry  # its compile cache entry, if any
        self._cached = compilation is None
        self._jit = None
        self._load_seconds = 0.0
        self._profiled = None

    def loaded(self) -> "CompiledModel":
        """This model with its code loaded into the process (MCJIT); returns itself."""
        if self._jit is None:
            from polyc.runtime.jit import JitModule

            start = time.perf_counter()
            self._jit = JitModule.from_object(self.native.code, self.native.manifest,
                                              self.native.constants)
            self._load_seconds = time.perf_counter() - start
            config.log(config.STAGES, f"polyc: {'load':<12} {self._load_seconds * 1e3:9.2f} ms")
            if self.options.profile:
                self._profiled = self._jit
        return self

    @property
    def options(self) -> Options:
        return self._options

    @property
    def cached(self) -> bool:
        """Whether the code was read from the compile cache."""
        return self._cached

    @property
    def compilation(self) -> Compilation:
        """Every stage's result (lowered again if the code came from the cache)."""
        if self._compilation is None:
            self._compilation = lower(self._source, self._options)
        return self._compilation

    def with_decisions(self, *notes: str) -> "CompiledModel":
        """This model with ``notes`` after its schedule's decisions (a choice made once
        it was compiled: :mod:`polyc.autoselect`); returns itself."""
        compilation = self.compilation
        scheduled = replace(compilation.schedule,
                            decisions=compilation.schedule.decisions + notes)
        self._compilation = replace(compilation, schedule=scheduled)
        return self

    @property
    def manifest(self) -> dict[str, Any]:
        return self.native.manifest

    @property
    def schedule(self) -> ScheduleResult:
        return self.compilation.schedule

    @property
    def inputs(self):
        return self.loaded()._jit.inputs

    @property
    def outputs(self):
        return self.loaded()._jit.outputs

    def run(self, inputs: Mapping[str, Any], out: Mapping[str, Any] | None = None) -> dict:
        """Run on ``{input name: numpy array}``; returns ``{output name: array}``.
        ``out`` gives buffers to write outputs into, without allocation or copy (a loop
        nest's arrays then update in place): :meth:`polyc.runtime.abi.Runner.run`."""
        return self.loaded()._jit.run(inputs, out)

    def save(self, path) -> None:
        """Write an ahead-of-time shared library that loads with numpy and ctypes only:
        the object file the JIT runs, linked (or the cache entry's artifact, copied)."""
        from polyc.runtime.aot import write_artifact
        from polyc.runtime.output import check_target, replacing

        def write(target):
            return write_artifact(self.native.code, self.manifest, target,
                                  self.native.constants, reads=(self._source,))

        if self._entry is None:
            write(path)
            return
        check_target(path, reads=(self._source,))
        try:
            made = self._entry.artifact(write)
        except (OSError, PolycError):  # the entry went or cannot be written: link directly
            write(path)
            return
        with replacing(path, reads=(self._source,)) as partial:
            shutil.copyfile(made, partial)

    def report(self) -> str:
        from polyc.report import compile_report

        times = list(self.native.times)
        if self._jit is not None:
            times.append(("load", self._load_seconds))
        return compile_report(self.compilation, times, cached=self.cached)

    def inspect(self) -> str:
        from polyc.report import inspect_text
        return inspect_text(self.compilation)

    def profile(self, inputs: Mapping[str, Any], repeat: int = 10, *,
                onnxruntime: bool = True):
        """Where the time of a call goes: ``repeat`` runs of a build of this program with
        timers around each loop nest (compiled once, on first use, unless this model
        was compiled with ``profile=True``), as a
        :class:`polyc.runtime.profile.Profile` whose ``str`` is a table sorted by time.
        With ``onnxruntime`` (and onnxruntime installed) each row also gives
        onnxruntime's own time for the same ONNX nodes, from its profiler, on as many
        threads as this model's ``threads`` (its default when None)."""
        from polyc.runtime.profile import onnxruntime_times

        if self._profiled is None:
            timed = self.compilation.profiled()
            self._profiled = CompiledModel(native_code(timed), timed).loaded()._jit
        reference = None
        if onnxruntime and self._source is not None:
            reference = onnxruntime_times(self._source, inputs, repeat,
                                          self.compilation.options.threads)
        return self._profiled.profile(inputs, repeat, reference)


__all__ = ["Options", "Compilation", "CompiledModel", "build", "compile_model", "compile_scop",
           "lower", "lower_scop", "PolycError"]
