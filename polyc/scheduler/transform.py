"""Affine transformations of one band of a schedule tree, for steering a schedule by
hand (:mod:`polyc.steer`): each gives the band new rows and recomputes its
``permutable`` and ``coincident`` flags from the dependences, so that tiling and
parallel marks read true flags. None checks legality; :class:`polyc.steer.Schedule`
runs the legality checker on the result and refuses what breaks a dependence.

A band is found by a statement below it and its depth among the bands on that
statement's path from the root (:func:`find_band`). Rows are ``isl.UnionPwAff``, one
per member, over the band's statements; in Pluto's notation, for jacobi-1d's
original band ``(t, i)``::

    interchange(band, 0, 1)       T(S1): (t, i)  ->  (i, t)
    skew(band, 1, 0, 2)           T(S1): (t, i)  ->  (t, 2*t + i)
    shift(band, 1, {"S2": 1})     T(S2): (t, i)  ->  (t, i + 1)
    reverse(band, 1)              T(S1): (t, i)  ->  (t, -i)

A band of tile loops over a band of point loops (as ``band_tile`` makes them) has its
tile sizes read back from the point loops (:func:`point_sizes`) and its full tiles
computed (:func:`full_tiles`) for isl's ``isolate`` option (:func:`isolate_option`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import islpy as isl

from polyc.errors import PolycError
from polyc.islutil import (
    items,
    multi_union,
    outer_schedule,
    statement_names,
    union_maps,
    union_sets,
    united,
)
from polyc.notation import natural
from polyc.scheduler.legality import backward_member, live_dependences, named_pairs
from polyc.scop.model import Scop


def find_band(schedule: isl.Schedule, statement: str, depth: int = 0) -> isl.ScheduleNode:
    """The ``depth``-th band (0: the outermost) on the path from the root of
    ``schedule`` to the instances of ``statement``."""
    names = statement_names(schedule.get_domain())
    if statement not in names:
        raise PolycError(f"no statement {statement!r} in the schedule; it has "
                         f"{', '.join(sorted(names, key=natural))}")
    node, found = schedule.get_root(), -1
    while True:
        kind = node.get_type()
        if kind == isl.schedule_node_type.band:
            found += 1
            if found == depth:
                return node
        if kind in (isl.schedule_node_type.sequence, isl.schedule_node_type.set):
            node = next(node.child(k) for k in range(node.n_children())
                        if statement in statement_names(node.child(k).filter_get_filter()))
        elif kind == isl.schedule_node_type.leaf or node.n_children() == 0:
            raise PolycError(f"{statement} has {found + 1} band(s) above it; there is no "
                             f"band at depth {depth}")
        else:
            node = node.child(0)


def band_id(band: isl.ScheduleNode) -> tuple[str, int]:
    """``(statement, depth)`` that :func:`find_band` finds ``band`` by: its first
    statement in natural order and the bands above it."""
    statement = min(statement_names(band.get_domain()), key=natural)
    depth, node = 0, band
    while node.has_parent():
        node = node.parent()
        depth += node.get_type() == isl.schedule_node_type.band
    return statement, depth


def rows(band: isl.ScheduleNode) -> list[isl.UnionPwAff]:
    partial = band.band_get_partial_schedule()
    return [partial.get_at(k) for k in range(band.band_n_member())]


def interchange(band: isl.ScheduleNode, first: int, second: int) -> list[isl.UnionPwAff]:
    """The band's rows with members ``first`` and ``second`` swapped."""
    found = rows(band)
    _members(found, first, second)
    found[first], found[second] = found[second], found[first]
    return found


def permute(band: isl.ScheduleNode, order: Sequence[int]) -> list[isl.UnionPwAff]:
    """The band's rows in ``order`` (new member k is old member ``order[k]``)."""
    found = rows(band)
    if sorted(order) != list(range(len(found))):
        raise PolycError(f"an order of the band's {len(found)} members must name each of "
                         f"0..{len(found) - 1} once, got {list(order)}")
    return [found[k] for k in order]


def skew(band: isl.ScheduleNode, member: int, by: int, factor: int = 1
         ) -> list[isl.UnionPwAff]:
    """The band's rows with ``factor`` times member ``by`` added to member ``member``."""
    found = rows(band)
    _members(found, member, by)
    if member == by:
        raise PolycError("skew a member by another one, not by itself (use scale)")
    _integer(factor, "factor")
    found[member] = found[member].add(found[by].scale_val(
        isl.Val.int_from_si(band.get_ctx(), factor)))
    return found


