"""Vector lanes: a loop under a ``vector`` mark becomes one 16-wide vector statement.

The tiling stage puts the mark above a band of one parallel member whose points lie in
one aligned chunk of :data:`LANES` iterations (``j`` with ``floor(j/16)`` fixed
outside). Here each such loop ``for (c = init; c <= bound; c++) S(..)`` is emitted as
one vector instance of ``S``: every access offset must be linear in ``c`` with stride
1 (a vector load or store) or 0 (a scalar load broadcast to every lane). A loop with
exactly 16 iterations uses plain vector memory operations; a shorter one (a partial
tile) masks the lanes past ``bound``. Anything else (another stride, a loop body that
is not a single statement) is left to the scalar emitter, so the mark is only a hint.

Outside marks, an innermost loop whose iterations are independent by its accesses
(:func:`loop_lanes`: an elementwise statement) runs 16 iterations at a time and the
last ones masked, instead of leaving the vector width and remainder to LLVM (which
chose 8 lanes and a scalar remainder of 14 for a 110-iteration row of a depthwise
convolution).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import islpy as isl
from llvmlite import ir

from polyc.codegen.exprs import F32, I1, I64, apply_op
from polyc.codegen.scalars import alignment
from polyc.marks import ACCUMULATOR_VECTORS, HALF, LANES, REGISTER_TILE, UNROLL, VECTOR  # noqa: F401

MARK = VECTOR
# The mark over a register tile's band whose last two members (rows, vectors of a row)
# codegen unrolls in full tiles; the AST stage appends their loops' iterators to it.
MASK = ir.VectorType(I1, LANES)
I32 = ir.IntType(32)
op = isl.ast_expr_op_type

Linear = dict[str, int]  # iterator name -> coefficient; "" -> the constant


def linear(expr: isl.AstExpr, known: Mapping[str, Linear] | None = None) -> Linear | None:
    """``expr`` as a linear form of the AST's ids, or None (div, min, select...); an id
    in ``known`` stands for its form there (an unrolled loop's iterator in one copy)."""
    kind = expr.get_type()
    if kind == isl.ast_expr_type.int:
        return {"": expr.int_get_val().to_python()}
    if kind == isl.ast_expr_type.id:
        name = expr.id_get_id().get_name()
        return dict(known[name]) if known and name in known else {name: 1}
    kind = expr.op_get_type()
    args = [linear(expr.op_get_arg(k), known) for k in range(expr.op_get_n_arg())]
    if any(a is None for a in args):
        return None
    if kind == op.add:
        return _combine(args[0], args[1], 1)
    if kind == op.sub:
        return _combine(args[0], args[1], -1)
    if kind == op.minus:
        return _scale(args[0], -1)
    if kind == op.mul:
        for const, other in (args, args[::-1]):
            if set(const) <= {""}:
                return _scale(other, const.get("", 0))
    return None


def _combine(x: Linear, y: Linear, sign: int) -> Linear:
    result = dict(x)
    for name, coef in y.items():
        result[name] = result.get(name, 0) + sign * coef
    return {name: coef for name, coef in result.items() if coef}


def _scale(x: Linear, factor: int) -> Linear:
    return {name: coef * factor for name, coef in x.items() if coef * factor}


@dataclass(frozen=True)
class Lanes:
    """A loop that can run as one vector statement."""

    iterator: str
    init: isl.AstExpr
    bound: isl.AstExpr  # inclusive upper bound of the iterator
    full: bool  # exactly ``width`` iterations: no mask
    user: isl.AstNode
    strides: tuple[int, ...]  # per access of the statement (write first), 0 or 1
    width: int = LANES  # lanes of the vector code (HALF: exactly that many, unmasked)


def lanes(node: isl.AstNode, offsets, known: Mapping[str, Linear] | None = None
          ) -> Lanes | None:
    """The vector form of the ``for`` node ``node``, or None. ``offsets(user)`` gives the
    access offset expressions (write first) of a user node; ``known`` the forms of the
    iterators of unrolled loops around it (see :func:`spanned`)."""
    if node.get_type() != isl.ast_node_type.for_:
        return None
    body = node.for_get_body()
    if body.get_type() != isl.ast_node_type.user:
        return None
    loop = unit_loop(node)
    if loop is None:
        return None
    iterator, init, bound = loop
    span = spanned(init, bound, known)
    if span is not None and not 0 <= span < LANES:
        return None
    strides = []
    for offset in offsets(body):
        stride = offset_stride(offset, iterator)
        if stride not in (0, 1):
            return None
        strides.append(stride)
    if strides[0] != 1:  # a write to one element from every lane: a reduction
        return None
    if span == HALF - 1:
        return Lanes(iterator, init, bound, True, body, tuple(strides), HALF)
    return Lanes(iterator, init, bound, span == LANES - 1, body, tuple(strides))


def loop_lanes(node: isl.AstNode, offsets, arrays) -> Lanes | None:
    """A whole innermost loop ``for (c = init; c <= bound; c++) S(..)`` that may run
    :data:`LANES` iterations at a time, or None: its body is one statement whose write
    has stride 1 along ``c`` and reads stride 0 or 1, and no read of the written array
    but at the write's own offset (each iteration reads nothing another one writes, so
    running the lanes together computes what the loop does). ``offsets(user)`` and
    ``arrays(user)`` give the access offsets and arrays of a user node, write first."""
    if node.get_type() != isl.ast_node_type.for_:
        return None
    body = node.for_get_body()
    loop = unit_loop(node) if body.get_type() == isl.ast_node_type.user else None
    if loop is None:
        return None
    iterator, init, bound = loop
    exprs, names = offsets(body), arrays(body)
    strides = tuple(offset_stride(offset, iterator) for offset in exprs)
    if strides[0] != 1 or any(stride not in (0, 1) for stride in strides):
        return None
    written = offset_form(exprs[0])
    for offset, name in zip(exprs[1:], names[1:]):
        if name == names[0] and (written is None or offset_form(offset) != written):
            return None
    return Lanes(iterator, init, bound, False, body, strides)


def offset_form(offset) -> tuple | None:
    """An offset as a comparable linear form (per dim for a symbolic shape), or None."""
    forms = [linear(index) for index in (offset if isinstance(offset, tuple) else (offset,))]
    if any(form is None for form in forms):
        return None
    return tuple(tuple(sorted(form.items())) for form in forms)


def offset_stride(offset, iterator: str) -> int | None:
    """The element stride of an access offset along ``iterator`` (0 when the offset does
    not use it); an offset given per array dim (a symbolic shape) has stride 1 when only
    its last index moves, by 1."""
    if not isinstance(offset, tuple):
        return _step(offset, iterator)
    steps = [offset_stride(index, iterator) for index in offset]
    if any(step != 0 for step in steps[:-1]):
        return None
    return steps[-1]


def _step(expr: isl.AstExpr, iterator: str) -> int | None:
    """How much ``expr`` grows when ``iterator`` grows by 1, if linear in it: terms that
    do not use it count 0 whatever their form (``128*c6 - 127*(c6 % 64) + 64*c9`` steps
    64 along ``c9``: a head-major tensor read as ``[seq, heads*dim]``)."""
    if not uses(expr, iterator):
        return 0
    if expr.get_type() == isl.ast_expr_type.id:
        return 1
    kind = expr.op_get_type()
    args = [expr.op_get_arg(k) for k in range(expr.op_get_n_arg())]
    if kind in (op.add, op.sub, op.minus):
        steps = [_step(arg, iterator) for arg in args]
        if None in steps:
            return None
        return -steps[0] if kind == op.minus else \
            steps[0] + steps[1] * (1 if kind == op.add else -1)
    if kind == op.mul:
        for const, other in (args, args[::-1]):
            if const.get_type() == isl.ast_expr_type.int:
                step = _step(other, iterator)
                return None if step is None else step * const.int_get_val().to_python()
    return None


def unit_loop(node: isl.AstNode) -> tuple[str, isl.AstExpr, isl.AstExpr] | None:
    """``(iterator, init, bound)`` of a ``for`` node with step 1 and the condition
    ``iterator <= bound`` (or ``< bound + 1``), else None."""
    iterator = node.for_get_iterator().id_get_id().get_name()
    cond = node.for_get_cond()
    if linear(node.for_get_inc()) != {"": 1} or cond.get_type() != isl.ast_expr_type.op:
        return None
    if cond.op_get_type() not in (op.le, op.lt) or linear(cond.op_get_arg(0)) != {iterator: 1}:
        return None
    bound = cond.op_get_arg(1)
    if cond.op_get_type() == op.lt:
        bound = bound.sub(isl.AstExpr.from_val(isl.Val.one(bound.get_ctx())))
    return iterator, node.for_get_init(), bound


def trip_count(node: isl.AstNode) -> int | None:
    """The number of iterations of a unit-step ``for`` node, when it is a constant."""
    loop = unit_loop(node)
    return None if loop is None else iterations(loop[1], loop[2])


def iterations(init: isl.AstExpr, last: isl.AstExpr, step: int = 1) -> int | None:
    """How many times ``for (c = init; c <= last; c += step)`` runs, when it is a
    constant."""
    span = difference(last, init)
    return None if span is None else span // step + 1


def spanned(init: isl.AstExpr, bound: isl.AstExpr, known: Mapping[str, Linear] | None
            ) -> int | None:
    """``bound - init`` when it is a constant, ``bound`` may be a min or max of forms:
    the vectors of a row of a register tile whose columns end in half a vector,
    ``c12 <= min(23, 16 * c11 + 15)``, are 16 and 8 lanes once the loop of ``c11``
    from 0 is unrolled (``known``: ``c11`` is 0, then 1)."""
    if bound.get_type() == isl.ast_expr_type.op and bound.op_get_type() in (op.min, op.max):
        spans = [spanned(init, bound.op_get_arg(k), known) for k in range(bound.op_get_n_arg())]
        if None in spans:
            return None
        return min(spans) if bound.op_get_type() == op.min else max(spans)
    x, y = linear(bound, known), linear(init, known)
    if x is None or y is None:
        return None
    span = _combine(x, y, -1)
    return span.get("", 0) if set(span) <= {""} else None


def difference(x: isl.AstExpr, y: isl.AstExpr) -> int | None:
    """``x - y`` when it is a constant."""
    fx, fy = linear(x), linear(y)
    if fx is None or fy is None:
        return None
    difference = _combine(fx, fy, -1)
    return difference.get("", 0) if set(difference) <= {""} else None


def splat(b: ir.IRBuilder, scalar: ir.Value, width: int = LANES) -> ir.Value:
    """``scalar`` in every lane."""
    vec = ir.VectorType(scalar.type, width)
    first = b.insert_element(ir.Constant(vec, ir.Undefined), scalar, ir.Constant(I32, 0))
    return b.shuffle_vector(first, ir.Constant(vec, ir.Undefined),
                            ir.Constant(ir.VectorType(I32, width), [0] * width))


def lane_numbers(width: int = LANES) -> ir.Constant:
    """``<0, 1, .., width - 1>`` as i64."""
    return ir.Constant(ir.VectorType(I64, width), list(range(width)))


def lane_mask(b: ir.IRBuilder, init: ir.Value, bound: ir.Value) -> ir.Value:
    """Lane ``l`` is on when ``init + l <= bound``."""
    lane = lane_numbers()
    return b.icmp_signed("<=", lane, splat(b, b.sub(bound, init)))


def _suffix(element: ir.Type) -> str:
    """``f32``, ``f64``, ``f16``, ``i64``, ``i8``...: the element's part of an
    intrinsic's name."""
    floats = {ir.FloatType: "f32", ir.DoubleType: "f64", ir.HalfType: "f16"}
    return floats.get(type(element)) or f"i{element.width}"


def load(b: ir.IRBuilder, address: ir.Value, mask: ir.Value | None,
         element: ir.Type = F32, passthru: ir.Value | None = None,
         width: int = LANES) -> ir.Value:
    """``width`` consecutive ``element`` values from ``address`` (the lanes off in
    ``mask``, of LANES lanes, are not read: they take ``passthru``'s value, or zero)."""
    vec, align = ir.VectorType(element, width), alignment(element)
    if mask is None:
        return b.load(address, typ=vec, align=align)
    fn = b.module.declare_intrinsic(
        f"llvm.masked.load.v{LANES}{_suffix(element)}.p0",
        fnty=ir.FunctionType(vec, [ir.PointerType(), I32, MASK, vec]))
    passthru = ir.Constant(vec, None) if passthru is None else passthru
    return b.call(fn, [address, ir.Constant(I32, align), mask, passthru])


def uses(expr: isl.AstExpr, name: str) -> bool:
    """Whether the AST expression ``expr`` mentions the id ``name``."""
    kind = expr.get_type()
    if kind == isl.ast_expr_type.id:
        return expr.id_get_id().get_name() == name
    if kind != isl.ast_expr_type.op:
        return False
    return any(uses(expr.op_get_arg(k), name) for k in range(expr.op_get_n_arg()))


# the operators a lane-wise condition may use (those whose LLVM instructions take vectors)
LANE_OPS = {op.add, op.sub, op.mul, op.minus, op.min, op.max, op.eq, op.le, op.lt, op.ge,
            op.gt, op.and_, op.and_then, op.or_, op.or_else, op.select, op.cond}


def lane_wise(expr: isl.AstExpr, iterator: str) -> bool:
    """Whether :func:`lane_condition` can evaluate ``expr`` lane by lane."""
    if not uses(expr, iterator) or expr.get_type() == isl.ast_expr_type.id:
        return True
    return expr.op_get_type() in LANE_OPS and all(
        lane_wise(expr.op_get_arg(k), iterator) for k in range(expr.op_get_n_arg()))


def lane_condition(b: ir.IRBuilder, expr: isl.AstExpr, scalar, iterator: str,
                   first: ir.Value) -> ir.Value:
    """The condition ``expr`` in each lane, ``iterator`` being ``first + lane`` (a
    ``<LANES x i1>``); ``expr`` must be :func:`lane_wise`. ``scalar(e)`` evaluates a
    part that does not use the iterator (once, for every lane)."""
    value = _lanes_of(b, expr, scalar, iterator, first)
    if not isinstance(value.type, ir.VectorType):
        value = splat(b, value)
    if value.type.element != I1:  # isl may print a condition as an integer
        value = b.icmp_signed("!=", value, ir.Constant(value.type, None))
    return value


def _lanes_of(b, expr, scalar, iterator, first) -> ir.Value:
    if not uses(expr, iterator):
        return scalar(expr)
    if expr.get_type() == isl.ast_expr_type.id:
        lane = ir.Constant(ir.VectorType(I64, LANES), list(range(LANES)))
        return b.add(splat(b, first), lane)
    args = [_lanes_of(b, expr.op_get_arg(k), scalar, iterator, first)
            for k in range(expr.op_get_n_arg())]
    return apply_op(b, expr.op_get_type(),
                    [a if isinstance(a.type, ir.VectorType) else splat(b, a) for a in args])


def store(b: ir.IRBuilder, value: ir.Value, address: ir.Value, mask: ir.Value | None) -> None:
    """``value`` (a vector) to consecutive elements from ``address``, lanes in ``mask``."""
    element = value.type.element
    align = alignment(element)
    if mask is None:
        b.store(value, address, align=align)
        return
    fn = b.module.declare_intrinsic(
        f"llvm.masked.store.v{LANES}{_suffix(element)}.p0",
        fnty=ir.FunctionType(ir.VoidType(), [value.type, ir.PointerType(), I32, MASK]))
    b.call(fn, [value, address, ir.Constant(I32, align), mask])
