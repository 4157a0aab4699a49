"""islpy helpers: every islpy quirk polyc relies on lives here.

- islpy lists are not iterable: use :func:`items`.
- Sets and maps are built programmatically (spaces, affs), never from f-strings.
- isl counts the operations of a context only once a maximum is set, and a call past
  it fails with a plain ``isl.Error``: :func:`budget` turns that into :class:`OverBudget`.
"""

from __future__ import annotations

import contextlib
import functools
import re
from typing import Iterable, Iterator, Sequence

import islpy as isl

from polyc.frontend.core import Ix


def items(isl_list) -> list:
    """The elements of an islpy list (``SetList``, ``MapList``, ``AstNodeList``...)."""
    kind = type(isl_list)
    if kind not in _COUNTERS:  # (``dir`` each time took 0.7 s of densenet121's tiling)
        _COUNTERS[kind] = next(n for n in dir(isl_list) if n.startswith("n_"))
    count = getattr(isl_list, _COUNTERS[kind])()
    return [isl_list.get_at(k) for k in range(count)]


_COUNTERS: dict[type, str] = {}  # an islpy list type -> the name of its length method


def union_maps(umap: isl.UnionMap) -> list[isl.Map]:
    return items(umap.get_map_list())


class OverBudget(Exception):
    """isl work past its :func:`budget`; the caller falls back to something simpler."""


@contextlib.contextmanager
def budget(ctx: isl.Context, operations: int, what: str) -> Iterator[None]:
    """The block's isl operations on ``ctx`` counted from 0 and stopped past
    ``operations`` (about 3 million a second on this project's machines), which raises
    :class:`OverBudget` naming ``what``. Blocks do not nest."""
    ctx.reset_operations()
    ctx.set_max_operations(operations)
    try:
        yield
    except isl.Error as err:
        if not _exhausted(ctx):
            raise
        raise OverBudget(f"{what} over budget ({operations:,} isl operations)") from err
    finally:
        ctx.set_max_operations(0)
        ctx.reset_operations()


def _exhausted(ctx: isl.Context) -> bool:
    """Whether ``ctx`` is past its maximum of operations: a tiny operation fails then
    (the error of the call that hit the maximum may only say that an argument could not
    be copied)."""
    try:
        isl.Set.read_from_str(ctx, "{ [i] : 0 <= i <= 1 }").lexmin()
    except isl.Error:
        return True
    return False


_SET_NODE = re.compile(r"(?<=\{ )set: \[")


def ordered(schedule: isl.Schedule) -> isl.Schedule:
    """``schedule`` with every set node (children in any order: isl's scheduler makes
    them of statements with no dependence between them) a sequence in the order it
    prints, which is the order ``get_map()`` gives and every check of the schedule
    assumes. Kept as a set, AST generation may pick another: a pass adding orders later
    (in place) was checked against one order and generated in the other (graph fuzzer
    seed 1770, a wrong answer). islpy has no call to turn a set into a sequence; the
    tree's text has one word to change."""
    text = str(schedule)
    if not _SET_NODE.search(text):
        return schedule
    return isl.Schedule.read_from_str(schedule.get_ctx(), _SET_NODE.sub("sequence: [", text))


def union_of(ctx: isl.Context, sets) -> isl.UnionSet:
    """The union of ``sets`` (the empty union set when there are none), united pairwise
    in a balanced tree: adding one set at a time copied the growing union each time
    (quadratic in the number of sets)."""
    parts = [isl.UnionSet.from_set(part) for part in sets]
    return united(parts) if parts else isl.UnionSet.empty(isl.Space.params_alloc(ctx, 0))


def united(parts: list):
    """The union of the union sets or maps ``parts`` (at least one), in a balanced tree
    of pairwise unions."""
    while len(parts) > 1:
        parts = [parts[k].union(parts[k + 1]) if k + 1 < len(parts) else parts[k]
                 for k in range(0, len(parts), 2)]
    return parts[0]


