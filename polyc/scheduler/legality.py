"""The legality checker: a schedule is legal when every dependence goes forward,
i.e. for each dependence ``x -> y``, ``T(x)`` is lexicographically before ``T(y)``,
and it schedules exactly the statement instances of the SCoP; every band marked
permutable may be tiled: each dependence between its instances whose outer loops
agree goes forward or stays along every member of the band (not only the first that
differs), so any order of its members, and tiles, keep it forward; and every loop
under a ``parallel`` mark carries no dependence: for each dependence ``x -> y``
between instances below the mark whose outer loops agree, ``x`` and ``y`` run in the
same iteration of the parallel loop.
"""

from __future__ import annotations

import islpy as isl

from polyc import workers
from polyc.errors import IllegalScheduleError
from polyc.islutil import marks_named, outer_schedule, statement_names, union_maps
from polyc.marks import PARALLEL as PARALLEL_MARK
from polyc.scop.model import Dependences, Scop


def check_legality(scop: Scop, schedule: isl.Schedule) -> None:
    """Raise :class:`IllegalScheduleError` naming the first violated dependence."""
    if not schedule.get_domain().is_equal(scop.domain):
        missing = scop.domain.subtract(schedule.get_domain())
        extra = schedule.get_domain().subtract(scop.domain)
        raise IllegalScheduleError(
            f"schedule does not cover the SCoP: missing {missing}, extra {extra}")
    check_order(scop.dependences, schedule.get_map())
    check_permutable(scop, schedule)
    check_parallel(scop, schedule)


# Dependences per process at least when they are checked on several (densenet121's
# tiled schedule: 2,539, 0.7 s in one process)
PARALLEL_DEPENDENCES = 512


class Times:
    """A schedule's map (``get_map()``) and its piece for each statement: a dependence
    between two statements is mapped through their two pieces, not through the union
    of all (isl matches each of a union's maps), and not at all between statements that
    the first time dim orders (two fusion groups)."""

    def __init__(self, times: isl.UnionMap):
        self.map = times
        self.of = {m.get_tuple_name(isl.dim_type.in_): m for m in union_maps(times)}
        # each statement's first time dim where it is one number (the fusion group's
        # place in the root sequence): a dependence between two groups needs no more
        self.first = {}
        for name, m in self.of.items():
            if m.dim(isl.dim_type.out):
                value = m.plain_get_val_if_fixed(isl.dim_type.out, 0)
                if value.is_int():
                    self.first[name] = value.to_python()

    def ordered(self, src: str, dst: str) -> bool:
        """Whether every instance of ``src`` runs before every one of ``dst`` by the first
        time dim alone."""
        first = self.first
        return src in first and dst in first and first[src] < first[dst]


