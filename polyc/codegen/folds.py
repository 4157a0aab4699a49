"""Folds along a vector loop: a row's sum or maximum kept in a vector of partial results.

A Softmax row computes ``e[c] = exp(x[c] - m)`` and ``s += e[c]`` in one loop over
``c``: the sum's write does not move with ``c`` (stride 0), so the loop is not an
elementwise vector loop (:func:`polyc.codegen.vector.loop_lanes`) and was left to LLVM,
which vectorized it from scalar code: exp in its portable form there (a clamp with
``minnum``/``maxnum``, a NaN select, two conversions of the exponent) since the table
form's ``vpermps`` has no scalar equivalent for the vectorizer to widen. Here such a
loop runs :data:`vector.LANES` iterations at a time as polyc's own vector statements:
the elementwise ones as in a vector loop, and each fold (``s = s + v`` or ``m =
max(m, v)``, ``s`` not moving along the loop) into a vector of partial results, one per
lane, started at the operation's identity before the loop and combined lane by lane
(a tree of shuffles) and with the element's value after it. The sum is then added in
another order than the program's: only with ``reassoc`` allowed (``fast_math``). A
1024x1024 Softmax, 1 thread, an artifact called in a loop: 0.37 -> 0.35 ms, 0.31 with
exp's rounding in one FMA (:mod:`polyc.codegen.vecmath`); the exp loop had been ~70% of
its samples (``perf record``), the row max and the scaling ~15% each.

Only loops that call exp (or sigmoid, tanh, erf: functions of it) take this form: a
fold of cheap operations (a ReduceSum or ReduceMax row) is left to LLVM, which keeps
four vectors of partial results (a single one would bind a max's loop to the latency
of ``vmaxps``).
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl
from llvmlite import ir

from polyc.codegen import scalars, sums, vector
from polyc.codegen.ast import children
from polyc.codegen.exprs import F32
from polyc.frontend.core import Call
from polyc.scop.model import Load

I32 = ir.IntType(32)
IDENTITY = {"add": -0.0, "max": float("-inf"), "min": float("inf")}  # fn(identity, x) = x
# exp on 16 lanes takes its table form (polyc.codegen.vecmath), not the portable one LLVM's
# vectorizer widens: a loop that calls exp or a function of it takes the fold form
COSTLY = {"exp", "sigmoid", "tanh", "erf"}


@dataclass(frozen=True)
class Fold:
    """A statement that folds every lane into one element: ``fn(R[k], value)``."""

    lanes: vector.Lanes
    fn: str
    k: int  # the read of the element it updates


@dataclass(frozen=True)
class FoldLoop:
    """An innermost loop of elementwise statements (vector Lanes) and folds, in order."""

    iterator: str
    init: isl.AstExpr
    bound: isl.AstExpr
    statements: tuple[vector.Lanes | Fold, ...]


def fold_loop(emitter, node: isl.AstNode) -> FoldLoop | None:
    """The fold form of the ``for`` node ``node``, or None: its body one statement or a
    block of them, of stride 0 or 1 along the loop in every access, at least one a
    float32 fold whose array nothing else in the loop touches, one calling a
    :data:`COSTLY` function, and every array written in the loop read there only at
    its write's offset (each chunk of lanes then reads what the scalar loop's
    iterations read); built with fast-math only."""
    if not emitter.reassociate or node.get_type() != isl.ast_node_type.for_:
        return None
    body = node.for_get_body()
    users = [body] if body.get_type() == isl.ast_node_type.user else list(children(body))
    loop = vector.unit_loop(node)
    trips = vector.trip_count(node)
    if loop is None or any(u.get_type() != isl.ast_node_type.user for u in users) \
            or trips is not None and trips < vector.LANES:
        return None
    iterator, init, bound = loop
    statements, written, accesses = [], {}, []
    for user in users:
        offsets, arrays = emitter._offsets(user), emitter._arrays(user)
        accesses.append((offsets, arrays))
        strides = tuple(vector.offset_stride(offset, iterator) for offset in offsets)
        instance = emitter.program.instance(user)
        if any(s not in (0, 1) for s in strides) or any(instance.guards) \
                or any(r.lookup is not None for r in instance.statement.reads) \
                or arrays[0] in written:
            return None
        written[arrays[0]] = vector.offset_form(offsets[0]) if strides[0] else None
        lanes = vector.Lanes(iterator, init, bound, False, user, strides)
        statements.append(lanes if strides[0] else _fold(emitter, lanes, arrays, offsets))
    if None in statements or not any(isinstance(s, Fold) for s in statements) or not any(
            _calls(emitter.program.instance(u).statement.body) & COSTLY for u in users):
        return None
    for statement, (offsets, arrays) in zip(statements, accesses):
        own = statement.k if isinstance(statement, Fold) else None
        for k, (offset, name) in enumerate(zip(offsets[1:], arrays[1:])):
            if name in written and k != own and (
                    written[name] is None or vector.offset_form(offset) != written[name]):
                return None
    return FoldLoop(iterator, init, bound, tuple(statements))


def _fold(emitter, lanes: vector.Lanes, arrays, offsets) -> Fold | None:
    """The Fold of a statement whose write does not move along the loop, or None: its
    body ``fn(R[k], v)`` (either order) with R[k] the written element, ``fn`` an add, max
    or min of float32, and ``v`` reading nothing of the written array."""
    statement = emitter.program.instance(lanes.user).statement
    body = statement.body
    if not isinstance(body, Call) or body.fn not in IDENTITY or len(body.args) != 2 \
            or emitter._dtype(statement.write.array) != "float32":
        return None
    own = [k for k, name in enumerate(arrays[1:]) if name == arrays[0]]
    element = vector.offset_form(offsets[0])
    if len(own) != 1 or element is None or vector.offset_form(offsets[1 + own[0]]) != element \
            or Load(own[0]) not in body.args or any(
                arg != Load(own[0]) and Load(own[0]) in sums.loads(arg) for arg in body.args):
        return None
    return Fold(lanes, body.fn, own[0])


def _calls(expr) -> set[str]:
    """The functions a body expression calls."""
    if not isinstance(expr, Call):
        return set()
    return {expr.fn}.union(*map(_calls, expr.args))


def emit(emitter, loop: FoldLoop) -> None:
    """The loop, LANES iterations at a time (the last ones masked), each fold into a
    vector of partial results, then combined with its element."""
    b = emitter.builder
    vec = ir.VectorType(F32, vector.LANES)
    partial = {}
    for statement in loop.statements:
        if isinstance(statement, Fold):
            partial[statement] = emitter.entry_alloca(vec, "fold")
            b.store(ir.Constant(vec, [IDENTITY[statement.fn]] * vector.LANES),
                    partial[statement])
    emitter.lane_chunks(loop.iterator, loop.init, loop.bound,
                        lambda mask: _chunk(emitter, loop, partial, mask), "f")
    for fold, slot in partial.items():
        _finish(emitter, fold, b.load(slot, typ=vec))


def _chunk(emitter, loop: FoldLoop, partial: dict, mask) -> None:
    """One vector of lanes of every statement, in order; a fold's lanes off in ``mask``
    keep their partial results."""
    b = emitter.builder
    for statement in loop.statements:
        if not isinstance(statement, Fold):
            emitter._vector_body(statement, mask)
            continue
        before = b.load(partial[statement], typ=ir.VectorType(F32, vector.LANES))

        def load(k: int, at=None, fold=statement, before=before):
            if k == fold.k:
                return before, "float32"
            return emitter.vector_load(fold.lanes, k, mask)

        value, _ = emitter._body(emitter.program.instance(statement.lanes.user).statement.body,
                                 load, vector.LANES)
        b.store(value if mask is None else b.select(mask, value, before), partial[statement])


def _finish(emitter, fold: Fold, lanes: ir.Value) -> None:
    """The element folded with its lanes' partial results, combined pairwise."""
    b = emitter.builder
    width = lanes.type.count
    while width > 1:
        width //= 2
        halves = [b.shuffle_vector(lanes, ir.Constant(lanes.type, ir.Undefined),
                                   ir.Constant(ir.VectorType(I32, width),
                                               list(range(start, start + width))))
                  for start in (0, width)]
        lanes = scalars.call(b, fold.fn, halves, ("float32", "float32"))
    total = b.extract_element(lanes, ir.Constant(I32, 0))
    instance = emitter.program.instance(fold.lanes.user)
    address = emitter._address(instance.statement.write.array, instance.write)
    element = b.load(address, typ=F32, align=scalars.alignment(F32))
    b.store(scalars.call(b, fold.fn, [element, total], ("float32", "float32")), address,
            align=scalars.alignment(F32))
