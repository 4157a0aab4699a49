"""C sources -> SCoPs: the kernels of PolyBench, as Pluto's polycc reads them.

    kernel = polyc.from_c("gemm.c", defines=["MINI_DATASET"],
                          include=["polybench/utilities"])
    kernel.params          # {'ni': 20, 'nj': 25, 'nk': 30}: from the call in main
    out = kernel.compile().run({"C": c, "A": a, "B": b, "alpha": 1.5, "beta": 1.2})

The source is preprocessed by the system C compiler (:mod:`polyc.scop.c.preprocess`),
parsed by pycparser, its kernel found (:mod:`polyc.scop.c.kernel`: the function with a
``#pragma scop``, or the one named) and its SCoP's statements read into a
:class:`polyc.scop.nest.LoopNest` (:mod:`polyc.scop.c.extract`): from there on it
compiles as any loop nest.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from polyc.errors import CSourceError, NestError
from polyc.scop.c.extract import CStatement, Extraction
from polyc.scop.c.kernel import Kernel, as_c, find_kernel
from polyc.scop.c.preprocess import parse_c
from polyc.scop.model import Scop
from polyc.scop.nest import LoopNest

__all__ = ["CKernel", "CSourceError", "caller_source", "from_c"]


class CKernel:
    """A C kernel's SCoP: :meth:`nest` (a :class:`LoopNest`), ``params`` (the int
    parameters' values at the file's call of the kernel, the defaults of
    :meth:`compile`), ``statements`` (each with its C text) and ``arrays`` (name ->
    dtype and shape)."""

    def __init__(self, kernel: Kernel, extraction: Extraction):
        self.kernel = kernel
        self.name = kernel.name
        self.file = kernel.file
        self._extraction = extraction
        self.statements: tuple[CStatement, ...] = tuple(extraction.statements)
        # (a nest that reads a parameter's value is built at the parameters' values)
        values = {p: 1 for p in extraction.params} if extraction.reads_parameters else None
        nest = extraction.nest(values)
        # (a parameter the function changes before its SCoP has another value there)
        changed = extraction.written_in_function
        self.params = {p: kernel.call_values[p] for p in nest.params
                       if p in kernel.call_values and p not in changed}
        self.arrays = {name: (array.dtype, array.shape) for name, array in nest.arrays.items()}
        self._parametric = None if values else nest

    def nest(self, params: Mapping[str, int] | None = None) -> LoopNest:
        """The kernel's :class:`LoopNest`: parametric, or at the parameters' values
        (``params`` over the defaults) where a statement reads one."""
        if self._parametric is not None and params is None:
            return self._parametric
        return self._extraction.nest(self.values(params))

    def scop(self, params: Mapping[str, int] | None = None) -> Scop:
        return self.nest(params).scop()

    def values(self, params: Mapping[str, int] | None = None) -> dict[str, int]:
        """The parameters' values: ``params`` over the defaults; every one needed."""
        values = {**self.params, **(params or {})}
        missing = sorted(p for p in self._extraction.params if p not in values)
        if missing:
            raise NestError(f"{self.file}: give a value to the parameter(s) "
                            f"{', '.join(missing)} of {self.name} (params={{...}}, or "
                            "--param on the command line): no call in the file gives one")
        return {p: int(values[p]) for p in sorted(self._extraction.params)}

    def compile(self, *, params: Mapping[str, int] | None = None, **options):
        """Native code for the kernel at these parameter values (default
        :attr:`params`); options as for :meth:`LoopNest.compile`, but ``autoselect``
        is ``"model"`` unless ``scheduler`` or ``tile`` is given (a schedule chosen by
        :mod:`polyc.autoselect`'s cost model). Its ``run`` takes and returns the arrays
        and scalars by name (numbers are accepted for scalars)."""
        if "scheduler" not in options and "tile" not in options:
            options.setdefault("autoselect", "model")
        values = self.values(params)
        compiled = self.nest(values).compile(params=values, **options)
        return _ScalarsAccepted(compiled, self.arrays)

    def macros(self) -> dict[str, tuple[tuple[str, ...], str]]:
        """Each statement's iterators and C text with its iterators parenthesised (the
        macros of :func:`polyc.codegen.c_text.c_text`)."""
        return {s.name: (s.iterators, s.macro_text()) for s in self.statements}

    def __repr__(self) -> str:
        return (f"<C kernel {self.name} from {self.file}: {len(self.statements)} statements, "
                f"parameters {self.params or sorted(self._extraction.params)}>")


class _ScalarsAccepted:
    """A compiled kernel whose ``run`` also takes Python numbers for scalar variables."""

    def __init__(self, compiled, arrays):
        self._compiled, self._arrays = compiled, arrays

    def run(self, inputs: Mapping[str, object], out: Mapping[str, np.ndarray] | None = None
            ) -> dict[str, np.ndarray]:
        given = {}
        for name, value in inputs.items():
            dtype_shape = self._arrays.get(name)
            if dtype_shape is not None and dtype_shape[1] == () and np.isscalar(value):
                value = np.array(value, dtype=dtype_shape[0])
            given[name] = value
        return self._compiled.run(given, out)

    def __getattr__(self, name):
        return getattr(self._compiled, name)


def caller_source(kernel: CKernel) -> str:
    """The preprocessed source of ``kernel``'s file with the kernel's definition
    replaced by its (non-static) declaration: the rest of the program (PolyBench's
    ``main``, its timing and dump) to compile and link with the kernel's drop-in
    library (:mod:`polyc.runtime.c_library`). Its declarations of the C library are
    polyc's stand-ins (``include/``), which link with the real one."""
    tree = copy.copy(kernel.kernel.tree)
    function = kernel.kernel.function
    declaration = copy.deepcopy(function.decl)
    declaration.storage = [s for s in declaration.storage if s != "static"]
    declaration.funcspec = []
    tree.ext = [declaration if ext is function else ext for ext in tree.ext]
    return as_c(tree)


def from_c(source: str | os.PathLike, *, function: str | None = None,
           defines: Sequence[str] = (), include: Sequence[str | os.PathLike] = (),
           cc: str | None = None) -> CKernel:
    """The kernel of a C source: a path to a ``.c`` file, or C text. ``function``
    names the kernel's function (default: the one with ``#pragma scop``); ``defines``
    (``"N=100"``, ``"MINI_DATASET"``) and ``include`` folders go to the preprocessor
    (``cc``, default ``$POLYC_CC`` or ``cc``)."""
    path = _path(source)
    if path is not None:
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as error:
            raise CSourceError(f"cannot read the C source {path}: {error}") from None
        name, directory = str(path), path.parent
    else:
        text, name, directory = str(source), "<C text>", None
    tree = parse_c(text, name, directory=directory, defines=defines, includes=include, cc=cc)
    kernel = find_kernel(tree, name, function)
    return CKernel(kernel, Extraction(kernel).run())


def _path(source) -> Path | None:
    if isinstance(source, os.PathLike):
        return Path(source)
    if isinstance(source, str) and "\n" not in source and source.strip().endswith((".c", ".h")):
        return Path(source)
    return None
