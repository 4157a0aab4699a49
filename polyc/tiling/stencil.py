"""Stencil bands: tile sizes per member, diamond tiles, and a wavefront over tiles.

A *stencil band* is a permutable band of two or more members whose first member is the
time loop ``t`` of every statement (its outermost loop, scaled and shifted), carrying a
dependence, and whose other members are skewed by it: Pluto's bands for time-iterated
stencils, e.g. jacobi-2d's ``(t, 2t + i, 2t + j)``. Its rectangular tiles are
parallelograms in the original iteration space.

Sizes (:func:`stencil_sizes`). Inside a tile each time step sweeps the tile's
cross-section (the product of its space widths) and the next step reuses it from L1,
shifted by the skew; the time steps of a tile amortise loading it. Measured on one core
(L1 48 KiB; jacobi-1d/2d, seidel-2d, heat-3d with arrays out of L2):

- innermost member: 256 iterations, so the stride-1 loop vectorizes over long rows;
  the only space member (1-d) takes as many as fit in L1, at most 2048. When a flow
  dependence runs along it (a recurrence: seidel-2d's ``A[i][j - 1]``) the loop cannot
  vectorize and 8 is best (1.5x faster than 16, 2.9x than 256): short rows let the
  out-of-order core overlap the latency chains of consecutive rows;
- the other space members: equal powers of two whose cross-section of all arrays fits in
  L1, between 8 and 64 (jacobi-2d: 16; 32, a 64 KiB cross-section, was 14% slower);
- time: 16 (8 to 64 ran alike on jacobi-2d and seidel-2d), at most the narrowest other
  space width (heat-3d: 8).

Distributed point loops (:func:`distribution`, :func:`distribute_points`): where a
dependence between two statements runs along the fused innermost point loop (Pluto
shifts jacobi-2d's second statement by one row and column to fuse it), that loop
carries it and runs scalar; each statement then gets its own innermost loop, in an
order the dependences allow, which vectorizes. The tile's cross-section is then read
in rows from L2, so it takes half of L2 in the widest element's bytes (not L1 in
floats). PolyBench LARGE, double, AVX2 Zen 3 (L2 512 KiB), jacobi-2d: fused 16x16x256
tiles 1.47 s, distributed 0.88 s; distributed 32x32x256 0.74-0.83 s, 64x64x256 0.76 s,
128x128x256 0.73 s, 8x8x256 1.05 s; the original loops untiled 1.05-1.42 s, clang
1.09-1.28 s (three runs of each in one session, interleaved).

Diamond tiles (:func:`diamond_tile`; Pluto tiles this way by default): when the
scheduler finds a row ``c`` that puts the time loop strictly inside the cone of ``c`` and
the second member (:func:`polyc.scheduler.pluto.concurrent_start`), the tile loops use
``(c, phi_1, ..)`` and the loops inside a tile keep the band's own rows
``(t, phi_1, ..)`` (Pluto's evicted hyperplane), so each time step of a tile is still a
stride-1 row. The first two members get the same size. Tiles along ``t = 0`` start
concurrently: the wavefront below runs all tiles of a time row at once, where over
parallelograms it starts with one tile and adds one per wavefront. On one core diamond
and parallelogram tiles ran alike (within 5%); on two threads the diamond wavefronts ran
jacobi-1d/2d 1.9x and heat-3d 1.7x faster than on one.

Wavefront (:func:`wavefront`): a tile band without a coincident member runs its tiles
one after another. ``(T0, T1, ..) -> (T0 + T1, T1, ..)`` makes ``T1`` parallel. Proof:
the band is permutable, so every dependence it does not leave to the loops below has a
distance vector ``d >= 0`` over its rows (point rows; tile rows are their floors,
monotone, so the same holds for them). The new first member has distance
``d0 + d1 >= 0``: still permutable. A dependence with distance 0 along ``T0 + T1`` has
``d0 = d1 = 0``: distance 0 along ``T1``, which is therefore coincident. On one core the
wavefront order cost 0-8% on the four stencils.

The innermost point loops of stencil tiles are separated (isl's ``separate`` AST
option): the statements' domains are shifted against each other, and without it every
row runs under their guards (jacobi-2d 1.2x).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import islpy as isl

from polyc.islutil import (
    equal_before,
    multi_union,
    outer_schedule,
    statement_names,
    union_maps,
    union_sets,
)
from polyc.notation import format_aff
from polyc.scheduler.base import group_dependences
from polyc.scheduler.cost import BYTES
from polyc.scheduler.pluto import concurrent_start, is_time_row
from polyc.scheduler.tree import row_aff
from polyc.scop.model import Scop
from polyc.tiling.cache import FLOAT_BYTES, Caches

TIME = 16  # time steps per tile, at most
INNER = 256  # innermost (stride-1) width when there are other space members
INNER_ALONE = 2048  # the only space member: at most this wide
RECURRENCE = 8  # innermost width when a flow dependence runs along it
SPACE = (8, 64)  # other space members: power of two in this range


@dataclass(frozen=True)
class Stencil:
    """What tiling needs to know about a stencil band."""

    rows: tuple[dict, ...]  # Pluto rows per member: {statement: (coefficients, shift)}
    dependences: isl.UnionMap  # live at the band: not ordered by anything above it
    recurrence: bool  # a flow dependence runs along the innermost member alone
    arrays: int  # distinct arrays the band's statements access
    # the statements in the order their innermost point loops run, distributed
    # (:func:`distribution`), or () where that loop stays fused
    distributed: tuple[str, ...] = ()
    element: int = FLOAT_BYTES  # bytes of the widest element accessed
    # the live dependences as the analysis gave them, before isl merged their pieces
    pieces: Callable[[], isl.UnionMap] | None = field(default=None, compare=False)


def stencil_band(scop: Scop, band: isl.ScheduleNode) -> Stencil | None:
    """The band as a :class:`Stencil`, or None when it is not one (see the module)."""
    if band.band_member_get_coincident(0):
        return None
    rows = _rows(band)
    if rows is None or not all(is_time_row(row) for row in rows[0].values()):
        return None
    if not any(coefs[0] for member in rows[1:] for coefs, _ in member.values()):
        return None  # not skewed: e.g. matmul's (i, k, j)
    deps = _live_dependences(scop, band)
    statements = [scop.statement(name) for name in rows[0]]
    arrays = {a.array for s in statements for a in (s.write,) + s.reads}
    element = max(BYTES.get(scop.array(a).dtype, FLOAT_BYTES) for a in arrays)
    return Stencil(rows, deps, _recurrence(scop, band, deps), len(arrays),
                   distribution(band, deps), element,
                   lambda: _live_dependences(scop, band, pieces=True))


def stencil_sizes(stencil: Stencil, n: int, caches: Caches, *, diamond: bool) -> list[int]:
    """Tile sizes of the ``n`` members (the model in the module docstring)."""
    cache = caches.l2 // 2 if stencil.distributed else caches.l1
    budget = cache // (stencil.element * max(stencil.arrays, 1))  # cross-section, elements
    middle = n - 2  # space members other than the innermost
    if stencil.recurrence:
        inner = RECURRENCE
    elif middle:
        inner = INNER
    else:
        inner = min(INNER_ALONE, _power_of_two(budget))
    width = _power_of_two(budget // inner, middle) if middle else 0
    width = min(max(width, SPACE[0]), SPACE[1])
    time = min(TIME, width) if middle else TIME
    sizes = [time] + [width] * middle + [inner]
    if diamond:
        sizes[0] = sizes[1]
    return sizes


def diamond_row(scop: Scop, stencil: Stencil) -> dict | None:
    """A first tile row allowing concurrent start, if the scheduler finds one and the
    second member is not the time loop too (it is for a statement with no loop of its
    own there, e.g. fdtd-2d's ``ey[0][j]`` once ``i`` goes innermost)."""
    if len(stencil.rows) < 2 or any(is_time_row(row) for row in stencil.rows[1].values()):
        return None
    return concurrent_start(scop, stencil.dependences, list(stencil.rows), stencil.pieces)


def diamond_tile(scop: Scop, band: isl.ScheduleNode, first: dict, sizes: isl.MultiVal
                 ) -> isl.ScheduleNode:
    """The tile band of ``band`` tiled along ``(first, phi_1, ..)``, above a point band with
    ``band``'s own rows: T(S): (t, phi_1, ..) -> (c/s0, phi_1/s1, .., t, phi_1, ..).
    Legal when ``first`` is valid on every dependence live at the band: tile distances
    are then >= 0 member-wise, and within a tile the band's own rows order as before."""
    n = band.band_n_member()
    point = band.band_get_partial_schedule()
    coincident = [band.band_member_get_coincident(k) for k in range(n)]
    members = [_member(scop, first, band.get_domain())]
    members += [point.get_at(k) for k in range(1, n)]
    node = band.delete().insert_partial_schedule(multi_union(point.get_space(), members))
    node = node.band_set_permutable(1).band_tile(sizes).child(0)
    node = node.delete().insert_partial_schedule(point).band_set_permutable(1)
    for k, flag in enumerate(coincident):  # still true below more loops
        node = node.band_member_set_coincident(k, flag)
    return node.parent()


def separate_points(tile: isl.ScheduleNode) -> isl.ScheduleNode:
    """The point band below ``tile`` with its innermost loop separated."""
    point = tile.child(0)
    last = point.band_n_member() - 1
    return point.band_member_set_ast_loop_type(last, isl.ast_loop_type.separate).parent()


def distribution(band: isl.ScheduleNode, deps: isl.UnionMap) -> tuple[str, ...]:
    """The order in which to run the band's statements, each in its own innermost
    loop, where a dependence between two of them runs along the fused innermost loop;
    () where none does or the statements cannot be ordered so.

    Jacobi-2d's ``(t, 2t + i, 2t + j)`` and ``(t, 2t + i + 1, 2t + j + 1)``: S0 at row
    ``i + 1`` writes what S1 at row ``i`` reads a ``j`` earlier, in the same iteration of
    the outer loops, so the fused ``j`` loop carries a dependence and runs scalar.
    Distributing it is legal when the dependences between statements in the same
    iteration of the outer members (``deps``, those the band orders) form no cycle: the
    sequence follows them (a topological order, ties by name), and a statement's own
    dependences keep their order along its loop. Each statement's loop then carries only
    its own dependences."""
    n = band.band_n_member()
    names = sorted(statement_names(band.get_domain()))
    if n < 2 or len(names) < 2:
        return ()
    times = band.band_get_partial_schedule_union_map()
    before: dict[str, set[str]] = {name: set() for name in names}
    for dep in union_maps(deps):
        source = dep.get_tuple_name(isl.dim_type.in_)
        sink = dep.get_tuple_name(isl.dim_type.out)
        if source == sink or sink not in before:
            continue
        pairs = isl.UnionMap.from_map(dep).apply_domain(times).apply_range(times)
        if any(not equal_before(m, n - 1).is_empty() for m in union_maps(pairs)):
            before[sink].add(source)
    if not any(before.values()):
        return ()
    order: list[str] = []
    while len(order) < len(names):
        ready = [name for name in names if name not in order and before[name] <= set(order)]
        if not ready:
            return ()  # a cycle: the loop stays fused
        order.append(ready[0])
    return tuple(order)


def distribute_points(tile: isl.ScheduleNode, order: tuple[str, ...]) -> isl.ScheduleNode:
    """The innermost point loop below ``tile`` distributed over the statements in
    ``order`` (:func:`distribution`: a sequence of one loop each)."""
    point = tile.child(0)
    domain = point.get_domain()
    filters = isl.UnionSetList.alloc(tile.get_ctx(), len(order))
    for name in order:
        (piece,) = [d for d in union_sets(domain) if d.get_tuple_name() == name]
        filters = filters.add(isl.UnionSet.from_set(piece))
    inner = point.band_split(point.band_n_member() - 1).child(0)
    return inner.insert_sequence(filters).parent().parent()


def wavefront(tile: isl.ScheduleNode) -> isl.ScheduleNode:
    """``(T0, T1, ..) -> (T0 + T1, T1, ..)`` with ``T1`` coincident (proof in the module
    docstring); ``tile`` must be a permutable band of two or more members."""
    partial = tile.band_get_partial_schedule()
    members = [partial.get_at(k) for k in range(tile.band_n_member())]
    members[0] = members[0].add(members[1])
    node = tile.delete().insert_partial_schedule(multi_union(partial.get_space(), members))
    return node.band_set_permutable(1).band_member_set_coincident(1, 1)


def describe_row(scop: Scop, row: dict) -> str:
    """``S1: 2*t - i; S2: 2*t - i + 1``."""
    return "; ".join(f"{name}: {format_aff(row_aff(scop, name, row[name]))}"
                     for name in sorted(row))


def _rows(band: isl.ScheduleNode) -> tuple[dict, ...] | None:
    """The band's members as Pluto rows, if every statement's are affine in its
    iterators alone (no parameters, no floor)."""
    n = band.band_n_member()
    rows: list[dict] = [{} for _ in range(n)]
    partial = band.band_get_partial_schedule_union_map().intersect_domain(band.get_domain())
    for relation in union_maps(partial):
        name = relation.get_tuple_name(isl.dim_type.in_)
        try:
            multi = isl.PwMultiAff.from_map(relation)
        except isl.Error:
            return None
        for k in range(n):
            row = _pluto_row(multi.get_at(k))
            if row is None:
                return None
            rows[k][name] = row
    return tuple(rows)


def _pluto_row(function: isl.PwAff):
    if function.n_piece() != 1:
        return None
    aff = function.get_pieces()[0][1]
    if aff.dim(isl.dim_type.div) or any(
            not aff.get_coefficient_val(isl.dim_type.param, p).is_zero()
            for p in range(aff.dim(isl.dim_type.param))):
        return None
    values = [aff.get_coefficient_val(isl.dim_type.in_, d)
              for d in range(aff.dim(isl.dim_type.in_))]
    shift = aff.get_constant_val()
    if not shift.is_int() or any(not v.is_int() for v in values):
        return None
    return tuple(v.to_python() for v in values), shift.to_python()


def _member(scop: Scop, row: dict, domain: isl.UnionSet) -> isl.UnionPwAff:
    """A Pluto row as a band member over ``domain``."""
    result = None
    for name, value in row.items():
        piece = isl.UnionPwAff.from_pw_aff(isl.PwAff.from_aff(row_aff(scop, name, value)))
        result = piece if result is None else result.union_add(piece)
    return result.intersect_domain_union_set(domain)


def _live_dependences(scop: Scop, band: isl.ScheduleNode, *, pieces: bool = False
                      ) -> isl.UnionMap:
    """Dependences among the band's instances that the tree above it leaves unordered
    (``pieces``: as the analysis gave them). Kept parametric (not at the bound values):
    Farkas' lemma on heat-3d's at T=3, N=8 took a minute, on the parametric ones 0.7 s."""
    domain = band.get_domain()
    deps = group_dependences(scop, domain, pieces=pieces)
    prefix = outer_schedule(band)
    if all(m.dim(isl.dim_type.out) == 0 for m in union_maps(prefix)):
        return deps
    return deps.intersect(prefix.apply_range(prefix.reverse()))


def _recurrence(scop: Scop, band: isl.ScheduleNode, deps: isl.UnionMap) -> bool:
    """A statement reads what it wrote an iteration of the innermost member earlier:
    a flow dependence from a statement to itself with distance 0 on every other member.
    (Between two statements, the source runs first in the loop body, so a vector of
    iterations still sees the values it needs.)"""
    times = band.band_get_partial_schedule_union_map()
    zero = isl.Val.zero(scop.ctx)
    last = band.band_n_member() - 1
    for flow in union_maps(scop.dependences.raw.intersect(deps)):
        if flow.get_tuple_name(isl.dim_type.in_) != flow.get_tuple_name(isl.dim_type.out):
            continue
        pairs = isl.UnionMap.from_map(flow).apply_domain(times).apply_range(times)
        for distances in union_sets(pairs.deltas()):
            for k in range(last):
                distances = distances.fix_val(isl.dim_type.set, k, zero)
            if not distances.is_subset(distances.fix_val(isl.dim_type.set, last, zero)):
                return True
    return False


def _power_of_two(value: int, root: int = 1) -> int:
    """The largest power of two ``p`` with ``p ** root <= value`` (1 at least)."""
    p = 1
    while (2 * p) ** root <= value:
        p *= 2
    return p
