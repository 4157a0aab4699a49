"""In-process code with LLVM's MCJIT.

:class:`JitModule` loads the object file of :mod:`polyc.runtime.native` (the code
generator's LLVM IR compiled once) and the model's constants into a callable model.
It owns the execution engine, its (empty) module and the target machine together:
none of them may be garbage-collected while the function pointer is in use. MCJIT
aborts the process on a symbol it cannot resolve, so every external function and
constant is looked up first.
"""

from __future__ import annotations

import ctypes.util
import functools
import threading
import time
from collections.abc import Mapping

import llvmlite.binding as llvm
import numpy as np

from polyc.codegen import target
from polyc.errors import CodegenError
from polyc.runtime import abi, native, openmp

# Shared libraries generated code may call into: libm (expf, tanhf, ...) and the
# OpenMP runtime of parallel loops (GOMP_parallel, omp_get_thread_num, ...).
RUNTIME_LIBRARIES = ("m", "gomp")
CONSTANT_ALIGNMENT = 64  # as the code generator declares them


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


def bind_constants(names, constants: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Register each external constant ``names`` reads as an aligned copy of its value
    (``constants``: ``{symbol: value}``), or as the value itself when it is read-only and
    aligned, for the next object MCJIT finalizes; return the buffers, which must outlive
    the code. Raise ``CodegenError`` for a constant without
    a value (MCJIT would abort the process)."""
    buffers = []
    for name in names:
        if name not in constants:
            raise CodegenError(f"generated code reads the global {name}, "
                               "whose value was not given")
        value = constants[name]
        if _usable_as_is(value):  # e.g. the compile cache's memory map of its entry
            buffer = value
        else:
            buffer = abi.aligned_empty(value.nbytes, CONSTANT_ALIGNMENT)
            buffer[:] = value.reshape(-1).view(np.uint8)
        llvm.add_symbol(name, buffer.ctypes.data)
        buffers.append(buffer)
    return buffers


def _usable_as_is(value: np.ndarray) -> bool:
    """Whether the code may read ``value``'s memory itself: read-only (nothing writes it
    later), contiguous and aligned as the code generator declares constants."""
    return (not value.flags.writeable and value.flags.c_contiguous and value.nbytes > 0
            and value.ctypes.data % CONSTANT_ALIGNMENT == 0)


class JitModule(abi.Runner):
    """A model compiled in process: ``JitModule(llvm_ir, manifest, constants).run({name:
    array})``; ``constants`` gives the values of the module's external constants.
    :meth:`from_object` loads the object file of :func:`polyc.runtime.native.emit_object`
    (compiled once, or read from the compile cache) instead.

    ``optimized_ir`` is the module's text after O3 (built from IR; printed at
    ``POLYC_DEBUG=4``); ``seconds`` maps ``parse``, ``optimize``, ``object`` and
    ``load`` to the time each took.
    """

    def __init__(self, llvm_ir: str, manifest: Mapping,
                 constants: Mapping[str, np.ndarray] | None = None):
        _check(manifest)
        code = native.emit_object(llvm_ir, manifest, keep_ir=True)
        self._load(code, manifest, constants)

    @classmethod
    def from_object(cls, code: native.NativeCode, manifest: Mapping,
                    constants: Mapping[str, np.ndarray] | None = None) -> "JitModule":
        _check(manifest)
        module = cls.__new__(cls)
        module._load(code, manifest, constants)
        return module

    def _load(self, code: native.NativeCode, manifest: Mapping,
              constants: Mapping[str, np.ndarray] | None) -> None:
        load_runtime_libraries()
        clock = time.perf_counter()
        missing = native.missing_functions(code)
        if missing:
            raise CodegenError(f"generated code calls {', '.join(missing)}, "
                               "which no loaded library defines")
        self.code = code
        tm = target.host_target_machine(jit=True)
        empty = llvm.parse_assembly("")
        empty.triple = tm.triple
        # The engine takes ownership of both the module and the target machine.
        self._engine = llvm.create_mcjit_compiler(empty, tm)
        self._module, self._target_machine = empty, tm
        with _BINDING:  # constant symbols are process-wide until the object is linked
            self._constants = bind_constants(code.constants, constants or {})
            try:
                for data in code.objects:
                    self._engine.add_object_file(llvm.ObjectFileRef.from_data(data))
                self._engine.finalize_object()
            except RuntimeError as error:
                raise CodegenError(f"MCJIT failed: {target.llvm_message(error)}") from None
        entry = manifest["entry"]
        address = self._engine.get_function_address(entry)
        if not address:
            raise CodegenError(f"MCJIT found no address for @{entry}")
        self.seconds = {**code.seconds, "load": time.perf_counter() - clock}
        try:
            super().__init__(manifest, address, self._engine.get_function_address)
        except ValueError as error:
            raise CodegenError(f"the compiled module does not fit its manifest: {error}") \
                from None

    @property
    def optimized_ir(self) -> str | None:
        return self.code.optimized_ir

    @property
    def compile_seconds(self) -> float:
        """Total time from LLVM IR text to a callable function."""
        return sum(self.seconds.values())


_BINDING = threading.Lock()


def _check(manifest: Mapping) -> None:
    try:
        abi.check_manifest(manifest)
    except (TypeError, ValueError) as error:
        raise CodegenError(f"the code generator produced a bad manifest: {error}") from None
