"""Border splitting: the loops of a bounded read's interior run without guards.

A bounded read (padding, a halo, ``core.Read.outside``) has a guard, the instances
whose element lies inside the array, and an address clamped into the array. Code for
an instance tests the guard and loads through the clamp, element by element: LLVM
vectorizes neither (a pad copy ran at 2 elements per ns, a 3x3 depthwise conv's loop
at a third of its speed without borders).

Here an outermost band whose statements have bounded reads is split in two, as a
sequence of two filters over copies of its subtree::

    band B  (domain D)     ->   sequence
                                  filter: interior (every bounded read inside)  band B
                                  filter: border   (the rest of D)              band B

In the interior isl's AST build knows each guard holds and each clamp is the identity:
the loads are plain affine ones. The border keeps the guards. The split only reorders
instances of the band, so it is done only when no dependence joins two of them (the
elementwise statements that have bounded reads: pad copies, im2col, pooling and
depthwise windows); the legality checker checks the result like every other schedule.
"""

from __future__ import annotations

import math

import islpy as isl

from polyc.islutil import (
    band_above,
    flat_offset,
    map_bottom_up,
    permuted_band,
    row_space,
    span,
    statement_names,
    union_of,
    union_sets,
)
from polyc.marks import REGISTER_TILE
from polyc.marks import VECTOR as VECTOR_MARK
from polyc.scheduler.base import group_dependences
from polyc.scop.model import Scop
from polyc.tiling.order import coefficients

# split when at least this share of the instances is interior, or when the border's
# cells have constant guards (then no instance tests one)
MIN_INTERIOR = 0.25
MAX_CELLS = 16  # border parts with constant guards, at most
# ... and for a smaller interior, whose border is most of the work: a 5x5 window's
# 24 (EfficientNet's 5x5 depthwise conv over 1152 channels at 7x7: 9 of 49 pixels
# inside). Allowed everywhere, these made MobileNetV3-Small compile in 38.8 s, not 26.2.
MAX_SMALL_CELLS = 24


def split_borders(scop: Scop, schedule: isl.Schedule) -> tuple[isl.Schedule, list[str]]:
    """``schedule`` with the interior of every eligible outermost band split from its
    border, and a note per split."""
    notes: list[str] = []
    return map_bottom_up(schedule, lambda node: _split(scop, node, notes)), notes


def _split(scop: Scop, node: isl.ScheduleNode, notes: list[str]) -> isl.ScheduleNode:
    if node.get_type() != isl.schedule_node_type.band or band_above(node):
        return node
    names = sorted(statement_names(node.get_domain()))
    statements = [scop.statement(n) for n in names]
    if not any(r.guard is not None for s in statements for r in s.reads) or _marked(node):
        return node
    domain = node.get_domain()
    rows = _masked_lanes(scop, statements)
    interior, border = _parts(scop, statements, domain, rows)
    if rows and border.is_empty():  # guards along the lanes alone (a Concat of channels)
        rows = False
        interior, border = _parts(scop, statements, domain, rows)
    if border.is_empty():
        return node
    if not group_dependences(scop, domain).is_empty():
        return node
    small = interior.is_empty() or _share(interior, domain) < MIN_INTERIOR
    cells = _cells(border, statements, rows, MAX_SMALL_CELLS if small else MAX_CELLS)
    if len(cells) == 1 and small:
        return node  # (a guarded border, for a small interior)
    parts = ([] if interior.is_empty() else [interior]) + cells
    filters = isl.UnionSetList.alloc(scop.ctx, len(parts))
    for part in parts:
        filters = filters.add(part)
    depth = node.get_tree_depth()
    node, kept = _around_parts(node, statements, rows)
    what = "interior rows" if rows else "interior"
    if interior.is_empty():
        notes.append(f"{', '.join(names)}: split into {len(cells)} parts (bounded reads "
                     "inside or outside throughout each)")
    else:
        notes.append(f"{', '.join(names)}: {what} split from {len(cells)} border "
                     f"part{'s' if len(cells) > 1 else ''} (bounded reads unguarded inside"
                     f"{', masked along rows' if rows else ''})")
    if kept:
        notes.append(f"{', '.join(names)}: {' and '.join(kept)} (no bounded read depends "
                     "on them) kept around the parts")
    node = node.insert_sequence(filters)
    while node.get_tree_depth() > depth:
        node = node.parent()
    return node


