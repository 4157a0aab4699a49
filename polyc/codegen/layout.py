"""Buffer planning: which arrays are entry parameters, where temporaries live in scratch.

Entry parameters are the graph inputs then the graph outputs (graph order), then one
scratch pointer; every temporary gets its own 64-byte-aligned slice of scratch;
constants are external globals (:func:`constant_symbol`) whose bytes
(:func:`constant_data`) the runtime supplies: the JIT binds them to numpy buffers, an
artifact links them in as a data section. Weights thus never pass through LLVM IR
text (alexnet's 240 MB took 16 s to print and more to parse). The arrays of a loop
nest (kinds ``inout`` and ``result``) are outputs whose buffers the runtime
initialises (:data:`INITIAL`).

A temporary whose shape names a symbolic parameter has no size at compile time: such
temporaries follow the others in scratch, at offsets the entry function computes from
the parameter values, and the module exports :data:`SCRATCH_FUNCTION`, which returns
the scratch size for given values (the manifest names it as ``scratch_bytes``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from polyc.scop.model import Scop

ALIGN = 64
SCRATCH_FUNCTION = "polyc_scratch_bytes"
OUTPUT_KINDS = ("output", "inout", "result")
# How the runtime fills an output buffer before a call (manifest key "init"): "given"
# copies the caller's array, which is required; "zeros" copies it if given, else zeros.
INITIAL = {"inout": "given", "result": "zeros"}


@dataclass(frozen=True)
class BufferPlan:
    inputs: tuple[str, ...]   # array names, entry order
    outputs: tuple[str, ...]
    scratch: Mapping[str, int]  # temp array name -> byte offset
    scratch_bytes: int  # of the temporaries in ``scratch``
    constants: tuple[str, ...]
    symbolic: tuple[str, ...] = ()  # temps of symbolic size, from scratch_bytes on
    params: tuple[str, ...] = ()  # symbolic parameters: entry arguments after scratch

    @property
    def manifest_scratch(self) -> int | str:
        """The manifest's ``scratch_bytes``: a size, or the function that computes it."""
        return SCRATCH_FUNCTION if self.symbolic else self.scratch_bytes

    def __str__(self) -> str:
        lines = [f"params: {', '.join(self.inputs + self.outputs + ('scratch',) + self.params)}"]
        lines += [f"scratch+{off}: {name}" for name, off in self.scratch.items()]
        lines += [f"scratch+(run time): {name}" for name in self.symbolic]
        lines.append(f"scratch bytes: {self.scratch_bytes}"
                     + (f" + the symbolic temporaries ({SCRATCH_FUNCTION})"
                        if self.symbolic else ""))
        return "\n".join(lines)


def plan_buffers(scop: Scop) -> BufferPlan:
    """One slot per temporary, no reuse yet."""
    offsets, size, symbolic = {}, 0, []
    for array in scop.arrays:
        if array.kind == "temp" and array.symbolic:
            symbolic.append(array.name)
        elif array.kind == "temp":
            offsets[array.name] = size
            size += aligned(array.nbytes)
    names = lambda *kinds: tuple(a.name for a in scop.arrays if a.kind in kinds)  # noqa: E731
    return BufferPlan(names("input"), names(*OUTPUT_KINDS), offsets, size, names("constant"),
                      tuple(symbolic), scop.symbolic_params)


def aligned(nbytes: int) -> int:
    """``nbytes`` rounded up to the alignment of a scratch slot."""
    return -(-nbytes // ALIGN) * ALIGN


def constant_symbol(name: str) -> str:
    """The global symbol of the constant array ``name``."""
    return f"polyc.const.{name}"


def constant_data(scop: Scop, plan: BufferPlan) -> dict[str, np.ndarray]:
    """``{symbol: C-contiguous value}`` of every constant the plan passes to the kernel."""
    return {constant_symbol(name): np.ascontiguousarray(scop.constants[name],
                                                        dtype=np.dtype(scop.array(name).dtype))
            for name in plan.constants}
