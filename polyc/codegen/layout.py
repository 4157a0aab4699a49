"""Buffer planning: which arrays are entry parameters, where temporaries live in scratch.

Entry parameters are the graph inputs then the graph outputs (graph order), then one
scratch pointer; every temporary gets a 64-byte-aligned slice of scratch, shared with
temporaries whose lifetimes (in the program's parts) do not overlap its own
(:mod:`polyc.codegen.liveness`);
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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

import numpy as np

from polyc.codegen.ast import LoopProgram, parts
from polyc.codegen.liveness import Lifetime, assign_offsets, lifetimes, peak
from polyc.codegen.parallel import arrays_in
from polyc.scop.model import Scop

if TYPE_CHECKING:
    from polyc.codegen.inplace import InPlace

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
    scratch_bytes: int  # of the temporaries in ``scratch``, shared by liveness
    constants: tuple[str, ...]
    symbolic: tuple[str, ...] = ()  # temps of symbolic size, from scratch_bytes on
    params: tuple[str, ...] = ()  # symbolic parameters: entry arguments after scratch
    # temp in ``scratch`` with a memory of its own -> its bytes and the parts its memory
    # lives in (None: never accessed)
    lifetimes: Mapping[str, Lifetime | None] = field(default_factory=dict)
    # temps written into another's memory (a temporary's, or a graph output's)
    in_place: tuple[InPlace, ...] = ()

    @property
    def unshared_bytes(self) -> int:
        """The scratch the temporaries would take one slot each, those written in place
        included."""
        return (sum(aligned(life.nbytes) for life in self.lifetimes.values() if life)
                + sum(aligned(done.nbytes) for done in self.in_place))

    @property
    def manifest_scratch(self) -> int | str:
        """The manifest's ``scratch_bytes``: a size, or the function that computes it."""
        return SCRATCH_FUNCTION if self.symbolic else self.scratch_bytes

    def __str__(self) -> str:
        lines = [f"params: {', '.join(self.inputs + self.outputs + ('scratch',) + self.params)}"]
        outside = {d.array: d.buffer for d in self.in_place if d.buffer not in self.scratch}
        lines += [f"{outside.get(name, f'scratch+{off}')}: {name} ({self._describe(name)})"
                  for name, off in sorted(self.scratch.items(),
                                          key=lambda item: (item[0] in outside, item[::-1]))]
        lines += [f"scratch+(run time): {name}" for name in self.symbolic]
        lines.append(f"scratch bytes: {self.scratch_bytes} ({self.unshared_bytes} without reuse)"
                     + (f" + the symbolic temporaries ({SCRATCH_FUNCTION})"
                        if self.symbolic else ""))
        return "\n".join(lines)

    def _describe(self, name: str) -> str:
        done = next((d for d in self.in_place if d.array == name), None)
        if done is not None:
            return f"{done.nbytes} bytes, in place: {done.statement} writes it into {done.buffer}"
        life = self.lifetimes.get(name)
        if life is None:
            return "never accessed"
        if life.first == life.last:
            return f"{life.nbytes} bytes, part {life.first}"
        return f"{life.nbytes} bytes, parts {life.first}-{life.last}"


def plan_buffers(scop: Scop, program: LoopProgram, in_place: tuple[InPlace, ...] = ()
                 ) -> BufferPlan:
    """Temporaries of static size share scratch by liveness over the program's parts
    (:mod:`polyc.codegen.liveness`); one written in place (``in_place``, also
    ``program.storage``) takes the offset of the memory it is written into. Temporaries
    of symbolic size follow, one slot each."""
    arrays = [arrays_in(part, program) for part in parts(program.root)]
    return plan_for_parts(scop, arrays, program.memory, in_place)


def plan_for_parts(scop: Scop, part_arrays: Sequence[Sequence[str]],
                   memory: Callable[[str], str], in_place: tuple[InPlace, ...] = ()
                   ) -> BufferPlan:
    """:func:`plan_buffers` from the memories each part accesses (``part_arrays``, in
    order) and ``memory`` (:meth:`LoopProgram.memory`)."""
    static = [a.name for a in scop.arrays if a.kind == "temp" and not a.symbolic]
    memories = [name for name in static if memory(name) == name]
    spans = lifetimes(part_arrays, memories)
    lives = {name: Lifetime(scop.array(name).nbytes, *spans[name]) if name in spans else None
             for name in memories}
    accessed = {name: life for name, life in lives.items() if life is not None}
    offsets = assign_offsets(accessed, ALIGN)
    # scop order: the kernel's arguments
    scratch = {name: offsets.get(memory(name), 0) for name in static}
    names = lambda *kinds: tuple(a.name for a in scop.arrays if a.kind in kinds)  # noqa: E731
    return BufferPlan(names("input"), names(*OUTPUT_KINDS), scratch,
                      aligned(peak(offsets, accessed)), names("constant"),
                      tuple(a.name for a in scop.arrays if a.kind == "temp" and a.symbolic),
                      scop.symbolic_params, lives, tuple(in_place))


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
