"""Rectangular tiling of permutable bands, with the intra-tile order chosen for
vectorization.

Every permutable band of two or more members is first permuted so that its best
stride-1 member is innermost (:mod:`polyc.tiling.order`), then, when some member runs
longer than the tile size, tiled with isl's ``band_tile``: a band of tile loops over a
band of point loops, both permutable, the coincident flags kept. Tiling a permutable
band is always legal (Irigoin and Triolet); the pipeline checks the result anyway.
"""

from __future__ import annotations

import islpy as isl

from polyc.islutil import multi_union, statement_names, union_maps
from polyc.scop.model import Scop
from polyc.tiling.cache import tile_size
from polyc.tiling.order import innermost_member


def tile_bands(scop: Scop, schedule: isl.Schedule, size: int | None,
               skip: set[str] = frozenset()) -> tuple[isl.Schedule, list[str]]:
    """The schedule with every permutable band reordered and tiled, and what was done;
    bands of the statements in ``skip`` alone are left as they are."""
    notes: list[str] = []
    failures: list[BaseException] = []

    def visit(node: isl.ScheduleNode) -> isl.ScheduleNode:
        try:
            if _tileable(node) and not _only(node, skip):
                return _tile_one(scop, node, size, notes)
        except BaseException as err:  # isl swallows callback exceptions: keep them
            failures.append(err)
        return node

    ctx = scop.ctx
    ctx.set_tile_scale_tile_loops(0)   # tile loops count tiles: i = size * T + p
    ctx.set_tile_shift_point_loops(1)  # point loops run from 0 within their tile
    result = schedule.map_schedule_node_bottom_up(visit)
    if failures:
        raise failures[0]
    return result, notes


def _only(node: isl.ScheduleNode, names: set[str]) -> bool:
    return statement_names(node.get_domain()) <= names


def _tileable(node: isl.ScheduleNode) -> bool:
    return (node.get_type() == isl.schedule_node_type.band and node.band_n_member() >= 2
            and bool(node.band_get_permutable()))


def _tile_one(scop: Scop, band: isl.ScheduleNode, size: int | None, notes: list[str]):
    n = band.band_n_member()
    inner = innermost_member(scop, band)
    order = [k for k in range(n) if k != inner] + [inner]
    if order != list(range(n)):
        band = _permute(band, order)
    extents = _extents(scop, band)
    statements = statement_names(band.get_domain())
    arrays = {a for s in statements for a in _arrays(scop, s)}
    chosen = size or tile_size(len(arrays))
    names = ", ".join(sorted(statements))
    permuted = "" if order == list(range(n)) else f", members reordered {tuple(order)}"
    if all(e is not None and e <= chosen for e in extents):
        notes.append(f"band of {names}: one tile (extents {extents}){permuted}")
        return band
    sizes = isl.MultiVal.zero(band.band_get_space())
    for k in range(n):
        sizes = sizes.set_val(k, isl.Val.int_from_si(scop.ctx, chosen))
    notes.append(f"band of {names}: tiles {'x'.join([str(chosen)] * n)}{permuted}")
    return band.band_tile(sizes)


def _permute(band: isl.ScheduleNode, order: list[int]) -> isl.ScheduleNode:
    partial = band.band_get_partial_schedule()
    coincident = [band.band_member_get_coincident(k) for k in order]
    permuted = multi_union(partial.get_space(), [partial.get_at(k) for k in order])
    node = band.delete().insert_partial_schedule(permuted).band_set_permutable(1)
    for k, flag in enumerate(coincident):
        node = node.band_member_set_coincident(k, flag)
    return node


def _extents(scop: Scop, band: isl.ScheduleNode) -> list[int | None]:
    """Each member's trip count over the band's domain at the bound parameter values
    (None when not a constant)."""
    times = band.band_get_partial_schedule_union_map().intersect_domain(band.get_domain())
    if scop.context is not None:
        times = times.intersect_params(scop.context)
    extents = []
    for k in range(band.band_n_member()):
        values = [_span(m.range(), k) for m in union_maps(times)]
        extents.append(None if None in values or not values else max(values))
    return extents


def _span(times: isl.Set, k: int) -> int | None:
    high, low = times.dim_max_val(k), times.dim_min_val(k)
    if not (high.is_int() and low.is_int()):
        return None
    return high.to_python() - low.to_python() + 1


def _arrays(scop: Scop, name: str) -> set[str]:
    statement = scop.statement(name)
    return {a.array for a in (statement.write,) + statement.reads}
