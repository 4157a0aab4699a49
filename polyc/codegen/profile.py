"""Per-nest timers compiled into the code (``profile=True``): where a model's time goes.

The kernel calls each top-level loop nest of the program (a *part*: one fusion group's
loops, or a group's packing copies) as a function of its own. With profiling on, each
call is wrapped as::

    t0 = clock_gettime(CLOCK_MONOTONIC)
    polyc_kernel.partK(..)
    polyc.profile.ns[K] += clock_gettime(CLOCK_MONOTONIC) - t0

and the module exports ``int64_t *polyc_profile_counters(void)``, the address of the
counters (nanoseconds per part, summed over calls), which the runtime reads and
resets (:mod:`polyc.runtime.profile`). Without profiling none of this is emitted: the
code is the same as before, at no cost. The manifest's ``"profile"`` lists each
part's statements, ONNX nodes, the ONNX nodes of producers inlined into its statements
(a depthwise conv and its Sigmoid computed inside SiLU's Mul), floating-point operations
and bytes (:func:`parts`).

A part's ``flops`` counts one operation per float arithmetic call of a statement body
(a multiply-add of a contraction: 2) times its number of instances; ``bytes`` is the
size of the arrays it touches, each once: the traffic of a nest that reads its inputs
and writes its outputs once, a lower bound.
"""

from __future__ import annotations

import islpy as isl
import numpy as np
from llvmlite import ir

from polyc.codegen.ast import LoopProgram
from polyc.codegen.exprs import I64
from polyc.codegen.parallel import users
from polyc.frontend.core import Call, result_dtype
from polyc.scop.model import Load, LoadAt, Scop, Statement

COUNTERS_FUNCTION = "polyc_profile_counters"
COUNTERS = "polyc.profile.ns"
CLOCK_MONOTONIC = 1
EXACT_COUNT_LIMIT = 50_000_000  # count points of a non-box domain up to this bound
I32 = ir.IntType(32)
PTR = ir.PointerType()


class Timers:
    """The counters of one module and the code that reads the clock around a call."""

    def __init__(self, module: ir.Module, n_parts: int, alloca):
        """``alloca(type)`` gives an entry-block slot of the function that will make
        the timed calls."""
        typ = ir.ArrayType(I64, max(n_parts, 1))
        self.counters = ir.GlobalVariable(module, typ, name=COUNTERS)
        self.counters.linkage = "internal"
        self.counters.initializer = ir.Constant(typ, None)
        self.counters.align = 64
        self.clock = ir.Function(module, ir.FunctionType(I32, [I32, PTR]), name="clock_gettime")
        accessor = ir.Function(module, ir.FunctionType(PTR, []), name=COUNTERS_FUNCTION)
        ir.IRBuilder(accessor.append_basic_block("entry")).ret(self.counters)
        self._slot = alloca(ir.LiteralStructType([I64, I64]))  # a struct timespec

    def call(self, b: ir.IRBuilder, k: int, fn: ir.Function, args: list) -> None:
        """``fn(args)`` with its time added to counter ``k``."""
        start = self._now(b)
        b.call(fn, args)
        elapsed = b.sub(self._now(b), start)
        counter = b.gep(self.counters, [ir.Constant(I64, 0), ir.Constant(I64, k)],
                        inbounds=True)
        b.store(b.add(b.load(counter, typ=I64), elapsed), counter)

    def _now(self, b: ir.IRBuilder) -> ir.Value:
        """Nanoseconds of the monotonic clock."""
        b.call(self.clock, [ir.Constant(I32, CLOCK_MONOTONIC), self._slot])
        fields = [b.load(b.gep(self._slot, [ir.Constant(I32, 0), ir.Constant(I32, k)],
                               inbounds=True, source_etype=self._slot.allocated_type), typ=I64)
                  for k in (0, 1)]
        return b.add(b.mul(fields[0], ir.Constant(I64, 1_000_000_000)), fields[1])