def check_order(dependences: Dependences, times: isl.UnionMap | Times) -> None:
    """Raise :class:`IllegalScheduleError` unless every dependence goes forward in the
    schedule ``times`` (a schedule's ``get_map()``, or its :class:`Times`)."""
    times = times if isinstance(times, Times) else Times(times)
    pairs = [(kind, dep) for kind, umap in dependences.kinds().items()
             for dep in union_maps(umap)]
    jobs = min(workers.jobs(), len(pairs) // PARALLEL_DEPENDENCES)

    def check(share: list[tuple[str, isl.Map]]):
        def run() -> None:
            for kind, dep in share:
                backward = _backward(dep, times)
                if backward is not None:
                    raise _not_respected(kind, dep, backward, times.map)
        return run

    # dealt out to forked processes when there are many (an error comes back whole)
    shares = [pairs[k::jobs] for k in range(jobs)] if jobs >= 2 else [pairs]
    workers.run_all([check(share) for share in shares], "legality check")


def respects_order(dependences: Dependences, times: Times) -> bool:
    """Whether every dependence goes forward in the schedule ``times``; no witness is
    looked for (in place tries many orders: densenet121's refused ones took 2.7 s so)."""
    return all(_backward(dep, times) is None
               for umap in dependences.kinds().values() for dep in union_maps(umap))


def _backward(dep: isl.Map, schedule: Times) -> isl.Map | None:
    """The pairs of times of ``dep``'s instances that do not go forward, or None."""
    src = dep.get_tuple_name(isl.dim_type.in_)
    dst = dep.get_tuple_name(isl.dim_type.out)
    if src not in schedule.of or dst not in schedule.of or schedule.ordered(src, dst):
        return None  # (an unscheduled statement: check_legality's coverage check names it)
    pairs = dep.apply_domain(schedule.of[src]).apply_range(schedule.of[dst])
    if pairs.is_empty():
        return None
    backward = pairs.subtract(isl.Map.lex_lt(pairs.get_space().domain()))
    return None if backward.is_empty() else backward


def _not_respected(kind: str, dep: isl.Map, backward: isl.Map, times: isl.UnionMap
                   ) -> IllegalScheduleError:
    """The error naming ``dep`` and an instance pair it is violated at."""
    witness = isl.UnionMap.from_map(dep).intersect(
        isl.UnionMap.from_map(backward).apply_domain(times.reverse())
        .apply_range(times.reverse()))
    sample = witness.sample() if not witness.is_empty() else backward.sample()
    src = dep.get_tuple_name(isl.dim_type.in_)
    dst = dep.get_tuple_name(isl.dim_type.out)
    return IllegalScheduleError(f"{kind} dependence {src} -> {dst} is not respected: {dep}; "
                                f"violated at {sample}", witness=dep)


def check_permutable(scop: Scop, schedule: isl.Schedule) -> None:
    """Raise :class:`IllegalScheduleError` when a band marked permutable has a member
    along which a dependence between the band's instances, their outer loops equal,
    goes backward: tiling the band, or reordering its members, would then run it
    backward. The error names the band, the member and an instance pair."""
    bands: list[isl.ScheduleNode] = []

    def visit(node: isl.ScheduleNode) -> bool:
        if (node.get_type() == isl.schedule_node_type.band and node.band_n_member() > 1
                and node.band_get_permutable()):
            bands.append(node.copy())
        return True

    schedule.get_root().foreach_descendant_top_down(visit)
    for band in bands:
        witness = backward_member(scop.dependences, band, scop.context)
        if witness is not None:
            member, kind, dep = witness
            raise IllegalScheduleError(
                f"band of {', '.join(sorted(statement_names(band.get_domain())))} is marked "
                f"permutable but its member {member} "
                f"({band.band_get_partial_schedule().get_at(member)}) runs a {kind} "
                f"dependence {_ends(dep)} backward: {dep}; e.g. {dep.sample()}", witness=dep)


def live_dependences(dependences: Dependences, band: isl.ScheduleNode,
                     context: isl.Set | None = None) -> isl.UnionMap:
    """The dependences between instances of ``band`` that its outer loops do not order
    (the same outer iteration): those the band's members must keep."""
    domain = band.get_domain()
    outer = outer_schedule(band, domain)
    deps = dependences.among(statement_names(domain))
    deps = deps.intersect_domain(domain).intersect_range(domain)
    if context is not None:
        deps = deps.intersect_params(context)
    return deps.intersect(outer.apply_range(outer.reverse()))


def backward_member(dependences: Dependences, band: isl.ScheduleNode,
                    context: isl.Set | None = None) -> tuple[int, str, isl.Map] | None:
    """``(member, kind, pairs)``: the first member of ``band`` along which some live
    dependence (:func:`live_dependences`) goes backward, its kind and those instance
    pairs; None when every member keeps every one forward or equal (the band is
    permutable)."""
    live = live_dependences(dependences, band, context)
    if live.is_empty():
        return None
    rows = band.band_get_partial_schedule()
    for member in range(band.band_n_member()):
        row = isl.UnionMap.from_union_pw_aff(rows.get_at(member))
        backward = live.intersect(row.apply_range(_below(row)).apply_range(row.reverse()))
        if not backward.is_empty():
            return (member, *named_pairs(dependences, backward))
    return None


def named_pairs(dependences: Dependences, pairs: isl.UnionMap) -> tuple[str, isl.Map]:
    """``(kind, map)``: the first kind (RAW, WAR, WAW) of ``dependences`` that has some
    of ``pairs`` (instance pairs of dependences), and those pairs of one statement pair."""
    for kind, umap in dependences.kinds().items():
        mine = pairs.intersect(umap)
        if not mine.is_empty():
            return kind, union_maps(mine)[0]
    return "dependence", union_maps(pairs)[0]


def _below(row: isl.UnionMap) -> isl.UnionMap:
    """Value -> the values below it, on the one-dimensional range of ``row``."""
    space = union_maps(row)[0].get_space().range()
    return isl.UnionMap.from_map(isl.Map.lex_gt(space))


def _ends(dep: isl.Map) -> str:
    return f"{dep.get_tuple_name(isl.dim_type.in_)} -> {dep.get_tuple_name(isl.dim_type.out)}"


def check_parallel(scop: Scop, schedule: isl.Schedule) -> None:
    """Raise :class:`IllegalScheduleError` when the loop under a ``parallel`` mark (the
    first member of the band right below it) carries a dependence: two dependent
    instances with the same outer schedule prefix in different iterations of the loop."""
    ParallelLoops(schedule).check(scop.dependences, scop.context)


class ParallelLoops:
    """The loops under ``parallel`` marks of a schedule, with what checking one needs,
    built once for the checks of many sets of dependences."""

    def __init__(self, schedule: isl.Schedule):
        self.loops = [_ParallelLoop(mark) for mark in marks_named(schedule, PARALLEL_MARK)]

    def check(self, dependences: Dependences, context: isl.Set | None = None) -> None:
        """Raise :class:`IllegalScheduleError` when a loop carries one of ``dependences``
        (a loop holding no source or no sink of them carries none)."""
        kinds = {kind: umap for kind, umap in dependences.kinds().items()
                 if not umap.is_empty()}
        if not kinds or not self.loops:
            return
        sources = set().union(*(statement_names(umap.domain()) for umap in kinds.values()))
        sinks = set().union(*(statement_names(umap.range()) for umap in kinds.values()))
        for loop in self.loops:
            if loop.statements & sources and loop.statements & sinks:
                loop.check(kinds, context)


class _ParallelLoop:
    """One loop under a parallel mark: its instances, which have the same outer
    schedule and which the same iteration of the loop."""

    def __init__(self, mark: isl.ScheduleNode):
        band = mark.child(0)
        if band.get_type() != isl.schedule_node_type.band:
            raise IllegalScheduleError(f"a parallel mark is above a {band.get_type()} node, "
                                       "not a band")
        self.domain = band.get_domain()
        self.statements = set(statement_names(self.domain))
        outer = outer_schedule(band, self.domain)
        self.loop = isl.UnionMap.from_union_pw_aff(band.band_get_partial_schedule().get_at(0))
        self.same_outer = outer.apply_range(outer.reverse())
        self.same_iteration = self.loop.apply_range(self.loop.reverse())

    def check(self, kinds: dict[str, isl.UnionMap], context: isl.Set | None) -> None:
        domain = self.domain
        for kind, umap in kinds.items():
            deps = umap.intersect_domain(domain).intersect_range(domain)
            if context is not None:
                deps = deps.intersect_params(context)
            carried = deps.intersect(self.same_outer).subtract(self.same_iteration)
            if carried.is_empty():
                continue
            (dep, *_) = union_maps(carried)
            self._refuse(kind, dep)

    def _refuse(self, kind: str, dep: isl.Map) -> None:
        domain, loop = self.domain, self.loop
        names = ", ".join(sorted(statement_names(domain)))
        raise IllegalScheduleError(
            f"parallel loop {loop} of {names} carries a {kind} dependence "
            f"{dep.get_tuple_name(isl.dim_type.in_)} -> {dep.get_tuple_name(isl.dim_type.out)}"
            f": {dep}; e.g. {dep.sample()}")