def _around_parts(band: isl.ScheduleNode, statements, rows: bool
                  ) -> tuple[isl.ScheduleNode, list[str]]:
    """Where the parts of ``band``'s split go, and the loops kept around them: below
    the members on which no guard depends (:func:`_guard_free_members`), through a
    whole tile band into its point band."""
    kept: list[str] = []
    guarded = [_guarded_dims(s, rows) for s in statements]
    while True:
        n = band.band_n_member()
        free = _guard_free_members(band, statements, guarded)
        if free:
            tiles = band.child(0).get_type() == isl.schedule_node_type.band
            kept.append(f"{'tile ' if tiles else ''}band members {tuple(free)}")
        if len(free) < n:
            break
        band = band.child(0)
    if not free:
        return band, kept
    order = free + [k for k in range(n) if k not in free]
    if order != sorted(order):
        band = permuted_band(band, order)
    return band.band_split(len(free)).child(0), kept


def _guard_free_members(band: isl.ScheduleNode, statements, guarded: list[set[int]]
                        ) -> list[int]:
    """The members of ``band`` on which no guard of its statements depends (``guarded``:
    each statement's :func:`_guarded_dims`), when the band may be permuted to put them
    first; its innermost member stays inside unless a band lies below it (the point
    loops of a tile band). The parts of the split then run inside their loops. A 5x5 depthwise conv
    over 1152 channels at 7x7 has 25 parts, each of which swept all 72 channel blocks:
    25 passes over its weights and input from L2, where the parts of one channel block
    find them in L1."""
    n = band.band_n_member()
    partial = band.band_get_partial_schedule()
    free = []
    for k in range(n):
        row = partial.get_at(k)
        pieces = [row.extract_pw_aff(row_space(s.domain)).gist(s.domain) for s in statements]
        if not any(piece.involves_dims(isl.dim_type.in_, d, 1)
                   for piece, dims in zip(pieces, guarded) for d in dims):
            free.append(k)
    if band.child(0).get_type() != isl.schedule_node_type.band and n - 1 in free:
        free.remove(n - 1)  # (the innermost loop: stride 1, vectorized)
    elif len(free) == n:
        return free
    if free != list(range(len(free))) and not band.band_get_permutable():
        return []
    return free


def _guarded_dims(statement, rows: bool) -> set[int]:
    """The domain dims of ``statement`` that one of its guards (row guards with
    ``rows``) depends on."""
    domain = statement.domain
    dims = set()
    for read in statement.reads:
        if read.guard is None:
            continue
        guard = (_row_guard(read.guard) if rows else read.guard).intersect(domain)
        for d in range(domain.dim(isl.dim_type.set)):
            if not guard.eliminate(isl.dim_type.set, d, 1).intersect(domain).is_equal(guard):
                dims.add(d)
    return dims


def _parts(scop: Scop, statements, domain: isl.UnionSet, rows: bool
           ) -> tuple[isl.UnionSet, isl.UnionSet]:
    """The interior of ``domain`` (see :func:`_interior`) and the rest, its border."""
    interior = union_of(scop.ctx, (_interior(s, rows) for s in statements)).intersect(domain)
    return interior, domain.subtract(interior)


