"""A schedule's estimated cost: statement instances over the vector lanes their
innermost loop gets.

For each statement, its innermost loop is the last schedule dimension along which
its instances vary (sequence positions and loops of one iteration are not loops).
That loop runs in vector lanes when (1) no dependence joins two instances in the same
iteration of the loops around it and different iterations of it (a dependence of a
statement on itself through an element it both reads and writes at every iteration,
a reduction, is allowed with fast math: the lanes sum apart), and (2) every access
of the statement moves by 0 or 1 element per iteration (a vector load, store or
broadcast; another stride is a gather). Its instances then cost ``1 / lanes`` each
(lanes: 64 bytes over the element size), else 1; in a contraction's register tile
(known to the caller: tiling's marks) ``1 / (3 lanes)``. The instances are counted as
the volume of the domain's bounding box at the parameters' values.

The model sees vectors only, not caches: :func:`choose` keeps the first candidate
(Pluto's tiled schedule) unless another is cheaper by :data:`MARGIN`, and the caller
keeps it too where the kernel reuses data that does not fit in a cache (:func:`reuse`:
PolyBench's cholesky does 333 instances per element of a 32 MB matrix; its original
order vectorizes the reductions but ran 1.25x slower than Pluto's tiles).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import islpy as isl

from polyc.islutil import carried, equal_before, flat_offset, innermost_dim, span, union_maps
from polyc.scop.model import Scop

VECTOR_BYTES = 64
MARGIN = 1.5  # another candidate replaces the first when this many times cheaper
# A register tile's FMAs take their operands from registers, a vector loop's load and
# store the accumulator each time: the tile's instances count this many times less
REGISTER_TILE_GAIN = 3
BYTES = {"float64": 8, "int64": 8, "uint64": 8, "float32": 4, "int32": 4, "uint32": 4,
          "float16": 2, "bfloat16": 2, "int16": 2, "uint16": 2}


@dataclass(frozen=True)
class Estimate:
    cost: float  # instances, each over the lanes of its innermost loop
    vectorized: tuple[str, ...]  # statements whose innermost loop runs in lanes
    scalar: tuple[str, ...]
    instances: float = 0.0  # all statements' (bounding boxes' volumes)

    def __str__(self) -> str:
        return (f"{self.cost:.3g} ({len(self.vectorized)} of "
                f"{len(self.vectorized) + len(self.scalar)} statements in vector lanes)")


def estimate(scop: Scop, schedule: isl.Schedule, *, fast_math: bool = True,
             register_tiled: frozenset[str] = frozenset()) -> Estimate:
    """The cost of ``scop`` run in the order of ``schedule`` (see the module);
    ``register_tiled`` statements (a contraction's register tile, its packing copies)
    cost ``1 / (lanes * REGISTER_TILE_GAIN)``."""
    times = {m.get_tuple_name(isl.dim_type.in_): m for m in union_maps(_bound(
        schedule.get_map(), scop))}
    deps = _bound(scop.dependences.all, scop)
    cost, instances, vectorized, scalar = 0.0, 0.0, [], []
    depths = {name: innermost_dim(relation) for name, relation in times.items()}
    for statement in scop.statements:
        relation = times.get(statement.name)
        if relation is None:
            continue
        depth = depths[statement.name]
        lanes = 1
        dtype_lanes = max(1, VECTOR_BYTES // BYTES.get(
            scop.array(statement.write.array).dtype, 8))
        if statement.name in register_tiled:
            lanes = dtype_lanes * REGISTER_TILE_GAIN
        elif depth is not None and not _holds_loops(statement.name, depth, times, depths) \
                and _parallel(statement, relation, depth, times, deps, fast_math) \
                and _unit_strides(scop, statement, relation, depth):
            lanes = dtype_lanes
        (vectorized if lanes > 1 else scalar).append(statement.name)
        volume = _volume(scop, statement.domain)
        cost += volume / lanes
        instances += volume
    return Estimate(cost, tuple(vectorized), tuple(scalar), instances)


def reuse(scop: Scop, instances: float) -> tuple[int, float]:
    """The bytes of the arrays the statements touch, and the statement instances per
    element of them: a kernel that does much more work than it has data reuses it,
    which tiles keep in cache and the vector model does not see."""
    touched = {a.array for s in scop.statements for a in (s.write,) + s.reads}
    size, elements = 0, 0
    for name in touched:
        array = scop.array(name)
        count = 1
        for extent in array.shape:
            count *= extent if isinstance(extent, int) else 1
        elements += count
        size += count * BYTES.get(array.dtype, 1)
    return size, instances / max(elements, 1)


def choose(estimates: Sequence[Estimate]) -> int:
    """The index of the candidate to keep: the first, unless another costs
    :data:`MARGIN` times less (then the cheapest)."""
    best = min(range(len(estimates)), key=lambda k: estimates[k].cost)
    return best if estimates[best].cost * MARGIN < estimates[0].cost else 0


def _bound(umap: isl.UnionMap, scop: Scop) -> isl.UnionMap:
    return umap if scop.context is None else umap.intersect_params(scop.context)


def _parallel(statement, relation: isl.Map, depth: int, times: dict[str, isl.Map],
              deps: isl.UnionMap, fast_math: bool) -> bool:
    """No dependence between an instance of ``statement`` and another in the same
    iteration of the outer loops, in another iteration of the innermost (but a
    reduction's, with fast math)."""
    name = statement.name
    for dep in union_maps(deps):
        source = dep.get_tuple_name(isl.dim_type.in_)
        sink = dep.get_tuple_name(isl.dim_type.out)
        if name not in (source, sink) or source not in times or sink not in times:
            continue
        pairs = dep.apply_domain(times[source]).apply_range(times[sink])
        n = pairs.dim(isl.dim_type.in_)
        if depth >= n:
            continue
        if carried(pairs, depth).is_empty():
            continue
        if fast_math and source == sink == name and _reduction(statement, relation, depth):
            continue
        if source != sink and _apart(times[source], times[sink], depth):
            continue
        return False
    return True


def _holds_loops(name: str, depth: int, times: dict[str, isl.Map],
                 depths: dict[str, int | None]) -> bool:
    """Whether the statement's innermost loop (time dimension ``depth``) is also a
    loop of another statement with a loop inside it: not an innermost loop, which
    LLVM does not vectorize."""
    return any(d is not None and d > depth and other != name
               and not _apart(times[name], times[other], depth)
               and not _apart(times[other], times[name], depth)
               for other, d in depths.items())


def _apart(first: isl.Map, second: isl.Map, depth: int) -> bool:
    """Whether, in every iteration of the loops outside time dimension ``depth``, the
    first statement's instances all come before the second's at ``depth``: each then
    has a loop of its own there (isl's AST generator separates them), which a
    dependence between the two does not tie (the pieces of a statement split where
    the loop carried a dependence, :mod:`polyc.scop.split`)."""
    pairs = equal_before(isl.Map.from_domain_and_range(first.range(), second.range()), depth)
    return pairs.order_ge(isl.dim_type.in_, depth, isl.dim_type.out, depth).is_empty()


def _reduction(statement, relation: isl.Map, depth: int) -> bool:
    """The statement writes one element along its innermost loop and reads it: an
    accumulation (``x[i] -= L[i][j] * x[j]`` along j)."""
    write = statement.write
    return any(r.array == write.array and r.relation.is_equal(write.relation)
               for r in statement.reads) and _stride(write.relation, relation, depth) == 0


def _unit_strides(scop: Scop, statement, relation: isl.Map, depth: int) -> bool:
    for access in (statement.write,) + statement.reads:
        stride = _stride(access.relation, relation, depth, scop.sizing_shape(access.array))
        if stride is None or abs(stride) > 1:
            return False
    return True


def _stride(access: isl.Map, relation: isl.Map, depth: int,
            shape: Sequence[int] | None = None) -> int | None:
    """Elements an access moves by per iteration of time dimension ``depth`` (None:
    not affine in the times); without the array's ``shape``, 0 or not."""
    try:
        inverse = isl.PwMultiAff.from_map(relation.reverse())
        if shape is None:  # whether the element stays the same: any flattening tells
            shape = [1 << 20] * access.dim(isl.dim_type.out)
        offset = flat_offset(access, shape).pullback_pw_multi_aff(inverse)
    except (isl.Error, TypeError):
        return None
    if offset.n_piece() != 1:
        return None
    aff = offset.get_pieces()[0][1]
    value = aff.get_coefficient_val(isl.dim_type.in_, depth)
    if not value.is_int() or aff.dim(isl.dim_type.div) and aff.involves_dims(
            isl.dim_type.div, 0, aff.dim(isl.dim_type.div)):
        return None
    return value.to_python()


def _volume(scop: Scop, domain: isl.Set) -> float:
    """The volume of the domain's bounding box, over the dimensions that are not a
    function of the others (``S[k, i, j = k]`` counts k and i)."""
    if scop.context is not None:
        domain = domain.intersect_params(scop.context)
    for d in range(domain.dim(isl.dim_type.set) - 1, -1, -1):
        n = domain.dim(isl.dim_type.set)
        others = isl.Map.from_range(domain).move_dims(isl.dim_type.in_, 0, isl.dim_type.out,
                                                      0, d)
        others = others.move_dims(isl.dim_type.in_, d, isl.dim_type.out, 1, n - d - 1)
        if n > 1 and others.is_single_valued():
            domain = domain.project_out(isl.dim_type.set, d, 1)
    volume = 1.0
    for d in range(domain.dim(isl.dim_type.set)):
        extent = span(domain, d)
        if extent is None:
            return float("inf")
        volume *= max(extent, 1)
    return volume
