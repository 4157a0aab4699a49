"""C source -> preprocessed text and pycparser's syntax tree.

Macros are resolved by the system C compiler's preprocessor (``cc -E``, with the
``-D`` and ``-I`` flags given), as Pluto's polycc does; its line markers keep each
construct's file and line for messages. The C library's headers are replaced by
polyc's stand-ins (``include/``: the declarations a kernel's file uses, without the
compiler extensions of the real ones that pycparser cannot read); they come first on
the include path, so other headers are still found.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from pycparser import c_ast, c_parser

from polyc import config
from polyc.errors import CSourceError

INCLUDE = Path(__file__).resolve().parent / "include"
# GNU spellings a user header may still contain, read as nothing (or their C99 names)
_EXTENSIONS = ("-D__attribute__(x)=", "-D__extension__=", "-D__restrict=restrict",
               "-D__inline=inline", "-D__inline__=inline", "-D__asm__(x)=",
               "-D__restrict__=restrict", "-D__const=const")
TIMEOUT_SECONDS = 60


def parse_c(text: str, name: str, *, directory: Path | None = None,
            defines: Sequence[str] = (), includes: Sequence[str | Path] = (),
            cc: str | None = None) -> c_ast.FileAST:
    """The syntax tree of the C source ``text`` (named ``name`` in messages; its
    ``#include "..."`` files are looked for in ``directory``) after preprocessing."""
    return parse_preprocessed(preprocess(text, name, directory=directory, defines=defines,
                                         includes=includes, cc=cc), name)


def preprocess(text: str, name: str, *, directory: Path | None = None,
               defines: Sequence[str] = (), includes: Sequence[str | Path] = (),
               cc: str | None = None) -> str:
    compiler = cc or config.c_compiler()
    found = shutil.which(compiler)
    if found is None:
        raise CSourceError(f"{name}: no C compiler {compiler!r} on the PATH: polyc resolves "
                           "a C source's macros and includes with its preprocessor (cc -E); "
                           "install one or name it with POLYC_CC")
    flags = [f"-D{d}" if not d.startswith("-D") else d for d in defines]
    folders = [Path(i).resolve() for i in (*includes, *([directory] if directory else []))]
    command = [found, "-E", "-x", "c", "-I", str(INCLUDE),
               *(f"-I{folder}" for folder in folders), *_EXTENSIONS, *flags, "-"]
    try:
        done = subprocess.run(command, input=_named(text, name), capture_output=True,
                              text=True, timeout=TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        raise CSourceError(f"{name}: the C preprocessor ran for more than {TIMEOUT_SECONDS} "
                           "s") from None
    if done.returncode != 0:
        message = "\n".join(done.stderr.strip().splitlines()[:6])
        raise CSourceError(f"{name}: the C preprocessor ({compiler} -E) failed:\n{message}")
    return done.stdout


def _named(text: str, name: str) -> str:
    """``text`` with a line marker naming it: the preprocessor's own markers then
    carry that name (it reads the text from its standard input)."""
    quoted = name.replace("\\", "\\\\").replace('"', '\\"')
    return f'# 1 "{quoted}"\n{text}'


def parse_preprocessed(text: str, name: str) -> c_ast.FileAST:
    try:
        return c_parser.CParser().parse(text, name)
    except Exception as error:  # pycparser's ParseError: "file:line:col: message"
        raise CSourceError(f"cannot parse {name} as C (polyc reads C99 without compiler "
                           f"extensions): {error}") from None