def _cells(border: isl.UnionSet, statements, rows: bool, most: int
           ) -> list[isl.UnionSet]:
    """The border cut where each guard holds or not (a 3x3 window's border: four
    edges and four corners), so that every guard is constant in a cell and its loops
    run plain; the whole border when that makes more than ``most`` cells.
    With ``rows``, the guards' conditions on rows only (:func:`_row_guard`)."""
    guards: list[isl.Set] = []
    for statement in statements:
        for read in statement.reads:
            if read.guard is None:
                continue
            guard = _row_guard(read.guard) if rows else read.guard
            if not any(guard.is_equal(g) for g in guards):
                guards.append(guard)
    cells = [border]
    for guard in guards:
        inside = isl.UnionSet.from_set(guard)
        split = []
        for cell in cells:
            split += [part for part in (cell.intersect(inside), cell.subtract(inside))
                      if not part.is_empty()]
        if len(split) > most:
            return [border]
        cells = split
    return [cell.coalesce() for cell in cells]


def _interior(statement, rows: bool) -> isl.Set:
    """The instances of ``statement`` whose bounded reads all stay inside (with
    ``rows``: inside along every dim but the last)."""
    inside = statement.domain
    for read in statement.reads:
        if read.guard is not None:
            inside = inside.intersect(_row_guard(read.guard) if rows else read.guard)
    return inside


def _row_guard(guard: isl.Set) -> isl.Set:
    """``guard``'s conditions on all dims but the last (the row of the element)."""
    return guard.eliminate(isl.dim_type.set, guard.dim(isl.dim_type.set) - 1, 1)


def _masked_lanes(scop: Scop, statements) -> bool:
    """Whether the innermost loop keeps its guards, loaded as masked vector lanes
    (codegen: :func:`polyc.codegen.vector.lane_condition`): each statement writes with
    stride 1 along its last dim and reads with stride 0 or 1 there, guarded reads at
    their unclamped offsets. A row is then a few masked vectors (a 5x5 depthwise conv
    with Relu at 28x28x240 took 0.25 ms with its border columns apart, 0.12 ms so),
    while a strided window keeps the whole split (its lanes would be scalar), and so
    does a statement reading through a run-time index (a lookup: its relation is no
    element per instance, and its lanes are loaded one by one)."""
    for statement in statements:
        if statement.domain.dim(isl.dim_type.set) < 2:
            return False
        reads = [None if r.lookup is not None else
                 _last_stride(scop, r.relation if r.guard is None else r.unclamped, r.array)
                 for r in statement.reads]
        if (_last_stride(scop, statement.write.relation, statement.write.array) != 1
                or any(stride not in (0, 1) for stride in reads)):
            return False
    return True


def _last_stride(scop: Scop, access: isl.Map | None, array: str) -> int | None:
    """The element stride of ``access`` along its domain's last dim, or None (no
    access, a symbolic shape, or not one affine piece)."""
    if access is None or not scop.array(array).flat:
        return None
    coefs = coefficients(flat_offset(access, scop.array(array).shape))
    return None if coefs is None else coefs[-1]


def _marked(node: isl.ScheduleNode) -> bool:
    """Whether a vector or register-tile mark lies below ``node`` (a contraction's
    recipe: left as it is)."""
    found = []

    def visit(child: isl.ScheduleNode) -> bool:
        if (child.get_type() == isl.schedule_node_type.mark
                and child.mark_get_id().get_name() in (VECTOR_MARK, REGISTER_TILE)):
            found.append(child)
        return not found

    node.foreach_descendant_top_down(visit)
    return bool(found)


def _share(part: isl.UnionSet, whole: isl.UnionSet) -> float:
    """``|part| / |whole|``, estimated on bounding boxes (exact for boxes)."""
    return _size(part) / max(_size(whole), 1)


def _size(instances: isl.UnionSet) -> int:
    """The points of the bounding boxes of ``instances``' sets (0 if one is unbounded)."""
    total = 0
    for piece in union_sets(instances):
        extents = [span(piece, d) for d in range(piece.dim(isl.dim_type.set))]
        if None in extents:
            return 0
        total += math.prod(extents)
    return total
