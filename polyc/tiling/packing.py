"""Packing: a copy statement that lays a contraction's ``b`` operand out in panels.

For a contraction ``S`` (:mod:`polyc.tiling.contraction`) and a panel width ``nr``,
the copy statement ``P[batch.., jb, k, jj]`` writes the scratch array

    Bp[batch.., jb, k, jj] = B-element that S reads at (batch.., j = nr*jb + jj, k)

so the register tile reads ``nr`` consecutive floats per ``k`` step, whatever B's
layout (a transposed B costs nothing more), instead of one row of B per step. ``S``
then reads ``Bp[batch.., floor(j/nr), k, j mod nr]``: quasi-affine, but under the
recipe's schedule isl turns it into plain index arithmetic of the loop iterators.

The SCoP gains the array (a temporary in scratch) and the statement, placed in the
original order just before the first instance of ``S`` (one more member of the
sequence, for an ONNX model's SCoP); its dependences are then
recomputed, so the legality checker sees the copies too. Packing is valid because
nothing writes the packed operand while ``S`` runs (checked).

A constant operand (a weight) is packed once, at compile time, in panels one vector
wide (:data:`CONSTANT_PANEL`; the register tile reads several): the packed array is a
new constant and there is no copy statement; the original constant goes if nothing
else reads it. The copy's index map is affine, so numpy evaluates it on the whole
panel grid at once (through the flat element offset, which is affine also for a
view's reshape: a 3x3 conv's weights as a matrix).
"""

from __future__ import annotations

import dataclasses

import islpy as isl
import numpy as np

from polyc.errors import PolycError
from polyc.islutil import (
    affs_to_map,
    box,
    flat_offset,
    identity_schedule,
    sequence,
    set_space,
    statement_names,
    union_maps,
    variable,
)
from polyc.marks import LANES
from polyc.scop.model import Access, Array, Load, Scop, Statement
from polyc.tiling.contraction import Contraction


@dataclasses.dataclass(frozen=True)
class Packed:
    """What packing made for one contraction (nothing, when ``b`` is read in place:
    ``array`` is then ``source`` and there is no copy)."""

    contraction: Contraction
    copy: Statement | None  # the packing statement P; None: packed at compile time
    array: str  # the packed array's name
    nr: int
    source: str  # the array it copies
    # a copy instance -> an instance of S reading the same element (None without a copy)
    to_statement: isl.Map | None

    @property
    def in_place(self) -> bool:
        return self.array == self.source


# A computed b read with stride 1 along j is read in place when it has at most this
# many rows of C to serve and at least IN_PLACE_COLUMNS columns (a 1x1 conv over many
# pixels): 144 -> 24 channels at 56x56 took 0.32 ms read in place, 0.42 ms packed; at
# 96 and 144 rows both were the same, at 256 packing won (0.57 against 0.68 ms).
IN_PLACE_ROWS = 32
IN_PLACE_COLUMNS = 1024


def in_place(scop: Scop, c: Contraction) -> bool:
    """Whether ``c``'s operand ``b`` is read as it is rather than packed (never when it
    is read with a border: its packing fills the padding)."""
    read = c.statement.reads[c.b]
    operand = scop.array(read.array)
    return (c.b_contiguous and operand.kind != "constant" and read.guard is None
            and isinstance(c.extent("i"), int) and c.extent("i") <= IN_PLACE_ROWS
            and isinstance(c.extent("j"), int) and c.extent("j") >= IN_PLACE_COLUMNS)


def packable(scop: Scop, contraction: Contraction) -> bool:
    """True when no statement writes the operand ``b`` after S's first instance starts."""
    operand = contraction.statement.reads[contraction.b].array
    if in_sequence(scop):  # one statement after the other: compare positions
        position = scop.statements.index(contraction.statement)
        return not any(s.write.array == operand for s in scop.statements[position:])
    first = _times(scop, contraction.statement).lexmin()
    for statement in scop.statements:
        if statement.write.array == operand:
            last = _times(scop, statement).lexmax()
            if statement is contraction.statement or last.lex_lt_set(first).is_empty():
                return False
    return True


def in_sequence(scop: Scop) -> bool:
    """Whether the original order runs the statements one after the other, in the order
    of ``scop.statements`` (as the SCoP of an ONNX model does), each a filter of a
    sequence; then a copy goes in as one more filter before its contraction."""
    root = scop.order.get_root()
    if root.n_children() != 1:
        return False
    node = root.child(0)
    if node.get_type() != isl.schedule_node_type.sequence or \
            node.n_children() != len(scop.statements):
        return False
    return all(statement_names(node.child(k).filter_get_filter()) == {s.name}
               for k, s in enumerate(scop.statements))


