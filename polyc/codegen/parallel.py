"""Parallel loops through the OpenMP runtime (libgomp): one region per marked loop.

The tiling stage puts a ``parallel`` mark above a loop that carries no dependence
(:mod:`polyc.tiling.parallel`). Here ``for (c = init; c <= last; c += step) S`` under
the mark becomes three pieces::

    caller:  count = number of iterations
             n = min(threads or omp_get_max_threads(), count)
             n > 1:  data = {arrays.., outer iterators.., init, count}   (a stack struct)
                     GOMP_parallel(region, &data, n, 0)
             else:   body(arrays.., outer iterators.., init, last)
    region(data):   thread t of n takes a static contiguous share of count/n
                    iterations, the last count%n threads one more, and calls
                    body(.., lo, hi) with them
    body(noalias arrays.., i64 outer iterators.., i64 lo, i64 hi):
                    for (c = lo; c <= hi; c += step) S

The extra iterations go to the last threads because the last iteration of a tiled
loop is the partial tile: the 5 row blocks of a 512-row matmul (126 rows each, 8 in
the last) split 252:260 rows, not 378:134, and two threads ran it 1.79x faster than
one instead of 1.30x (idle machine, libgomp's default spinning,
``benchmarks/threads.py``).

The body is a function of its own so that its array pointers are ``noalias``
parameters: loaded from the struct they would not be, and LLVM then keeps no register
tile in registers (73 vs 18 GFLOP/s measured). ``threads`` is the number of threads
compiled in (``None``: the OpenMP default, ``OMP_NUM_THREADS`` or
``omp_set_num_threads``); with one thread available the body is called directly,
without a region. A marked node that is not such a loop (isl emits no ``for`` for a
single iteration, or a condition of another form) runs serially: the mark is a hint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import islpy as isl
from llvmlite import ir

from polyc.codegen.ast import LoopProgram, children
from polyc.codegen.exprs import I64, value_name
from polyc.codegen.vector import linear
from polyc.marks import PARALLEL

MARK = PARALLEL
PTR = ir.PointerType()
I32 = ir.IntType(32)
VOID = ir.VoidType()
op = isl.ast_expr_op_type

# The OpenMP runtime entries generated code calls (libgomp's ABI).
RUNTIME = {
    "GOMP_parallel": ir.FunctionType(VOID, [PTR, PTR, I32, I32]),
    "omp_get_thread_num": ir.FunctionType(I32, []),
    "omp_get_num_threads": ir.FunctionType(I32, []),
    "omp_get_max_threads": ir.FunctionType(I32, []),
}


@dataclass(frozen=True)
class Bounds:
    """``for (iterator = init; iterator <= last; iterator += step)``."""

    iterator: str
    init: isl.AstExpr
    last: isl.AstExpr  # inclusive
    step: int


def loop_bounds(node: isl.AstNode) -> Bounds | None:
    """The bounds of the ``for`` node ``node`` when its condition is ``c <= e`` or
    ``c < e`` (``e`` free of ``c``) and its step a constant; None otherwise."""
    if node.get_type() != isl.ast_node_type.for_:
        return None
    iterator = node.for_get_iterator().id_get_id().get_name()
    step, cond = linear(node.for_get_inc()), node.for_get_cond()
    if step is None or set(step) != {""} or step[""] < 1:
        return None
    if cond.get_type() != isl.ast_expr_type.op or cond.op_get_type() not in (op.le, op.lt):
        return None
    bound = cond.op_get_arg(1)
    if linear(cond.op_get_arg(0)) != {iterator: 1} or _mentions(bound, iterator):
        return None
    if cond.op_get_type() == op.lt:
        bound = bound.sub(isl.AstExpr.from_val(isl.Val.one(bound.get_ctx())))
    return Bounds(iterator, node.for_get_init(), bound, step[""])


def _mentions(expr: isl.AstExpr, name: str) -> bool:
    kind = expr.get_type()
    if kind == isl.ast_expr_type.id:
        return expr.id_get_id().get_name() == name
    if kind != isl.ast_expr_type.op:
        return False
    return any(_mentions(expr.op_get_arg(k), name) for k in range(expr.op_get_n_arg()))


def arrays_in(node: isl.AstNode, program: LoopProgram) -> tuple[str, ...]:
    """The memories the statements below ``node`` access, in first-use order: the
    arrays, but an array written into another's memory counts as that one
    (``program.memory``), so that no two of them overlap."""
    names: dict[str, None] = {}
    for user in users(node):
        statement = program.instance(user).statement
        for access in (statement.write, *statement.reads):
            if program.arrays[access.array].stored:
                names.setdefault(program.memory(access.array))
    return tuple(names)


def users(node: isl.AstNode) -> Iterator[isl.AstNode]:
    """The user (statement) nodes below ``node``, in AST order."""
    if node.get_type() == isl.ast_node_type.user:
        yield node
    for child in children(node):
        yield from users(child)


def noalias_function(module: ir.Module, name: str, arrays: Sequence[str],
                     integers: Sequence[str] = ()) -> ir.Function:
    """``void name(ptr noalias arrays.., i64 integers..)``: internal and never inlined
    (one copy of a loop body, or a nest kept out of one huge kernel function)."""
    params = [PTR] * len(arrays) + [I64] * len(integers)
    fn = ir.Function(module, ir.FunctionType(VOID, params), name=module.get_unique_name(name))
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    for arg, arg_name in zip(fn.args, [*arrays, *integers]):
        arg.name = value_name(arg_name)
    for arg in fn.args[:len(arrays)]:
        arg.add_attribute("noalias")
    return fn


def body_function(module: ir.Module, name: str, arrays: Sequence[str],
                  outer: Sequence[str], iterator: str) -> ir.Function:
    """``void name(ptr noalias arrays.., i64 outer.., i64 lo, i64 hi)``, to be filled
    with the loop from ``lo`` to ``hi`` (inclusive); called from the region and the
    serial path."""
    return noalias_function(module, name, arrays,
                            [*outer, f"{iterator}.lo", f"{iterator}.hi"])


def within(b: ir.IRBuilder, lo: ir.Value, hi: ir.Value, init: ir.Value, last: ir.Value
           ) -> tuple[ir.Value, ir.Value]:
    """A share ``lo..hi`` of the loop ``init..last`` intersected with that range:
    ``max(lo, init)..min(hi, last)``. The iterations are the same (a share lies inside
    the range; an empty range, ``init > last``, stays empty), but LLVM now bounds the
    iterator by constants when the loop's bounds are constant. Without that it cannot
    prove that index arithmetic such as ``4 * c + 3`` does not overflow, loses the
    constant trip counts of the loops inside, and with them the registers of partial
    register tiles (measured 20% slower on a 64x256x1024 matmul)."""
    return _max(b, lo, init), _min(b, hi, last)


def _min(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


def _max(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed(">", x, y), x, y)


def call(b: ir.IRBuilder, alloca: Callable[[ir.Type], ir.Value], body: ir.Function,
         values: Sequence[ir.Value], init: ir.Value, last: ir.Value, step: int,
         threads: int | None) -> None:
    """Run ``body`` over ``init..last`` (by ``step``) on the threads: ``values`` are its
    leading arguments (arrays and outer iterators); ``alloca(type)`` gives an
    entry-block slot of the caller."""
    module = b.module
    count = b.select(b.icmp_signed("<", last, init), ir.Constant(I64, 0),
                     b.add(b.sdiv(b.sub(last, init), ir.Constant(I64, step)), ir.Constant(I64, 1)))
    available = (ir.Constant(I64, threads) if threads is not None else
                 b.sext(b.call(_runtime(module, "omp_get_max_threads"), []), I64))
    n = b.select(b.icmp_signed("<", count, available), count, available)
    with b.if_else(b.icmp_signed(">", n, ir.Constant(I64, 1))) as (parallel, serial):
        with parallel:
            fields = [*values, init, count]
            data = alloca(ir.LiteralStructType([v.type for v in fields]))
            for k, value in enumerate(fields):
                b.store(value, _field(b, data, k))
            region = _region(module, body, data.allocated_type, step)
            b.call(_runtime(module, "GOMP_parallel"),
                   [region, data, b.trunc(n, I32), ir.Constant(I32, 0)])
        with serial:
            b.call(body, [*values, init, last])


def _region(module: ir.Module, body: ir.Function, data_type: ir.LiteralStructType,
            step: int) -> ir.Function:
    """``void body.region(ptr data)``: this thread's share of the iterations."""
    fn = ir.Function(module, ir.FunctionType(VOID, [PTR]), name=f"{body.name}.region")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    (data,) = fn.args
    fields = [b.load(_field(b, data, k, data_type), typ=t)
              for k, t in enumerate(data_type.elements)]
    *values, init, count = fields
    thread = b.sext(b.call(_runtime(module, "omp_get_thread_num"), []), I64)
    threads = b.sext(b.call(_runtime(module, "omp_get_num_threads"), []), I64)
    share, extra = b.sdiv(count, threads), b.srem(count, threads)
    late = b.sub(threads, extra)  # threads from here on take one more iteration
    has_extra = b.icmp_signed(">=", thread, late)
    first = b.add(b.mul(thread, share), b.select(has_extra, b.sub(thread, late),
                                                 ir.Constant(I64, 0)))
    length = b.add(share, b.zext(has_extra, I64))
    with b.if_then(b.icmp_signed(">", length, ir.Constant(I64, 0))):
        lo = b.add(init, b.mul(first, ir.Constant(I64, step)))
        hi = b.add(lo, b.mul(b.sub(length, ir.Constant(I64, 1)), ir.Constant(I64, step)))
        b.call(body, [*values, lo, hi])
    b.ret_void()
    return fn


def _field(b: ir.IRBuilder, data: ir.Value, k: int, data_type: ir.Type | None = None):
    """The address of field ``k`` of the struct at ``data`` (an alloca of it, or an
    opaque pointer to a ``data_type``)."""
    indices = [ir.Constant(I32, 0), ir.Constant(I32, k)]
    if data_type is None:
        return b.gep(data, indices, inbounds=True)
    return b.gep(data, indices, inbounds=True, source_etype=data_type)


def _runtime(module: ir.Module, name: str) -> ir.Function:
    """The declaration of an OpenMP runtime function, added once per module."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, RUNTIME[name], name=name)
