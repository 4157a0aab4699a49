"""Producer inlining: an elementwise temporary read once per element disappears.

For a temporary ``t`` written by a single-statement op ``P: t[f(p)] = e(reads of P)``
and read by exactly one statement ``C`` through one injective access ``g`` (several
reads of it in ``C`` must read the same element), every read
of ``t`` in ``C`` becomes ``e`` evaluated at ``p = f^-1(g(c))``: ``P``'s reads are
composed into ``C``'s (``g . f^-1 . r``), ``P`` and ``t`` are dropped::

    S0: t0[i] = x[i] * y[i]           S1: t1[i] = x[i] * y[i] + x[i]
    S1: t1[i] = t0[i] + x[i]    ->

So no element of ``t`` is recomputed: the reads of ``t`` in ``C`` become one subtree
over one set of ``P``'s reads, which codegen evaluates once (SiLU's ``c * sigmoid(c)``
of a 5x5 depthwise conv ``c``: LLVM had not merged two copies of the window, 0.84 ms
against 0.43 ms as two passes). Inlining only removes the store and the load of
every element (the intermediates of a fused elementwise chain
never reach memory). Precondition (true of SCoPs built from ONNX graphs): ``t`` is a
``temp`` array, written by ``P`` alone, and no array ``P`` reads is written by a later
op, so ``P``'s reads see the same values at ``C``'s time as at ``P``'s.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import replace

import islpy as isl

from polyc.frontend.core import Call
from polyc.fusion.groups import canonical_policy
from polyc.islutil import union_of
from polyc.scop.model import Access, Load, LoadAt, Scop, Statement


def inline_temporaries(scop: Scop, *, policy: str = "smart") -> tuple[Scop, tuple[str, ...]]:
    """``scop`` with every inlinable producer folded into its consumer, and notes
    ``"inline: S0_mul into S1_add (t0)"``; the fusion policy ``none`` inlines nothing.
    Dependences must be (re)computed afterwards.

    Producers are tried in program order. Folding ``P`` into ``C`` changes only who
    reads ``P``'s operands (now ``C``), so the scan resumes at the first writer of one
    of them (a temporary read by ``P`` and another statement may now have one reader).
    Who reads and writes each array is kept up to date in :class:`_Program`, so the
    scan is linear in the number of statements (it searched them all per producer: a
    chain of 3,000 ops took 16 s)."""
    if canonical_policy(policy) == "none":
        return scop, ()
    temps = {a.name for a in scop.arrays if a.kind == "temp"}
    program = _Program(scop.statements)
    notes: list[str] = []
    k = 0
    while k < len(program.statements):
        producer = program.statements[k]
        consumer = None if producer is None else _consumer(program, producer, temps)
        if consumer is None:
            k += 1
            continue
        program.fold(producer, consumer, _inline(producer, consumer))
        notes.append(f"inline: {producer.name} into {consumer.name} ({producer.write.array})")
        k = min([k] + [n for r in producer.reads for n in program.writers[r.array]])
    if not notes:
        return scop, ()
    statements = [s for s in program.statements if s is not None]
    kept = union_of(scop.ctx, (s.domain for s in statements))
    written = {s.write.array for s in statements}
    arrays = tuple(a for a in scop.arrays if a.name not in temps or a.name in written)
    return replace(scop, statements=tuple(statements), order=scop.order.intersect_domain(kept),
                   arrays=arrays, dependences=None), tuple(notes)


class _Program:
    """The statements in program order (None where one was folded away), with the
    positions of the statements that read and that write each array, and the number of
    statements of each op."""

    def __init__(self, statements):
        self.statements: list[Statement | None] = list(statements)
        self.readers: dict[str, set[int]] = defaultdict(set)
        self.writers: dict[str, set[int]] = defaultdict(set)
        self.per_op: Counter = Counter(s.op_index for s in statements)
        self.position = {s.name: n for n, s in enumerate(statements)}
        for n, s in enumerate(statements):
            self._enter(n, s)

    def _enter(self, n: int, statement: Statement) -> None:
        self.writers[statement.write.array].add(n)
        for r in statement.reads:
            self.readers[r.array].add(n)

    def _leave(self, n: int, statement: Statement) -> None:
        self.writers[statement.write.array].discard(n)
        for r in statement.reads:
            self.readers[r.array].discard(n)

    def fold(self, producer: Statement, consumer: Statement, merged: Statement) -> None:
        """``producer`` gone, ``consumer`` replaced by ``merged`` (at its place)."""
        p, c = self.position[producer.name], self.position[consumer.name]
        self._leave(p, producer)
        self._leave(c, consumer)
        self.statements[p] = None
        self.per_op[producer.op_index] -= 1
        self.statements[c] = merged
        self._enter(c, merged)


def _consumer(program: _Program, producer: Statement, temps: set[str]) -> Statement | None:
    """The one statement ``producer`` can be folded into, or None."""
    t = producer.write.array
    if t not in temps or any(r.array == t for r in producer.reads):
        return None
    readers = program.readers[t]
    if len(readers) != 1 or len(program.writers[t]) != 1:
        return None
    consumer = program.statements[next(iter(readers))]
    if (_single_op(program, producer) and _stable_reads(program, producer)
            and _reads_each_element_once(consumer, t)
            and body_depth(producer.body) + body_depth(consumer.body) <= MAX_DEPTH
            and not (len(producer.reads) > WIDE_READS and _transposes(producer, consumer))):
        return consumer
    return None


# Inlining stops where a body would nest deeper than this: every pass over a body
# (renumbering, hashing, printing, code generation) recurses along its depth, and 250
# chained elementwise ops inlined into one body overflowed Python's stack. A chain
# of 10,000 ops becomes statements of at most this depth each.
MAX_DEPTH = 64


def body_depth(body) -> int:
    """The nesting depth of a statement body (1 for a load or a constant), counted
    without recursion."""
    depth, stack = 0, [(body, 1)]
    while stack:
        node, level = stack.pop()
        depth = max(depth, level)
        if isinstance(node, Call):
            stack.extend((arg, level + 1) for arg in node.args)
        elif isinstance(node, LoadAt):
            stack.append((node.at, level + 1))
    return depth


# A producer with more reads than this is not inlined into a consumer that walks it in
# another order: its sum would run along the consumer's innermost loop, strided. A
# Winograd output transform (16 terms) inlined into the copy to an NCHW graph output:
# 64 channels at 56x56, 1 thread, 4.2 ms a conv, 1.5 ms as a pass of its own.
WIDE_READS = 8


def _transposes(producer: Statement, consumer: Statement) -> bool:
    """Whether the consumer's innermost loop does not move the producer's innermost
    loop alone, by 1 (the consumer reads the producer's array transposed)."""
    read = next(r for r in consumer.reads if r.array == producer.write.array)
    to_producer = read.relation.apply_range(producer.write.relation.reverse())
    n_in = to_producer.dim(isl.dim_type.in_)
    n_out = to_producer.dim(isl.dim_type.out)
    if n_in == 0 or n_out == 0:
        return False
    try:
        last = isl.PwMultiAff.from_map(to_producer).get_at(n_out - 1)
    except isl.Error:
        return True
    if last.n_piece() != 1:
        return True
    aff = last.get_pieces()[0][1]
    return any(not aff.get_coefficient_val(isl.dim_type.in_, d).eq(int(d == n_in - 1))
               for d in range(n_in)) or aff.dim(isl.dim_type.div) > 0


def _reads_each_element_once(consumer: Statement, t: str) -> bool:
    """Every read of ``t`` in ``C`` is injective and they all read the same element (so
    the inlined copies are common subexpressions, not recomputations)."""
    reads = [r for r in consumer.reads if r.array == t]
    if any(r.address is not None for r in reads):  # a bounded read of t: keep t
        return False
    relations = [r.relation for r in reads]
    return relations[0].is_injective() and all(r.is_equal(relations[0]) for r in relations)


def _single_op(program: _Program, producer: Statement) -> bool:
    """``P`` is its op's only statement (a Map, not a reduction's init or update)."""
    return program.per_op[producer.op_index] == 1 and producer.write.relation.is_injective()


def _stable_reads(program: _Program, producer: Statement) -> bool:
    """No array ``P`` reads is written by an op after ``P``'s."""
    return all(program.statements[n].op_index < producer.op_index
               for r in producer.reads for n in program.writers[r.array])


def _inline(producer: Statement, consumer: Statement) -> Statement:
    """``consumer`` with its reads of ``producer``'s array replaced by ``producer``'s
    body over ``producer``'s reads, composed into ``consumer``'s instances."""
    t = producer.write.array
    instance_of = producer.write.relation.reverse()  # t element -> P instance
    reads: list[Access] = []
    loads: dict[int, object] = {}
    inlined = None  # every read of t reads the same element: one copy of P's body
    for k, read in enumerate(consumer.reads):
        if read.array != t:
            loads[k] = Load(len(reads))
            reads.append(read)
            continue
        if inlined is not None:
            loads[k] = inlined
            continue
        to_producer = read.relation.apply_range(instance_of)
        shift = len(reads)
        reads.extend(r.pulled_back(to_producer) for r in producer.reads)
        loads[k] = inlined = _renumber(producer.body, lambda j, shift=shift: Load(shift + j))
    body = _renumber(consumer.body, lambda j: loads[j])
    nodes = (*producer.inlined, producer.node, *consumer.inlined)
    inlined = tuple(n for n in dict.fromkeys(nodes) if n and n != consumer.node)
    return replace(consumer, reads=tuple(reads), body=body, inlined=inlined)


def _renumber(body, load):
    """``body`` with every ``Load(j)`` replaced by ``load(j)`` (and the read of every
    ``LoadAt(j, ..)`` renumbered as ``load(j)`` says)."""
    if isinstance(body, Load):
        return load(body.k)
    if isinstance(body, LoadAt):  # never a read of the inlined array: it stays a Load
        return LoadAt(load(body.k).k, _renumber(body.at, load))
    if isinstance(body, Call):
        return Call(body.fn, tuple(_renumber(a, load) for a in body.args))
    return body
