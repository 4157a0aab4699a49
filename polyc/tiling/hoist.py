"""Hoisting: a statement that runs in a single iteration of an innermost loop (a
reduction's initialisation fused into the loop of its update: ``if (c1 == 0) init``)
runs before the loop instead, when no dependence forbids it::

    band L (its last member)           sequence
      sequence                           filter: S     band L (one iteration: no loop)
        filter: A                        filter: A, B  band L
        filter: S   (L constant on S)                    sequence: A, B
        filter: B

(a band of several members is first split above its last one, which gets the
sequence).
The loop's body then has no test and its trip count is the whole extent: softmax's
exp-and-sum loop over a row of 1024 ran one iteration peeled off by LLVM (the
test), 63 vectors and a remainder of 15 elements (an 8-wide vector and 7 scalar exps).

Moving S first reorders it only against the loop's earlier iterations, so it is done
when no dependence goes from an instance of the loop's other statements to S under the
same outer loops; the legality checker checks the result like every other schedule.
"""

from __future__ import annotations

import islpy as isl

from polyc.islutil import items, map_bottom_up, outer_schedule, statement_names, union_of
from polyc.scop.model import Scop


def hoist_single_iterations(scop: Scop, schedule: isl.Schedule
                            ) -> tuple[isl.Schedule, list[str]]:
    """``schedule`` with each statement hoisted out of the innermost loop it runs once
    in, and a note per hoist."""
    notes: list[str] = []
    return map_bottom_up(schedule, lambda node: _hoist(scop, node, notes)), notes


def _hoist(scop: Scop, node: isl.ScheduleNode, notes: list[str]) -> isl.ScheduleNode:
    if not _innermost_band_over_a_sequence(node):
        return node
    members = node.band_n_member()
    loop = node.band_get_partial_schedule().get_at(members - 1)
    statements = _filtered(node.child(0))
    once = [name for name in statements if _constant(loop, name)]
    if not once or len(once) == len(statements):
        return node
    domain = node.get_domain()
    hoisted = union_of(scop.ctx, (p for p in items(domain.get_set_list())
                                  if p.get_tuple_name() in once))
    inner = node.band_split(members - 1).child(0) if members > 1 else node
    if _depends_on_the_loop(scop, inner, domain.subtract(hoisted), hoisted):
        return node
    notes.append(f"hoist {', '.join(once)} before its loop")
    hoisted_first = inner.order_before(hoisted)
    return hoisted_first.parent() if members > 1 else hoisted_first


def _innermost_band_over_a_sequence(node: isl.ScheduleNode) -> bool:
    """A band over a sequence of filters with no band below them."""
    if node.get_type() != isl.schedule_node_type.band:
        return False
    if not node.has_children() or node.child(0).get_type() != isl.schedule_node_type.sequence:
        return False
    return not _has_band(node.child(0))


def _has_band(node: isl.ScheduleNode) -> bool:
    found = []

    def visit(child: isl.ScheduleNode) -> bool:
        if child.get_type() == isl.schedule_node_type.band:
            found.append(True)
        return not found

    node.foreach_descendant_top_down(visit)
    return bool(found)


def _filtered(sequence: isl.ScheduleNode) -> list[str]:
    """The statements of a sequence's filters, in order."""
    return [name for k in range(sequence.n_children())
            for name in sorted(statement_names(sequence.child(k).filter_get_filter()))]


def _constant(loop: isl.UnionPwAff, statement: str) -> bool:
    """Whether the loop's schedule is one value on every instance of ``statement`` (a
    function of the parameters at most)."""
    for piece in items(loop.get_pw_aff_list()):
        if piece.domain().get_tuple_name() == statement:
            dims = piece.dim(isl.dim_type.in_)
            return not any(aff.involves_dims(isl.dim_type.in_, 0, dims)
                           for _, aff in piece.get_pieces())
    return False


def _depends_on_the_loop(scop: Scop, node: isl.ScheduleNode, rest: isl.UnionSet,
                         hoisted: isl.UnionSet) -> bool:
    """Whether an instance of ``hoisted`` depends on one of ``rest`` under the same
    outer loops (it must then stay after it)."""
    outer = outer_schedule(node)
    same_outer = outer.apply_range(outer.reverse())
    into = (scop.dependences.all.intersect_domain(rest).intersect_range(hoisted)
            .intersect(same_outer))
    return not into.is_empty()
