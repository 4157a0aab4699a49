"""Rebuilding a schedule tree bottom-up, with some band subtrees replaced.

isl rewrites a node in place only when the domain below it stays the same; a recipe
that adds statements (packing copies) needs a subtree over a larger domain. Here the
tree is rebuilt from its leaves: a replaced band returns a whole new subtree, and every
band above it gets rows for the statements that subtree added (``extend``), so the
enclosing sequences and filters include them too.
"""

from __future__ import annotations

import functools
from typing import Callable

import islpy as isl

from polyc.errors import PolycError
from polyc.islutil import multi_union, sequence, statement_names

Replace = Callable[[isl.ScheduleNode], "isl.Schedule | None"]
# The rows of an outer band member for the statements a replaced subtree added.
Extend = Callable[[isl.UnionPwAff, isl.UnionSet], isl.UnionPwAff]


def rebuild(schedule: isl.Schedule, replace: Replace, extend: Extend,
            moved: set[str] = frozenset()) -> isl.Schedule:
    """``schedule`` with each band for which ``replace(band)`` returns a schedule
    replaced (with everything below it) by that schedule; the children of sequences
    that hold only statements in ``moved`` (which a replacement schedules) are left out."""
    return _subtree(schedule.get_root().child(0), replace, extend, moved)


def _subtree(node: isl.ScheduleNode, replace: Replace, extend: Extend,
             moved: set[str]) -> isl.Schedule:
    kind = node.get_type()
    types = isl.schedule_node_type
    if kind == types.leaf:
        return isl.Schedule.from_domain(node.get_domain())
    if kind == types.filter:
        return _subtree(node.child(0), replace, extend, moved)
    if kind in (types.sequence, types.set):
        parts = [_subtree(node.child(k), replace, extend, moved)
                 for k in range(node.n_children())
                 if not statement_names(node.child(k).filter_get_filter()) <= moved]
        if kind == types.sequence:
            return sequence(parts)
        return functools.reduce(isl.Schedule.set, parts)
    if kind == types.mark:
        inner = _subtree(node.child(0), replace, extend, moved)
        return inner.get_root().child(0).insert_mark(node.mark_get_id()).get_schedule()
    if kind == types.band:
        replaced = replace(node)
        if replaced is not None:
            return replaced
        return _band(node, _subtree(node.child(0), replace, extend, moved), extend)
    raise PolycError(f"tiling cannot rebuild a schedule tree with a {kind} node")


def _band(node: isl.ScheduleNode, inner: isl.Schedule, extend: Extend) -> isl.Schedule:
    partial = node.band_get_partial_schedule()
    added = inner.get_domain().subtract(node.get_domain())
    if not added.is_empty():
        partial = multi_union(partial.get_space(), [extend(partial.get_at(k), added)
                                                    for k in range(partial.size())])
    band = inner.insert_partial_schedule(partial).get_root().child(0)
    band = band.band_set_permutable(node.band_get_permutable())
    for k in range(node.band_n_member()):
        band = band.band_member_set_coincident(k, node.band_member_get_coincident(k))
        band = band.band_member_set_ast_loop_type(k, node.band_member_get_ast_loop_type(k))
    band = band.band_set_ast_build_options(node.band_get_ast_build_options())
    return band.get_schedule()
