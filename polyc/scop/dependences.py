"""Exact dependences with isl's dataflow analysis.

RAW: the last write before each read (must sources);
WAR: every read before a write (may sources);
WAW: the last write before each write.
All are relations between statement instances, in the original program order
(``Scop.order``), parametric when the SCoP has parameters and restricted to its context.

The analysis runs under a budget of :data:`OPERATIONS` isl operations; past it the
dependences are memory-based instead: every pair of accesses to one element, the
first a write or the second one, in program order (no write hides an earlier one).
That is more than the exact relations, so a schedule that respects it is legal, but
it may leave the scheduler less freedom; ``Dependences.exact`` is then False and the
schedule's decisions say so.
"""

from __future__ import annotations

import dataclasses

import islpy as isl

from polyc.islutil import OverBudget, budget, union_maps
from polyc.scop.model import Dependences, Scop

# About a minute of isl at 2-3 million operations a second; inception_v2's analysis,
# the largest of the benchmarks' models, needs some 2e7.
OPERATIONS = 200_000_000


def _flow(sink: isl.UnionMap, order: isl.Schedule, *, must=None, may=None) -> isl.UnionFlow:
    info = isl.UnionAccessInfo.from_sink(sink)
    if must is not None:
        info = info.set_must_source(must)
    if may is not None:
        info = info.set_may_source(may)
    return info.set_schedule(order).compute_flow()


def compute_dependences(scop: Scop, *, operations: int | None = None) -> Scop:
    """The SCoP with its RAW, WAR and WAW dependences filled in: exact within
    ``operations`` isl operations (default :data:`OPERATIONS`), else memory-based."""
    try:
        with budget(scop.ctx, operations or OPERATIONS, "dependence analysis"):
            raw, war, waw, exact = *_exact(scop), True
    except OverBudget:
        raw, war, waw, exact = *_memory_based(scop), False
    if scop.context is not None:
        raw, war, waw = (d.intersect_params(scop.context) for d in (raw, war, waw))
    deps = Dependences(raw=raw.coalesce(), war=war.coalesce(), waw=waw.coalesce(),
                       exact=exact)
    return dataclasses.replace(scop, dependences=deps)


def _exact(scop: Scop) -> tuple[isl.UnionMap, isl.UnionMap, isl.UnionMap]:
    """RAW, WAR and WAW by isl's dataflow analysis."""
    reads, writes = scop.reads, scop.writes
    return (_flow(reads, scop.order, must=writes).get_must_dependence(),
            _flow(writes, scop.order, may=reads).get_may_dependence(),
            _flow(writes, scop.order, must=writes).get_must_dependence())


def _memory_based(scop: Scop) -> tuple[isl.UnionMap, isl.UnionMap, isl.UnionMap]:
    """RAW, WAR and WAW as every ordered pair of accesses to one element."""
    times = scop.order.get_map()
    before = times.lex_lt_union_map(times)

    def pairs(first: isl.UnionMap, second: isl.UnionMap) -> isl.UnionMap:
        return first.apply_range(second.reverse()).intersect(before)

    reads, writes = scop.reads, scop.writes
    return pairs(writes, reads), pairs(reads, writes), pairs(writes, writes)


def live_in_arrays(scop: Scop) -> set[str]:
    """The arrays whose initial values some statement reads (a read no write precedes,
    for some parameter values in the context)."""
    unsourced = _flow(scop.reads, scop.order, must=scop.writes).get_may_no_source()
    if scop.context is not None:
        unsourced = unsourced.intersect_params(scop.context)
    return {relation.get_tuple_name(isl.dim_type.out) for relation in union_maps(unsourced)
            if not relation.is_empty()}
