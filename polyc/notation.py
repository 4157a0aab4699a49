"""Schedules in Pluto notation: one line per statement, e.g. ``T(S1): (0, i0, i1, 1)``."""

from __future__ import annotations

import re
from fractions import Fraction

import islpy as isl

from polyc.islutil import single_multi_aff, union_maps


def pluto_notation(schedule: isl.Schedule | isl.UnionMap, scop=None) -> str:
    """``T(S): (...)`` for every statement of a schedule tree or schedule map."""
    times = schedule.get_map() if isinstance(schedule, isl.Schedule) else schedule
    rows = {}
    for relation in union_maps(times):
        name = relation.get_tuple_name(isl.dim_type.in_)
        rows[name] = f"T({name}): ({', '.join(_row_terms(relation))})"
    order = [s.name for s in scop.statements] if scop is not None else sorted(rows, key=natural)
    return "\n".join(rows[name] for name in order if name in rows)


def natural(name: str):
    """``S2_x`` before ``S10_y``: statement names sort by their number."""
    digits = "".join(ch for ch in name[1:].split("_")[0] if ch.isdigit())
    return (int(digits) if digits else -1, name)


def _row_terms(relation: isl.Map) -> list[str]:
    multi_aff = single_multi_aff(relation)
    if multi_aff is None:
        return [str(relation)]
    return [format_aff(multi_aff.get_at(k)) for k in range(multi_aff.dim(isl.dim_type.out))]


def format_aff(aff: isl.Aff) -> str:
    """An affine (or quasi-affine) expression over named dims: ``2*t + i + 1``, ``i/32``."""
    if aff.dim(isl.dim_type.div) > 0:
        return _quasi_affine(aff)
    terms = []
    for k in range(aff.dim(isl.dim_type.in_)):
        coef = _frac(aff.get_coefficient_val(isl.dim_type.in_, k))
        terms.append((coef, aff.get_dim_name(isl.dim_type.in_, k) or f"i{k}"))
    text = _join(terms, _frac(aff.get_constant_val()))
    denominator = _frac(aff.get_denominator_val())
    return text if denominator == 1 else f"({text})/{denominator}"


def _quasi_affine(aff: isl.Aff) -> str:
    """isl's own text of the expression, with ``floor((i)/32)`` written ``i/32`` (integer
    division, as Pluto prints tile loops)."""
    text = str(aff)
    body = text[text.index("[(") + 2:text.rindex(")]")]
    return _FLOOR.sub(r"\1/\2", body)


_FLOOR = re.compile(r"floor\(\((\w+)\)/(\d+)\)")


def _join(terms, constant) -> str:
    parts = []
    for coef, name in terms:
        if coef == 0:
            continue
        magnitude = "" if abs(coef) == 1 else f"{abs(coef)}*"
        parts.append(("-" if coef < 0 else "+", f"{magnitude}{name}"))
    if constant != 0 or not parts:
        parts.append(("-" if constant < 0 else "+", str(abs(constant))))
    text = " ".join(f"{sign} {body}" for sign, body in parts)
    return text[2:] if text.startswith("+ ") else "-" + text[2:]


def _frac(val: isl.Val) -> Fraction:
    return Fraction(val.get_num_si(), val.get_den_val().get_num_si())
