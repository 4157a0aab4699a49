"""A C kernel compiled by polyc, as a drop-in replacement of its function: a shared
library (``.so``) or relocatable object (``.o``) that defines the kernel's function
with its C signature, non-static, to link in place of the original.

The function is the original one, compiled by the system C compiler (``-O3
-march=native``), with its SCoP replaced: when the int parameters have the values
polyc compiled for, it calls polyc's code on the SCoP's arrays and scalars (in place,
scalars by address; locals and parameters are in scope there, globals are declared
``extern``), and other values run the SCoP's original statements, so a call is never
wrong and what the function does before and after its SCoP still happens. The
source's typedefs come along; the function may call the C library and nothing else
of its file.
"""

from __future__ import annotations

import copy
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from pycparser import c_ast

from polyc import config
from polyc.errors import CSourceError, OutputError
from polyc.runtime.aot import constants_assembly, link_shared, object_files, run_tool
from polyc.runtime.output import check_target, replacing
from polyc.scop.c import CKernel
from polyc.scop.c.kernel import as_c, scop_span

FALLBACK_FLAGS = ("-O3", "-march=native", "-fPIC")
_MARKER = "polyc_scop_goes_here"


def wrapper_source(kernel: CKernel, native, values: dict[str, int]) -> str:
    """The C of the kernel's function: its own body, but for the SCoP, which runs
    polyc's code when the parameters have ``values`` and the original statements
    otherwise. ``native`` is the compiled program (its manifest orders the entry's
    arguments: every array and scalar of the SCoP, by name, in scope there)."""
    function = copy.deepcopy(kernel.kernel.function)
    function.decl.storage = [s for s in function.decl.storage if s not in ("static", "extern")]
    function.decl.funcspec = []
    block, start, end = scop_span(function)
    scop = c_ast.Compound(block.block_items[start:end])
    block.block_items[start:end] = [c_ast.ID(_MARKER)]
    manifest = native.manifest
    names = [entry["name"] for entry in [*manifest["inputs"], *manifest["outputs"]]]
    variables = kernel.kernel.variables
    externs = []
    args = []
    for name in names:
        variable = variables.get(name)
        if variable is None:
            raise CSourceError(f"{kernel.file}: polyc's code for {kernel.name} takes {name}, "
                               "which the function does not declare")
        if variable.global_:
            if "static" in variable.decl.storage:
                raise CSourceError(f"{kernel.file}: {kernel.name}'s SCoP uses the static "
                                   f"variable {name}, which a library cannot reach")
            decl = copy.deepcopy(variable.decl)
            decl.storage, decl.init = ["extern"], None
            externs.append(as_c(decl) + ";")
        args.append(f"(void *) {name}" if variable.is_array else f"(void *) &{name}")
    condition = " && ".join(f"{p} == {v}" for p, v in values.items()) or "1"
    call = ", ".join([*args, "polyc_scratch"])
    polyc_block = "\n".join([
        f"if ({condition}) {{  /* polyc's code, compiled for these values */",
        f"  void *polyc_scratch = {_allocation(int(manifest['scratch_bytes']))};",
        f"  {manifest['entry']}({call});",
        "  free(polyc_scratch);",
        "} else " + as_c(scop).rstrip(),
    ])
    body = as_c(function).replace(f"{_MARKER};", polyc_block, 1)
    typedefs = [as_c(ext) + ";" for ext in kernel.kernel.tree.ext
                if isinstance(ext, c_ast.Typedef) and ext.coord is not None
                and ext.coord.file == kernel.file]
    entry_args = ", ".join(["void *"] * (len(args) + 1))
    return "\n".join([
        f"/* {kernel.name} from {kernel.file}: polyc's code for "
        f"{', '.join(f'{p}={v}' for p, v in values.items()) or 'its loops'}; other values",
        "   run the original loops. Written by polyc. */",
        "#include <math.h>", "#include <stdio.h>", "#include <stdlib.h>",
        "#include <string.h>", "",
        *typedefs, *externs,
        f"void {manifest['entry']}({entry_args});", "",
        body, "",
    ])


def _allocation(size: int) -> str:
    if size == 0:
        return "NULL"
    rounded = (size + 63) // 64 * 64
    return f"aligned_alloc(64, {rounded})"


def c_library(kernel: CKernel, path: str | os.PathLike, *, params=None, reads: Iterable = (),
              **options) -> Path:
    """Compile ``kernel`` at its parameters' values (``params`` over the defaults; one
    thread unless ``threads`` says otherwise) and write its drop-in library ``path``."""
    values = kernel.values(params)
    options.setdefault("threads", 1)
    compiled = kernel.compile(params=values, **options)
    return write_c_library(kernel, compiled.native, values, path, reads=reads)


def write_c_library(kernel: CKernel, native, values: dict[str, int],
                    path: str | os.PathLike, *, reads: Iterable = ()) -> Path:
    """Write the drop-in library ``path`` (``.o``: a relocatable object whose only
    global symbol is the kernel's function; else a shared library)."""
    path = check_target(path, reads=reads)
    compiler = config.c_compiler()
    with tempfile.TemporaryDirectory(prefix="polyc-c-") as tmp:
        source = Path(tmp, "wrapper.c")
        source.write_text(wrapper_source(kernel, native, values))
        wrapper = Path(tmp, "wrapper.o")
        _run([compiler, *FALLBACK_FLAGS, "-c", str(source), "-o", str(wrapper)],
             f"compiling the wrapper of {kernel.name}")
        objects = [*native.code.objects, wrapper.read_bytes()]
        with replacing(path, reads=reads) as partial:
            if path.suffix == ".o":
                _relocatable(objects, native.constants, Path(partial), kernel.name, Path(tmp))
            else:
                link_shared(objects, Path(partial), native.constants, name=path.name)
    return path


def _relocatable(objects: Sequence[bytes], constants, path: Path, keep: str, tmp: Path
                 ) -> None:
    paths = object_files(objects, tmp)
    if constants:
        assembly = tmp / "constants.s"
        assembly.write_text(constants_assembly(constants, tmp))
        _run([config.c_compiler(), "-c", str(assembly), "-o", str(tmp / "constants.o")],
             "assembling the constants")
        paths.append(str(tmp / "constants.o"))
    merged = tmp / "merged.o"
    _run([config.c_compiler(), "-r", "-nostdlib", "-o", str(merged), *paths],
         "merging the objects")
    _run(["objcopy", f"--keep-global-symbol={keep}", str(merged), str(path)],
         "hiding polyc's symbols")


def _run(command: list[str], what: str) -> None:
    try:
        run_tool(command, what, CSourceError)
    except OSError as error:
        raise OutputError(f"{what}: cannot run {command[0]} ({error.strerror})") from None
