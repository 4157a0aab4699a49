"""A Pluto-style affine scheduler (Bondhugula et al., PLDI 2008), solved with isl.

Per level, one ILP finds a hyperplane ``phi_S(i) = c_S . i + c_S0`` for every
statement: tiling-valid on every dependence not yet satisfied at the start of the
current band (distance >= 0), distances bounded by ``u.n + w`` and the lexicographic
minimum of ``(u, w, coefficients)`` taken. Each statement's new row is linearly
independent of its earlier rows: first Pluto's one-sided form on the orthogonal
complement, then, if that has no solution, the exact union of sign choices.

Rows found one after another form a permutable band; a row is parallel when every
dependence live at the band's start has distance 0 along it. When no further row
exists the band ends, and later levels keep only the dependence instances it left
unordered (distance 0 on all its rows). When no row exists at the start of a band,
the statements are cut between strongly connected components of the remaining
dependence graph (loop distribution), as the fusion policy says.

Fusion policies: ``none`` (nofuse: cut every SCC up front), ``smart`` (smartfuse: cut
between SCCs of different dimensionality up front), ``max`` (maxfuse: cut only when
stuck). When stuck, smart and max keep neighbouring SCCs together while they still
share a hyperplane; none cuts between all of them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from math import prod

import islpy as isl

from polyc import islserver
from polyc.config import SYSTEMS, log_section
from polyc.errors import PolycError
from polyc.islutil import OverBudget, budget, items, sequence, union_maps
from polyc.scheduler import farkas
from polyc.scheduler.base import group_dependences, group_domain, register
from polyc.scheduler.graph import topological_sccs
from polyc.scheduler.isl_scheduler import isl_schedule, original_schedule
from polyc.scheduler.linalg import orthogonal_complement, rank
from polyc.scheduler.tree import band_schedule, flag_text, row_aff, row_text
from polyc.scop.model import Scop

MAX_OPERATIONS = 20_000_000  # isl operations per ILP before falling back to isl
# isl counts little of a large ILP's work against that budget: a random graph's system
# of 69 variables and 696 constraints ran past 60 s. Larger than these (variables,
# constraints; the ILPs of EfficientNet, inception_v2 and bert4 have at most 16 and 64)
# an ILP is solved in the isl server's child (:mod:`polyc.islserver`) given
# LARGE_ILP_SECONDS.
LARGE_ILP = (32, 256)
LARGE_ILP_SECONDS = 5.0
MAX_GROUP_STATEMENTS = 16  # larger groups are scheduled in chunks of whole SCCs
MAX_CASES = 64  # sign choices tried for exact linear independence
MAX_MERGED_SCCS = 16  # a stuck group with more SCCs is cut between all of them
MAX_SATISFYING_ROWS = 8  # rows past the permutable ones, per group, before giving up


@dataclass(frozen=True, eq=False)
class Edge:
    """One basic dependence polyhedron and its Farkas coefficient set. Edges compare and
    hash by identity: hashing the isl sets took minutes for a 6-D reduction's edges."""

    src: str
    dst: str
    relation: isl.BasicMap
    coefficients: isl.BasicSet


class NoSchedule(Exception):
    """Pluto found no legal way on: the group falls back to isl's scheduler."""


@register("pluto")
def pluto_schedule(scop: Scop, group: tuple[str, ...], policy: str = "smart"):
    domain = group_domain(scop, group)
    try:
        edges = _edges(group_dependences(scop, domain),
                       lambda: group_dependences(scop, domain, pieces=True))
    except NoSchedule as why:
        return _fallback(scop, list(group), why)
    chunks = _chunks(list(group), edges)
    notes: list[str] = []
    if len(chunks) > 1:
        notes.append(f"{len(group)} statements scheduled in {len(chunks)} chunks of at most "
                     f"{MAX_GROUP_STATEMENTS} (whole SCCs, in dependence order)")
    parts = []
    for chunk in chunks:
        inside = [e for e in edges if e.src in chunk and e.dst in chunk]
        part, chunk_notes = _schedule_chunk(scop, chunk, inside, policy)
        parts.append(part)
        notes += chunk_notes
    return sequence(parts), tuple(notes)


