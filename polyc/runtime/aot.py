"""Ahead-of-time artifacts: one shared library that carries its own manifest.

:func:`write_artifact` takes the object file of :func:`polyc.runtime.native.emit_object`
(the code generator's LLVM IR optimised for the host CPU, position-independent, with
``const char *polyc_manifest(void)`` returning the manifest as JSON) and links it with
the system C compiler
(``$POLYC_CC -shared -o lib.so obj.o constants.s -lm -lgomp``). The model's constants
(weights) reach the library through ``constants.s``, an assembly file that defines
each constant's symbol in a read-only section as the ``.incbin`` of its bytes. The
library is then sealed with its length and checksum (:mod:`polyc.runtime.seal`). The
result loads with :func:`polyc.runtime.artifact.load_artifact`, which needs only numpy
and ctypes.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from polyc import config
from polyc.errors import CodegenError
from polyc.runtime import abi, seal
from polyc.runtime.native import NativeCode, emit_object
from polyc.runtime.output import check_target, replacing

LINK_FLAGS = ("-shared", "-Wl,-Bsymbolic", "-Wl,-z,noexecstack")
LIBRARIES = ("-lm", "-lgomp")
MESSAGE_LINES = 12


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


def link_shared(objects: Sequence[bytes], path: Path,
                constants: Mapping[str, np.ndarray] | None = None,
                *, name: str | None = None) -> None:
    """Link the ``objects`` and the ``constants`` they read (``{symbol: value}``) into
    the shared library ``path`` with the system C compiler; errors call the library
    ``name`` (default: the file's)."""
    compiler = config.c_compiler()
    with tempfile.TemporaryDirectory(prefix="polyc-") as tmp:
        paths = object_files(objects, Path(tmp))
        data_path = Path(tmp, "constants.s")
        data_path.write_text(constants_assembly(constants or {}, Path(tmp)))
        command = [compiler, *LINK_FLAGS, "-o", str(path), *paths, str(data_path),
                   *LIBRARIES]
        try:
            run_tool(command, f"linking {name or path.name}")
        except OSError as error:
            raise CodegenError(f"cannot run the C compiler '{compiler}' ({error.strerror}); "
                               "install one or set POLYC_CC") from None


def object_files(objects: Sequence[bytes], folder: Path) -> list[str]:
    """``objects`` written to ``model0.o``, ``model1.o``... in ``folder``; their paths."""
    paths = []
    for k, data in enumerate(objects):
        paths.append(str(folder / f"model{k}.o"))
        Path(paths[-1]).write_bytes(data)
    return paths


def run_tool(command: Sequence[str], what: str, error: type[Exception] = CodegenError) -> None:
    """Run a tool of the C toolchain; ``error`` (``what`` with '<tool>' failed, and the
    first lines of its messages) when it fails. A tool that cannot start raises its
    OSError (the caller says which tool is missing and how to get one)."""
    done = subprocess.run(list(command), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()[:MESSAGE_LINES]
        raise error(f"{what} with '{command[0]}' failed (exit {done.returncode}): "
                    f"{' | '.join(lines)}")


def write_artifact(code: str | NativeCode, manifest: Mapping, path: str | os.PathLike,
                   constants: Mapping[str, np.ndarray] | None = None, *,
                   reads: Iterable = ()) -> Path:
    """Write the shared library ``path`` of ``code`` (the object file of
    :func:`~polyc.runtime.native.emit_object`, or LLVM IR compiled here); return it.

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
    if isinstance(code, str):
        code = emit_object(code, manifest)
    clock = time.perf_counter()
    with replacing(path, reads=reads) as partial:
        link_shared(code.objects, partial, constants, name=path.name)
        seal.seal(partial)
    config.log(config.STAGES, f"polyc: {'aot link':<12} "
                              f"{(time.perf_counter() - clock) * 1e3:9.2f} ms")
    return path

