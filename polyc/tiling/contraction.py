"""Recognising contractions: ``C[.., i, j] += A[.., i, k] * B[.., k, j]`` in one band.

A band qualifies when it schedules one statement alone, is permutable, its members are
the statement's loops in some order (unit rows), the domain is a box from 0, and the
body is ``acc + x * y`` (times constants) with ``acc`` reading exactly what the
statement writes.
An int8 product written as byte dot products (``acc + dot4(a0, .., a3, w)``,
:mod:`polyc.frontend.ops.byte_product`) qualifies as ``acc + a0 * w`` with int32 sums.
The loops then take roles, from the access strides:

- ``k``: the one loop the write does not use (the reduction); or several (a direct
  convolution's ``c, kh, kw``): ``k`` the first, the others ``inner``, all inside the
  register tile in their order. Then ``b`` is read with stride 1 along ``j`` as it is
  (packing it would copy it once per kernel offset: im2col), or it is a constant,
  packed at compile time (a transposed direct convolution's weights, output channels
  along ``j``);
- ``j``: the loop along which the write is stride-1 (the vector loop); one operand, the
  one that gets packed (``b``), must use it, and the other (``a``) must not;
- ``i``: the loop with the smallest write stride after ``j`` that ``a`` uses and ``b``
  does not; it indexes the rows of the register tile;
- every other loop is a batch loop.

Matmul, Gemm with either operand transposed and batched MatMul all match.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import islpy as isl

from polyc.frontend.core import Call, Const
from polyc.islutil import band_above, box, flat_offset, outer_schedule, union_maps, union_sets
from polyc.scop.model import Load, Scop, Statement
from polyc.tiling.order import access_coefficients, band_rows, moving_dims

# A symbolic extent's size where blocks are chosen: large, so that cache blocks are
# sized by the caches rather than capped by a guess (a block larger than the extent
# at run time is just one partial block). On the encoder layer at seq 64 / 256 it
# measured as 64 did (0.92-0.94x / 1.36-1.39x the time of artifacts for those lengths).
BLOCKING_NOMINAL = 1024


@dataclass(frozen=True)
class Contraction:
    statement: Statement
    i: int  # domain dimensions by role
    j: int
    k: int
    batch: tuple[int, ...]
    a: int  # index in statement.reads of the operand without j
    b: int  # ... of the operand with j (packed, unless there are inner reductions)
    extents: tuple[int | str, ...]  # per domain dimension, from 0; str: a parameter
    inner: tuple[int, ...] = ()  # further reduction dims, inside k, in domain order
    b_contiguous: bool = False  # b is read with stride 1 along j
    b_batch: tuple[int, ...] = ()  # the batch dims that b's index uses
    wide: bool = False  # float64: 8-byte elements (microkernel.WIDE_TILES)

    @property
    def reductions(self) -> tuple[int, ...]:
        return (self.k,) + self.inner

    @property
    def shared_batch(self) -> tuple[int, ...]:
        """The batch dims that ``b`` does not vary with (a direct conv's output rows)."""
        return tuple(d for d in self.batch if d not in self.b_batch)

    @property
    def shared_rows(self) -> bool:
        """Whether a shared batch dim has more than one instance (output rows)."""
        return any(self.extents[d] != 1 for d in self.shared_batch)

    @property
    def direct(self) -> bool:
        """A direct conv, its weights ``b`` packed at compile time: kernel loops inside
        the tile, or output rows as a batch the weights do not vary with (a 1x1 conv
        over channels-last pixels)."""
        return not self.b_contiguous and (bool(self.inner) or self.shared_rows)

    @property
    def inner_size(self) -> int:
        """Instances of the inner reductions per ``k`` step (1 without them)."""
        return self._instances(self.inner)

    @property
    def shared_size(self) -> int:
        """Instances of the shared batch dims (a direct conv's output rows)."""
        return self._instances(self.shared_batch)

    def _instances(self, dims: tuple[int, ...]) -> int:
        """The product of the extents of ``dims``, a symbolic one counted as
        :data:`BLOCKING_NOMINAL`."""
        size = 1
        for d in dims:
            size *= self.extents[d] if isinstance(self.extents[d], int) else BLOCKING_NOMINAL
        return size

    def extent(self, role: str) -> int | str:
        return self.extents[getattr(self, role)]

    def size(self, role: str) -> int:
        """The extent, or :data:`BLOCKING_NOMINAL` for a symbolic one (to choose sizes by)."""
        extent = self.extent(role)
        return BLOCKING_NOMINAL if isinstance(extent, str) else extent


def match_contraction(scop: Scop, band: isl.ScheduleNode) -> Contraction | None:
    """The contraction ``band`` schedules, or None."""
    statements = union_sets(band.get_domain())
    if len(statements) != 1 or not band.band_get_permutable():
        return None
    statement = scop.statement(statements[0].get_tuple_name())
    operands = _operands(statement)
    dtype = scop.array(statement.write.array).dtype
    if dtype not in (("int32",) if byte_dot(statement.body) else ("float32", "float64")):
        return None  # the register tile and packing are float code, or byte dot products
    extents = _box_extents(scop, statement.domain)
    if operands is None or extents is None:
        return None
    x, y = operands
    guarded = [n for n in (x, y) if statement.reads[n].address is not None]
    strides = [access_coefficients(scop, access) for access in
               (statement.write, statement.reads[x], statement.reads[y])]
    quasi = [n for n, s in zip((x, y), strides[1:]) if s is None]
    if strides[0] is None or len(quasi) > 1:
        return None
    if quasi:  # one factor read through divisions: which loops it uses
        uses = _loops_used(scop, statement.reads[quasi[0]])
        if uses is None:
            return None
        strides[1 + (x, y).index(quasi[0])] = uses
    outer = _outer_dims(band, statement)
    moving = [d for d in moving_dims(statement.domain, scop) if d not in outer]
    c = _roles(statement, extents, moving, *strides, x, y, outer)
    if c is None or quasi and quasi != [c.a]:
        return None  # b is packed or read as it is: its strides must be known
    if c.extents[c.i] == 1 and scop.array(statement.reads[c.b].array).kind != "constant":
        return None  # one row: packing b at run time would cost what the product does
    if guarded and (guarded != [c.b] or c.inner or statement.reads[c.b].lookup is not None):
        return None  # a factor read with a border (padding) is only read from its packing
    if c.inner and not c.b_contiguous and \
            scop.array(statement.reads[c.b].array).kind != "constant":
        return None  # several reductions: b is read as it is, or packed at compile time
    if dtype == "float64":
        if c.inner:
            return None  # (direct convolutions of doubles: not measured)
        c = replace(c, wide=True)
    if c.inner:  # the recipe replaces this band and the ones below it (Pluto skews
        return None if band_above(band) else c  # a serial multi-loop reduction)
    return c if _unit_rows(scop, band, statement, outer) else None


def _outer_dims(band: isl.ScheduleNode, statement: Statement) -> tuple[int, ...]:
    """The loops of a Recurrence's step that bands above ``band`` run, each as a member
    of its own (the time loop): the recipe leaves them to those bands. Other
    statements: none (the recipe's band is all their loops)."""
    if not statement.recurrent:
        return ()
    prefix = outer_schedule(band, isl.UnionSet.from_set(statement.domain))
    maps = union_maps(prefix)
    rows = band_rows(maps[0]) if len(maps) == 1 else None
    if not rows:
        return ()
    n = statement.domain.dim(isl.dim_type.set)
    return tuple(sorted(r.index(1) for r in rows if sorted(r) == [0] * (n - 1) + [1]))


def _loops_used(scop: Scop, access) -> list[int] | None:
    """For a read whose flat offset is quasi-affine (one piece, divisions of the loops:
    the head-major context of attention read as ``[seq, heads*dim]``), 1 for each loop
    that it uses and 0 for the others; None when it is not of that form."""
    if access.address is not None or access.lookup is not None:
        return None
    offset = flat_offset(access.relation, scop.sizing_shape(access.array))
    if offset.n_piece() != 1:
        return None
    aff = offset.get_pieces()[0][1]
    n_in = aff.dim(isl.dim_type.in_)
    used = [not aff.get_coefficient_val(isl.dim_type.in_, d).is_zero() for d in range(n_in)]
    for k in range(aff.dim(isl.dim_type.div)):
        div = aff.get_div(k)
        if any(not div.get_coefficient_val(isl.dim_type.div, j).is_zero()
               for j in range(div.dim(isl.dim_type.div))):
            return None  # divisions of divisions
        if aff.get_coefficient_val(isl.dim_type.div, k).is_zero():
            continue
        for d in range(n_in):
            used[d] = used[d] or div.involves_dims(isl.dim_type.in_, d, 1)
    return [int(u) for u in used]


def _operands(statement: Statement) -> tuple[int, int] | None:
    """The read indices of the two factors when the body is ``acc + x * y`` (constant
    factors allowed, as in Gemm's ``alpha``, and scalars read from memory, as in
    PolyBench's gemm: ``C[i][j] += alpha * A[i][k] * B[k][j]``)."""
    body = statement.body
    if not (isinstance(body, Call) and body.fn == "add" and len(body.args) == 2):
        return None
    for acc, product in (body.args, body.args[::-1]):
        loads = _factors(product)
        if loads is not None:  # scalars are constant factors of the tile
            loads = [k for k in loads if statement.reads[k].relation.dim(isl.dim_type.out)]
        if (isinstance(acc, Load) and loads is not None and len(loads) == 2
                and statement.reads[acc.k].array == statement.write.array
                and statement.reads[acc.k].relation.is_equal(statement.write.relation)):
            return loads[0], loads[1]
    return None


def byte_dot(body) -> bool:
    """The body is ``acc + dot4(a0, a1, a2, a3, w)`` (an int8 product's words)."""
    return isinstance(body, Call) and body.fn == "add" and any(
        isinstance(arg, Call) and arg.fn == "dot4" for arg in body.args)


def _factors(expr) -> list[int] | None:
    """The loads multiplied in ``expr`` (a product of loads and constants), or None."""
    if isinstance(expr, Load):
        return [expr.k]
    if isinstance(expr, Const):
        return []
    if isinstance(expr, Call) and expr.fn == "dot4":  # the bytes' first, and the word
        loads = [_factors(arg) for arg in expr.args]
        return None if any(part is None or len(part) != 1 for part in loads) \
            else [loads[0][0], loads[4][0]]
    if isinstance(expr, Call) and expr.fn == "mul":
        parts = [_factors(arg) for arg in expr.args]
        return None if None in parts else [k for part in parts for k in part]
    return None


def _box_extents(scop: Scop, domain: isl.Set) -> tuple[int | str, ...] | None:
    """The extents of a domain that is a box starting at 0 (at the bound parameters):
    an int, or the name of the symbolic parameter that is the extent."""
    if scop.context is not None:
        domain = domain.intersect_params(scop.context)
    sizing = domain if scop.sizing_context is None else \
        domain.intersect_params(scop.sizing_context)
    extents: list[int | str] = []
    for d in range(domain.dim(isl.dim_type.set)):
        low, high = sizing.dim_min_val(d), sizing.dim_max_val(d)
        if not (low.is_int() and high.is_int()) or low.to_python() != 0:
            return None
        extents.append(high.to_python() + 1)
        high = domain.dim_max(d)
        if scop.context is not None:
            high = high.gist_params(scop.context)
        symbolic = [p for p in scop.symbolic_params if high.involves_dims(
            isl.dim_type.param, high.get_domain_space().find_dim_by_name(isl.dim_type.param, p),
            1)]
        if len(symbolic) > 1:
            return None
        if symbolic:
            extents[-1] = symbolic[0]
    hull = box(scop.ctx, domain.get_tuple_name(), extents).align_params(domain.get_space())
    if scop.context is not None:
        hull = hull.intersect_params(scop.context)
    return tuple(extents) if hull.is_equal(domain) else None


def _unit_rows(scop: Scop, band: isl.ScheduleNode, statement: Statement,
               outer: tuple[int, ...] = ()) -> bool:
    """The band's members are the statement's loops but the ``outer`` ones, each once.
    On the domain isl simplifies the row of a loop of one iteration to zeros: such a
    loop matches any row that is zero on the other loops."""
    (relation,) = union_maps(band.band_get_partial_schedule_union_map()
                             .intersect_domain(band.get_domain()))
    rows = band_rows(relation)
    n_dims = statement.domain.dim(isl.dim_type.set) - len(outer)
    if rows is None or len(rows) != n_dims or any(row[d] for row in rows for d in outer):
        return False
    moving = [d for d in moving_dims(statement.domain, scop) if d not in outer]
    on_moving = [[row[d] for d in moving] for row in rows]
    units = sorted(r.index(1) for r in on_moving if sorted(r) == [0] * (len(moving) - 1) + [1])
    zeros = sum(not any(r) for r in on_moving)
    return units == list(range(len(moving))) and zeros == n_dims - len(moving)


def _roles(statement, extents, dims, write, x, y, read_x: int, read_y: int,
           outer: tuple[int, ...] = ()) -> Contraction | None:
    """Roles among the loops ``dims`` of more than one iteration; a loop of one
    iteration (whose strides isl may have simplified to 0) is a batch loop; the
    ``outer`` loops have none (bands above run them)."""
    reduction = [d for d in dims if write[d] == 0]
    if not reduction or not all(x[d] and y[d] for d in reduction):
        return None
    k = reduction[0]
    j = next((d for d in dims if write[d] == 1), None)
    if j is None or bool(x[j]) == bool(y[j]):
        return None
    (a, b), (sa, sb) = ((read_y, read_x), (y, x)) if x[j] else ((read_x, read_y), (x, y))
    rows = sorted((abs(write[d]), d) for d in dims if d not in (j, k) and sa[d] and not sb[d])
    single = [d for d in range(len(extents))
              if extents[d] == 1 and d not in (j, *reduction, *outer)]
    if not rows and not single:
        return None
    # no row loop: a matrix-vector product (a classifier at batch 1), one row, the last
    # loop of one iteration
    i = rows[0][1] if rows else single[-1]
    batch = tuple(d for d in range(len(extents)) if d not in (i, j, *reduction, *outer))
    return Contraction(statement, i, j, k, batch, a, b, tuple(extents), tuple(reduction[1:]),
                       sb[j] == 1, tuple(d for d in batch if sb[d]))
