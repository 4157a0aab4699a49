"""The reference for polyc's C frontend: the same C source compiled by the system C
compiler (``cc -O1``) into a shared library, its kernel function called through ctypes
on copies of the same arrays. An independent implementation of the C semantics."""

from __future__ import annotations

import ctypes
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from polyc.scop.c import CKernel
from polyc.scop.c.kernel import constant_int

POLYBENCH = Path(__file__).resolve().parents[1] / "third_party" / "polybench-c-4.2.1"
UTILITIES = POLYBENCH / "utilities"
_SCALARS = {"float64": ctypes.c_double, "float32": ctypes.c_float, "int32": ctypes.c_int,
            "int64": ctypes.c_long, "int8": ctypes.c_byte, "uint8": ctypes.c_ubyte}


def polybench_sources() -> list[Path]:
    """The 30 kernels of PolyBench/C 4.2.1."""
    return sorted(p for p in POLYBENCH.rglob("*.c")
                  if "utilities" not in p.parts and p.stem.lower() != "nussinov.orig")


def reference_library(source: Path | str, folder: Path, *, defines: Sequence[str] = (),
                      includes: Sequence[Path] = (), extra: Sequence[Path] = ()
                      ) -> ctypes.CDLL:
    """``source`` (a path, or C text) built by cc with ``static`` defined away (the
    kernel function is then exported), plus the ``extra`` C files."""
    if not isinstance(source, Path):
        path = folder / "kernel.c"
        path.write_text(source)
        source = path
    library = folder / f"{source.stem}_reference.so"
    command = ["cc", "-O1", "-shared", "-fPIC", "-Dstatic=", *(f"-D{d}" for d in defines),
               *(f"-I{i}" for i in includes), str(source), *map(str, extra), "-o",
               str(library), "-lm"]
    subprocess.run(command, check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(library))


def inputs_for(kernel: CKernel, seed: int = 0, *, values: Mapping[str, object] = ()
               ) -> dict[str, np.ndarray]:
    """Seeded values for every array and scalar parameter of the kernel's function
    (floats in [0.5, 1.5), ints in [0, 10)), ``values`` for some of them."""
    rng = np.random.default_rng(seed)
    data = {}
    for variable in kernel.kernel.parameters:
        if variable.name in values:
            data[variable.name] = np.array(values[variable.name], dtype=variable.dtype)
            continue
        if not variable.is_array and variable.dtype.startswith("int"):
            continue  # a parameter: its value is the kernel's
        shape = tuple(constant_int(e) for e in variable.extents)
        if variable.dtype.startswith("float"):
            data[variable.name] = rng.uniform(0.5, 1.5, size=shape).astype(variable.dtype)
        else:
            data[variable.name] = rng.integers(0, 10, size=shape).astype(variable.dtype)
    return data


def run_reference(library: ctypes.CDLL, kernel: CKernel, data: Mapping[str, np.ndarray],
                  params: Mapping[str, int]) -> dict[str, np.ndarray]:
    """The kernel function of ``library`` called on copies of ``data``; the arrays
    after the call."""
    arrays = {name: np.ascontiguousarray(value.copy()) for name, value in data.items()}
    params = {**kernel.kernel.call_values, **params}  # (ints the SCoP does not use too)
    args = []
    for variable in kernel.kernel.parameters:
        if variable.is_array:
            args.append(arrays[variable.name].ctypes.data_as(ctypes.c_void_p))
        elif variable.name in arrays:
            args.append(_SCALARS[variable.dtype](arrays[variable.name].item()))
        else:
            args.append(ctypes.c_int(params[variable.name]))
    getattr(library, kernel.name)(*args)
    return arrays
