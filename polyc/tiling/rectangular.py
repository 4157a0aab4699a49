"""Rectangular tiling of permutable bands, with the intra-tile order chosen for
vectorization.

Every permutable band of two or more members is first permuted so that its best
stride-1 member is innermost (:mod:`polyc.tiling.order`), then, when some member runs
longer than its tile size, tiled with isl's ``band_tile``: a band of tile loops over a
band of point loops, both permutable, the coincident flags kept. Tiling a permutable
band is always legal (Irigoin and Triolet); the pipeline checks the result anyway.

Stencil bands (skewed, time loop first; :mod:`polyc.tiling.stencil`) get sizes per
member, diamond tiles when the scheduler finds a row for concurrent start, and
separated point loops. A tile band with no coincident member becomes a wavefront over
its first two tile loops, so the second one is parallel. With ``tile2`` the other bands
get a second level of tiles around the first (:mod:`polyc.tiling.levels`); the
wavefront then runs over the second-level tiles.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import islpy as isl

from polyc.errors import PolycError
from polyc.islutil import (
    band_with_rows,
    map_bottom_up,
    outer_schedule,
    permuted_band,
    span,
    statement_names,
    union_maps,
)
from polyc.marks import LANES
from polyc.marks import TRANSPOSE as TRANSPOSE_MARK
from polyc.scop.model import Scop
from polyc.tiling import levels
from polyc.tiling.cache import host_caches, tile_size
from polyc.tiling.levels import sizes_value, tile_options, tiled
from polyc.tiling.order import access_strides, innermost_member, statement_strides
from polyc.tiling.overrides import Lookup, per_statement, tile_sizes
from polyc.tiling.stencil import (
    Stencil,
    describe_row,
    diamond_row,
    diamond_tile,
    distribute_points,
    separate_points,
    stencil_band,
    stencil_sizes,
    wavefront,
)

# A transposing band (one access stride 1 along the innermost member, another along an
# outer one) gets tiles of this many iterations of that outer member and of the
# innermost, 1 of the others: the tile's rows of both arrays stay in L1. A 7x7 stride-2
# conv's output, 64 channels x 112x112 pixels with Relu, written back from (pixel,
# channel) to (channel, pixel): 4.6 ms as one tile, 0.34-0.41 ms with 16 or 32 x 112,
# 0.30 with 64 x 112, 0.56 with 16 x 2 x 112.
TRANSPOSE_TILE = (64, 112)  # multiples of LANES: whole register transposes

# A window Map vectorized along its innermost member with a constant operand that moves
# along that member alone (a depthwise conv over channels-last pixels: each tap reads a
# pixel's channels and the tap's per-channel weights) gets tiles of one vector along the
# innermost member and WINDOW_TILE along the others: the tile's taps' weights (25
# vectors for 5x5) stay in registers over its pixels, where tiles of 176 channels
# loaded a weight vector per tap per output vector. 5x5 depthwise convs + Relu, 1
# thread: 240 channels at 28x28 0.215 -> 0.110 ms (onnxruntime 0.116), 672 at 14x14
# 0.152 -> 0.090, 1152 at 7x7 0.068 -> 0.049, 144 at 56x56 stride 2 0.118 -> 0.066;
# 3x3, 32 at 112x112 0.079 -> 0.072. Spatial tiles of 4x32, 8x32, 16x16 and 64x64
# ran within 10% of each other; 32 channels (two vectors) lost 0-50%.
WINDOW_TILE = 16
WINDOW_READS = 9  # reads of one computed array that make a statement a window (3x3)


def tile_bands(scop: Scop, schedule: isl.Schedule, sizes: Lookup | int | None = None,
               skip: set[str] = frozenset(), *, without: tuple[str, ...] = (),
               tile2: bool | int = False) -> tuple[isl.Schedule, list[str]]:
    """The schedule with every permutable band reordered and tiled, and what was done;
    bands of the statements in ``skip`` alone are left as they are. ``sizes(statement
    names)`` fixes a band's sizes (an int for every member, or one per member) or is
    None for the model's (:mod:`polyc.tiling.overrides`); an int or None instead applies
    to every band; ``without`` names strategies to leave out
    (:mod:`polyc.strategies`: ``diamond`` keeps stencil tiles parallelograms;
    ``wavefront``, ``distribute``, ``reorder``); ``tile2`` adds second-level tiles
    (:mod:`polyc.tiling.levels`: True sized from the caches, an int that many
    first-level tiles per member)."""
    if not callable(sizes):
        sizes = per_statement(sizes, scop, "tile_size", tile_sizes)
    notes: list[str] = []

    def visit(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if _tileable(node) and not _only(node, skip):
            size = sizes(statement_names(node.get_domain()))
            return _tile_one(scop, node, size, notes, without, tile2)
        return node

    tile_options(scop.ctx)
    return map_bottom_up(schedule, visit), notes


def _only(node: isl.ScheduleNode, names: set[str]) -> bool:
    return statement_names(node.get_domain()) <= names


def _tileable(node: isl.ScheduleNode) -> bool:
    """A permutable band of two or more members that isl may tile: not one whose
    subtree an ``isolate`` option (:meth:`polyc.steer.Schedule.isolate`) anchors."""
    return (node.get_type() == isl.schedule_node_type.band and node.band_n_member() >= 2
            and bool(node.band_get_permutable()) and not node.is_subtree_anchored())


def _tile_one(scop: Scop, band: isl.ScheduleNode, size: int | tuple[int, ...] | None,
              notes: list[str], without: tuple[str, ...] = (), tile2: bool | int = False):
    n = band.band_n_member()
    inner = innermost_member(scop, band)
    chained = inner
    if "reorder" not in without:
        inner = _parallel_inner(scop, band, inner)
    order = [k for k in range(n) if k != inner] + [inner]
    if order != list(range(n)):
        band = permuted_band(band, order)
    extents = _extents(scop, band)
    statements = statement_names(band.get_domain())
    names = ", ".join(sorted(statements))
    permuted = "" if order == list(range(n)) else f", members reordered {tuple(order)}"
    if chained != inner:
        permuted += (f" (member {chained} carries a recurrence, member {inner} is "
                     "parallel: innermost)")
    stencil = stencil_band(scop, band)
    if stencil is not None and "distribute" in without:  # (and the sizes of fused loops)
        stencil = dataclasses.replace(stencil, distributed=())
    members = _transposed_members(scop, band, extents) if stencil is None and size is None \
        else None
    merged = None if members is None else _merged_rows(scop, band, members, extents)
    if merged is not None:  # (the merged rows have no stride along each loop)
        band, members, n = *merged, n - 1
        extents = _extents(scop, band)
        permuted += ", rows merged into one loop"
    window = members is None and stencil is None and size is None and _channel_window(scop,
                                                                                      band)
    two = bool(tile2) and members is None and stencil is None and not window
    if window:
        sizes = [WINDOW_TILE] * (n - 1) + [LANES]
    elif members is None:
        sizes = _sizes(scop, statements, stencil, n, size, diamond=False, level=1 if two else 2)
    else:
        sizes = [1] * n
        for member, chosen in zip(members, TRANSPOSE_TILE):
            sizes[member] = chosen
    blocks = members is not None and _register_transposes(band, members, extents)
    small = size is None and stencil is None and members is None and _fits_l1(scop, statements)
    if (small or all(e is not None and e <= s for e, s in zip(extents, sizes))) and not blocks:
        why = " (its arrays fit in L1)" if small else ""
        notes.append(f"band of {names}: one tile (extents {extents}){why}{permuted}")
        return band
    first = diamond_row(scop, stencil) if stencil is not None and "diamond" not in without \
        else None
    if first is not None:
        sizes = _sizes(scop, statements, stencil, n, size, diamond=True)
    model = " (stencil sizes)" if stencil is not None and size is None else ""
    notes.append(f"band of {names}: tiles {'x'.join(map(str, sizes))}{permuted}{model}")
    if first is not None:
        tile = diamond_tile(scop, band, first, sizes_value(band, sizes))
        notes.append(f"band of {names}: diamond tiles, first tile row {describe_row(scop, first)}"
                     " (concurrent start along t)")
    else:
        tile = tiled(band, sizes)
    if two:
        tile = _second_level(tile, statements, extents, sizes, tile2, notes)
    elif tile2:
        kind = "stencil" if stencil is not None else "transposing" if members is not None \
            else "channel window"
        notes.append(f"band of {names}: one level of tiles (a {kind} band; second-level "
                     "tiles are for rectangular bands)")
    if stencil is not None:
        tile = separate_points(tile)
    if stencil is not None and stencil.distributed:
        tile = distribute_points(tile, stencil.distributed)
        notes.append(f"band of {names}: innermost point loop distributed over "
                     f"{', '.join(stencil.distributed)} (a dependence between them runs "
                     "along it)")
    if blocks:
        tile = _transpose_blocks(tile, members)
        notes.append(f"band of {names}: {LANES}x{LANES} blocks transposed in registers")
    if not any(tile.band_member_get_coincident(k) for k in range(n)) \
            and "wavefront" not in without:
        tile = wavefront(tile)
        notes.append(f"band of {names}: wavefront over tile loops 0+1 (tile loop 1 parallel)")
    return tile


def _parallel_inner(scop: Scop, band: isl.ScheduleNode, inner: int) -> int:
    """``inner``, or a parallel (coincident) member to run innermost instead where
    ``inner`` carries a recurrence: a statement reads what it wrote an iteration of
    ``inner`` earlier, the other members and the loops outside equal. The recurrence
    then runs as many chains side by side as the parallel member has iterations in a
    tile, and the innermost loop vectorizes. PolyBench's adi,
    ``p[i][j] = -c / (a * p[i][j - 1] + b)``: each ``j`` waits for the division of the
    one before; with ``i`` innermost a tile's rows divide at once, their cache lines
    (one per row and array) kept in L1 across the tile's ``j``."""
    n = band.band_n_member()
    if band.band_member_get_coincident(inner):
        return inner
    parallel = [k for k in range(n) if band.band_member_get_coincident(k)]
    if not parallel or not recurrence_along(scop, band, inner):
        return inner
    return parallel[-1]