def maps_by_name(umap: isl.UnionMap, dim: isl.dim_type) -> dict[str, list[isl.Map]]:
    """The maps of ``umap`` grouped by the tuple name of their domain (``dim`` is
    ``isl.dim_type.in_``: the statement) or of their range (``out``: the array)."""
    groups: dict[str, list[isl.Map]] = {}
    for relation in union_maps(umap):
        groups.setdefault(relation.get_tuple_name(dim), []).append(relation)
    return groups


def union_sets(uset: isl.UnionSet) -> list[isl.Set]:
    return items(uset.get_set_list())


def single_multi_aff(relation: isl.Map) -> isl.MultiAff | None:
    """``relation`` as one affine function (a single-valued map of one piece), or None."""
    pieces: list[isl.MultiAff] = []
    isl.PwMultiAff.from_map(relation).foreach_piece(lambda _set, piece: pieces.append(piece))
    return pieces[0] if len(pieces) == 1 else None


def span(values: isl.Set, dim: int) -> int | None:
    """How many integer values dimension ``dim`` of ``values`` spans (max - min + 1),
    or None when a bound is not a constant."""
    high, low = values.dim_max_val(dim), values.dim_min_val(dim)
    if not (high.is_int() and low.is_int()):
        return None
    return high.to_python() - low.to_python() + 1


def band_above(node: isl.ScheduleNode) -> bool:
    """Whether a band node is an ancestor of ``node`` in its schedule tree."""
    while node.has_parent():
        node = node.parent()
        if node.get_type() == isl.schedule_node_type.band:
            return True
    return False


def outer_schedule(node: isl.ScheduleNode, domain: isl.UnionSet | None = None
                   ) -> isl.UnionMap:
    """The prefix schedule of ``node`` (the flat product of the band members above it)
    on ``domain`` (default: the instances reaching ``node``), as
    ``get_prefix_schedule_union_map().intersect_domain(domain)``, but made from the
    bands above alone: isl's intersects the whole tree's domain with each filter on
    the way down, which took densenet121's 121 register tiles 0.43 s."""
    if domain is None:
        domain = node.get_domain()
    rows = []
    while node.has_parent():
        node = node.parent()
        if node.get_type() == isl.schedule_node_type.band:
            rows.append(node.band_get_partial_schedule_union_map().intersect_domain(domain))
    if not rows:
        nothing = isl.Set.universe(isl.Space.set_alloc(domain.get_ctx(), 0, 0))
        return isl.UnionMap.from_domain_and_range(domain, isl.UnionSet.from_set(nothing))
    result = rows.pop()
    while rows:
        result = result.flat_range_product(rows.pop())
    return result


def row_space(domain: isl.Set) -> isl.Space:
    """The space of one band member's schedule of the statement whose instances are
    ``domain`` (what ``UnionPwAff.extract_pw_aff`` takes: given the set's own space it
    returns an empty piece)."""
    return domain.get_space().from_domain().add_dims(isl.dim_type.out, 1)


def permuted_band(band: isl.ScheduleNode, order: Sequence[int]) -> isl.ScheduleNode:
    """``band`` (permutable) with its members in ``order``."""
    partial = band.band_get_partial_schedule()
    return band_with_rows(band, [partial.get_at(k) for k in order],
                          [band.band_member_get_coincident(k) for k in order])


def band_with_rows(band: isl.ScheduleNode, rows: Sequence[isl.UnionPwAff],
                   coincident: Sequence[bool]) -> isl.ScheduleNode:
    """``band`` replaced by a permutable band of ``rows`` (as many as its members, or
    fewer) with these coincident flags."""
    space = band.band_get_partial_schedule().get_space()
    space = space.drop_dims(isl.dim_type.set, len(rows), band.band_n_member() - len(rows))
    node = band.delete().insert_partial_schedule(multi_union(space, rows))
    node = node.band_set_permutable(1)
    for k, flag in enumerate(coincident):
        node = node.band_member_set_coincident(k, flag)
    return node


