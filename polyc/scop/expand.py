"""Scalar expansion: a temporary scalar that each iteration of some loops sets before
it reads it becomes an array over those loops, so that they no longer carry
dependences through it.

PolyBench's symm keeps a running sum in a local ``temp2``, set to 0 at each (i, j)
and read at the end of it; its deriche keeps the last values of a row or a column in
``ym1``, ``ym2``, ``xm1``, set at the start of each row or column. Through the one
memory cell every iteration of the loops around writes after the previous one has
read, so they carry dependences (WAR and WAW) and no schedule may reorder or
interchange them. As ``temp2[i][j]`` or ``ym1[j]`` the iterations touch elements of
their own: the column passes of deriche may then run with the columns innermost, in
vector lanes.

A scalar is expanded when it is a temporary (``Array.kind == "temp"``: a C local whose
value the function does not use after the SCoP) that no statement reads before some
statement of the SCoP has written it. Its accesses are grouped into webs (statements
joined by a dependence through it: a value flows from one to the other); for each web,
the number ``p`` of leading dimensions of the original time (``Scop.order``) on which
every flow of a value from a write to a read agrees; its element for an instance is
the instance's time along those of the first ``p`` dimensions that vary over the web,
less their least value (a loop iterator; the constant dimensions of a 2d+1 time
only place statements). A web whose ``p`` is 0, or whose time has no varying
dimension among the first ``p``, keeps a scalar. Each web gets an array of its own
(``temp2``, or ``ym1_0``, ``ym1_1`` for two webs; ``Array.tensor`` names the scalar),
sized at the parameters' values: the pass runs only when every parameter has one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import islpy as isl

from polyc.islutil import fixed_params, maps_by_name, union_maps
from polyc.scop.dependences import compute_dependences
from polyc.scop.model import Access, Array, Scop, Statement


def expand_scalars(scop: Scop, values: Mapping[str, int] | None) -> Scop:
    """``scop`` with its temporary scalars expanded where the loops around them carry
    nothing else through them (see the module); itself when none is. Needs the
    dependences and a value for every parameter (``values``)."""
    if scop.dependences is None:
        raise ValueError("scalar expansion needs the SCoP's dependences")
    if any(p not in (values or {}) for p in scop.params):
        return scop
    scalars = [a for a in scop.arrays if a.kind == "temp" and a.shape == ()]
    if not scalars:
        return scop
    context = fixed_params(scop.ctx, scop.params, values) if scop.params else None
    times = {m.get_tuple_name(isl.dim_type.in_): m for m in union_maps(scop.order.get_map())}
    raw = maps_by_name(scop.dependences.raw, isl.dim_type.in_)
    statements = {s.name: s for s in scop.statements}
    arrays = list(scop.arrays)
    for scalar in scalars:
        webs = _webs(scop, scalar.name, raw)
        if webs is None:
            continue
        names = [scalar.name] if len(webs) == 1 else \
            [_fresh(f"{scalar.name}_{k}", scop) for k in range(len(webs))]
        made = []
        for name, (members, flows) in zip(names, webs):
            relation = _element(members, flows, times, statements, context, scop, name)
            element, shape = relation if relation is not None else (
                {m: None for m in members}, ())
            made.append(Array(name, scalar.name, shape, "temp", scalar.dtype))
            if name != scalar.name or shape:
                _redirect(statements, members, scalar.name, name, element)
        if made != [scalar]:
            arrays = [a for a in arrays if a is not scalar] + made
    if all(statements[s.name] is s for s in scop.statements):
        return scop
    return compute_dependences(dataclasses.replace(
        scop, arrays=tuple(arrays), dependences=None,
        statements=tuple(statements[s.name] for s in scop.statements)))


def _webs(scop: Scop, scalar: str, raw: Mapping[str, list[isl.Map]]
          ) -> list[tuple[list[str], list[isl.Map]]] | None:
    """The statements that access ``scalar`` grouped by the flow of its values (each
    group with the RAW relations among them), or None when some read of it has no
    write before it in the SCoP."""
    writers = [s for s in scop.statements if s.write.array == scalar]
    readers = [s for s in scop.statements if any(r.array == scalar for r in s.reads)]
    parent = {s.name: s.name for s in writers + readers}

    def root(name: str) -> str:
        while parent[name] != name:
            name = parent[name]
        return name

    flows: list[isl.Map] = []
    sourced: dict[str, isl.Set] = {}
    reader_names = {s.name for s in readers}
    for writer in writers:
        for dep in raw.get(writer.name, ()):
            sink = dep.get_tuple_name(isl.dim_type.out)
            if sink not in reader_names:
                continue
            flows.append(dep)
            sourced[sink] = dep.range() if sink not in sourced else sourced[sink].union(
                dep.range())
            parent[root(sink)] = root(writer.name)
    for reader in readers:
        domain = reader.domain if scop.context is None else \
            reader.domain.intersect_params(scop.context)
        if reader.name not in sourced or not domain.is_subset(sourced[reader.name]):
            return None  # (a read of the value before the SCoP, or of no value)
    groups: dict[str, list[str]] = {}
    for s in writers + readers:
        members = groups.setdefault(root(s.name), [])
        if s.name not in members:
            members.append(s.name)
    return [(members, [f for f in flows if f.get_tuple_name(isl.dim_type.in_) in members])
            for members in groups.values()]


def _element(members: list[str], flows: list[isl.Map], times: Mapping[str, isl.Map],
             statements: Mapping[str, Statement], context: isl.Set | None, scop: Scop,
             name: str) -> tuple[dict[str, isl.Map], tuple[int, ...]] | None:
    """Each member's map from its instances to the web's element, and the array's
    shape; None when the web stays a scalar."""
    timed = {m: times[m].intersect_domain(statements[m].domain) for m in members}
    n = next(iter(timed.values())).dim(isl.dim_type.out)
    agree = n
    for flow in flows:
        pairs = flow.apply_domain(timed[flow.get_tuple_name(isl.dim_type.in_)]) \
            .apply_range(timed[flow.get_tuple_name(isl.dim_type.out)])
        for d in range(min(agree, pairs.dim(isl.dim_type.in_))):
            equal = pairs.equate(isl.dim_type.in_, d, isl.dim_type.out, d)
            if not equal.is_equal(pairs):
                agree = d
                break
            pairs = equal
    if agree == 0:
        return None
    every = None
    for relation in timed.values():
        when = relation.range()
        every = when if every is None else every.union(when)
    if context is not None:
        every = every.intersect_params(context)
    kept, lows, shape = [], [], []
    for d in range(agree):
        low, high = every.dim_min_val(d), every.dim_max_val(d)
        if not (low.is_int() and high.is_int()):
            return None
        if high.to_python() > low.to_python():
            kept.append(d)
            lows.append(low.to_python())
            shape.append(high.to_python() - low.to_python() + 1)
    if not kept:
        return None
    dims = ", ".join(f"t{d}" for d in range(n))
    index = ", ".join(f"t{d} - ({low})" for d, low in zip(kept, lows))
    to_element = isl.Map.read_from_str(scop.ctx, f"{{ [{dims}] -> {name}[{index}] }}")
    return {m: timed[m].apply_range(to_element) for m in members}, tuple(shape)


def _redirect(statements: dict[str, Statement], members: list[str], scalar: str, name: str,
              element: Mapping[str, isl.Map | None]) -> None:
    """The members' accesses to ``scalar`` made to array ``name``: the element
    ``element[member]`` (None: ``name`` is a scalar)."""
    for member in members:
        s = statements[member]
        moved = [_moved(a, scalar, name, element[member]) for a in (s.write, *s.reads)]
        statements[member] = dataclasses.replace(s, write=moved[0], reads=tuple(moved[1:]))


def _moved(access: Access, scalar: str, name: str, relation: isl.Map | None) -> Access:
    """``access`` to array ``name`` at ``relation`` (None: the scalar ``name``) when it
    accesses ``scalar``."""
    if access.array != scalar:
        return access
    if relation is None:
        relation = access.relation.set_tuple_name(isl.dim_type.out, name)
    return dataclasses.replace(access, array=name, relation=relation, address=None)


def _fresh(name: str, scop: Scop) -> str:
    taken = {a.name for a in scop.arrays} | {s.name for s in scop.statements}
    while name in taken:
        name += "_"
    return name