def parts(scop: Scop, program: LoopProgram, nodes: list[isl.AstNode]) -> list[dict]:
    """What the manifest says of each timed part: ``statements``, ``nodes`` (ONNX node
    names, program order), ``inlined`` (the nodes of producers inlined into them, not
    among ``nodes``), ``flops`` and ``bytes`` (see the module docstring). A statement
    split over several parts is counted in the first."""
    counted: set[str] = set()
    result = []
    for node in nodes:
        names = list(dict.fromkeys(program.instance(u).statement.name for u in users(node)))
        statements = [scop.statement(n) for n in names]
        onnx_nodes = list(dict.fromkeys(s.node for s in statements if s.node))
        arrays = {a.array for s in statements for a in (s.write, *s.reads)}
        flops = sum(_flops(scop, s) for s in statements if s.name not in counted)
        counted.update(names)
        result.append({
            "statements": names,
            "nodes": onnx_nodes,
            "inlined": [n for s in statements for n in s.inlined if n not in onnx_nodes],
            "flops": int(flops),
            "bytes": int(sum(_nbytes(scop, a) for a in arrays)),
        })
    return result


def _nbytes(scop: Scop, name: str) -> int:
    array = scop.array(name)
    return 0 if array.symbolic else array.nbytes


def _flops(scop: Scop, statement: Statement) -> int:
    per_instance, _ = _float_ops(statement.body, statement, scop, set())
    return per_instance * instances(statement.domain, scop) if per_instance else 0


def _float_ops(expr, statement: Statement, scop: Scop, seen: set) -> tuple[int, str]:
    """The float arithmetic calls in a body (loads and integer arithmetic cost nothing)
    and the body's dtype, in one walk; a subtree equal to one counted already (in
    ``seen``) costs nothing, as the code computes it once (Clip's ``x`` read three
    times had counted a depthwise conv's sum three times)."""
    if isinstance(expr, Load):
        return 0, scop.array(statement.reads[expr.k].array).dtype
    if isinstance(expr, LoadAt):
        ops, _ = _float_ops(expr.at, statement, scop, seen)
        return ops, scop.array(statement.reads[expr.k].array).dtype
    if not isinstance(expr, Call):
        return 0, expr.dtype
    args = [_float_ops(arg, statement, scop, seen) for arg in expr.args]
    dtype = result_dtype(expr.fn, tuple(d for _, d in args))
    if expr in seen:
        return 0, dtype
    seen.add(expr)
    return sum(ops for ops, _ in args) + dtype.startswith("float"), dtype


def instances(domain: isl.Set, scop: Scop) -> int:
    """The number of points of ``domain`` at the bound parameter values (0 while any
    stays symbolic): a box's size directly, other sets counted by isl up to
    :data:`EXACT_COUNT_LIMIT` points and bounded by their box beyond."""
    if scop.symbolic_params:
        return 0
    if scop.context is not None:
        domain = domain.intersect_params(scop.context)
    domain = domain.project_out(isl.dim_type.param, 0, domain.dim(isl.dim_type.param))
    if domain.is_empty():
        return 0
    lows, highs = [], []
    for k in range(domain.dim(isl.dim_type.set)):
        lows.append(domain.dim_min_val(k).to_python())
        highs.append(domain.dim_max_val(k).to_python())
    box_size = int(np.prod([h - lo + 1 for lo, h in zip(lows, highs)], dtype=np.int64))
    box = isl.Set.universe(domain.get_space())
    for k, (lo, hi) in enumerate(zip(lows, highs)):
        box = box.lower_bound_val(isl.dim_type.set, k, isl.Val.int_from_si(scop.ctx, lo))
        box = box.upper_bound_val(isl.dim_type.set, k, isl.Val.int_from_si(scop.ctx, hi))
    if box.is_subset(domain) or box_size > EXACT_COUNT_LIMIT:
        return box_size
    return domain.count_val().to_python()