def marks_named(schedule: isl.Schedule, name: str) -> list[isl.ScheduleNode]:
    """The mark nodes of ``schedule`` named ``name``, top down (copies: a visit's nodes
    are only borrowed)."""
    found: list[isl.ScheduleNode] = []

    def visit(node: isl.ScheduleNode) -> bool:
        if node.get_type() == isl.schedule_node_type.mark \
                and node.mark_get_id().get_name() == name:
            found.append(node.copy())
        return True

    schedule.get_root().foreach_descendant_top_down(visit)
    return found


def statement_names(uset: isl.UnionSet) -> set[str]:
    """The tuple names of the sets in ``uset`` (e.g. the statements reaching a node)."""
    return {part.get_tuple_name() for part in union_sets(uset)}


def multi_union(space: isl.Space, rows: Sequence[isl.UnionPwAff]) -> isl.MultiUnionPwAff:
    """The band schedule with members ``rows`` in ``space``."""
    members = isl.UnionPwAffList.alloc(space.get_ctx(), len(rows))
    for row in rows:
        members = members.add(row)
    return isl.MultiUnionPwAff.from_union_pw_aff_list(space, members)


def set_space(ctx: isl.Context, name: str, dims: Sequence[str]) -> isl.Space:
    """The space ``name[dims...]``."""
    return isl.Space.create_from_names(ctx, set=list(dims)).set_tuple_name(isl.dim_type.set, name)


def box(ctx: isl.Context, name: str, extents: Sequence[int | str], prefix: str = "i"
        ) -> isl.Set:
    """``{ name[i0, .., in-1] : 0 <= ik < extents[k] }``; an extent may be the name of a
    parameter (``"batch"``), which then is a parameter of the set, or an isl expression
    of parameters (``"floor((N + 15)/16)"``)."""
    symbolic = [e for e in extents if isinstance(e, str)]
    params = expression_params(" ".join(symbolic))
    space = set_space(ctx, name, [f"{prefix}{k}" for k in range(len(extents))])
    if params:
        space = space.align_params(params_space(ctx, params))
    result = isl.Set.universe(space)
    for dim, extent in enumerate(extents):
        lower = isl.Constraint.inequality_alloc(space).set_coefficient_val(
            isl.dim_type.set, dim, 1)
        result = result.add_constraint(lower)
        if isinstance(extent, str) and not extent.isidentifier():
            bound = (param_expr(ctx, params, extent).insert_dims(isl.dim_type.in_, 0, len(extents))
                     .set_tuple_id(isl.dim_type.in_, space.get_tuple_id(isl.dim_type.set)))
            result = result.intersect(isl.PwAff.from_aff(variable(space, dim)).lt_set(bound))
            continue
        upper = isl.Constraint.inequality_alloc(space).set_coefficient_val(
            isl.dim_type.set, dim, -1)
        if isinstance(extent, str):
            upper = (upper.set_coefficient_val(isl.dim_type.param, params.index(extent), 1)
                     .set_constant_val(-1))
        else:
            upper = upper.set_constant_val(extent - 1)
        result = result.add_constraint(upper)
    return result


_NOT_PARAMS = {"floor", "ceil", "mod", "min", "max", "and", "or"}


def expression_params(text: str) -> list[str]:
    """The parameter names an isl expression uses, in order."""
    names = re.findall(r"[A-Za-z_]\w*", text)
    return list(dict.fromkeys(n for n in names if n not in _NOT_PARAMS))


def aff_of_index(domain_space: isl.Space, index: Ix) -> isl.Aff:
    """The affine function ``index`` (terms over the domain's dims) as an isl Aff."""
    aff = isl.Aff.zero_on_domain(isl.LocalSpace.from_space(domain_space))
    for var, coef in index.terms:
        aff = aff.add_coefficient_val(isl.dim_type.in_, var, coef)
    return aff.set_constant_val(index.const)


def variable(space: isl.Space, dim: int) -> isl.Aff:
    """The affine function ``x_dim`` on the set space ``space``."""
    return aff_of_index(space, Ix.var(dim))


