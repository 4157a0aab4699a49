"""Ahead-of-time artifacts: one shared library that carries its own manifest.

:func:`write_artifact` optimises the code generator's LLVM IR for the host CPU with a
position-independent target machine, links in a tiny module that defines::

    const char *polyc_manifest(void);   /* the manifest as JSON, NUL-terminated */

emits one object file and links it with the system C compiler
(``$POLYC_CC -shared -o lib.so obj.o constants.s -lm -lgomp``). The model's constants
(weights) reach the library through ``constants.s``, an assembly file that defines
each constant's symbol in a read-only section as the ``.incbin`` of its bytes. The
library is then sealed with its length and checksum (:mod:`polyc.runtime.seal`). The
result loads with :func:`polyc.runtime.artifact.load_artifact`, which needs only numpy
and ctypes.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
from llvmlite import ir

from polyc import config
from polyc.codegen import target
from polyc.errors import CodegenError
from polyc.runtime import abi, seal
from polyc.runtime.output import check_target, replacing

MANIFEST_FUNCTION = "polyc_manifest"
LINK_FLAGS = ("-shared", "-Wl,-Bsymbolic", "-Wl,-z,noexecstack")
LIBRARIES = ("-lm", "-lgomp")
MESSAGE_LINES = 12


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


def compile_object(llvm_ir: str, manifest: Mapping) -> bytes:
    """An ELF object (PIC, host CPU, O3) defining the entry function and ``polyc_manifest``."""
    tm = target.host_target_machine(reloc="pic")
    module = target.parse(llvm_ir, tm)
    target.require_function(module, manifest["entry"])
    target.optimize(module, tm)
    config.log_section(config.LLVM, "LLVM IR after O3 (AOT)", lambda: str(module))
    try:
        module.link_in(target.parse(manifest_ir(manifest), tm))
    except RuntimeError as error:
        raise CodegenError(f"cannot link the manifest in: {target.llvm_message(error)}") from None
    return tm.emit_object(module)


def constants_assembly(constants: Mapping[str, np.ndarray], folder: Path) -> str:
    """GNU assembly defining each ``{symbol: value}`` as 64-byte-aligned read-only data
    (hidden: the library's own code reads it); the bytes go to files in ``folder``."""
    lines = ['\t.section .rodata.polyc,"a",@progbits']
    for n, (symbol, value) in enumerate(constants.items()):
        data = Path(folder, f"constant{n}.bin")
        data.write_bytes(value.tobytes())
        lines += ["\t.p2align 6", f"\t.globl {symbol}", f"\t.hidden {symbol}",
                  f"\t.type {symbol}, @object", f"\t.size {symbol}, {value.nbytes}",
                  f"{symbol}:", f'\t.incbin "{data}"']
        if not value.nbytes:
            lines.append("\t.byte 0")  # a symbol of its own, not the next one's address
    lines.append('\t.section .note.GNU-stack,"",@progbits')
    return "\n".join(lines) + "\n"


def link_shared(obj: bytes, path: Path, constants: Mapping[str, np.ndarray] | None = None,
                *, name: str | None = None) -> None:
    """Link the object ``obj`` and the ``constants`` it reads (``{symbol: value}``) into
    the shared library ``path`` with the system C compiler; errors call the library
    ``name`` (default: the file's)."""
    compiler = config.c_compiler()
    with tempfile.TemporaryDirectory(prefix="polyc-") as tmp:
        obj_path = Path(tmp, "model.o")
        obj_path.write_bytes(obj)
        data_path = Path(tmp, "constants.s")
        data_path.write_text(constants_assembly(constants or {}, Path(tmp)))
        command = [compiler, *LINK_FLAGS, "-o", str(path), str(obj_path), str(data_path),
                   *LIBRARIES]
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False)
        except OSError as error:
            raise CodegenError(f"cannot run the C compiler '{compiler}' ({error.strerror}); "
                               "install one or set POLYC_CC") from None
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()[:MESSAGE_LINES]
            raise CodegenError(f"linking {name or path.name} with '{compiler}' failed "
                               f"(exit {done.returncode}): {' | '.join(lines)}")


def write_artifact(llvm_ir: str, manifest: Mapping, path: str | os.PathLike,
                   constants: Mapping[str, np.ndarray] | None = None, *,
                   reads: Iterable = ()) -> Path:
    """Compile ``llvm_ir`` for the host and write the shared library ``path``; return it.

    ``manifest`` (format ``polyc-1``, see :mod:`polyc.runtime.abi`) is embedded in the
    library, and so are the values of the module's external ``constants`` (by symbol).
    ``path`` is replaced whole or not at all, and never when it is one of ``reads``
    (the model compiled), a directory or a device (:mod:`polyc.runtime.output`).
    """
    try:
        abi.check_manifest(manifest)
    except (TypeError, ValueError) as error:
        raise CodegenError(f"bad manifest for {path}: {error}") from None
    path = check_target(path, reads=reads)
    clock = time.perf_counter()
    obj = compile_object(llvm_ir, manifest)
    compiled = time.perf_counter()
    with replacing(path, reads=reads) as partial:
        link_shared(obj, partial, constants, name=path.name)
        seal.seal(partial)
    linked = time.perf_counter()
    config.log(config.STAGES, f"polyc: {'aot object':<12} {(compiled - clock) * 1e3:9.2f} ms")
    config.log(config.STAGES, f"polyc: {'aot link':<12} {(linked - compiled) * 1e3:9.2f} ms")
    return path