def concurrent_start(scop: Scop, deps: isl.UnionMap, band: list[dict],
                     pieces: Callable[[], isl.UnionMap] | None = None) -> dict | None:
    """A first row for ``band`` that allows concurrent start (diamond tiling), or None.

    ``band`` holds Pluto rows (``{statement: (coefficients, shift)}`` per member) whose
    first row is the time loop ``t``, each statement's outermost loop; ``deps`` are the
    dependences live at the band's start (``pieces()`` the same as the analysis gave
    them, see :func:`_edges`). See :meth:`_Pluto.concurrent_start`."""
    try:
        edges = _edges(deps, pieces)
    except NoSchedule:  # over budget: tiles without concurrent start
        return None
    return _Pluto(scop, "smart").concurrent_start(list(band[0]), edges, band)


def _schedule_chunk(scop: Scop, stmts: list[str], edges: list[Edge], policy: str):
    scheduler = _Pluto(scop, policy)
    try:
        rows = {name: [] for name in stmts}
        return scheduler.schedule(stmts, edges, rows, initial=True), scheduler.decisions
    except NoSchedule as why:
        schedule, notes = _fallback(scop, stmts, why)
        return schedule, list(notes)


def _fallback(scop: Scop, stmts: list[str], why: NoSchedule):
    """isl's schedule of ``stmts`` (or, if isl fails too, the original order), with a
    note saying why Pluto's was not used."""
    note = f"pluto fell back to isl's scheduler for {', '.join(stmts)}: {why}"
    try:
        schedule, notes = isl_schedule(scop, tuple(stmts))
    except PolycError as err:  # isl's scheduler can fail too: the original order is legal
        schedule, notes = original_schedule(scop, tuple(stmts))
        notes = (f"isl's scheduler failed as well ({err}); kept the original order",) + notes
    return schedule, (note, *notes)


def _chunks(stmts: list[str], edges: list[Edge]) -> list[list[str]]:
    """Consecutive SCCs (dependence order) packed into chunks of at most
    MAX_GROUP_STATEMENTS: the ILP's size, and so its cost, stays bounded."""
    if len(stmts) <= MAX_GROUP_STATEMENTS:
        return [stmts]
    chunks: list[list[str]] = []
    for scc in topological_sccs(stmts, [(e.src, e.dst) for e in edges]):
        if chunks and len(chunks[-1]) + len(scc) <= MAX_GROUP_STATEMENTS:
            chunks[-1].extend(scc)
        else:
            chunks.append(list(scc))
    return chunks


# A merged dependence polyhedron of this many constraints or more is replaced by the
# pieces the analysis gave (``pieces`` of :func:`_edges`), when they are at most
# MAX_PIECES and each has fewer constraints. heat-3d's 7-point reads merge into
# polyhedra of 25 constraints whose duals took 0.4-0.7 s each (8 of them: about 4 s of
# its 5.5 s compile at PolyBench LARGE); the 60 pieces, mostly equalities, take
# milliseconds each, and Pluto finds the same schedule.
MERGED_CONSTRAINTS = 18
MAX_PIECES = 64


def _edges(deps: isl.UnionMap, pieces: Callable[[], isl.UnionMap] | None = None
           ) -> list[Edge]:
    """The dependence polyhedra of ``deps`` with their Farkas coefficient sets
    (:func:`_coefficients`); NoSchedule when one takes too long. ``pieces()`` gives
    the same dependences as the analysis gave them (before isl merged them), and is
    asked for where a merged polyhedron is large (:data:`MERGED_CONSTRAINTS`)."""
    edges = []
    finer = None
    for relation in union_maps(deps):
        basics = items(relation.get_basic_map_list())
        largest = max(b.n_constraint() for b in basics)
        if pieces is not None and largest >= MERGED_CONSTRAINTS:
            finer = pieces() if finer is None else finer
            same = finer.extract_map(relation.get_space())
            split = items(same.get_basic_map_list())
            if 0 < len(split) <= MAX_PIECES and all(b.n_constraint() < largest for b in split) \
                    and same.is_equal(relation):
                basics = split
        for basic in basics:
            coefficients = _coefficients(basic.wrap())
            edges.append(Edge(basic.get_tuple_name(isl.dim_type.in_),
                              basic.get_tuple_name(isl.dim_type.out), basic, coefficients))
    return edges