def shift(band: isl.ScheduleNode, member: int, amounts: Mapping[str, int]
          ) -> list[isl.UnionPwAff]:
    """The band's rows with ``amounts[S]`` added to member ``member`` for each named
    statement ``S`` (statements not named stay)."""
    found = rows(band)
    _members(found, member)
    names = statement_names(band.get_domain())
    row = found[member]
    for statement, amount in amounts.items():
        if statement not in names:
            raise PolycError(f"statement {statement!r} is not in the band "
                             f"({', '.join(sorted(names, key=natural))})")
        _integer(amount, f"shift of {statement}")
        row = row.add(_constant_on(band, statement, amount))
    found[member] = row
    return found


def reverse(band: isl.ScheduleNode, member: int) -> list[isl.UnionPwAff]:
    """The band's rows with member ``member`` negated: its loop runs backward."""
    found = rows(band)
    _members(found, member)
    found[member] = found[member].neg()
    return found


def distribute(band: isl.ScheduleNode, at: int, order: Sequence[str]
               ) -> list[isl.UnionPwAff]:
    """The band's rows with a row that is constant per statement inserted before
    member ``at`` (``order[k]`` gets k; the band's statements not named come after, in
    natural order): the loops from ``at`` on run statement by statement, all of one
    before any of the next, in Pluto's notation ``(t, i)`` -> ``(t, 0, i)`` for S1
    and ``(t, 1, i)`` for S2."""
    found = rows(band)
    if isinstance(at, bool) or not isinstance(at, int) or not 0 <= at <= len(found):
        raise PolycError(f"distribute before a member 0..{len(found)} of the band, got {at!r}")
    names = statement_names(band.get_domain())
    unknown = [name for name in order if name not in names]
    if unknown or len(set(order)) != len(order):
        raise PolycError(f"an order names the band's statements "
                         f"({', '.join(sorted(names, key=natural))}) once each, got "
                         f"{list(order)}")
    ranked = [*order, *sorted(names - set(order), key=natural)]
    row = _constant_on(band, ranked[0], 0)
    for rank, statement in enumerate(ranked[1:], 1):
        row = row.add(_constant_on(band, statement, rank))
    return [*found[:at], row, *found[at:]]


def fuse_siblings(scop: Scop, band: isl.ScheduleNode, depth: int | None = None,
                  through: str | None = None) -> isl.ScheduleNode:
    """The first ``depth`` members (default: as many as every sibling has) of ``band``
    and of every other band right below the same sequence (or only of those from
    ``band``'s to the one above statement ``through``), fused into one band above the
    sequence, which then orders the statements inside each iteration: in Pluto's
    notation ``(0, i, j)``, ``(1, i, j)`` -> ``(i, 0, j)``, ``(i, 1, j)``. The fused
    band, its flags recomputed."""
    kinds = isl.schedule_node_type
    parent = band.parent() if band.has_parent() else None
    sequence = parent.parent() if parent is not None and parent.has_parent() else None
    if parent is None or parent.get_type() != kinds.filter or sequence is None \
            or sequence.get_type() not in (kinds.sequence, kinds.set):
        raise PolycError("the band is not right below a sequence of statements' loops: "
                         "nothing to fuse it with")
    if sequence.is_subtree_anchored():
        raise PolycError("a band below the sequence is isolated (isolate): fuse before "
                         "isolating")
    if through is not None:
        sequence = _grouped(sequence, parent.get_child_position(), through)
    count = sequence.n_children()
    bands = [sequence.child(k).child(0) for k in range(count)]
    lacking = [k for k, b in enumerate(bands) if b.get_type() != kinds.band]
    if lacking:
        names = ", ".join(sorted(statement_names(bands[lacking[0]].get_domain()), key=natural))
        raise PolycError(f"{names} has no loop at this level to fuse with the others")
    most = min(b.band_n_member() for b in bands)
    depth = most if depth is None else depth
    if isinstance(depth, bool) or not isinstance(depth, int) or not 0 < depth <= most:
        raise PolycError(f"fuse 1..{most} loops (as many as every sibling has), got {depth!r}")
    fused = []
    for member in range(depth):
        row = rows(bands[0])[member]
        for other in bands[1:]:
            row = row.union_add(rows(other)[member])
        fused.append(row)
    node = sequence
    for k in range(count):
        child = node.child(k).child(0)
        if child.band_n_member() > depth:
            child = child.band_split(depth)
        node = child.delete().parent().parent()
    partial = multi_union(_space(bands[0], depth), fused)
    return set_flags(scop, node.insert_partial_schedule(partial))