def affs_to_map(domain_space: isl.Space, target: isl.Space, affs: Iterable[isl.Aff]) -> isl.Map:
    """The map ``domain -> target[affs...]``."""
    if target.dim(isl.dim_type.param) != domain_space.dim(isl.dim_type.param):
        target = target.align_params(domain_space)
    space = domain_space.map_from_domain_and_range(target)
    aff_list = isl.AffList.alloc(domain_space.get_ctx(), 0)
    for aff in affs:
        aff_list = aff_list.add(aff)
    return isl.Map.from_multi_aff(isl.MultiAff.from_aff_list(space, aff_list))


def index_map(domain: isl.Set, target: isl.Space, index: Sequence[Ix]) -> isl.Map:
    """``{ S[i] -> A[index(i)] }`` restricted to ``domain``."""
    space = domain.get_space()
    affs = [aff_of_index(space, ix) for ix in index]
    return affs_to_map(space, target, affs).intersect_domain(domain)


def outside_map(space: isl.Space, shape: Sequence[int], mode: str) -> isl.Map:
    """``{ A[d] -> A[e] }`` sending every index to the element read there: ``edge``
    clamps each ``d_k`` into ``[0, n_k)``, ``reflect`` mirrors it at the border without
    repeating it (``e = (n-1) - |(n-1) - |d||``, exact for ``-(n-1) <= d <= 2(n-1)``)."""
    pieces = isl.PwAffList.alloc(space.get_ctx(), 0)
    for dim, extent in enumerate(shape):
        x = isl.PwAff.from_aff(variable(space, dim))
        zero = x.sub(x)
        top = _last_index(zero, extent)
        if mode == "edge":
            folded = x.max(zero).min(top)
        elif mode == "reflect":
            distance = top.sub(x.max(x.neg()))
            folded = top.sub(distance.max(distance.neg()))
        else:
            raise ValueError(f"no outside map for mode {mode!r}")
        pieces = pieces.add(folded)
    multi = isl.MultiPwAff.from_pw_aff_list(space.map_from_set(), pieces)
    return isl.Map.from_multi_pw_aff(multi)


def _last_index(zero: isl.PwAff, extent: int | str) -> isl.PwAff:
    """``extent - 1`` on the domain of ``zero`` (a parameter's name: that parameter)."""
    if isinstance(extent, int):
        return zero.add_constant_val(extent - 1)
    param = param_aff(zero.get_domain_space(), extent)
    return zero.add(isl.PwAff.from_aff(param).add_constant_val(-1))


def spread_dim(relation: isl.Map, dim: int, extent: int | str) -> isl.Map:
    """``relation`` with its output dim ``dim`` any value in ``[0, extent)``: the elements
    a read may touch whose index along ``dim`` is known only at run time."""
    out = isl.dim_type.out
    ctx = relation.get_ctx()
    free = (relation.project_out(out, dim, 1).insert_dims(out, dim, 1)
            .set_tuple_name(out, relation.get_tuple_name(out)))
    free = free.lower_bound_val(out, dim, isl.Val.int_from_si(ctx, 0))
    if isinstance(extent, int):
        return free.upper_bound_val(out, dim, isl.Val.int_from_si(ctx, extent - 1))
    free = free.align_params(params_space(ctx, [extent]))
    below = (isl.Constraint.inequality_alloc(free.get_space())
             .set_coefficient_val(out, dim, -1).set_constant_val(-1)
             .set_coefficient_val(isl.dim_type.param,
                                  free.find_dim_by_name(isl.dim_type.param, extent), 1))
    return free.add_constraint(below)


def strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major element strides of ``shape`` (its first extent may be symbolic)."""
    result, step = [], 1
    for extent in reversed(shape[1:]):
        result.append(step)
        step *= max(extent, 1)
    return tuple(reversed(result + [step])) if shape else ()


def linear_aff(space: isl.Space, coefficients: Sequence[int]) -> isl.Aff:
    """``sum(coefficients[k] * x_k)`` on the set space ``space``."""
    return aff_of_index(space, Ix(tuple(enumerate(coefficients))))


def reshape_map(ctx: isl.Context, view: isl.Space, view_shape, base: isl.Space,
                base_shape) -> isl.Map:
    """Row-major reshape: view index -> base index with the same linear offset.

    Symbolic extents (parameter names) must appear in both shapes in the same order:
    each maps to itself, and the fixed dims between two of them reshape on their own
    (the caller checked that their sizes agree)."""
    view_cuts = [k for k, e in enumerate(view_shape) if isinstance(e, str)]
    base_cuts = [k for k, e in enumerate(base_shape) if isinstance(e, str)]
    if [view_shape[k] for k in view_cuts] != [base_shape[k] for k in base_cuts]:
        raise ValueError(f"reshape {list(view_shape)} -> {list(base_shape)} moves a "
                         "symbolic dim")
    affs: list[isl.Aff | None] = [None] * len(base_shape)
    view_starts, base_starts = [0] + [k + 1 for k in view_cuts], [0] + [k + 1 for k in base_cuts]
    view_ends = view_cuts + [len(view_shape)]
    base_ends = base_cuts + [len(base_shape)]
    for v0, v1, b0, b1 in zip(view_starts, view_ends, base_starts, base_ends):
        coefficients = [0] * len(view_shape)
        coefficients[v0:v1] = strides(view_shape[v0:v1])
        linear = linear_aff(view, coefficients)
        for dim, (stride, extent) in enumerate(zip(strides(base_shape[b0:b1]),
                                                   base_shape[b0:b1])):
            aff = linear.scale_down_val(isl.Val.int_from_si(ctx, stride)).floor()
            if dim > 0:
                aff = aff.mod_val(isl.Val.int_from_si(ctx, max(extent, 1)))
            affs[b0 + dim] = aff
    for v, b in zip(view_cuts, base_cuts):
        affs[b] = variable(view, v)
    return affs_to_map(view, base, affs)


def transpose_map(view: isl.Space, base: isl.Space, perm: Sequence[int]) -> isl.Map:
    """numpy.transpose: view index ``v`` reads base index ``b`` with ``b[perm[k]] = v[k]``."""
    inverse = [0] * len(perm)
    for k, p in enumerate(perm):
        inverse[p] = k
    affs = [aff_of_index(view, Ix.var(inverse[d])) for d in range(len(perm))]
    return affs_to_map(view, base, affs)


def offset_strides(shape: Sequence[int | str]) -> tuple[int, ...] | None:
    """Row-major strides that give every element's offset, or None when one would
    involve a symbolic extent: dims of extent 1 in front (their index is always 0) get
    stride 0, and the first other dim may be symbolic (``[1, seq, 64]``)."""
    lead = 0
    while lead < len(shape) - 1 and shape[lead] == 1:
        lead += 1
    if any(isinstance(extent, str) for extent in shape[lead + 1:]):
        return None
    if lead == 0:
        return strides(shape)
    return (0,) * lead + strides(shape[lead:])


def flat_offset(access: isl.Map, shape: Sequence[int]) -> isl.PwAff:
    """The row-major element offset an access touches, as a function of its domain
    (``shape`` as :func:`offset_strides` takes it)."""
    array_space = access.get_space().range()
    linear = isl.PwAff.from_aff(linear_aff(array_space, offset_strides(shape)))
    offset = linear.pullback_pw_multi_aff(isl.PwMultiAff.from_map(access))
    return offset.gist(access.domain()).coalesce()


def identity_schedule(domain: isl.Set) -> isl.Schedule:
    """A schedule that runs ``domain`` in lexicographic order of its own dims."""
    schedule = isl.Schedule.from_domain(isl.UnionSet.from_set(domain))
    if domain.dim(isl.dim_type.set) == 0:
        return schedule
    identity = isl.MultiAff.identity(domain.get_space().map_from_set())
    anonymous = identity.reset_tuple_id(isl.dim_type.out)  # works for empty domains too
    partial = isl.MultiUnionPwAff.from_multi_pw_aff(isl.MultiPwAff.from_multi_aff(anonymous))
    return schedule.insert_partial_schedule(partial)


def time_loop(domains: Sequence[isl.Set]) -> isl.Schedule:
    """Statements over ``domains`` (each ``[t, ..]``, one ``t`` range) under one loop
    over ``t``, one after the other inside it, each in lexicographic order of its
    other dims."""
    inner, times = [], []
    for domain in domains:
        space = domain.get_space().map_from_set()
        identity = isl.MultiAff.identity(space).reset_tuple_id(isl.dim_type.out)
        n = domain.dim(isl.dim_type.set)
        schedule = isl.Schedule.from_domain(isl.UnionSet.from_set(domain))
        if n > 1:
            rest = identity.drop_dims(isl.dim_type.out, 0, 1)
            schedule = schedule.insert_partial_schedule(
                isl.MultiUnionPwAff.from_multi_pw_aff(isl.MultiPwAff.from_multi_aff(rest)))
        inner.append(schedule)
        times.append(isl.UnionMap.from_map(isl.Map.from_multi_aff(
            identity.drop_dims(isl.dim_type.out, 1, n - 1))))
    time = functools.reduce(isl.UnionMap.union, times)
    return sequence(inner).insert_partial_schedule(isl.MultiUnionPwAff.from_union_map(time))


def sequence(schedules: Sequence[isl.Schedule]) -> isl.Schedule:
    """The schedules one after the other (an isl sequence node). Joined as a balanced
    tree: isl flattens nested sequences, and joining one at a time copies the growing
    sequence each time (quadratic: 3 s for 30 SCoPs of 290 statements)."""
    if len(schedules) == 1:
        return schedules[0]
    half = len(schedules) // 2
    return sequence(schedules[:half]).sequence(sequence(schedules[half:]))


def tuple_name(obj) -> str:
    """The tuple name of a set, or of a map's domain."""
    if isinstance(obj, isl.Map):
        return obj.get_tuple_name(isl.dim_type.in_)
    return obj.get_tuple_name()