@contextlib.contextmanager
def _budget(ctx: isl.Context, what: str):
    """The block's isl operations bounded by MAX_OPERATIONS; past them (or on another
    isl error) NoSchedule: Pluto then falls back to isl's scheduler."""
    try:
        with budget(ctx, MAX_OPERATIONS, what):
            yield
    except (OverBudget, isl.Error) as err:
        raise NoSchedule(str(err)) from err


# ``coefficients()`` enumerates the polyhedron's dual: cheap for the usual dependences,
# exponential in its constraints (an 8-D dependence with 20 constraints and 3
# parameters between two statements of a random nest took 80 s, its neighbours with
# 14-16 milliseconds; without parameters, an 8-D dependence of 18 constraints of a
# random graph, fuzzer seed 2798, ran for minutes, and one of 15, graph fuzzer seed
# 1766, the flattening equality of a reshape, 62 s), and isl counts none of it
# against a context's operation budget. Every polyhedron is therefore handed to the
# serving child of :mod:`polyc.islserver`, which has COEFFICIENT_SECONDS to answer;
# past that the child is killed and the group falls back to isl's scheduler. A fork
# per polyhedron (10-30 ms each) had cost 3 s of ResNet-18's 13 s compile; the round
# trip of the texts to the child costs well under 1 ms (EfficientNet's 461
# polyhedra: 40.1 s compile, 41.9 s with the 170 of under 12 constraints kept in
# process, within noise). isl's detect_equalities first removes redundant floors and
# mods (a conv through a reshape and its copy, graph fuzzer seed 298: 22 constraints
# with 3 of them, 13 and none after, coefficients in 1 ms).
COEFFICIENT_SECONDS = 2.0


def _coefficients(polyhedron: isl.BasicSet) -> isl.BasicSet:
    """The Farkas coefficients of ``polyhedron`` (``coefficients().flatten()`` of it
    :func:`_lifted`), within COEFFICIENT_SECONDS in :mod:`polyc.islserver`'s child;
    NoSchedule past them."""
    polyhedron = polyhedron.detect_equalities()  # drops redundant floors and mods
    polyhedron = _lifted(polyhedron)
    key = str(polyhedron)
    text = _DUALS.get(key)
    if text is None:
        try:
            text = islserver.call(dual, [key], COEFFICIENT_SECONDS)
        except islserver.Unanswered as why:
            raise NoSchedule(f"the Farkas coefficients of a dependence with "
                             f"{polyhedron.n_constraint()} constraints {why}") from None
        if len(_DUALS) >= MAX_DUALS:
            _DUALS.pop(next(iter(_DUALS)))
        _DUALS[key] = text
    return isl.BasicSet.read_from_str(polyhedron.get_ctx(), text)


# The duals already computed, by the polyhedron's text (oldest dropped first). Pluto's
# schedule and the diamond tiles' concurrent start ask for the same dependences, and
# the cost model's candidates tile the same schedule again: PolyBench's heat-3d at LARGE
# asked for 12 duals of 0.3 s each, 6 of them distinct.
_DUALS: dict[str, str] = {}
MAX_DUALS = 4096


def dual(ctx: isl.Context, polyhedron: str) -> str:
    """The Farkas coefficients of a polyhedron given as text, as text (for the isl
    server's child)."""
    return str(isl.BasicSet.read_from_str(ctx, polyhedron).coefficients().flatten())


