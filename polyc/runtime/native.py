"""Native code: the code generator's LLVM IR as optimised object files.

LLVM runs once per compile (:func:`emit_object`): O3 for the host CPU, then
position-independent ELF objects, the first of which defines the entry function and
``const char *polyc_manifest(void)``: one object, or for a large module one per unit
compiled on a core of its own (:mod:`polyc.runtime.units`). The same bytes serve both
ways of running them: the in-process model loads them into MCJIT
(:class:`polyc.runtime.jit.JitModule`), an artifact links them into a shared library
(:mod:`polyc.runtime.aot`), and the compile cache (:mod:`polyc.cache`) keeps them.

The model's constants stay outside the object, as external symbols read through the
GOT: MCJIT binds them to numpy buffers anywhere in memory, and the static linker turns
an artifact's GOT loads into direct addresses (its constants are hidden symbols of the
library).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from polyc import config, workers
from polyc.codegen import target
from polyc.errors import CodegenError
from polyc.runtime import units

MANIFEST_FUNCTION = "polyc_manifest"
# Units per core of a large module, compiled as many at once as there are cores, the
# largest first: one unit per core waited for the slowest (densenet121's four modules
# of nests, about equal in size: O3 and objects 8.8 s on 2 cores, 12.3 s on one)
UNITS_PER_JOB = 4


@dataclass(frozen=True)
class NativeCode:
    """Object files and what loading them needs: the external symbols they call or read
    (functions from libm and libgomp, and the constants), and the time each LLVM step
    took (``parse``, ``optimize``, ``object``: wall-clock, units compiled together).
    ``optimized_ir`` is the modules' text after O3 when it was asked for (``keep_ir``).
    The first object defines the entry; a module of several units
    (:mod:`polyc.runtime.units`) has an object per unit, which only link together."""

    objects: tuple[bytes, ...]
    functions: tuple[str, ...]  # external functions the code calls
    constants: tuple[str, ...]  # external data the code reads (the model's constants)
    seconds: Mapping[str, float] = field(default_factory=dict)
    optimized_ir: str | None = None


@dataclass(frozen=True)
class NativeProgram:
    """A compiled program: its object file, manifest and constants (by symbol), and
    what making it took (``(stage, seconds)``); what the compile cache stores."""

    code: NativeCode
    manifest: Mapping[str, Any]
    constants: Mapping[str, np.ndarray]
    times: tuple[tuple[str, float], ...] = ()


def manifest_ir(manifest: Mapping) -> str:
    """LLVM IR of ``const char *polyc_manifest(void)`` returning ``manifest`` as JSON."""
    data = json.dumps(manifest).encode("utf-8") + b"\0"
    module = ir.Module(name=MANIFEST_FUNCTION)
    text_type = ir.ArrayType(ir.IntType(8), len(data))
    text = ir.GlobalVariable(module, text_type, name=f"{MANIFEST_FUNCTION}_json")
    text.global_constant = True
    text.linkage = "private"
    text.initializer = ir.Constant(text_type, bytearray(data))
    function = ir.Function(module, ir.FunctionType(ir.PointerType(), []), MANIFEST_FUNCTION)
    ir.IRBuilder(function.append_basic_block("entry")).ret(text)
    return str(module)


def emit_object(llvm_ir: str, manifest: Mapping, *, keep_ir: bool = False) -> NativeCode:
    """Optimise ``llvm_ir`` (O3, host CPU) and emit PIC objects, ``polyc_manifest`` in the
    first: one per unit of :func:`polyc.runtime.units.split`, on as many processes
    (:mod:`polyc.workers`)."""
    clock = time.perf_counter()
    jobs = workers.jobs()
    texts = units.split(llvm_ir, jobs * UNITS_PER_JOB if jobs > 1 else 1)
    calls = [functools.partial(_unit_object, text, manifest if k == 0 else None, keep_ir)
             for k, text in enumerate(texts)]
    order = sorted(range(len(texts)), key=lambda k: -len(texts[k]))  # largest first
    done = workers.run_queued([calls[k] for k in order], "LLVM")
    parts = [done[order.index(k)] for k in range(len(texts))]
    defined = set().union(*(part.defined for part in parts))
    functions = sorted({f for part in parts for f in part.functions} - defined)
    constants = sorted({c for part in parts for c in part.constants})
    texts = [part.text for part in parts]
    text = None if None in texts else "\n".join(texts)
    if text is not None:
        config.log_section(config.LLVM, "LLVM IR after O3", text)
    wall = time.perf_counter() - clock
    parse, optimize = (max(part.seconds[k] for part in parts) for k in ("parse", "optimize"))
    seconds = {"parse": parse, "optimize": optimize, "object": max(wall - parse - optimize, 0.0)}
    return NativeCode(tuple(part.object for part in parts), tuple(functions), tuple(constants),
                      seconds, text)


@dataclass(frozen=True)
class _Unit:
    """One unit's object file, the functions it defines and the external symbols it
    uses, its optimised IR (if kept) and the time of each step."""

    object: bytes
    defined: frozenset[str]
    functions: tuple[str, ...]
    constants: tuple[str, ...]
    text: str | None
    seconds: Mapping[str, float]


def _unit_object(llvm_ir: str, manifest: Mapping | None, keep_ir: bool) -> _Unit:
    """One unit optimised and emitted; with ``manifest``, the entry's unit, which gets
    ``polyc_manifest``."""
    clock = time.perf_counter()
    tm = target.host_target_machine(reloc="pic")
    module = target.parse(llvm_ir, tm)
    if manifest is not None:
        target.require_function(module, manifest["entry"])
    parsed = time.perf_counter()
    target.optimize(module, tm)
    optimized = time.perf_counter()
    text = str(module) if keep_ir or config.debug_level() >= config.LLVM else None
    functions = tuple(f.name for f in module.functions
                      if f.is_declaration and not f.name.startswith("llvm."))
    defined = frozenset(f.name for f in module.functions if not f.is_declaration)
    constants = tuple(v.name for v in module.global_variables if v.is_declaration)
    if manifest is not None:
        try:
            module.link_in(target.parse(manifest_ir(manifest), tm))
        except RuntimeError as error:
            raise CodegenError(f"cannot link the manifest in: "
                               f"{target.llvm_message(error)}") from None
    try:
        data = tm.emit_object(module)
    except RuntimeError as error:
        raise CodegenError(f"LLVM could not emit code: {target.llvm_message(error)}") from None
    seconds = {"parse": parsed - clock, "optimize": optimized - parsed,
               "object": time.perf_counter() - optimized}
    return _Unit(data, defined, functions, constants, text, seconds)


def missing_functions(code: NativeCode) -> list[str]:
    """The external functions ``code`` calls that no library of this process defines."""
    return [name for name in code.functions if not llvm.address_of_symbol(name)]