def _grouped(sequence: isl.ScheduleNode, at: int, through: str) -> isl.ScheduleNode:
    """The children of ``sequence`` from position ``at`` to the one whose filter holds
    statement ``through`` (either way), as a sequence of their own in its place: the
    sequence of those children (the others stay where they were)."""
    count = sequence.n_children()
    filters = [sequence.child(k).filter_get_filter() for k in range(count)]
    found = [k for k, f in enumerate(filters) if through in statement_names(f)]
    if sequence.get_type() != isl.schedule_node_type.sequence or not found:
        names = sorted({n for f in filters for n in statement_names(f)}, key=natural)
        raise PolycError(f"fuse through {through!r}: no such statement below a sibling of "
                         f"the band (below the sequence: {', '.join(names)})")
    low, high = sorted((at, found[0]))
    if low == high:
        raise PolycError(f"fuse through {through!r}: a statement of the band itself; name "
                         "one below a sibling")
    if (low, high) == (0, count - 1):
        return sequence
    parts = [(0, low), (low, high + 1), (high + 1, count)]
    groups = isl.UnionSetList.alloc(sequence.get_ctx(), 3)
    for first, end in parts:
        if first < end:
            groups = groups.add(united(filters[first:end]))
    node = sequence.insert_sequence(groups)
    for position in reversed(range(node.n_children())):  # the others back in place
        if position != (1 if low else 0) \
                and node.child(position).child(0).get_type() == isl.schedule_node_type.sequence:
            node = node.sequence_splice_child(position)
    return node.child(low).child(0)


def strip(band: isl.ScheduleNode, member: int, factor: int) -> list[isl.UnionPwAff]:
    """The band's rows with ``member`` strip-mined by ``factor`` and its strip moved
    innermost: ``(i, j, k)`` -> ``(floor(i/4), j, k, i mod 4)`` for member 0 and 4 (one
    more row than members)."""
    found = rows(band)
    _members(found, member)
    _integer(factor, "factor")
    if factor < 2:
        raise PolycError(f"an unroll factor is 2 or more, got {factor}")
    value = isl.Val.int_from_si(band.get_ctx(), factor)
    row = found[member]
    found[member] = row.scale_down_val(value).floor()
    return [*found, row.mod_val(value)]


def point_sizes(band: isl.ScheduleNode) -> list[int] | None:
    """The tile sizes of ``band`` when it is a band of tile loops over a band of as
    many point loops, each point loop running from 0 to its size less one whatever the
    instance (``(i) mod 8``: 8); else None."""
    point = band.child(0)
    n = band.band_n_member()
    if point.get_type() != isl.schedule_node_type.band or point.band_n_member() != n:
        return None
    sizes = []
    for row in rows(point):
        found = set()
        for piece in items(row.get_pw_aff_list()):
            for _, aff in piece.get_pieces():
                values = isl.Map.from_aff(aff).range()  # over every instance of the space
                low, high = values.dim_min_val(0), values.dim_max_val(0)
                if not (low.is_zero() and high.is_int()):
                    return None
                found.add(high.to_python() + 1)
        if len(found) != 1:
            return None
        sizes.append(found.pop())
    return sizes


def full_tiles(band: isl.ScheduleNode, sizes: Sequence[int]) -> isl.Set:
    """The tiles of ``band`` (a band of tile loops, :func:`point_sizes`) that are full:
    the values of the loops outside it and of its own at which every point of the
    ``sizes`` box runs, for each statement below it."""
    n = len(sizes)
    times = outer_schedule(band).flat_range_product(
        band.band_get_partial_schedule_union_map()).flat_range_product(
        band.child(0).band_get_partial_schedule_union_map())
    full = None
    for relation in union_maps(times):
        occupied = relation.range()
        at = occupied.dim(isl.dim_type.set) - n  # the first point loop
        tiles = occupied.project_out(isl.dim_type.set, at, n)
        whole = tiles.add_dims(isl.dim_type.set, n)
        for k, size in enumerate(sizes):
            whole = whole.lower_bound_val(isl.dim_type.set, at + k, _val(band, 0)) \
                .upper_bound_val(isl.dim_type.set, at + k, _val(band, size - 1))
        partial = whole.subtract(occupied).project_out(isl.dim_type.set, at, n)
        found = tiles.subtract(partial)
        full = found if full is None else full.intersect(found)
    return full.coalesce()