def lexmin(ctx: isl.Context, system: str) -> str:
    """The lexicographic minimum of a set given as text, as text ("empty" if it is
    empty; for the isl server's child)."""
    system = isl.Set.read_from_str(ctx, system)
    return "empty" if system.is_empty() else str(system.lexmin())


def _lifted(polyhedron: isl.BasicSet) -> isl.BasicSet:
    """Existentially quantified variables (from mod and floor in accesses) become set
    variables after the original ones; ``coefficients()`` refuses local variables.
    The Farkas constraints give those extra variables coefficient 0, which is exact:
    a form in the original variables is non-negative on the lifted set exactly when
    it is on its projection."""
    if polyhedron.dim(isl.dim_type.div) == 0:
        return polyhedron
    return polyhedron.lift()


class _Pluto:
    def __init__(self, scop: Scop, policy: str):
        self.scop, self.policy, self.ctx = scop, policy, scop.ctx
        self.params = tuple(scop.domain.get_space().get_var_names(isl.dim_type.param))
        self.decisions: list[str] = []
        self._systems: dict = {}
        self._satisfying_rows = 0

    def dim(self, statement: str) -> int:
        return self.scop.statement(statement).domain.dim(isl.dim_type.set)

    def full_rank(self, statement: str, rows: dict) -> bool:
        found = [coefs for coefs, _ in rows[statement]]
        return rank(found) == self.dim(statement) if found else self.dim(statement) == 0

    def schedule(self, stmts: list[str], edges: list[Edge], rows: dict, *,
                 initial: bool = False) -> isl.Schedule:
        if initial and any(self.scop.statement(s).recurrent and not rows[s] for s in stmts):
            return self._recurrence(stmts, edges, rows)
        if initial and self.policy in ("none", "smart"):
            parts = self._initial_cut(stmts, edges)
            if len(parts) > 1:
                return self._cut(parts, edges, rows, "initial")
        band, satisfied, coincident = self._band(stmts, edges, rows)
        remaining = [part for e in edges if e not in satisfied
                     for part in self._unsatisfied_part(e, band)]
        if band:
            self.decisions.append(self._band_text(stmts, band, coincident))
            return band_schedule(self.scop, stmts, band, coincident,
                                 self._below(stmts, remaining, rows))
        if self._done(stmts, remaining, rows):
            return self._leaf(stmts)
        parts = self._stuck_parts(stmts, remaining, rows)
        if len(parts) > 1:
            return self._cut(parts, remaining, rows, "stuck")
        return self._satisfying_band(stmts, remaining, rows)

    def _recurrence(self, stmts, edges, rows) -> isl.Schedule:
        """A Recurrence's statements: its start steps first, then its time loop ``t``
        (every body step's outermost loop) as a band of its own, and below it the steps
        of one time step scheduled as a group of their own (initial cuts included). Pluto
        would otherwise put the independent batch loop outside the time loop, and the
        recurrent product of a batch of rows would become one matrix-vector product per
        row and step, each reading all of R."""
        body = [s for s in stmts if self.scop.statement(s).recurrent]
        start = [s for s in stmts if s not in body]
        row = {s: ((1,) + (0,) * (self.dim(s) - 1), 0) for s in body}
        for name in body:
            rows[name].append(row[name])
        self.decisions.append(self._band_text(body, [row], [False]) + " (time loop)")
        inside = [e for e in edges if e.src in body and e.dst in body]
        remaining = [part for e in inside for part in self._unsatisfied_part(e, [row])]
        below = self._leaf(body) if self._done(body, remaining, rows) else \
            self.schedule(body, remaining, rows, initial=True)
        loop = band_schedule(self.scop, body, [row], [False], below)
        if not start:
            return loop
        before = [e for e in edges if e.src in start and e.dst in start]
        return self.schedule(start, before, rows, initial=True).sequence(loop)

    def _satisfying_band(self, stmts, edges, rows) -> isl.Schedule:
        """One SCC and no permutable row left: a row that orders (distance >= 1) all of at
        least one dependence, not necessarily independent; then go on below it."""
        self._satisfying_rows += 1
        row = None
        if self._satisfying_rows <= MAX_SATISFYING_ROWS:
            layout, system = self._validity(stmts, edges)
            cases = isl.Set.empty(system.get_space())
            for edge in edges:
                cases = cases.union(isl.Set.from_basic_set(system.intersect(farkas.integer_set(
                    farkas.farkas_constraints(edge.coefficients, layout, edge.src, edge.dst,
                                              bounding=False, ctx=self.ctx, minimum=1)))))
            point = self._lexmin(cases)
            row = None if point is None else self._row(point, layout, stmts)
        if row is None:
            raise NoSchedule(f"no hyperplane and nothing to cut for {', '.join(stmts)}")
        for name in stmts:
            rows[name].append(row[name])
        self.decisions.append(self._band_text(stmts, [row], [False]) + " (orders a cycle)")
        remaining = [part for e in edges for part in self._unsatisfied_part(e, [row])]
        return band_schedule(self.scop, stmts, [row], [False],
                             self._below(stmts, remaining, rows))

    def _below(self, stmts, edges, rows) -> isl.Schedule:
        """What goes under a band: the next levels, or a leaf when nothing is left."""
        return self._leaf(stmts) if self._done(stmts, edges, rows) else \
            self.schedule(stmts, edges, rows)

    def _done(self, stmts, edges, rows) -> bool:
        return not edges and all(self.full_rank(s, rows) for s in stmts)

    def _leaf(self, stmts: list[str]) -> isl.Schedule:
        return isl.Schedule.from_domain(group_domain(self.scop, tuple(stmts)))

    def _initial_cut(self, stmts, edges) -> list[list[str]]:
        sccs = topological_sccs(stmts, [(e.src, e.dst) for e in edges])
        if self.policy == "none":
            return sccs
        parts: list[list[str]] = []
        for scc in sccs:  # smart: keep neighbouring SCCs of equal dimensionality together
            depth = max(self.dim(s) for s in scc)
            if parts and max(self.dim(s) for s in parts[-1]) == depth:
                parts[-1].extend(scc)
            else:
                parts.append(list(scc))
        return parts

    def _stuck_parts(self, stmts, edges, rows) -> list[list[str]]:
        """No hyperplane for all of ``stmts``: distribute. nofuse cuts between every SCC;
        smartfuse and maxfuse keep neighbouring SCCs together while they still have a
        common hyperplane (one ILP per SCC, up to MAX_MERGED_SCCS of them)."""
        sccs = topological_sccs(stmts, [(e.src, e.dst) for e in edges])
        if self.policy == "none" or len(sccs) > MAX_MERGED_SCCS:
            return sccs
        parts = [list(sccs[0])]
        for scc in sccs[1:]:
            merged = parts[-1] + list(scc)
            inside = [e for e in edges if e.src in merged and e.dst in merged]
            open_rows = any(not self.full_rank(s, rows) for s in merged)
            if open_rows and self._hyperplane(merged, inside, rows) is not None:
                parts[-1] = merged
            else:
                parts.append(list(scc))
        return parts

    def _cut(self, parts, edges, rows, why: str) -> isl.Schedule:
        self.decisions.append(f"cut ({why}): " + " | ".join(", ".join(p) for p in parts))
        children = []
        for part in parts:
            inside = [e for e in edges if e.src in part and e.dst in part]
            children.append(self.schedule(part, inside, rows))
        result = children[0]
        for child in children[1:]:
            result = result.sequence(child)
        return result

    def _band(self, stmts, edges, rows):
        """Rows found one after another while the band's dependences stay valid."""
        band, satisfied, coincident = [], set(), []
        while not all(self.full_rank(s, rows) for s in stmts):
            row = self._hyperplane(stmts, edges, rows)
            if row is None:
                break
            distances = {e: self._distance(e, row) for e in edges}
            # coincident: zero distance on every dependence live at the band's start
            coincident.append(all(d == "zero" for d in distances.values()))
            satisfied |= {e for e, d in distances.items() if d == "positive"}
            for name in stmts:
                rows[name].append(row[name])
            band.append(row)
        return band, satisfied, coincident

    def concurrent_start(self, stmts, edges, band) -> dict | None:
        """Diamond tiling (Bandishti, Pananilath and Bondhugula, SC'12; Pluto's
        ``--diamond-tile``, on by default there when tiling). Tiles of a band that starts
        with the time loop ``t`` and has no parallel row start one after another along
        ``t``. A valid row ``c = l0 * t - l1 * phi_1`` (``l0, l1 >= 1``, ``phi_1`` the
        band's second row) in place of ``t`` puts ``t = (c + l1 * phi_1) / l0`` strictly
        inside the cone of ``c`` and ``phi_1``: tiles of ``(c, phi_1, ...)`` along the
        face ``t = 0`` start concurrently, e.g. ``(2t - i, 2t + i)`` for jacobi-1d's
        ``(t, 2t + i)``.

        ``c`` comes from Pluto's ILP (validity and distance bounds on every edge, lexmin)
        with coefficients of either sign; None when there is no such row (seidel-2d:
        ``-phi_1`` reverses a dependence within a time step) or ``t`` does not start the
        band. ``c`` spans with ``phi_1`` what ``t`` did, so ``(c, phi_1, ...)`` is
        permutable and has the band's rank."""
        if len(band) < 2 or not all(is_time_row(band[0][name]) for name in stmts):
            return None
        layout = farkas.Layout(self.params, {s: self.dim(s) for s in stmts})
        system = farkas.bounds(layout, self.ctx, signed=True)
        for edge in edges:
            for bounding in (False, True):
                system = system.intersect(farkas.integer_set(farkas.farkas_constraints(
                    edge.coefficients, layout, edge.src, edge.dst, bounding=bounding,
                    ctx=self.ctx)))
        for name in stmts:
            time = [int(d == 0) for d in range(self.dim(name))]
            system = system.intersect(farkas.cone_complement(
                layout, name, time, list(band[1][name][0]), self.ctx))
        try:
            point = self._lexmin(system)
        except NoSchedule:  # over budget: tile without concurrent start
            return None
        return None if point is None else self._row(point, layout, stmts)

    def _validity(self, stmts, edges) -> tuple[farkas.Layout, isl.BasicSet]:
        """Bounds, validity and bounding constraints: the same for every row of a band,
        so built once per (statements, edges)."""
        key = (tuple(stmts), tuple(id(e) for e in edges))
        if key not in self._systems:
            layout = farkas.Layout(self.params, {s: self.dim(s) for s in stmts})
            system = farkas.bounds(layout, self.ctx)
            for edge in edges:
                for bounding in (False, True):
                    system = system.intersect(farkas.integer_set(farkas.farkas_constraints(
                        edge.coefficients, layout, edge.src, edge.dst, bounding=bounding,
                        ctx=self.ctx)))
            self._systems[key] = (tuple(edges), layout, system)  # edges kept: ids stay valid
        _, layout, system = self._systems[key]
        return layout, system

    def _hyperplane(self, stmts, edges, rows):
        layout, system = self._validity(stmts, edges)
        complements = {name: orthogonal_complement([c for c, _ in rows[name]], self.dim(name))
                       for name in stmts if not self.full_rank(name, rows)}
        one_sided = system
        for name, complement in complements.items():
            one_sided = one_sided.intersect(farkas.independence(layout, name, complement,
                                                                self.ctx))
        log_section(SYSTEMS, f"pluto ILP for {', '.join(stmts)}", lambda: str(one_sided))
        point = self._lexmin(one_sided)
        if point is None and 0 < prod(2 * len(c) for c in complements.values()) <= MAX_CASES:
            exact = isl.Set.from_basic_set(system)  # a union: one case per sign choice
            for name, complement in complements.items():
                exact = exact.intersect(farkas.independence_any(layout, name, complement,
                                                                self.ctx))
            point = self._lexmin(exact)
        return None if point is None else self._row(point, layout, stmts)

    def _row(self, point: isl.Point, layout: farkas.Layout, stmts) -> dict:
        values = farkas.solution(point, layout)
        return {s: (tuple(values[layout.coefficient(s, d)] for d in range(self.dim(s))),
                    values[layout.shift(s)]) for s in stmts}

    def _lexmin(self, system: isl.BasicSet):
        """The lexicographic minimum of ``system`` (a point, None if it is empty), within
        the ILP budget, or LARGE_ILP_SECONDS in the isl server's child for a large system."""
        if system.dim(isl.dim_type.set) > LARGE_ILP[0] or \
                sum(part.n_constraint() for part in system.get_basic_sets()) > LARGE_ILP[1]:
            try:
                text = islserver.call(lexmin, [str(system)], LARGE_ILP_SECONDS)
            except islserver.Unanswered as why:
                raise NoSchedule(f"an ILP of {system.dim(isl.dim_type.set)} variables "
                                 f"{why}") from None
            return None if text == "empty" else \
                isl.Set.read_from_str(self.ctx, text).sample_point()
        with _budget(self.ctx, "ILP"):
            if system.is_empty():
                return None
            return system.lexmin().sample_point()

    def _unsatisfied_part(self, edge: Edge, band: list[dict]) -> list[Edge]:
        """The instances of ``edge`` that ``band`` does not order: where every row of the
        band has distance 0 (elsewhere it is >= 1 on some row, since all rows are valid).
        Later levels only need to respect these, as in isl's scheduler."""
        relation = isl.Map.from_basic_map(edge.relation)
        for row in band:
            src, dst = self._row_maps(edge, row)
            relation = relation.intersect(src.apply_range(dst.reverse()))
        if relation.is_equal(isl.Map.from_basic_map(edge.relation)):
            return [edge]
        return _edges(isl.UnionMap.from_map(relation))

    def _row_maps(self, edge: Edge, row) -> tuple[isl.Map, isl.Map]:
        """``row`` on the source and on the target statement of ``edge``, as maps."""
        return (isl.Map.from_aff(row_aff(self.scop, edge.src, row[edge.src])),
                isl.Map.from_aff(row_aff(self.scop, edge.dst, row[edge.dst])))

    def _distance(self, edge: Edge, row) -> str:
        """'zero', 'positive' (>= 1 everywhere) or 'other' along ``row``."""
        src, dst = self._row_maps(edge, row)
        deltas = isl.Map.from_basic_map(edge.relation).apply_domain(src).apply_range(dst).deltas()
        if deltas.is_subset(_half_line(deltas.get_space(), 0, equal=True)):
            return "zero"
        if deltas.is_subset(_half_line(deltas.get_space(), 1)):
            return "positive"
        return "other"

    def _band_text(self, stmts, band, coincident) -> str:
        return f"band [{flag_text(coincident)}]: " + "; ".join(
            f"{s}: ({', '.join(row_text(self.scop, s, r[s]) for r in band)})" for s in stmts)


def is_time_row(row) -> bool:
    """The Pluto row ``(coefficients, shift)`` is its statement's outermost loop (scaled,
    shifted), and the statement has other loops."""
    coefs, _ = row
    return len(coefs) >= 2 and coefs[0] > 0 and not any(coefs[1:])


def _half_line(space: isl.Space, bound: int, *, equal: bool = False) -> isl.Set:
    """``{ [d] : d >= bound }`` (or ``d = bound``) in ``space``."""
    make = isl.Constraint.equality_alloc if equal else isl.Constraint.inequality_alloc
    constraint = make(space).set_coefficient_val(isl.dim_type.set, 0, 1)
    return isl.Set.universe(space).add_constraint(constraint.set_constant_val(-bound))
