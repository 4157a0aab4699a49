"""Prologues and epilogues of a contraction, run inside its register tiles.

A contraction ``S: C[.., i, j] += A * B`` is usually surrounded, in its fusion group,
by the statement that initialises ``C`` (the reduction's init: ``0``, or Gemm's
``beta * c``) and by an elementwise statement that reads ``C`` (bias, activation:
after inlining, ``y = relu(C + b)`` is one statement). Run as loops of their own, each
is a pass over the whole of ``C`` in memory. Attached to the recipe, they run on one
register tile at a time, while it is in registers or L1:

- a **prologue** ``I`` (writes ``C``) runs just before the tile's first ``k`` block;
- an **epilogue** ``E`` (reads ``C``) runs just after the tile's last ``k`` block.

Each is described by the affine map from its instances to the contraction instance
with the same ``(batch.., i, j)`` (and ``k = 0``): the recipe's rows for ``S`` pulled
back along it are its rows. Conditions, from the SCoP alone:

- ``I`` is the other statement of ``S``'s op and writes ``C`` injectively;
- ``E`` reads ``C`` (all its reads of ``C`` the same element) injectively, and writes
  an array ``S`` does not touch;
- each maps into ``S``'s ``(batch.., i, j)`` box;
- an epilogue reads, in each row of C, one interval along ``j`` (no holes between
  the vector lanes), and writes consecutive elements along ``j`` (not a transposed
  conv's write-back, a channel plane between lanes);
- the epilogue of a direct conv (:attr:`Contraction.direct`) reads no computed data
  besides C: with a residual Add in the tile (a 1x1 conv 64->256 at 56x56 over
  channels-last pixels, + Sum + Relu), LLVM kept the tile's accumulators in memory,
  loading and storing them at every ``k`` step: 1.85 ms, against 0.62 ms for the conv
  and 0.21 ms for the Add + Relu as a pass of its own.

:func:`attachable` checks these; the caller also checks the schedule tree (``I``, ``S``
and ``E`` consecutive children of one sequence), and the legality checker verifies the
result.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polyc.islutil import single_multi_aff
from polyc.scop.model import Scop, Statement
from polyc.tiling.contraction import Contraction
from polyc.tiling.order import access_coefficients


@dataclass(frozen=True)
class Attached:
    statement: Statement
    to_contraction: isl.MultiAff  # an instance -> S's instance at the same (i, j), k = 0
    prologue: bool  # True: before the first k block; False: after the last


def attachable(scop: Scop, c: Contraction) -> list[Attached]:
    """The statements that may run inside ``c``'s register tiles, in program order."""
    s = c.statement
    found = []
    for t in scop.statements:
        if t is s:
            continue
        if t.op_index == s.op_index and t.write.array == s.write.array:
            to_c = _to_contraction(c, t.write.relation, t.domain)
            if to_c is not None and t.write.relation.is_injective():
                found.append(Attached(t, to_c, prologue=True))
            continue
        reads = [r.relation for r in t.reads if r.array == s.write.array]
        touched = {s.write.array, *(r.array for r in s.reads)}
        if (not reads or t.op_index <= s.op_index or t.write.array in touched
                or not all(r.is_equal(reads[0]) for r in reads)
                or not reads[0].is_injective()):
            continue
        if c.direct and any(scop.array(r.array).kind != "constant"
                            for r in t.reads if r.array != s.write.array):
            continue  # see the module docstring
        to_c = _to_contraction(c, reads[0], t.domain)
        if to_c is not None and _rows_without_holes(c, to_c, t.domain) and \
                _writes_along_j(scop, c, t, to_c):
            found.append(Attached(t, to_c, prologue=False))
    return found


def _rows_without_holes(c: Contraction, to_c: isl.MultiAff, domain: isl.Set) -> bool:
    """Whether the elements of C an epilogue reads are, in every row (fixed other
    dims), one interval along ``j``: in the tile its vector loop then has no guard
    between lanes. A direct conv's crop skips the padding columns of its pixel grid,
    and run in the tile it was scalar code (3x3 conv 256->128 at 20x20 with SiLU:
    1.40x onnxruntime's time, 1.17x with Relu; as a pass of its own that vectorizes,
    1.14x); with Relu, 32ch at 112x112 went from 1.17x to 0.98x."""
    image = domain.apply(isl.Map.from_multi_aff(to_c))
    n = image.dim(isl.dim_type.set)
    rows = isl.Map.from_range(image)
    rows = rows.move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0, c.j)
    rows = rows.move_dims(isl.dim_type.in_, c.j, isl.dim_type.out, 1, n - c.j - 1)
    hull = isl.Map.from_basic_map(rows.polyhedral_hull())
    return hull.intersect_domain(rows.domain()).is_equal(rows)


def _writes_along_j(scop: Scop, c: Contraction, t: Statement, to_c: isl.MultiAff) -> bool:
    """Whether an epilogue writes consecutive elements along ``j`` (the tile's vector
    lanes), or one cannot tell (``j`` is not one of its loops). A transposed conv's
    output channels are ``j``, and the epilogue that writes them back to (channel,
    pixel) order stores each lane a channel's plane from the next: scalar stores in the
    tile. As a pass of its own (tiled as a transpose, :mod:`polyc.tiling.rectangular`),
    with Relu, 1 thread: a 7x7 stride-2 conv 3->64 channels at 224x224 took 1.6 ms
    instead of 2.4; 3x3 convs 32->64 at 112x112 2.7 instead of 3.8, 64->64 at 56x56
    1.24 instead of 1.33. When ``j`` is a sum of its loops, its write must move with
    ``j`` along each (a crop of padded pixels ``j = 14*h + w`` writing ``[.., h, w]``
    of 14 columns does); a detector head's Sigmoid over ``[N, A, H, W, O]``, reading
    channel ``j = a*O + o``, writes planes apart along ``a``: in the tile it took
    0.42 ms for 128->75 channels at 40x40, as a pass of its own 0.06 after a 0.09 ms
    conv, onnxruntime 0.12 for both."""
    j = to_c.get_at(c.j)
    uses = [d for d in range(t.domain.dim(isl.dim_type.set))
            if not j.get_coefficient_val(isl.dim_type.in_, d).is_zero()]
    coefs = {d: j.get_coefficient_val(isl.dim_type.in_, d).to_python() for d in uses}
    if not uses or (len(uses) == 1 and coefs[uses[0]] != 1):
        return True
    strides = access_coefficients(scop, t.write)
    if strides is None:
        return len(uses) == 1
    return all(strides[d] == coefs[d] for d in uses)


def _to_contraction(c: Contraction, access: isl.Map, domain: isl.Set) -> isl.MultiAff | None:
    """``access`` (an instance -> an element of C) composed with the inverse of S's
    write, at ``k = 0``, when that is one affine function on all of ``domain``."""
    s = c.statement
    first_k = s.domain
    for d in c.reductions:
        first_k = first_k.fix_val(isl.dim_type.set, d, isl.Val.zero(s.domain.get_ctx()))
    relation = access.intersect_domain(domain).apply_range(
        s.write.relation.intersect_domain(first_k).reverse())
    if not relation.is_single_valued() or not relation.domain().is_equal(domain):
        return None
    return single_multi_aff(relation)
