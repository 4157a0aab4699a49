"""The contraction recipe as a schedule subtree: cache blocks, packed panels and a
register tile of vector accumulators (the loop structure of BLIS / GotoBLAS).

For ``C[i, j] += A[i, k] * Bp[j/nr, k, j%nr]`` and its packing copy ``P``::

    band  [batch.., j/nc, k/kc]                       cache blocks (P and S)
      sequence
        P: band [jb, k, jj/16]  mark vector  band [jj]     pack the kc x nc block
        S: mark register_tile
             band [i/mc, j/nr, i/mr, k, i, j/16]           isolated full tiles:
               mark vector  band [j]                       i and j/16 unrolled

Inside a full register tile the ``k`` loop carries ``mr x nr/16`` vector accumulators
(the loads and stores of C do not depend on ``k``, so LLVM keeps them in registers);
each step broadcasts ``mr`` elements of A and loads ``nr/16`` vectors of packed B.
Full tiles are separated from partial ones with isl's ``isolate`` option, so their
loops have constant trip counts; partial tiles run the same loops with masked lanes.
Every ``k`` stays in its original order for each ``C`` element, so the sums are the
same as the untiled loops' (bit for bit without fast-math).
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polyc.codegen.vector import LANES
from polyc.codegen.vector import MARK as VECTOR_MARK
from polyc.errors import PolycError
from polyc.islutil import multi_union, statement_names, variable
from polyc.tiling.cache import FLOAT_BYTES, Caches
from polyc.tiling.contraction import Contraction
from polyc.tiling.packing import Packed

REGISTER_MARK = "register_tile"
# mr x nr, 24 zmm accumulators each; 1024^3 measured 145, 142 and 137 GFLOP/s
REGISTER_TILES = ((6, 64), (8, 48), (12, 32))
KC = 256


@dataclass(frozen=True)
class Blocking:
    """Register tile ``mr x nr`` and cache blocks ``mc x nc x kc`` (in elements)."""

    mr: int
    nr: int
    mc: int
    nc: int
    kc: int

    def __post_init__(self):
        values = (self.mr, self.nr, self.mc, self.nc, self.kc)
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
            raise PolycError(f"blocking sizes must be positive ints, got {self!r}")
        if self.nr % LANES or self.mc % self.mr or self.nc % self.nr:
            raise PolycError(f"blocking {self!r}: nr must be a multiple of {LANES} (the "
                             "vector width), mc of mr and nc of nr")

    def __str__(self) -> str:
        return (f"register tile {self.mr}x{self.nr}, blocks mc={self.mc} nc={self.nc} "
                f"kc={self.kc}")


def as_blocking(value) -> Blocking | None:
    """A :class:`Blocking` from itself, ``(mr, nr, mc, nc, kc)`` or None."""
    if value is None or isinstance(value, Blocking):
        return value
    try:
        mr, nr, mc, nc, kc = value
    except (TypeError, ValueError):
        raise PolycError(f"blocking must be (mr, nr, mc, nc, kc), got {value!r}") from None
    return Blocking(mr, nr, mc, nc, kc)


def choose_blocking(c: Contraction, caches: Caches) -> Blocking:
    """Sizes from the shape and the caches:

    - the register tile that leaves the fewest columns (then rows) to partial tiles;
    - ``kc`` = :data:`KC`, measured best on this machine kind (256 to 512 were within
      noise; 96 and 128 lost 30%), or the whole reduction when shorter;
    - ``nc`` so the packed block ``kc x nc`` fills half of L2, reused by every row block;
    - ``mc`` so a block of A ``mc x kc`` fills an eighth of L2.

    Blocks never exceed the extents (rounded up to whole register tiles)."""
    m, n, k = c.extent("i"), c.extent("j"), c.extent("k")
    mr, nr = min(REGISTER_TILES, key=lambda t: (n % t[1] if t[1] <= n else n, m % t[0]))
    kc = min(KC, -(-k // LANES) * LANES)
    nc = _fit(caches.l2 // 2 // (kc * FLOAT_BYTES), nr, n)
    mc = _fit(caches.l2 // 16 // (kc * FLOAT_BYTES), mr, m)
    return Blocking(mr, nr, mc, nc, kc)


def _fit(budget: int, unit: int, extent: int) -> int:
    """``budget`` rounded down to a multiple of ``unit`` (at least one unit), and no
    more than ``extent`` rounded up to one."""
    size = max(budget // unit, 1) * unit
    return min(size, -(-extent // unit) * unit)


def recipe_schedule(packed: Packed, block: Blocking) -> isl.Schedule:
    """The subtree above (domain: the statement and its packing copy)."""
    c, copy = packed.contraction, packed.copy
    s_space, p_space = c.statement.domain.get_space(), copy.domain.get_space()
    nb, nr = len(c.batch), packed.nr
    s = lambda d: variable(s_space, d)  # noqa: E731
    p = lambda d: variable(p_space, d)  # noqa: E731
    p_j = p(nb).scale_val(_val(p_space, nr)).add(p(nb + 2))

    copy_tree = _band(isl.Schedule.from_domain(isl.UnionSet.from_set(copy.domain)),
                      copy.domain, [p(nb + 2)])
    copy_tree = _mark(copy_tree, VECTOR_MARK)
    copy_tree = _band(copy_tree, copy.domain, [p(nb), p(nb + 1), _div(p(nb + 2), LANES)])

    i, j, k = s(c.i), s(c.j), s(c.k)
    tile_tree = _band(isl.Schedule.from_domain(isl.UnionSet.from_set(c.statement.domain)),
                      c.statement.domain, [j])
    tile_tree = _mark(tile_tree, VECTOR_MARK)
    tile_tree = _band(tile_tree, c.statement.domain,
                      [_div(i, block.mc), _div(j, nr), _div(i, block.mr), k, i,
                       _div(j, LANES)])
    tile_tree = _mark(tile_tree, REGISTER_MARK)

    tree = copy_tree.sequence(tile_tree)
    outer_s = [s(d) for d in c.batch] + [_div(j, block.nc), _div(k, block.kc)]
    outer_p = [p(n) for n in range(nb)] + [_div(p_j, block.nc), _div(p(nb + 1), block.kc)]
    rows = [_union(c.statement.domain, a).union_add(_union(copy.domain, b))
            for a, b in zip(outer_s, outer_p)]
    node = tree.insert_partial_schedule(_multi(rows)).get_root().child(0)
    node = node.band_set_permutable(1)
    for member in range(nb + 1):  # batch and column blocks: no dependence crosses them
        node = node.band_member_set_coincident(member, 1)
    return node.get_schedule()


def isolate_full_tiles(schedule: isl.Schedule, tiles: dict[str, tuple[Contraction,
                                                                       Blocking]]):
    """Set the ``isolate`` option (and unrolling inside it) on every register-tile band
    of ``schedule``; ``tiles`` maps statement names to their contraction and blocking."""
    def visit(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if (node.get_type() != isl.schedule_node_type.mark
                or node.mark_get_id().get_name() != REGISTER_MARK):
            return node
        band = node.child(0)
        (name,) = statement_names(band.get_domain())
        c, block = tiles[name]
        full = _full_tiles(c, block)
        prefix = band.get_prefix_schedule_union_map().intersect_domain(full)
        members = band.band_get_partial_schedule_union_map().intersect_domain(full)
        pairs = isl.Map.from_union_map(prefix.reverse().apply_range(members))
        option = pairs.wrap().set_tuple_name("isolate")
        band = band.band_set_ast_build_options(isl.UnionSet.from_set(option))
        for member in (4, 5):  # i within the tile, and the vectors of a row
            band = band.band_member_set_isolate_ast_loop_type(member, isl.ast_loop_type.unroll)
        return band.parent()

    return schedule.map_schedule_node_bottom_up(visit)


def _full_tiles(c: Contraction, block: Blocking) -> isl.UnionSet:
    """The statement instances in full register tiles."""
    domain = c.statement.domain
    for dim, size in ((c.i, block.mr), (c.j, block.nr)):
        last = c.extents[dim] // size * size - 1
        domain = domain.upper_bound_val(isl.dim_type.set, dim,
                                        isl.Val.int_from_si(domain.get_ctx(), last))
    return isl.UnionSet.from_set(domain)


def _val(space: isl.Space, value: int) -> isl.Val:
    return isl.Val.int_from_si(space.get_ctx(), value)


def _div(aff: isl.Aff, size: int) -> isl.Aff:
    return aff.scale_down_val(_val(aff.get_domain_space(), size)).floor()


def _union(domain: isl.Set, aff: isl.Aff) -> isl.UnionPwAff:
    return isl.UnionPwAff.from_pw_aff(isl.PwAff.from_aff(aff).intersect_domain(domain))


def _multi(rows: list[isl.UnionPwAff]) -> isl.MultiUnionPwAff:
    return multi_union(isl.Space.set_alloc(rows[0].get_ctx(), 0, len(rows)), rows)


def _band(tree: isl.Schedule, domain: isl.Set, affs: list[isl.Aff]) -> isl.Schedule:
    return tree.insert_partial_schedule(_multi([_union(domain, a) for a in affs]))


def _mark(tree: isl.Schedule, name: str) -> isl.Schedule:
    mark = isl.Id(name, context=tree.get_ctx())
    return tree.get_root().child(0).insert_mark(mark).get_schedule()