def recurrence_along(scop: Scop, band: isl.ScheduleNode, member: int) -> bool:
    """A cycle of flow dependences among the band's statements, with the loops outside
    and the other members equal, one of them carried by ``member``: each iteration of
    it waits for values the one before computed (deriche's ``y1[i][j]`` from ``ym1``,
    which the statement after it set to ``y1[i][j - 1]``). A reduction's own dependence
    (one element read and written along ``member``) does not count: it runs in vector
    lanes with fast math."""
    domain = band.get_domain()
    times = outer_schedule(band, domain).flat_range_product(
        band.band_get_partial_schedule_union_map().intersect_domain(domain))
    names = statement_names(domain)
    edges: dict[str, set[str]] = {name: set() for name in names}
    carried_edges = []
    for flow in union_maps(scop.dependences.raw):
        source = flow.get_tuple_name(isl.dim_type.in_)
        sink = flow.get_tuple_name(isl.dim_type.out)
        if source not in names or sink not in names:
            continue
        if source == sink:
            write = scop.statement(source).write.relation
            flow = flow.subtract(write.apply_range(write.reverse()))  # not a reduction's
        pairs = isl.UnionMap.from_map(flow).apply_domain(times).apply_range(times)
        for relation in union_maps(pairs):
            n_dims = relation.dim(isl.dim_type.in_)
            at = n_dims - band.band_n_member() + member
            for d in range(n_dims):
                if d != at:
                    relation = relation.equate(isl.dim_type.in_, d, isl.dim_type.out, d)
            same = relation.equate(isl.dim_type.in_, at, isl.dim_type.out, at)
            if not same.is_empty():
                edges[source].add(sink)
            if not relation.subtract(same).is_empty():
                edges[source].add(sink)
                carried_edges.append((source, sink))
    return any(_reaches(edges, sink, source) for source, sink in carried_edges)


