"""Index-set splitting: a statement whose innermost loop carries a dependence only
through one iteration of that loop is split there, so that the loops of the pieces
carry none.

Floyd-Warshall, ``path[i][j] = min(path[i][j], path[i][k] + path[k][j])`` over
``(k, i, j)``, reads ``path[i][k]`` at every j, and the iteration ``j = k`` writes it:
each j loop carries a dependence (the reads at ``j < k`` before that write, the reads
at ``j > k`` after it), so no schedule has a parallel innermost loop and the loop runs
one element at a time. Split at ``j = k``, the statement is three, ``j < k``, ``j = k``
and ``j > k``, in that order, and the two loops carry nothing: they run in vector
lanes.

For each statement, in the original order (``Scop.order``): its innermost loop (the
last time dimension along which its instances vary); the dependences from the
statement to itself carried by that loop (equal iterations of the loops outside it,
different iterations of it); where the sources, or the sinks, of one of them are at
one iteration ``f`` of the loop for each iteration of the loops outside (``f`` an
affine function of them; each disjunct of the relation is looked at apart), the
statement's instances split into those before ``f``, at ``f`` and after it. The
split is kept when neither loop piece carries a dependence from itself to itself and
at least one of them is a loop (a reduction over two elements is left alone). The
pieces, ``S_0``, ``S_1`` and ``S_2`` for a statement ``S`` (those not empty;
``Statement.whole`` names ``S``), have its body and accesses and its place in the
original order; the dependences are computed again.
"""

from __future__ import annotations

import dataclasses

import islpy as isl

from polyc.islutil import carried, innermost_dim, maps_by_name, union_maps, united
from polyc.scop.dependences import compute_dependences
from polyc.scop.model import Scop, Statement


def split_index_sets(scop: Scop) -> Scop:
    """``scop`` with each statement split where that makes its innermost loop parallel
    (see the module); itself when no statement is. Needs the dependences."""
    if scop.dependences is None:
        raise ValueError("index-set splitting needs the SCoP's dependences")
    times = {m.get_tuple_name(isl.dim_type.in_): m for m in union_maps(scop.order.get_map())}
    by_source = maps_by_name(scop.dependences.all, isl.dim_type.in_)
    statements: list[Statement] = []
    contraction: list[isl.Map] = []  # each new instance -> the old one
    split = False
    for statement in scop.statements:
        own = [d for d in by_source.get(statement.name, ())
               if d.get_tuple_name(isl.dim_type.out) == statement.name]
        pieces = _pieces(times[statement.name].intersect_domain(statement.domain), own) \
            if own and statement.name in times else None
        if pieces is None:
            statements.append(statement)
            contraction.append(isl.Map.identity(statement.domain.get_space().map_from_set())
                               .intersect_domain(statement.domain))
            continue
        split = True
        for k, part in enumerate(pieces):
            if part.is_empty():
                continue
            piece, to_old = _piece(statement, f"{statement.name}_{k}", part)
            statements.append(piece)
            contraction.append(to_old)
    if not split:
        return scop
    to_old = united([isl.UnionMap.from_map(m) for m in contraction])
    order = scop.order.pullback_union_pw_multi_aff(isl.UnionPwMultiAff.from_union_map(to_old))
    return compute_dependences(dataclasses.replace(
        scop, statements=tuple(statements), order=order, dependences=None))


def _pieces(times: isl.Map, own: list[isl.Map]) -> list[isl.Set] | None:
    """The statement's instances before, at and after the iteration of its innermost
    loop that splits it (see the module), or None. ``times``: its original times;
    ``own``: its dependences on itself."""
    depth = innermost_dim(times)
    if depth is None:
        return None
    loop_carried = [pairs for pairs in (carried(dep.apply_domain(times).apply_range(times),
                                                depth) for dep in own)
                    if not pairs.is_empty()]
    if not loop_carried:
        return None
    for pairs in (isl.Map.from_basic_map(b) for c in loop_carried for b in c.get_basic_maps()):
        for side in (pairs.domain(), pairs.range()):
            at = _single_iteration(side, depth)
            if at is None:
                continue
            pieces = _cut(times, depth, at)
            if _parallel_pieces(times, depth, pieces, loop_carried):
                return pieces
    return None


def _single_iteration(side: isl.Set, depth: int) -> isl.Aff | None:
    """The iteration ``f(outer)`` of time dimension ``depth`` at which all of ``side``
    lies for each value of the dimensions before it, as an affine function of all the
    time dimensions (those from ``depth`` on not involved); None when there are several
    or no single affine ``f``."""
    n = side.dim(isl.dim_type.set)
    upto = side.project_out(isl.dim_type.set, depth + 1, n - depth - 1)
    step = isl.Map.from_range(upto).move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0, depth)
    if not step.is_single_valued():
        return None
    function = isl.PwMultiAff.from_map(step).get_pw_aff(0)
    if function.n_piece() != 1:
        return None
    aff = function.get_pieces()[0][1]
    return aff.insert_dims(isl.dim_type.in_, depth, n - depth)


def _cut(times: isl.Map, depth: int, at: isl.Aff) -> list[isl.Set]:
    """The statement's instances whose time at ``depth`` is before, at and after
    ``at``."""
    loop = isl.Aff.var_on_domain(isl.LocalSpace.from_space(at.get_domain_space()),
                                 isl.dim_type.set, depth)
    return [times.intersect_range(cut).domain()
            for cut in (loop.lt_set(at), loop.eq_set(at), loop.gt_set(at))]


def _parallel_pieces(times: isl.Map, depth: int, pieces: list[isl.Set],
                     loop_carried: list[isl.Map]) -> bool:
    """Whether no piece carries a dependence from itself to itself at ``depth`` and
    the piece before or the one after is a loop there."""
    loops = 0
    for k in (0, 2):
        part = times.intersect_domain(pieces[k])
        if part.is_empty():
            continue
        span = part.range()
        if any(not pairs.intersect_domain(span).intersect_range(span).is_empty()
               for pairs in loop_carried):
            return False
        loops += innermost_dim(part) == depth
    return loops > 0


def _piece(statement: Statement, name: str, part: isl.Set) -> tuple[Statement, isl.Map]:
    """The statement over the instances ``part``, named ``name``, and the map from its
    instances to the statement's."""
    domain = part.set_tuple_name(name)
    to_old = isl.Map.identity(domain.get_space().map_from_set()).intersect_domain(domain) \
        .set_tuple_name(isl.dim_type.out, statement.name)
    return dataclasses.replace(
        statement, name=name, whole=statement.whole or statement.name, domain=domain,
        write=statement.write.pulled_back(to_old),
        reads=tuple(r.pulled_back(to_old) for r in statement.reads)), to_old
