"""A Pluto-style affine scheduler (Bondhugula et al., PLDI 2008), solved with isl.

Per level, one ILP finds a hyperplane ``phi_S(i) = c_S . i + c_S0`` for every
statement: tiling-valid on every dependence not yet satisfied at the start of the
current band (distance >= 0), distances bounded by ``u.n + w`` and the lexicographic
minimum of ``(u, w, coefficients)`` taken; each statement's new row is linearly
independent of its earlier rows. Rows found one after another form a permutable band;
a row is parallel when every dependence still live has distance 0 along it. When no
row exists, the band ends (its satisfied dependences are dropped); when none exists
at the start of a band, the statements are cut between strongly connected components
of the remaining dependence graph (loop distribution), as the fusion policy says.

Fusion policies: ``none`` (nofuse: cut every SCC up front), ``smart`` (smartfuse: cut
between SCCs of different dimensionality up front, every SCC when stuck), ``max``
(maxfuse: cut only when stuck).
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polyc.config import SYSTEMS, log_section
from polyc.islutil import items, union_maps
from polyc.scheduler import farkas
from polyc.scheduler.base import group_dependences, group_domain, register
from polyc.scheduler.graph import topological_sccs
from polyc.scheduler.isl_scheduler import isl_schedule
from polyc.scheduler.linalg import orthogonal_complement, rank
from polyc.scheduler.tree import band_schedule, row_aff, row_text
from polyc.scop.model import Scop

MAX_OPERATIONS = 20_000_000  # isl operations per ILP before falling back to isl


@dataclass(frozen=True)
class Edge:
    """One basic dependence polyhedron and its Farkas coefficient set."""

    src: str
    dst: str
    relation: isl.BasicMap
    coefficients: isl.BasicSet


class NoSchedule(Exception):
    """Pluto found no legal way on: the group falls back to isl's scheduler."""


@register("pluto")
def pluto_schedule(scop: Scop, group: tuple[str, ...], policy: str = "smart"):
    domain = group_domain(scop, group)
    edges = _edges(group_dependences(scop, domain))
    scheduler = _Pluto(scop, policy)
    try:
        rows = {name: [] for name in group}
        schedule = scheduler.schedule(list(group), edges, rows, initial=True)
    except NoSchedule as why:
        schedule, notes = isl_schedule(scop, group)
        return schedule, (f"pluto fell back to isl's scheduler: {why}",) + notes
    return schedule, tuple(scheduler.decisions)


def _edges(deps: isl.UnionMap) -> list[Edge]:
    edges = []
    for relation in union_maps(deps):
        for basic in items(relation.get_basic_map_list()):
            coefficients = basic.wrap().coefficients().flatten()
            edges.append(Edge(basic.get_tuple_name(isl.dim_type.in_),
                              basic.get_tuple_name(isl.dim_type.out), basic, coefficients))
    return edges


class _Pluto:
    def __init__(self, scop: Scop, policy: str):
        self.scop, self.policy, self.ctx = scop, policy, scop.ctx
        self.params = tuple(scop.domain.get_space().get_var_names(isl.dim_type.param))
        self.decisions: list[str] = []

    def dim(self, statement: str) -> int:
        return self.scop.statement(statement).domain.dim(isl.dim_type.set)

    def full_rank(self, statement: str, rows: dict) -> bool:
        found = [coefs for coefs, _ in rows[statement]]
        return rank(found) == self.dim(statement) if found else self.dim(statement) == 0

    def schedule(self, stmts: list[str], edges: list[Edge], rows: dict, *,
                 initial: bool = False) -> isl.Schedule:
        if initial and self.policy in ("none", "smart"):
            parts = self._initial_cut(stmts, edges)
            if len(parts) > 1:
                return self._cut(parts, edges, rows, "initial")
        band, satisfied, coincident = self._band(stmts, edges, rows)
        remaining = [e for e in edges if e not in satisfied]
        if band:
            self.decisions.append(self._band_text(stmts, band, coincident))
            below = self.schedule(stmts, remaining, rows) if not self._done(
                stmts, remaining, rows) else self._leaf(stmts)
            return band_schedule(self.scop, stmts, band, coincident, below)
        if self._done(stmts, remaining, rows):
            return self._leaf(stmts)
        parts = topological_sccs(stmts, [(e.src, e.dst) for e in remaining])
        if len(parts) == 1:
            raise NoSchedule(f"no hyperplane and nothing to cut for {', '.join(stmts)}")
        return self._cut(parts, remaining, rows, "stuck")

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

    def _hyperplane(self, stmts, edges, rows):
        layout = farkas.Layout(self.params, {s: self.dim(s) for s in stmts})
        system = farkas.bounds(layout, self.ctx)
        for edge in edges:
            for bounding in (False, True):
                system = system.intersect(farkas.integer_set(farkas.farkas_constraints(
                    edge.coefficients, layout, edge.src, edge.dst, bounding=bounding,
                    ctx=self.ctx)))
        for name in stmts:
            if not self.full_rank(name, rows):
                complement = orthogonal_complement([c for c, _ in rows[name]], self.dim(name))
                system = system.intersect(farkas.independence(layout, name, complement,
                                                              self.ctx))
        log_section(SYSTEMS, f"pluto ILP for {', '.join(stmts)}", str(system))
        point = self._lexmin(system)
        if point is None:
            return None
        values = farkas.solution(point, layout)
        return {s: (tuple(values[layout.coefficient(s, d)] for d in range(self.dim(s))),
                    values[layout.shift(s)]) for s in stmts}

    def _lexmin(self, system: isl.BasicSet):
        self.ctx.set_max_operations(MAX_OPERATIONS)
        try:
            if system.is_empty():
                return None
            return system.lexmin().sample_point()
        except isl.Error as err:
            raise NoSchedule(f"ILP over budget ({MAX_OPERATIONS} isl operations)") from err
        finally:
            self.ctx.set_max_operations(0)
            self.ctx.reset_operations()

    def _distance(self, edge: Edge, row) -> str:
        """'zero', 'positive' (>= 1 everywhere) or 'other' along ``row``."""
        src = isl.Map.from_aff(row_aff(self.scop, edge.src, row[edge.src]))
        dst = isl.Map.from_aff(row_aff(self.scop, edge.dst, row[edge.dst]))
        deltas = isl.Map.from_basic_map(edge.relation).apply_domain(src).apply_range(dst).deltas()
        if deltas.is_subset(_half_line(deltas.get_space(), 0, equal=True)):
            return "zero"
        if deltas.is_subset(_half_line(deltas.get_space(), 1)):
            return "positive"
        return "other"

    def _band_text(self, stmts, band, coincident) -> str:
        flags = "".join("p" if c else "s" for c in coincident)
        return f"band [{flags}]: " + "; ".join(
            f"{s}: ({', '.join(row_text(self.scop, s, r[s]) for r in band)})" for s in stmts)


def _half_line(space: isl.Space, bound: int, *, equal: bool = False) -> isl.Set:
    """``{ [d] : d >= bound }`` (or ``d = bound``) in ``space``."""
    make = isl.Constraint.equality_alloc if equal else isl.Constraint.inequality_alloc
    constraint = make(space).set_coefficient_val(isl.dim_type.set, 0, 1)
    return isl.Set.universe(space).add_constraint(constraint.set_constant_val(-bound))