def _reaches(edges: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        for nxt in edges[node] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return False


def _transposed_members(scop: Scop, band: isl.ScheduleNode, extents: list[int | None]
                        ) -> tuple[int, int] | None:
    """``(across, inner)`` for a transposing band: ``inner`` the innermost member of
    more than one iteration, some access stride 1 along it, and another stride 1 along
    ``across``, an outer member, and a larger stride along ``inner``; else None."""
    moving = [k for k, e in enumerate(extents) if e != 1]
    if len(moving) < 2:
        return None
    inner = moving[-1]
    strides = access_strides(scop, band)
    if not any(abs(s[inner]) == 1 for s in strides):
        return None
    across = [k for s in strides for k in moving[:-1] if abs(s[k]) == 1 and abs(s[inner]) > 1]
    return (across[0], inner) if across else None


def _merged_rows(scop: Scop, band: isl.ScheduleNode, members: tuple[int, int],
                 extents: list[int | None]
                 ) -> tuple[isl.ScheduleNode, tuple[int, int]] | None:
    """A copy's transposing band with a member ``x`` of ``members`` (across or inner)
    shorter than LANES merged with another member ``m`` that every access moves by
    ``extents[x]`` times its stride along ``x`` (an image's rows and columns, both
    contiguous in one of the layouts, as ``m * W + x``): one loop of pixels, long enough
    for register transposes; and its (across, inner) members. None when there is no
    such member, or the band is not one statement that writes each element once and
    reads nothing it writes (the order of its instances is free)."""
    across, inner = members
    names = statement_names(band.get_domain())
    short = [x for x in members if extents[x] is not None and extents[x] < LANES]
    if not short or len(names) != 1:
        return None
    statement = scop.statement(next(iter(names)))
    if any(r.array == statement.write.array for r in statement.reads) \
            or not statement.write.relation.is_injective():
        return None
    strides = access_strides(scop, band)
    x, width = short[0], extents[short[0]]
    outer = [m for m in range(band.band_n_member()) if m not in members and extents[m]
             and extents[m] * width >= LANES and all(s[m] == width * s[x] for s in strides)]
    if not outer:
        return None
    m = outer[0]
    partial = band.band_get_partial_schedule()
    rows = [partial.get_at(k) for k in range(band.band_n_member())]
    rows[x] = rows[m].scale_val(isl.Val.int_from_si(scop.ctx, width)).add(rows[x])
    coincident = [band.band_member_get_coincident(k) for k in range(len(rows))]
    coincident[x] = coincident[x] and coincident[m]
    del rows[m], coincident[m]
    return band_with_rows(band, rows, coincident), (across - (m < across), inner - (m < inner))


def _register_transposes(band: isl.ScheduleNode, members: tuple[int, int],
                         extents: list[int | None]) -> bool:
    """Whether a transposing band's tiles get blocks of LANES x LANES (across, inner)
    iterations transposed in registers (:mod:`polyc.codegen.transpose`): one statement,
    and both members at least LANES long."""
    return len(statement_names(band.get_domain())) == 1 and all(
        extents[m] is not None and extents[m] >= LANES for m in members)


def _transpose_blocks(tile: isl.ScheduleNode, members: tuple[int, int]) -> isl.ScheduleNode:
    """The tile band ``tile`` with its point band cut into blocks of LANES along
    ``members`` (1 along the others), each under a transpose mark."""
    points = tile.child(0)
    values = sizes_value(points, [LANES if k in members else 1
                                  for k in range(points.band_n_member())])
    marked = points.band_tile(values).child(0).insert_mark(
        isl.Id(TRANSPOSE_MARK, context=tile.get_ctx()))
    return marked.parent().parent()


def _channel_window(scop: Scop, band: isl.ScheduleNode) -> bool:
    """Whether ``band`` is one window statement whose innermost member moves its write
    and a constant read by 1 and that read along no other member (see WINDOW_TILE)."""
    relations = union_maps(band.band_get_partial_schedule_union_map()
                           .intersect_domain(band.get_domain()))
    if len(relations) != 1:
        return False
    statement = scop.statement(relations[0].get_tuple_name(isl.dim_type.in_))
    computed = Counter(r.array for r in statement.reads
                       if scop.array(r.array).kind != "constant")
    strides = statement_strides(scop, relations[0])
    if not computed or max(computed.values()) < WINDOW_READS or strides is None:
        return False
    write, reads = strides[0], strides[1:]
    along_inner = [0] * (len(write or ()) - 1) + [1]
    return write is not None and write[-1] == 1 and any(
        scop.array(r.array).kind == "constant" and s == along_inner
        for r, s in zip(statement.reads, reads))


def _second_level(tile: isl.ScheduleNode, statements: set[str], extents: list[int | None],
                  sizes: list[int], tile2: bool | int, notes: list[str]
                  ) -> isl.ScheduleNode:
    """The band of tile loops ``tile`` (first-level tiles of ``sizes``) tiled again
    (:mod:`polyc.tiling.levels`), unless one second-level tile would hold the band."""
    names = ", ".join(sorted(statements))
    counts = levels.ratios(tile2, sizes)
    shown = "x".join(map(str, counts))
    if not levels.worth_it(extents, sizes, counts):
        notes.append(f"band of {names}: one level of tiles (second-level tiles of {shown} "
                     f"would hold the band, extents {extents})")
        return tile
    model = " (from the caches)" if tile2 is True else ""
    notes.append(f"band of {names}: second-level tiles of {shown} tiles"
                 f" ({'x'.join(str(s * c) for s, c in zip(sizes, counts))}){model}")
    return tiled(tile, counts)


def _sizes(scop: Scop, statements: set[str], stencil: Stencil | None, n: int,
           size: int | tuple[int, ...] | None, *, diamond: bool, level: int = 2
           ) -> list[int]:
    """Tile size per member: ``size`` when given (one for all, or one per member), else
    the stencil model or one size from the cache model (``level`` 1: the first of two
    levels, one array's slice in L1, :mod:`polyc.tiling.cache`)."""
    if isinstance(size, tuple):
        if len(size) != n:
            raise PolycError(f"tile_size {size} for the band of {', '.join(sorted(statements))}:"
                             f" {len(size)} sizes for a band of {n} loops")
        return list(size)
    if size is not None:
        return [size] * n
    if stencil is not None:
        return stencil_sizes(stencil, n, host_caches(), diamond=diamond)
    if level == 1:
        return [tile_size(1, level=1)] * n
    arrays = {a for s in statements for a in _arrays(scop, s)}
    return [tile_size(len(arrays))] * n


def _extents(scop: Scop, band: isl.ScheduleNode) -> list[int | None]:
    """Each member's trip count over the band's domain at the bound parameter values
    (None when not a constant)."""
    times = band.band_get_partial_schedule_union_map().intersect_domain(band.get_domain())
    if scop.sizing_context is not None:
        times = times.intersect_params(scop.sizing_context)
    extents = []
    for k in range(band.band_n_member()):
        values = [span(m.range(), k) for m in union_maps(times)]
        extents.append(None if None in values or not values else max(values))
    return extents


def _fits_l1(scop: Scop, statements: set[str]) -> bool:
    """Whether every array the statements touch, together, fits in L1 and none reads
    through a guard (a window's border, which the tiles' border split unguards): tiles
    would only split the loops (a 2-layer MLP's last layer, 8x256 @ 256x10, in tiles of
    208 took 2.7 us, untiled 1.2 us)."""
    if any(r.guard is not None for name in statements for r in scop.statement(name).reads):
        return False
    arrays = [scop.array(a) for a in {a for name in statements for a in _arrays(scop, name)}]
    if any(array.symbolic for array in arrays):
        return False
    return sum(array.nbytes for array in arrays) <= host_caches().l1


def _arrays(scop: Scop, name: str) -> set[str]:
    statement = scop.statement(name)
    return {a.array for a in (statement.write,) + statement.reads}