def isolate_option(band: isl.ScheduleNode, tiles: isl.Set) -> isl.UnionSet:
    """isl's ``isolate`` AST build option for ``band``: ``tiles`` (values of the loops
    outside it, then of its own) as ``isolate[[outer] -> [band]]``."""
    outer = tiles.dim(isl.dim_type.set) - band.band_n_member()
    pairs = isl.Map.from_range(tiles).move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0,
                                                outer)
    return isl.UnionSet.from_set(pairs.wrap().set_tuple_name("isolate"))


def replace(scop: Scop, band: isl.ScheduleNode, new_rows: Sequence[isl.UnionPwAff]
            ) -> isl.ScheduleNode:
    """``band`` with ``new_rows`` (as many members, or more) and flags recomputed
    (:func:`set_flags`)."""
    node = band.delete().insert_partial_schedule(multi_union(_space(band, len(new_rows)),
                                                             new_rows))
    return set_flags(scop, node)


def _space(band: isl.ScheduleNode, members: int) -> isl.Space:
    """The space of ``band``'s partial schedule with ``members`` members."""
    space = band.band_get_partial_schedule().get_space()
    return space.drop_dims(isl.dim_type.set, 0, band.band_n_member()) \
        .add_dims(isl.dim_type.set, members)


def set_flags(scop: Scop, band: isl.ScheduleNode) -> isl.ScheduleNode:
    """``band`` with its ``permutable`` and ``coincident`` flags as :func:`flags` finds
    them."""
    permutable, coincident = flags(scop, band)
    band = band.band_set_permutable(int(permutable))
    for k, parallel in enumerate(coincident):
        band = band.band_member_set_coincident(k, int(parallel))
    return band


def flags(scop: Scop, band: isl.ScheduleNode) -> tuple[bool, list[bool]]:
    """Whether ``band`` is permutable (no live dependence goes backward along any
    member: :func:`polyc.scheduler.legality.backward_member`), and per member whether
    it is coincident: every live dependence that the members before it leave equal
    has distance zero along it (the loop of that member then carries nothing)."""
    dependences, context = scop.dependences, scop.context
    permutable = backward_member(dependences, band, context) is None
    live = live_dependences(dependences, band, context)
    coincident = []
    for row in rows(band):
        same = _same_value(row)
        coincident.append(live.is_subset(same))
        live = live.intersect(same)
    return permutable, coincident


def carried(scop: Scop, band: isl.ScheduleNode, member: int
            ) -> tuple[str, isl.Map] | None:
    """``(kind, pairs)`` of a live dependence that ``member``'s loop carries: its two
    instances in different iterations of the member, the members before it equal; None
    when the loop carries none (it may run in parallel)."""
    live = live_dependences(scop.dependences, band, scop.context)
    found = rows(band)
    for row in found[:member]:
        live = live.intersect(_same_value(row))
    crossing = live.subtract(_same_value(found[member]))
    return None if crossing.is_empty() else named_pairs(scop.dependences, crossing)


def _same_value(row: isl.UnionPwAff) -> isl.UnionMap:
    """Instance -> the instances at which ``row`` takes the same value."""
    row_map = isl.UnionMap.from_union_pw_aff(row)
    return row_map.apply_range(row_map.reverse())


def _constant_on(band: isl.ScheduleNode, statement: str, amount: int) -> isl.UnionPwAff:
    """``amount`` on ``statement``'s instances in ``band``, zero on the others."""
    domain = band.get_domain()
    pieces = []
    for part in union_sets(domain):
        value = amount if part.get_tuple_name() == statement else 0
        pieces.append(isl.UnionPwAff(isl.PwAff.val_on_domain(
            part, isl.Val.int_from_si(band.get_ctx(), value))))
    result = pieces[0]
    for piece in pieces[1:]:
        result = result.union_add(piece)
    return result


def _val(band: isl.ScheduleNode, value: int) -> isl.Val:
    return isl.Val.int_from_si(band.get_ctx(), value)


def _members(found: list, *members: int) -> None:
    for member in members:
        if isinstance(member, bool) or not isinstance(member, int) \
                or not 0 <= member < len(found):
            raise PolycError(f"the band has members 0..{len(found) - 1}, got {member!r}")


def _integer(value, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolycError(f"{what} must be an integer, got {value!r}")

