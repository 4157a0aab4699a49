"""Schedule rows as isl objects: affine rows, permutable bands on top of subtrees."""

from __future__ import annotations

import islpy as isl

from polyc.notation import format_aff
from polyc.scop.model import Scop


def row_aff(scop: Scop, statement: str, row) -> isl.Aff:
    """``c . i + c0`` on the statement's domain space."""
    coefs, shift = row
    space = scop.statement(statement).domain.get_space()
    aff = isl.Aff.zero_on_domain(isl.LocalSpace.from_space(space))
    for dim, coef in enumerate(coefs):
        aff = aff.set_coefficient_val(isl.dim_type.in_, dim, coef)
    return aff.set_constant_val(shift)


def row_text(scop: Scop, statement: str, row) -> str:
    return format_aff(row_aff(scop, statement, row))


def band_schedule(scop: Scop, stmts: list[str], band: list[dict], coincident: list[bool],
                  below: isl.Schedule) -> isl.Schedule:
    """``below`` with a permutable band of the rows ``band`` inserted at its root."""
    partial = None
    for name in stmts:
        statement = scop.statement(name)
        affs = isl.AffList.alloc(scop.ctx, 0)
        for row in band:
            affs = affs.add(row_aff(scop, name, row[name]))
        space = statement.domain.get_space().map_from_domain_and_range(
            isl.Space.set_alloc(scop.ctx, 0, len(band)).align_params(statement.domain.get_space()))
        multi = isl.MultiAff.from_aff_list(space, affs)
        piece = isl.MultiUnionPwAff.from_multi_pw_aff(isl.MultiPwAff.from_multi_aff(multi))
        piece = piece.intersect_domain(isl.UnionSet.from_set(statement.domain))
        partial = piece if partial is None else partial.union_add(piece)
    schedule = below.insert_partial_schedule(partial)
    node = schedule.get_root().child(0).band_set_permutable(1)
    for k, flag in enumerate(coincident):
        node = node.band_member_set_coincident(k, int(flag))
    return node.get_schedule()


def flag_text(coincident, permutable: bool = True) -> str:
    """A band's flags: one per member, ``p`` coincident (parallel) or ``s``; ``*`` after
    a band of several members that is not permutable."""
    coincident = list(coincident)
    return "".join("p" if c else "s" for c in coincident) + (
        "" if permutable or len(coincident) < 2 else "*")


def band_summary(schedule: isl.Schedule) -> list[str]:
    """The bands of a schedule tree, outermost first in a depth-first walk: one flag per
    member, ``p`` coincident (parallel) or ``s``; ``*`` after a band of several members
    that is not permutable. Pluto's and isl's schedules compare at a glance."""
    bands: list[str] = []

    def walk(node: isl.ScheduleNode) -> None:
        if node.get_type() == isl.schedule_node_type.band:
            bands.append(flag_text((node.band_member_get_coincident(k)
                                    for k in range(node.band_n_member())),
                                   bool(node.band_get_permutable())))
        for k in range(node.n_children()):
            walk(node.child(k))

    walk(schedule.get_root())
    return bands
