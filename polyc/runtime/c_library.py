"""A C kernel compiled by polyc, as a drop-in replacement of its function: a shared
library (``.so``) or relocatable object (``.o``) that defines the kernel's function
with its C signature, non-static, to link in place of the original.

The function is a small C wrapper, compiled by the system C compiler: when the int
parameters have the values polyc compiled for, it calls polyc's code on the caller's
arrays (in place; scalars by address, the kernel's local temporaries in memory of its
own); other values run the original function's body, compiled with it (``-O3
-march=native``), so a call is never wrong. The source's typedefs come along; the
body may call the C library's math functions and nothing else of its file.
"""

from __future__ import annotations

import copy
import os
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from pycparser import c_ast, c_generator

from polyc import config
from polyc.errors import CSourceError, OutputError
from polyc.runtime.aot import constants_assembly, link_shared
from polyc.runtime.output import check_target, replacing
from polyc.scop.c import CKernel

FALLBACK_FLAGS = ("-O3", "-march=native", "-fPIC")
_C_TYPES = {"float64": "double", "float32": "float", "int32": "int", "int64": "long",
            "int8": "signed char", "uint8": "unsigned char", "int16": "short",
            "uint16": "unsigned short", "uint32": "unsigned int", "uint64": "unsigned long"}


def wrapper_source(kernel: CKernel, native, values: dict[str, int]) -> str:
    """The C of the kernel's function: polyc's code at ``values``, else the original.
    ``native`` is the compiled program (its manifest orders the entry's arguments)."""
    function = kernel.kernel.function
    generator = c_generator.CGenerator()
    original = copy.deepcopy(function)
    original.decl.storage = ["static"]
    original.decl.funcspec = []
    _rename(original.decl, "polyc_original")
    public = copy.deepcopy(function.decl)
    public.storage = [s for s in public.storage if s not in ("static", "extern")]
    public.funcspec = []
    manifest = native.manifest
    entries = [*manifest["inputs"], *manifest["outputs"]]
    params = {v.name: v for v in kernel.kernel.parameters}
    locals_, args, frees = [], [], []
    for entry in entries:
        name, shape, dtype = entry["name"], entry["shape"], entry["dtype"]
        c_type = _C_TYPES[dtype]
        if name in params:
            args.append(f"(void *) {name}" if params[name].is_array else f"(void *) &{name}")
        elif shape:
            count = 1
            for extent in shape:
                count *= extent
            locals_.append(f"  {c_type} *{name} = calloc({count}, sizeof({c_type}));")
            frees.append(name)
            args.append(f"(void *) {name}")
        else:
            locals_.append(f"  {c_type} {name} = 0;")
            args.append(f"(void *) &{name}")
    scratch = int(manifest["scratch_bytes"])
    call_args = ", ".join([*args, "scratch"])
    entry_args = ", ".join(["void *"] * (len(args) + 1))
    condition = " && ".join(f"{p} == {v}" for p, v in values.items()) or "1"
    forwarded = ", ".join(v.name for v in kernel.kernel.parameters)
    typedefs = [generator.visit(ext) + ";" for ext in kernel.kernel.tree.ext
                if isinstance(ext, c_ast.Typedef) and ext.coord is not None
                and ext.coord.file == kernel.file]
    lines = [
        f"/* {kernel.name} from {kernel.file}: polyc's code for "
        f"{', '.join(f'{p}={v}' for p, v in values.items()) or 'its loops'}; other values",
        "   run the original loops. Written by polyc. */",
        "#include <math.h>", "#include <stdlib.h>", "",
        *typedefs,
        f"void {manifest['entry']}({entry_args});", "",
        generator.visit(original), "",
        generator.visit(public),
        "{",
        f"  if ({condition}) {{",
        *["  " + line for line in locals_],
        f"    void *scratch = {_allocation(scratch)};",
        f"    {manifest['entry']}({call_args});",
        *[f"    free({name});" for name in frees],
        "    free(scratch);",
        "    return;",
        "  }",
        f"  polyc_original({forwarded});",
        "}", "",
    ]
    return "\n".join(lines)


def _allocation(size: int) -> str:
    if size == 0:
        return "NULL"
    rounded = (size + 63) // 64 * 64
    return f"aligned_alloc(64, {rounded})"


def _rename(decl: c_ast.Decl, name: str) -> None:
    decl.name = name
    node = decl.type
    while not isinstance(node, c_ast.TypeDecl):
        node = node.type
    node.declname = name


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
    paths = []
    if constants:
        assembly = tmp / "constants.s"
        assembly.write_text(constants_assembly(constants, tmp))
        _run([config.c_compiler(), "-c", str(assembly), "-o", str(tmp / "constants.o")],
             "assembling the constants")
        paths.append(str(tmp / "constants.o"))
    for k, data in enumerate(objects):
        paths.append(str(tmp / f"part{k}.o"))
        Path(paths[-1]).write_bytes(data)
    merged = tmp / "merged.o"
    _run([config.c_compiler(), "-r", "-nostdlib", "-o", str(merged), *paths],
         "merging the objects")
    _run(["objcopy", f"--keep-global-symbol={keep}", str(merged), str(path)],
         "hiding polyc's symbols")


def _run(command: list[str], what: str) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as error:
        raise OutputError(f"{what}: cannot run {command[0]} ({error.strerror})") from None
    if done.returncode != 0:
        message = " | ".join((done.stderr or done.stdout).strip().splitlines()[:6])
        raise CSourceError(f"{what} failed ({command[0]} exit {done.returncode}): {message}")
