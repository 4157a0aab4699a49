"""Exact dependences with isl's dataflow analysis.

RAW: the last write before each read (must sources);
WAR: every read before a write (may sources);
WAW: the last write before each write.
All are relations between statement instances, in the original program order
(``Scop.order``), parametric when the SCoP has parameters and restricted to its context.

The analysis runs under a budget of :data:`OPERATIONS` isl operations (of
:data:`SECONDS` in the isl server's child, :mod:`polyc.islserver`, when the SCoP has
parameters); past it the
dependences are memory-based instead: every pair of accesses to one element, the
first a write or the second one, in program order (no write hides an earlier one).
That is more than the exact relations, so a schedule that respects it is legal, but
it may leave the scheduler less freedom; ``Dependences.exact`` is then False and the
schedule's decisions say so.

The analysis runs once per written array, over the accesses to it and the order of the
statements that access it: dependences through one array involve only its accesses (a
write hides earlier writes to the same elements only), so the union is the relation
one analysis of the whole program gives. isl's time for one analysis grows with the
square of the statements: a Concat of 1,000 branches (1,144 statements) took 8.3 s CPU,
0.9 s array by array, a chain of 1,000 elementwise ops unfused 5.3 and 0.9 s;
EfficientNet, bert4 and inception_v2 take the same either way (2.1, 0.45, 4.3 s).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

import islpy as isl

from polyc import islserver, workers
from polyc.islutil import (
    OverBudget,
    budget,
    maps_by_name,
    statement_names,
    union_maps,
    union_sets,
    united,
)
from polyc.scop.model import Dependences, Scop

# About a minute of isl at 2-3 million operations a second; inception_v2's analysis,
# the largest of the benchmarks' models, needs some 2e7. isl counts few of the
# operations when the SCoP has parameters (a random 3-statement nest: 21 s within the
# budget), so such a SCoP is analysed in the isl server's child given SECONDS.
OPERATIONS = 200_000_000
SECONDS = 10.0
# Arrays per process at least when the analysis runs on several (polyc.workers)
PARALLEL_ARRAYS = 64


def _flow(sink: isl.UnionMap, order: isl.UnionMap, *, must=None, may=None) -> isl.UnionFlow:
    info = isl.UnionAccessInfo.from_sink(sink)
    if must is not None:
        info = info.set_must_source(must)
    if may is not None:
        info = info.set_may_source(may)
    return info.set_schedule_map(order).compute_flow()


def compute_dependences(scop: Scop, *, operations: int | None = None,
                        since: Dependences | None = None,
                        changed: Collection[str] = ()) -> Scop:
    """The SCoP with its RAW, WAR and WAW dependences filled in: exact within
    ``operations`` isl operations (default :data:`OPERATIONS`), else memory-based.

    ``since`` are the dependences of an earlier form of this SCoP that differs from it
    only in accesses to the arrays ``changed`` (tiling's packing copies: new statements
    that read a contraction's operand and write its packed array, which the contraction
    reads instead), in the same relative order of the statements it had: the relations
    through the other arrays are taken from it (resnet50: 2.6 s of analysis saved)."""
    known = {} if since is None or not since.exact else \
        {a: rel for a, rel in since.by_array.items() if a not in set(changed)}
    by_array = {}
    try:
        if scop.domain.dim(isl.dim_type.param) == 0:
            with budget(scop.ctx, operations or OPERATIONS, "dependence analysis"):
                raw, war, waw, by_array = _exact(scop, known)
        else:
            raw, war, waw = _exact_apart(scop)
        exact = True
    except OverBudget:
        raw, war, waw, exact = *_memory_based(scop), False
    if scop.context is not None:
        raw, war, waw = (d.intersect_params(scop.context) for d in (raw, war, waw))
    pieces = raw.union(war).union(waw)  # (before coalescing, which isl does in place)
    deps = Dependences(raw=_coalesced(raw), war=_coalesced(war), waw=_coalesced(waw),
                       exact=exact, by_array=by_array, pieces=pieces)
    return dataclasses.replace(scop, dependences=deps)


def _coalesced(deps: isl.UnionMap) -> isl.UnionMap:
    """``deps`` with pieces merged where isl can; as they are when isl's coalescing
    fails (an internal error, "cannot relax redundant constraint", on a random nest's
    dependences: program fuzzer seed 617). The same relation either way."""
    try:
        return deps.coalesce()
    except isl.Error:
        return deps


def _exact(scop: Scop, known: Mapping[str, Relations]):
    """RAW, WAR and WAW by isl's dataflow analysis, and the three through each array;
    ``known`` gives those of some arrays already."""
    return _relations(scop.reads, scop.writes, scop.order, known)


Relations = tuple[isl.UnionMap, isl.UnionMap, isl.UnionMap]  # RAW, WAR, WAW


def _relations(reads: isl.UnionMap, writes: isl.UnionMap, order: isl.Schedule,
               known: Mapping[str, Relations] | None = None
               ) -> tuple[isl.UnionMap, isl.UnionMap, isl.UnionMap, dict[str, Relations]]:
    """RAW, WAR and WAW, one written array at a time (see the module's docstring), and
    the three through each array; those of the arrays in ``known`` are taken from it."""
    times = {m.get_tuple_name(isl.dim_type.in_): isl.UnionMap.from_map(m)
             for m in union_maps(order.get_map())}
    reads_of, writes_of = _by_array(reads), _by_array(writes)
    work = {}
    for array, written in writes_of.items():
        if known and array in known:
            continue
        read = reads_of.get(array, isl.UnionMap.empty(written.get_space()))
        accessing = statement_names(written.domain().union(read.domain()))
        work[array] = (read, written, accessing)

    def analyse(arrays: list[str]) -> dict[str, Relations]:
        found = {}
        for array in arrays:
            read, written, accessing = work[array]
            local = united([times[name] for name in sorted(accessing)])
            found[array] = (_flow(read, local, must=written).get_must_dependence(),
                            _flow(written, local, may=read).get_may_dependence(),
                            _flow(written, local, must=written).get_must_dependence())
        return found

    computed = _apart(analyse, work, reads.get_ctx())
    by_array = {array: known[array] if known and array in known else computed[array]
                for array in writes_of}
    empty = isl.UnionMap.empty(reads.get_space())
    raw, war, waw = (united([found[k] for found in by_array.values()]) if by_array else empty
                     for k in range(3))
    return raw, war, waw, by_array


def _apart(analyse, work: Mapping[str, tuple], ctx: isl.Context) -> dict[str, Relations]:
    """``analyse(arrays)`` for all of ``work``: in this process, or with several jobs
    and at least PARALLEL_ARRAYS arrays a process, the arrays dealt out (most statements
    first) to forked processes whose relations come back as text."""
    jobs = min(workers.jobs(), len(work) // PARALLEL_ARRAYS)
    if jobs < 2:
        return analyse(list(work))
    arrays = list(work)
    shares = [[arrays[k] for k in share]
              for share in workers.deal([len(work[a][2]) ** 2 for a in arrays], jobs)]

    def as_text(arrays: list[str]):
        return lambda: {a: tuple(map(str, rel)) for a, rel in analyse(arrays).items()}

    calls = [lambda: analyse(shares[0])] + [as_text(share) for share in shares[1:]]
    found, *others = workers.run_all(calls, "dependence analysis")
    for texts in others:
        found.update({a: tuple(isl.UnionMap.read_from_str(ctx, t) for t in rel)
                      for a, rel in texts.items()})
    return found


def _by_array(accesses: isl.UnionMap) -> dict[str, isl.UnionMap]:
    """``accesses`` split by the array accessed."""
    return {array: united([isl.UnionMap.from_map(m) for m in maps])
            for array, maps in maps_by_name(accesses, isl.dim_type.out).items()}


def _exact_apart(scop: Scop) -> tuple[isl.UnionMap, isl.UnionMap, isl.UnionMap]:
    """:func:`_exact` in the isl server's child given SECONDS; OverBudget past them."""
    texts = [str(scop.reads), str(scop.writes), str(scop.order)]
    try:
        answer = islserver.call(dataflow, texts, SECONDS)
    except islserver.Unanswered as why:
        raise OverBudget(f"dependence analysis {why}") from None
    raw, war, waw = (isl.UnionMap.read_from_str(scop.ctx, line) for line in answer.split("\n"))
    return raw, war, waw


def dataflow(ctx: isl.Context, reads: str, writes: str, order: str) -> str:
    """RAW, WAR and WAW of accesses and an order given as texts, one line each (for the
    isl server's child)."""
    reads, writes = (isl.UnionMap.read_from_str(ctx, text) for text in (reads, writes))
    order = isl.Schedule.read_from_str(ctx, order)
    return "\n".join(str(deps) for deps in _relations(reads, writes, order)[:3])


def _memory_based(scop: Scop) -> tuple[isl.UnionMap, isl.UnionMap, isl.UnionMap]:
    """RAW, WAR and WAW as every ordered pair of accesses to one element."""
    times = scop.order.get_map()
    before = times.lex_lt_union_map(times)

    def pairs(first: isl.UnionMap, second: isl.UnionMap) -> isl.UnionMap:
        return first.apply_range(second.reverse()).intersect(before)

    reads, writes = scop.reads, scop.writes
    return pairs(writes, reads), pairs(reads, writes), pairs(writes, writes)


def live_in_arrays(scop: Scop) -> set[str]:
    """The arrays whose initial values some statement reads (a read no write of the
    same element precedes, for some parameter values in the context). Whether a write
    precedes needs no dataflow analysis (which later writes hide earlier ones does not
    matter), and isl's took 18 s on a random 3-statement nest that this does in 20 ms."""
    times = scop.order.get_map()
    earlier = times.lex_lt_union_map(times).reverse()  # instance -> those before it
    reads = scop.reads  # instance -> element
    writers = reads.range_map().apply_range(scop.writes.reverse())  # (i -> e) -> writer
    preceded = writers.intersect(reads.domain_map().apply_range(earlier)).domain()
    unsourced = reads.wrap().subtract(preceded)
    if scop.context is not None:
        unsourced = unsourced.intersect_params(scop.context)
    return {part.unwrap().get_tuple_name(isl.dim_type.out)
            for part in union_sets(unsourced) if not part.is_empty()}
