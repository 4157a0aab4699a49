"""Transposing statements as register transposes of LANES x LANES blocks.

A copy between layouts (NCHW <-> NHWC around a channels-last convolution, a graph
boundary, Winograd's input tiles) writes consecutive elements along one loop and reads
them along another: as plain loops each element is a load and a store of its own
(0.028 ms for a 1152 x 49 float copy, where onnxruntime's reorder takes 0.014-0.019).
The tiling stage cuts such a band into blocks of LANES x LANES iterations under a
:data:`MARK`; here a block whose accesses allow it becomes LANES vector loads along
the read's contiguous loop, a transpose in registers and LANES vector stores along the
write's (:class:`Block`). Partial blocks mask the loads and stores past their bounds.

The transpose is four rounds of two-vector shuffles: round ``bit`` pairs vector ``j``
with ``j | bit`` and swaps bit ``bit`` of the vector number with the same bit of the
lane number, so after all four the element of vector ``j``, lane ``i`` sits in vector
``i``, lane ``j`` (the classic butterfly; LLVM lowers each shuffle to one instruction).
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl
from llvmlite import ir

from polyc.codegen.vector import LANES, offset_stride, unit_loop, uses
from polyc.marks import TRANSPOSE

MARK = TRANSPOSE
I32 = ir.IntType(32)


@dataclass(frozen=True)
class Loop:
    iterator: str
    init: isl.AstExpr
    bound: isl.AstExpr  # inclusive


@dataclass(frozen=True)
class Block:
    """A block ``for (..) for (..) S`` as vectors: the write is contiguous along
    ``lanes``; each read is ``transposed`` (contiguous along ``rows``: loaded as
    vectors along rows, one per lane, then transposed) or ``direct``, with stride 1 or
    0 along ``lanes`` (a vector load or one element for every lane, per row)."""

    rows: Loop
    lanes: Loop
    user: isl.AstNode
    transposed: tuple[bool, ...]  # per read
    direct: tuple[int, ...]  # per read: its stride along lanes (0 or 1; -1 if transposed)


def block(node: isl.AstNode, offsets) -> Block | None:
    """The :class:`Block` of a mark's child ``node``, or None when the child is not two
    unit loops (the inner one's bounds free of the outer iterator) around one
    statement whose accesses fit. ``offsets(user)`` gives the access offsets (write
    first)."""
    loops = []
    while node.get_type() == isl.ast_node_type.for_ and len(loops) < 2:
        loop = unit_loop(node)
        if loop is None:
            return None
        loops.append(Loop(*loop))
        node = node.for_get_body()
    if len(loops) != 2 or node.get_type() != isl.ast_node_type.user:
        return None
    outer, inner = loops
    if uses(inner.init, outer.iterator) or uses(inner.bound, outer.iterator):
        return None
    write, *reads = offsets(node)
    for rows, lanes in ((outer, inner), (inner, outer)):
        if offset_stride(write, lanes.iterator) != 1:
            continue
        along_lanes = [offset_stride(r, lanes.iterator) for r in reads]
        transposed = tuple(s not in (0, 1) and offset_stride(r, rows.iterator) == 1
                           for r, s in zip(reads, along_lanes))
        if any(transposed) and all(t or s in (0, 1) for t, s in zip(transposed, along_lanes)):
            direct = tuple(-1 if t else s for t, s in zip(transposed, along_lanes))
            return Block(rows, lanes, node, transposed, direct)
    return None


def transpose(b: ir.IRBuilder, vectors: list[ir.Value]) -> list[ir.Value]:
    """The LANES vectors of LANES elements ``vectors`` transposed: lane ``j`` of result
    ``i`` is lane ``i`` of ``vectors[j]``."""
    vectors = list(vectors)
    bit = LANES // 2
    while bit:
        low = [i if not i & bit else LANES + (i ^ bit) for i in range(LANES)]
        high = [i | bit if not i & bit else LANES + i for i in range(LANES)]
        for j in range(LANES):
            if not j & bit:
                x, y = vectors[j], vectors[j | bit]
                vectors[j] = b.shuffle_vector(x, y, ir.Constant(ir.VectorType(I32, LANES), low))
                vectors[j | bit] = b.shuffle_vector(
                    x, y, ir.Constant(ir.VectorType(I32, LANES), high))
        bit //= 2
    return vectors
