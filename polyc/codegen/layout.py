"""Buffer planning: which arrays are entry parameters, where temporaries live in scratch.

Entry parameters are the graph inputs then the graph outputs (graph order), then one
scratch pointer; every temporary gets its own 64-byte-aligned slice of scratch;
constants are external globals (:func:`constant_symbol`) whose bytes
(:func:`constant_data`) the runtime supplies: the JIT binds them to numpy buffers, an
artifact links them in as a data section. Weights thus never pass through LLVM IR
text (alexnet's 240 MB took 16 s to print and more to parse). The arrays of a loop
nest (kinds ``inout`` and ``result``) are outputs whose buffers the runtime
initialises (:data:`INITIAL`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from polyc.scop.model import Scop

ALIGN = 64
OUTPUT_KINDS = ("output", "inout", "result")
# How the runtime fills an output buffer before a call (manifest key "init"): "given"
# copies the caller's array, which is required; "zeros" copies it if given, else zeros.
INITIAL = {"inout": "given", "result": "zeros"}


@dataclass(frozen=True)
class BufferPlan:
    inputs: tuple[str, ...]   # array names, entry order
    outputs: tuple[str, ...]
    scratch: Mapping[str, int]  # temp array name -> byte offset
    scratch_bytes: int
    constants: tuple[str, ...]

    def __str__(self) -> str:
        lines = [f"params: {', '.join(self.inputs + self.outputs)}, scratch"]
        lines += [f"scratch+{off}: {name}" for name, off in self.scratch.items()]
        lines.append(f"scratch bytes: {self.scratch_bytes}")
        return "\n".join(lines)


def plan_buffers(scop: Scop) -> BufferPlan:
    """One slot per temporary, no reuse yet."""
    offsets, size = {}, 0
    for array in scop.arrays:
        if array.kind == "temp":
            offsets[array.name] = size
            size += -(-array.nbytes // ALIGN) * ALIGN
    names = lambda *kinds: tuple(a.name for a in scop.arrays if a.kind in kinds)  # noqa: E731
    return BufferPlan(names("input"), names(*OUTPUT_KINDS), offsets, size, names("constant"))


def constant_symbol(name: str) -> str:
    """The global symbol of the constant array ``name``."""
    return f"polyc.const.{name}"


def constant_data(scop: Scop, plan: BufferPlan) -> dict[str, np.ndarray]:
    """``{symbol: C-contiguous value}`` of every constant the plan passes to the kernel."""
    return {constant_symbol(name): np.ascontiguousarray(scop.constants[name],
                                                        dtype=np.dtype(scop.array(name).dtype))
            for name in plan.constants}