def _times(scop: Scop, statement: Statement) -> isl.Set:
    """When ``statement``'s instances run in the original order."""
    times = scop.order.get_map().intersect_domain(isl.UnionSet.from_set(statement.domain))
    result = isl.Set.from_union_set(times.range())
    return result if scop.sizing_context is None else result.intersect_params(scop.sizing_context)


def pack(scop: Scop, contraction: Contraction, nr: int) -> tuple[Scop, Packed]:
    """``scop`` with ``S``'s operand ``b`` packed into panels, of :data:`CONSTANT_PANEL`
    columns at compile time, else of the register tile's ``nr`` by a copy; as it is for
    a contraction with inner reductions (read in place, see
    :mod:`polyc.tiling.contraction`)."""
    c, ctx = contraction, scop.ctx
    if (c.inner and c.b_contiguous) or in_place(scop, c):
        operand = c.statement.reads[c.b].array
        return scop, Packed(c, None, operand, nr, operand, None)
    statement = c.statement
    operand = statement.reads[c.b]
    name = _fresh(scop, f"{operand.array}_packed")
    copy_name = _fresh(scop, f"{statement.name}_pack")
    position = scop.statements.index(statement)
    # at compile time (one set of panels for the batch dims b does not use), else a copy
    batch, width = c.b_batch, CONSTANT_PANEL
    shape, domain, to_statement = _layout(scop, copy_name, c, width, batch)
    data = _packed_constant(scop, operand, to_statement.apply_range(operand.relation),
                            shape, c, width)
    if data is None:
        if c.inner:
            raise PolycError(f"{statement.name}: its operand {operand.array} cannot be packed "
                             "at compile time (check packs_at_compile_time first)")
        batch, width = c.batch, nr
        shape, domain, to_statement = _layout(scop, copy_name, c, width, batch)
    target = set_space(ctx, name, [f"d{n}" for n in range(len(shape))]).align_params(
        statement.domain.get_space())
    packed_read = Access(name, _panel_read(statement.domain, c, width, target, batch))
    reads = tuple(packed_read if k == c.b else r for k, r in enumerate(statement.reads))
    new_statement = dataclasses.replace(statement, reads=reads)
    array = Array(name, name, shape, "temp", scop.array(operand.array).dtype)
    if data is not None:
        statements = (scop.statements[:position] + (new_statement,)
                      + scop.statements[position + 1:])
        result = _with_constant(scop, statements, array, data, operand.array)
        return result, Packed(dataclasses.replace(c, statement=new_statement), None, name,
                              width, operand.array, to_statement)
    copied = operand.pulled_back(to_statement)
    space = domain.get_space()
    write = affs_to_map(space, target, [variable(space, d) for d in range(len(shape))])
    copy = Statement(copy_name, domain, Access(name, write.intersect_domain(domain)),
                     (copied,), Load(0), statement.op_index,
                     statement.node)
    statements = (scop.statements[:position] + (copy, new_statement)
                  + scop.statements[position + 1:])
    if in_sequence(scop):
        order = sequence([identity_schedule(s.domain) for s in statements])
    else:
        order = _order_with_copy(scop, copy, statement)
    result = dataclasses.replace(scop, arrays=scop.arrays + (array,), statements=statements,
                                 order=order, dependences=None)
    return result, Packed(dataclasses.replace(c, statement=new_statement), copy, name, nr,
                          operand.array, to_statement)


CONSTANT_GROWTH = 2  # pack a constant when the packed copy is at most this much larger
# A constant is packed in panels one vector wide, so that a register tile of nr/16
# vectors reads as many streams of weights: their prefetchers fetch them from memory
# side by side (3x3 conv 512ch then 1x1 to 2048ch at 7x7, 1 thread, weights 13 MB,
# time between onnxruntime's calls: 2.95-3.11 ms with 32-wide panels, 2.68-2.74 ms;
# onnxruntime 2.44-2.53 ms; at 14x14 and more pixels the same).
CONSTANT_PANEL = LANES


def packs_at_compile_time(scop: Scop, c: Contraction) -> bool:
    """Whether ``c``'s operand ``b`` is a constant that :func:`pack` lays out in panels
    at compile time (what a contraction with inner reductions whose ``b`` is not read
    with stride 1 along ``j`` needs: a transposed direct conv's weights)."""
    operand = c.statement.reads[c.b]
    shape, _, to_statement = _layout(scop, "P", c, CONSTANT_PANEL, c.b_batch)
    source = to_statement.apply_range(operand.relation)
    return _constant_offset(scop, operand, source, shape, c) is not None


def _layout(scop: Scop, name: str, c: Contraction, nr: int, batch: tuple[int, ...]
            ) -> tuple[tuple, isl.Set, isl.Map]:
    """The panels' shape, the instances of a copy ``name`` filling them and the map of
    those to instances of S (:func:`_panels_shape`, :func:`_copy_domain`,
    :func:`_copy_to_statement`), one set of panels per instance of ``batch``."""
    shape = _panels_shape(c, nr, batch)
    domain = _copy_domain(scop, name, c, nr, shape, batch)
    return shape, domain, _copy_to_statement(domain, c, nr, batch)