def params_space(ctx: isl.Context, params: Sequence[str]) -> isl.Space:
    """The parameter space ``[p0, p1, ..] -> { : }``."""
    return isl.Space.create_from_names(ctx, set=[], params=list(params)).params()


def param_aff(space: isl.Space, name: str) -> isl.Aff:
    """The parameter ``name`` as an affine function on ``space`` (which gains the
    parameter if it lacks it)."""
    if space.find_dim_by_name(isl.dim_type.param, name) < 0:
        space = space.align_params(params_space(space.get_ctx(), [name]))
    return isl.Aff.zero_on_domain(isl.LocalSpace.from_space(space)).set_coefficient_val(
        isl.dim_type.param, space.find_dim_by_name(isl.dim_type.param, name), 1)


def param_expr(ctx: isl.Context, params: Sequence[str], text: str) -> isl.PwAff:
    """An isl expression of the parameters ``params`` (``"floor((N + 15)/16)"``)."""
    return read_with_params(isl.PwAff, ctx, params, f"{{ [({text})] }}")


def read_with_params(kind, ctx: isl.Context, params: Sequence[str], text: str):
    """``kind.read_from_str`` (``isl.Set``, ``isl.Map``, ``isl.PwAff``) of ``{ ... }`` text
    with the parameter declaration ``[p0, ..] ->`` put in front.

    The text parser raises a bare ``isl.Error`` ("syntax error") for an unknown
    identifier or a non-affine term; callers turn it into a message that says where.
    """
    declaration = f"[{', '.join(params)}] -> " if params else ""
    return kind.read_from_str(ctx, declaration + text)


def fixed_params(ctx: isl.Context, params: Sequence[str], values) -> isl.Set:
    """``[p..] -> { : p0 = values[p0] and ... }``, built programmatically."""
    result = isl.Set.universe(params_space(ctx, params))
    for k, name in enumerate(params):
        result = result.fix_val(isl.dim_type.param, k, isl.Val.int_from_si(ctx, values[name]))
    return result


