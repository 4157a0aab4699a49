"""The legality checker: a schedule is legal when every dependence goes forward,
i.e. for each dependence ``x -> y``, ``T(x)`` is lexicographically before ``T(y)``,
and it schedules exactly the statement instances of the SCoP.
"""

from __future__ import annotations

import islpy as isl

from polyc.errors import IllegalScheduleError
from polyc.islutil import union_maps
from polyc.scop.model import Scop


def check_legality(scop: Scop, schedule: isl.Schedule) -> None:
    """Raise :class:`IllegalScheduleError` naming the first violated dependence."""
    if not schedule.get_domain().is_equal(scop.domain):
        missing = scop.domain.subtract(schedule.get_domain())
        extra = schedule.get_domain().subtract(scop.domain)
        raise IllegalScheduleError(
            f"schedule does not cover the SCoP: missing {missing}, extra {extra}")
    times = schedule.get_map()
    for kind, umap in scop.dependences.kinds().items():
        for dep in union_maps(umap):
            _check_one(kind, dep, times)


def _check_one(kind: str, dep: isl.Map, times: isl.UnionMap) -> None:
    pairs = isl.UnionMap.from_map(dep).apply_domain(times).apply_range(times)
    if pairs.is_empty():
        return
    (pair_map,) = union_maps(pairs)
    forward = isl.Map.lex_lt(pair_map.get_space().domain())
    backward = pair_map.subtract(forward)
    if backward.is_empty():
        return
    src = dep.get_tuple_name(isl.dim_type.in_)
    dst = dep.get_tuple_name(isl.dim_type.out)
    witness = isl.UnionMap.from_map(dep).intersect(
        isl.UnionMap.from_map(backward).apply_domain(times.reverse())
        .apply_range(times.reverse()))
    sample = witness.sample() if not witness.is_empty() else backward.sample()
    raise IllegalScheduleError(
        f"{kind} dependence {src} -> {dst} is not respected: {dep}; "
        f"violated at {sample}")
