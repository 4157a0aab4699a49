"""In-process compilation with LLVM's MCJIT.

:class:`JitModule` turns the code generator's LLVM IR and manifest into a callable
model. It owns the execution engine, the module and the target machine together:
none of them may be garbage-collected while the function pointer is in use.
"""

from __future__ import annotations

import ctypes.util
import functools
import itertools
import time
from collections.abc import Mapping

import llvmlite.binding as llvm
import numpy as np

from polyc import config
from polyc.codegen import target
from polyc.errors import CodegenError
from polyc.runtime import abi, openmp

# Shared libraries generated code may call into: libm (expf, tanhf, ...) and the
# OpenMP runtime of parallel loops (GOMP_parallel, omp_get_thread_num, ...).
RUNTIME_LIBRARIES = ("m", "gomp")
CONSTANT_ALIGNMENT = 64  # as the code generator declares them
_modules = itertools.count()  # JIT symbols are process-wide: a suffix per module


@functools.cache
def load_runtime_libraries() -> tuple[str, ...]:
    """Make libm and libgomp symbols visible to MCJIT, once per process; libgomp is
    loaded first with polyc's wait policy (:func:`polyc.runtime.openmp.load_libgomp`).

    Returns the libraries loaded. A library that cannot be found is skipped here;
    code that needs it then fails to link with a ``CodegenError`` naming the symbol.
    """
    openmp.load_libgomp()
    loaded = []
    for name in RUNTIME_LIBRARIES:
        path = ctypes.util.find_library(name)
        if path is None:
            continue
        try:
            llvm.load_library_permanently(path)
        except RuntimeError:
            continue
        loaded.append(path)
    return tuple(loaded)


def check_symbols(module: llvm.ModuleRef) -> None:
    """Raise ``CodegenError`` naming any external function the process cannot provide.

    MCJIT aborts the whole process on an unresolved symbol, so look first.
    """
    missing = [f.name for f in module.functions
               if f.is_declaration and not f.name.startswith("llvm.")
               and not llvm.address_of_symbol(f.name)]
    if missing:
        raise CodegenError(f"generated code calls {', '.join(missing)}, "
                           "which no loaded library defines")


def bind_constants(module: llvm.ModuleRef, constants: Mapping[str, np.ndarray]
                   ) -> list[np.ndarray]:
    """Define the module's external constants (``{symbol: value}``) as aligned copies of
    their values, under symbols of this module alone; return the buffers, which must
    outlive the code. Raise ``CodegenError`` for a declaration without a value (MCJIT
    would abort the process)."""
    suffix = next(_modules)
    buffers = []
    for variable in module.global_variables:
        if not variable.is_declaration:
            continue
        if variable.name not in constants:
            raise CodegenError(f"generated code reads the global {variable.name}, "
                               "whose value was not given")
        value = constants[variable.name]
        buffer = abi.aligned_empty(value.nbytes, CONSTANT_ALIGNMENT)
        buffer[:] = value.reshape(-1).view(np.uint8)
        variable.name = f"{variable.name}.{suffix}"
        llvm.add_symbol(variable.name, buffer.ctypes.data)
        buffers.append(buffer)
    return buffers


class JitModule(abi.Runner):
    """A model compiled in process: ``JitModule(llvm_ir, manifest, constants).run({name:
    array})``; ``constants`` gives the values of the module's external constants.

    ``optimized_ir`` is the module's text after O3 (printed at ``POLYC_DEBUG=4``);
    ``seconds`` maps ``parse``, ``optimize`` and ``codegen`` to the time each took.
    """

    def __init__(self, llvm_ir: str, manifest: Mapping,
                 constants: Mapping[str, np.ndarray] | None = None):
        try:
            abi.check_manifest(manifest)
        except (TypeError, ValueError) as error:
            raise CodegenError(f"the code generator produced a bad manifest: {error}") from None
        load_runtime_libraries()
        entry = manifest["entry"]
        clock = time.perf_counter()
        tm = target.host_target_machine(jit=True)
        module = target.parse(llvm_ir, tm)
        target.require_function(module, entry)
        parsed = time.perf_counter()
        target.optimize(module, tm)
        self.optimized_ir = str(module)
        optimized = time.perf_counter()
        config.log_section(config.LLVM, "LLVM IR after O3", self.optimized_ir)
        check_symbols(module)
        self._constants = bind_constants(module, constants or {})
        # The engine takes ownership of both the module and the target machine.
        self._engine = self._create_engine(module, tm)
        self._module, self._target_machine = module, tm
        address = self._engine.get_function_address(entry)
        if not address:
            raise CodegenError(f"MCJIT found no address for @{entry}")
        self.seconds = {"parse": parsed - clock, "optimize": optimized - parsed,
                        "codegen": time.perf_counter() - optimized}
        try:
            super().__init__(manifest, address, self._engine.get_function_address)
        except ValueError as error:
            raise CodegenError(f"the compiled module does not fit its manifest: {error}") \
                from None

    @staticmethod
    def _create_engine(module: llvm.ModuleRef, tm: llvm.TargetMachine) -> llvm.ExecutionEngine:
        try:
            engine = llvm.create_mcjit_compiler(module, tm)
            engine.finalize_object()
        except RuntimeError as error:
            raise CodegenError(f"MCJIT failed: {target.llvm_message(error)}") from None
        return engine

    @property
    def compile_seconds(self) -> float:
        """Total time from LLVM IR text to a callable function."""
        return sum(self.seconds.values())
