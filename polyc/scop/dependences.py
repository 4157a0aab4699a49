"""Exact dependences with isl's dataflow analysis.

RAW: the last write before each read (must sources);
WAR: every read before a write (may sources);
WAW: the last write before each write.
All are relations between statement instances, in the original program order
(``Scop.order``), parametric when the SCoP has parameters and restricted to its context.
"""

from __future__ import annotations

import dataclasses

import islpy as isl

from polyc.islutil import union_maps
from polyc.scop.model import Dependences, Scop


def _flow(sink: isl.UnionMap, order: isl.Schedule, *, must=None, may=None) -> isl.UnionFlow:
    info = isl.UnionAccessInfo.from_sink(sink)
    if must is not None:
        info = info.set_must_source(must)
    if may is not None:
        info = info.set_may_source(may)
    return info.set_schedule(order).compute_flow()


def compute_dependences(scop: Scop) -> Scop:
    """The SCoP with its RAW, WAR and WAW dependences filled in."""
    reads, writes = scop.reads, scop.writes
    raw = _flow(reads, scop.order, must=writes).get_must_dependence()
    war = _flow(writes, scop.order, may=reads).get_may_dependence()
    waw = _flow(writes, scop.order, must=writes).get_must_dependence()
    if scop.context is not None:
        raw, war, waw = (d.intersect_params(scop.context) for d in (raw, war, waw))
    deps = Dependences(raw=raw.coalesce(), war=war.coalesce(), waw=waw.coalesce())
    return dataclasses.replace(scop, dependences=deps)


def live_in_arrays(scop: Scop) -> set[str]:
    """The arrays whose initial values some statement reads (a read no write precedes,
    for some parameter values in the context)."""
    unsourced = _flow(scop.reads, scop.order, must=scop.writes).get_may_no_source()
    if scop.context is not None:
        unsourced = unsourced.intersect_params(scop.context)
    return {relation.get_tuple_name(isl.dim_type.out) for relation in union_maps(unsourced)
            if not relation.is_empty()}