def _copy_domain(scop: Scop, name: str, c: Contraction, nr: int, shape: tuple,
                 batch: tuple[int, ...]) -> isl.Set:
    """The packing copy's instances ``name[batch.., jb, k, inner.., jj]`` (the last panel
    partial)."""
    domain = box(scop.ctx, name, shape).align_params(c.statement.domain.get_space())
    return _within(domain, len(batch), len(shape) - 1, nr, c.extent("j"))


def _panels_shape(c: Contraction, nr: int, batch: tuple[int, ...]) -> tuple:
    """``(batch.., panels, k, inner.., nr)``: ``b`` in panels of ``nr`` columns, one set
    of panels per instance of the batch dims ``batch`` (all of ``c``'s when copied at
    run time; those ``b`` uses when packed at compile time)."""
    columns = c.extent("j")
    panels = (f"floor(({columns} + {nr - 1})/{nr})" if isinstance(columns, str)
              else -(-columns // nr))
    return (tuple(c.extents[d] for d in batch) + (panels, c.extent("k"))
            + tuple(c.extents[d] for d in c.inner) + (nr,))


def _constant_offset(scop: Scop, operand: Access, source: isl.Map, shape: tuple,
                     c: Contraction) -> tuple[list[int], int] | None:
    """The affine element offset (coefficients of the copy's dims, constant) at which
    panels of ``shape`` read a constant ``operand`` (``source``: copy instance ->
    element); None when the operand is read with a border or is not a constant, the
    shape is symbolic, the offset is not one affine function (a view's divisions
    simplify away in it), or packing would replicate it (a weight shared by a batch)."""
    array = scop.array(operand.array)
    if (operand.guard is not None or array.kind != "constant"
            or any(isinstance(e, str) for e in shape) or not _small_growth(array, shape, c)):
        return None
    return _affine_offset(flat_offset(source, array.shape))


def _packed_constant(scop: Scop, operand: Access, source: isl.Map, shape: tuple[int, ...],
                     c: Contraction, nr: int) -> np.ndarray | None:
    """The packed value of a constant operand, zero past the last column; None where
    :func:`_constant_offset` is."""
    offset = _constant_offset(scop, operand, source, shape, c)
    if offset is None:
        return None
    array = scop.array(operand.array)
    coefficients, constant = offset
    n_batch = len(shape) - 3 - len(c.inner)
    panels, columns = np.arange(shape[n_batch]), np.arange(shape[-1])
    inside = (nr * panels[:, None] + columns[None, :] < c.extent("j")).reshape(
        [shape[n_batch]] + [1] * (len(shape) - n_batch - 2) + [shape[-1]])
    value = np.asarray(scop.constants[operand.array], dtype=np.dtype(array.dtype)).reshape(-1)
    return np.where(inside, _gathered(value, coefficients, constant, shape), 0).astype(
        array.dtype)


def _gathered(value: np.ndarray, coefficients: list[int], constant: int,
              shape: tuple[int, ...]) -> np.ndarray:
    """``value[constant + sum(coefficients * index)]`` at each index of ``shape``, as a
    strided view (of a copy padded with zeros where that reaches outside ``value``: the
    panels' columns past the last, masked off by the caller). vgg19's 19 packed
    weights (548 MB) took 11.7 s gathered through index arrays."""
    spans = [k * (n - 1) for k, n in zip(coefficients, shape)]
    low = constant + sum(min(0, span) for span in spans)
    high = constant + sum(max(0, span) for span in spans)
    before, after = max(0, -low), max(0, high - (value.size - 1))
    if before or after:
        value = np.concatenate([np.zeros(before, value.dtype), value,
                                np.zeros(after, value.dtype)])
    start = value[constant + before:]
    strides = [k * value.itemsize for k in coefficients]
    return np.lib.stride_tricks.as_strided(start, shape=shape, strides=strides, writeable=False)


def _small_growth(array: Array, shape: tuple[int, ...], c: Contraction) -> bool:
    """Whether panels of ``shape`` hold at most :data:`CONSTANT_GROWTH` times ``array``
    (with a last partial panel)."""
    padded = array.size + shape[-1] * np.prod(shape[-2 - len(c.inner):-1])
    return np.prod(shape) <= CONSTANT_GROWTH * padded


def _affine_offset(offset: isl.PwAff) -> tuple[list[int], int] | None:
    """The integer coefficients of the input dims and the constant of an offset that is
    one affine piece without divisions or parameters, or None."""
    if offset.n_piece() != 1:
        return None
    aff = offset.get_pieces()[0][1]
    if aff.dim(isl.dim_type.div) or not aff.get_denominator_val().is_one() or any(
            not aff.get_coefficient_val(isl.dim_type.param, p).is_zero()
            for p in range(aff.dim(isl.dim_type.param))):
        return None
    return ([aff.get_coefficient_val(isl.dim_type.in_, d).to_python()
             for d in range(aff.dim(isl.dim_type.in_))], aff.get_constant_val().to_python())


def _with_constant(scop: Scop, statements: tuple[Statement, ...], array: Array,
                   data: np.ndarray, source: str) -> Scop:
    """``scop`` with the packed constant ``array`` (and without ``source`` once no
    statement reads it)."""
    arrays = scop.arrays + (dataclasses.replace(array, kind="constant"),)
    constants = dict(scop.constants, **{array.name: data})
    if not any(r.array == source for s in statements for r in s.reads):
        arrays = tuple(a for a in arrays if a.name != source)
        del constants[source]
    return dataclasses.replace(scop, arrays=arrays, statements=statements,
                               constants=constants, dependences=None)


def _fresh(scop: Scop, base: str) -> str:
    taken = {a.name for a in scop.arrays} | {s.name for s in scop.statements}
    name, n = base, 1
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name


def _within(domain: isl.Set, jb: int, jj: int, nr: int, extent: int | str) -> isl.Set:
    """``nr * jb + jj < extent``: the last panel may be partial (``extent``: an int or
    a symbolic parameter)."""
    space = domain.get_space()
    last = (isl.Constraint.inequality_alloc(space)
            .set_coefficient_val(isl.dim_type.set, jb, -nr)
            .set_coefficient_val(isl.dim_type.set, jj, -1)
            .set_constant_val(-1 if isinstance(extent, str) else extent - 1))
    if isinstance(extent, str):
        last = last.set_coefficient_val(
            isl.dim_type.param, space.find_dim_by_name(isl.dim_type.param, extent), 1)
    return domain.add_constraint(last)


def _copy_to_statement(domain: isl.Set, c: Contraction, nr: int,
                       batch: tuple[int, ...]) -> isl.Map:
    """``P[batch, jb, k, inner.., jj] -> S[..]`` with ``j = nr*jb + jj``, and ``i`` and
    the batch dims not in ``batch`` 0."""
    space = domain.get_space()
    n_batch = len(batch)
    jj = n_batch + 2 + len(c.inner)
    zero = isl.Aff.zero_on_domain(isl.LocalSpace.from_space(space))
    affs = [zero] * len(c.extents)
    for n, d in enumerate(batch):
        affs[d] = variable(space, n)
    affs[c.j] = variable(space, n_batch).scale_val(isl.Val.int_from_si(space.get_ctx(), nr)) \
        .add(variable(space, jj))
    affs[c.k] = variable(space, n_batch + 1)
    for n, d in enumerate(c.inner):
        affs[d] = variable(space, n_batch + 2 + n)
    target = c.statement.domain.get_space()
    result = affs_to_map(space, target, affs)
    return result.intersect_domain(domain)


def _panel_read(domain: isl.Set, c: Contraction, nr: int, target: isl.Space,
                batch: tuple[int, ...]) -> isl.Map:
    """``S[..] -> Bp[batch.., floor(j/nr), k, inner.., j mod nr]``."""
    space = domain.get_space()
    width = isl.Val.int_from_si(space.get_ctx(), nr)
    j = variable(space, c.j)
    affs = [variable(space, d) for d in batch]
    affs += [j.scale_down_val(width).floor(), variable(space, c.k)]
    affs += [variable(space, d) for d in c.inner] + [j.mod_val(width)]
    return affs_to_map(space, target, affs).intersect_domain(domain)


def _order_with_copy(scop: Scop, copy: Statement, statement: Statement) -> isl.Schedule:
    """The original order with the copies at the time of ``statement``'s first instance,
    just before it (a last schedule dimension: 0 for the copy, 1 for the others)."""
    times = scop.order.get_map()
    ranges = union_maps(times)
    n_out = ranges[0].dim(isl.dim_type.out)
    start = _times(scop, statement).lexmin()
    result = isl.UnionMap.empty(times.get_space())
    for relation in ranges + [isl.Map.from_domain_and_range(copy.domain, start)]:
        last = 0 if relation.get_tuple_name(isl.dim_type.in_) == copy.name else 1
        relation = relation.reset_tuple_id(isl.dim_type.out).add_dims(isl.dim_type.out, 1)
        relation = relation.fix_val(isl.dim_type.out, n_out,
                                    isl.Val.int_from_si(scop.ctx, last))
        result = result.union(isl.UnionMap.from_map(relation))
    domain = scop.domain.union(isl.UnionSet.from_set(copy.domain))
    return isl.Schedule.from_domain(domain).insert_partial_schedule(
        isl.MultiUnionPwAff.from_union_map(result))
