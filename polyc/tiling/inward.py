"""Parallel loops moved inside recurrences: a single loop whose iterations are
independent, around single loops one of which carries a recurrence (each iteration
waits for values the one before computed), goes below them in blocks, so a block's
chains run side by side and the innermost loop carries nothing (it vectorizes).

PolyBench's deriche runs its column passes ``for j: for i: y1[i][j] = ... ym1 ...``,
``ym1 = y1[i][j]`` (a chain along ``i``; isl's schedule, Pluto having found no
hyperplane for the backward passes), the columns ``j`` independent. ``for J: for i:
for j in block J`` runs :data:`BLOCK` columns at once, along their rows. (Bands of two
or more loops get the same treatment from :mod:`polyc.tiling.rectangular`.)

The move is isl's ``band_sink`` of the block's point loop: it goes down to every leaf
of the subtree, so statements that ran once per column get a loop of their own and a
sequence below it is distributed. Legal because the loop is coincident: no dependence
joins two of its iterations within one iteration of the loops outside it, so the
instances of two columns may run in any order, and those of one column keep the order
the rest of the tree gives them.
"""

from __future__ import annotations

import islpy as isl

from polyc.islutil import map_bottom_up, span, statement_names, union_maps
from polyc.marks import REGISTER_TILE
from polyc.marks import VECTOR as VECTOR_MARK
from polyc.scop.model import Scop
from polyc.tiling.rectangular import recurrence_along

BLOCK = 64  # iterations of the parallel loop per block
MIN_ITERATIONS = 2 * BLOCK  # a loop of fewer stays where it is
_MARKS = (VECTOR_MARK, REGISTER_TILE)


def parallel_inward(scop: Scop, schedule: isl.Schedule) -> tuple[isl.Schedule, list[str]]:
    """``schedule`` with each parallel single loop around a recurrence moved below it
    in blocks (see the module), and a note per move."""
    notes: list[str] = []

    def visit(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if not _around_a_recurrence(scop, node):
            return node
        names = ", ".join(sorted(statement_names(node.get_domain())))
        notes.append(f"loop of {names}: parallel around a recurrence, moved inside it "
                     f"in blocks of {BLOCK}")
        ctx = node.get_ctx()
        ctx.set_tile_scale_tile_loops(0)
        ctx.set_tile_shift_point_loops(1)
        sizes = isl.MultiVal.zero(node.band_get_space()).set_val(
            0, isl.Val.int_from_si(ctx, BLOCK))
        return node.band_tile(sizes).child(0).band_sink().parent()

    return map_bottom_up(schedule, visit), notes


def _around_a_recurrence(scop: Scop, node: isl.ScheduleNode) -> bool:
    """``node`` is a single coincident loop of :data:`MIN_ITERATIONS` or more, outside
    any vector or register-tile mark, over single loops only, one of which carries a
    recurrence."""
    if node.get_type() != isl.schedule_node_type.band or node.band_n_member() != 1 \
            or not node.band_member_get_coincident(0) or _below_a_mark(node):
        return False
    bands = _bands_below(node.child(0))
    if not bands:
        return False
    domain = node.get_domain()
    if scop.sizing_context is not None:
        domain = domain.intersect_params(scop.sizing_context)
    own = node.band_get_partial_schedule_union_map().intersect_domain(domain)
    for relation in union_maps(own):
        extent = span(relation.range(), 0)
        if extent is not None and extent < MIN_ITERATIONS:
            return False
    return any(not band.band_member_get_coincident(0) and recurrence_along(scop, band, 0)
               for band in bands)


def _bands_below(node: isl.ScheduleNode) -> list[isl.ScheduleNode] | None:
    """The bands in the subtree of ``node``; None if one has several members or a mark
    is there."""
    kind = node.get_type()
    if kind == isl.schedule_node_type.mark:
        return None
    found: list[isl.ScheduleNode] = []
    if kind == isl.schedule_node_type.band:
        if node.band_n_member() != 1:
            return None
        found.append(node)
    for k in range(node.n_children()):
        below = _bands_below(node.child(k))
        if below is None:
            return None
        found += below
    return found


def _below_a_mark(node: isl.ScheduleNode) -> bool:
    while node.has_parent():
        node = node.parent()
        if node.get_type() == isl.schedule_node_type.mark and \
                node.mark_get_id().get_name() in _MARKS:
            return True
    return False
