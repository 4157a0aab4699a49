"""Intra-tile loop order: the band member along which most accesses are stride-1
goes innermost, so LLVM vectorizes it (and members along which accesses jump by a
whole row are kept outside).

For a statement with band rows ``R`` (square, invertible) and an access whose element
offset is ``a . i + c``, moving one step along band member ``k`` moves the access by
``(a R^-1)_k`` elements. Each stride of +-1 scores 2 (a vector load or store), an
invariant access 1 (kept in a register across the loop: a reduction's accumulator),
a larger stride -2 (a gather, and a cache line per element); the best-scoring member
(the current innermost on ties) moves innermost. Permuting the members of a
permutable band is always legal.
"""

from __future__ import annotations

import islpy as isl

from polyc.islutil import flat_offset, union_maps
from polyc.scheduler.linalg import left_solve
from polyc.scop.model import Access, Scop

STRIDE_SCORES = {1: 2, 0: 1, "other": -2}


def innermost_member(scop: Scop, band: isl.ScheduleNode) -> int:
    n = band.band_n_member()
    scores = [0] * n
    for strides in access_strides(scop, band):
        for k, stride in enumerate(strides):
            scores[k] += STRIDE_SCORES.get(abs(stride), STRIDE_SCORES["other"])
    best = max(scores)
    return n - 1 if scores[n - 1] == best else scores.index(best)


def access_strides(scop: Scop, band: isl.ScheduleNode) -> list[list[int]]:
    """Per access of the band's statements (where affine), its stride in elements along
    each band member."""
    found = []
    for relation in union_maps(band.band_get_partial_schedule_union_map()
                               .intersect_domain(band.get_domain())):
        found += [s for s in statement_strides(scop, relation) or () if s is not None]
    return found


def statement_strides(scop: Scop, relation: isl.Map) -> list[list[int] | None] | None:
    """For one statement's band rows ``relation``: per access, write first, then the
    reads in order, its stride along each member (None where not affine); None when the
    rows are not affine."""
    rows = band_rows(relation)
    if rows is None:
        return None
    statement = scop.statement(relation.get_tuple_name(isl.dim_type.in_))
    moving = moving_dims(statement.domain, scop)
    found = []
    for access in (statement.write,) + statement.reads:
        coefs = access_coefficients(scop, access)
        found.append(None if coefs is None else member_strides(rows, coefs, moving))
    return found


def access_coefficients(scop: Scop, access: Access) -> list[int] | None:
    """The element stride of ``access`` along each loop of its statement, if affine."""
    return coefficients(flat_offset(access.affine, scop.sizing_shape(access.array)))


def moving_dims(domain: isl.Set, scop: Scop) -> list[int]:
    """The loops of a statement with more than one iteration."""
    if scop.sizing_context is not None:
        domain = domain.intersect_params(scop.sizing_context)
    return [d for d in range(domain.dim(isl.dim_type.set))
            if not domain.dim_min_val(d).eq(domain.dim_max_val(d))]


def member_strides(rows: list[list[int]], coefs: list[int], moving: list[int]
                   ) -> list[int] | None:
    """Strides along the band members. A loop of one iteration is left out first: isl
    simplifies its row to zeros, which would make ``rows`` singular; a member whose
    row is zero moves nothing."""
    live = [k for k, row in enumerate(rows) if any(row[d] for d in moving)]
    reduced = [[rows[k][d] for d in moving] for k in live]
    solved = left_solve(reduced, [coefs[d] for d in moving]) if len(live) == len(moving) else None
    if solved is None:
        return None
    strides = [0] * len(rows)
    for k, stride in zip(live, solved):
        strides[k] = stride
    return strides


def band_rows(relation: isl.Map) -> list[list[int]] | None:
    """The band rows of one statement as integer coefficient vectors, if affine."""
    try:
        multi = isl.PwMultiAff.from_map(relation)
    except isl.Error:
        return None
    rows = []
    for k in range(multi.dim(isl.dim_type.out)):
        coefs = coefficients(multi.get_at(k))
        if coefs is None:
            return None
        rows.append(coefs)
    return rows


def coefficients(function: isl.PwAff) -> list[int] | None:
    """Iterator coefficients of a single-piece affine function without divs."""
    if function.n_piece() != 1:
        return None
    pieces = function.get_pieces()
    aff = pieces[0][1]
    if aff.dim(isl.dim_type.div) > 0:
        return None
    values = [aff.get_coefficient_val(isl.dim_type.in_, d)
              for d in range(aff.dim(isl.dim_type.in_))]
    if any(not v.is_int() for v in values):
        return None
    return [v.to_python() for v in values]