def lower_bounds(ctx: isl.Context, params: Sequence[str], minimum: int = 1) -> isl.Set:
    """``[p..] -> { : p0 >= minimum and ... }``."""
    space = params_space(ctx, params)
    result = isl.Set.universe(space)
    for k in range(len(params)):
        bound = (isl.Constraint.inequality_alloc(space)
                 .set_coefficient_val(isl.dim_type.param, k, 1).set_constant_val(-minimum))
        result = result.add_constraint(bound)
    return result


def eval_params(expr: isl.PwAff, values) -> int:
    """The value of a parameter-only expression at ``values`` (name -> int)."""
    space = expr.get_domain_space()
    point = isl.Point.zero(space)
    for k in range(space.dim(isl.dim_type.param)):
        name = space.get_dim_name(isl.dim_type.param, k)
        value = isl.Val.int_from_si(space.get_ctx(), values[name])
        point = point.set_coordinate_val(isl.dim_type.param, k, value)
    return expr.eval(point).to_python()


def pad_range(relation: isl.Map, n_out: int) -> isl.Map:
    """``relation`` with zeros appended to its (anonymous) range up to ``n_out`` dims."""
    extra = n_out - relation.dim(isl.dim_type.out)
    result = relation.reset_tuple_id(isl.dim_type.out).add_dims(isl.dim_type.out, extra)
    zero = isl.Val.zero(relation.get_ctx())
    for dim in range(n_out - extra, n_out):
        result = result.fix_val(isl.dim_type.out, dim, zero)
    return result


def innermost_dim(relation: isl.Map) -> int | None:
    """The last dimension of ``relation``'s range (a statement's times) along which its
    instances vary, given the dimensions before it; None when no dimension does."""
    times = relation.range()
    n = times.dim(isl.dim_type.set)
    for depth in range(n - 1, -1, -1):
        upto = times.project_out(isl.dim_type.set, depth + 1, n - depth - 1)
        step = isl.Map.from_range(upto).move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0,
                                                  depth)
        if not step.is_single_valued():
            return depth
    return None


def equal_before(pairs: isl.Map, depth: int) -> isl.Map:
    """The pairs of times of ``pairs`` equal on every dimension before ``depth``."""
    for d in range(depth):
        pairs = pairs.equate(isl.dim_type.in_, d, isl.dim_type.out, d)
    return pairs


def carried(pairs: isl.Map, depth: int) -> isl.Map:
    """The pairs of times of ``pairs`` (a dependence seen in time) that a loop at
    dimension ``depth`` carries: equal before it, different at it."""
    outer = equal_before(pairs, depth)
    return outer.subtract(outer.equate(isl.dim_type.in_, depth, isl.dim_type.out, depth))


def schedule_from_maps(domain: isl.UnionSet, maps: Sequence[isl.Map]) -> isl.Schedule:
    """A schedule tree with one band: statement instances ordered by their ``maps``
    (each padded with zeros to the longest), e.g. ``S1[t, i] -> [t, 0, i]``."""
    n_out = max(m.dim(isl.dim_type.out) for m in maps)
    union = isl.UnionMap.empty(isl.Space.params_alloc(domain.get_ctx(), 0))
    for relation in maps:
        union = union.union(isl.UnionMap.from_map(pad_range(relation, n_out)))
    schedule = isl.Schedule.from_domain(domain)
    if n_out == 0:
        return schedule
    return schedule.insert_partial_schedule(isl.MultiUnionPwAff.from_union_map(union))


def map_bottom_up(schedule: isl.Schedule, visit) -> isl.Schedule:
    """``schedule.map_schedule_node_bottom_up(visit)``, raising the first exception
    ``visit`` raised (isl swallows callback exceptions with only a warning)."""
    failures: list[BaseException] = []

    def guarded(node: isl.ScheduleNode) -> isl.ScheduleNode:
        try:
            return visit(node)
        except BaseException as err:  # noqa: BLE001 - re-raised below
            failures.append(err)
            return node

    result = schedule.map_schedule_node_bottom_up(guarded)
    if failures:
        raise failures[0]
    return result
