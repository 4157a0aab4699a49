"""Producer inlining: an elementwise temporary read once per element disappears.

For a temporary ``t`` written by a single-statement op ``P: t[f(p)] = e(reads of P)``
and read by exactly one statement ``C`` through one injective access ``g`` (several
reads of it in ``C`` must read the same element), every read
of ``t`` in ``C`` becomes ``e`` evaluated at ``p = f^-1(g(c))``: ``P``'s reads are
composed into ``C``'s (``g . f^-1 . r``), ``P`` and ``t`` are dropped::

    S0: t0[i] = x[i] * y[i]           S1: t1[i] = x[i] * y[i] + x[i]
    S1: t1[i] = t0[i] + x[i]    ->

So no element of ``t`` is recomputed (copies of ``e`` for the same element are common
subexpressions that LLVM merges): inlining only removes the store and the load of
every element (the intermediates of a fused elementwise chain
never reach memory). Precondition (true of SCoPs built from ONNX graphs): ``t`` is a
``temp`` array, written by ``P`` alone, and no array ``P`` reads is written by a later
op, so ``P``'s reads see the same values at ``C``'s time as at ``P``'s.
"""

from __future__ import annotations

from dataclasses import replace

from polyc.frontend.core import Call
from polyc.fusion.groups import canonical_policy
from polyc.scop.model import Access, Load, Scop, Statement


def inline_temporaries(scop: Scop, *, policy: str = "smart") -> tuple[Scop, tuple[str, ...]]:
    """``scop`` with every inlinable producer folded into its consumer, and notes
    ``"inline: S0_mul into S1_add (t0)"``; the fusion policy ``none`` inlines nothing.
    Dependences must be (re)computed afterwards."""
    notes: list[str] = []
    if canonical_policy(policy) == "none":
        return scop, ()
    while (found := _next_candidate(scop)) is not None:
        producer, consumer = found
        scop = _inline(scop, producer, consumer)
        notes.append(f"inline: {producer.name} into {consumer.name} ({producer.write.array})")
    return scop, tuple(notes)


def _next_candidate(scop: Scop) -> tuple[Statement, Statement] | None:
    writers: dict[str, list[Statement]] = {}
    readers: dict[str, set[str]] = {}
    for s in scop.statements:
        writers.setdefault(s.write.array, []).append(s)
        for read in s.reads:
            readers.setdefault(read.array, set()).add(s.name)
    for producer in scop.statements:
        t = producer.write.array
        if (scop.array(t).kind != "temp" or len(writers[t]) != 1
                or len(readers.get(t, ())) != 1 or t in {r.array for r in producer.reads}):
            continue
        consumer = scop.statement(next(iter(readers[t])))
        if (_single_op(scop, producer) and _stable_reads(scop, producer, writers)
                and _reads_each_element_once(consumer, t)):
            return producer, consumer
    return None


def _reads_each_element_once(consumer: Statement, t: str) -> bool:
    """Every read of ``t`` in ``C`` is injective and they all read the same element (so
    the inlined copies are common subexpressions, not recomputations)."""
    relations = [r.relation for r in consumer.reads if r.array == t]
    return relations[0].is_injective() and all(r.is_equal(relations[0]) for r in relations)


def _single_op(scop: Scop, producer: Statement) -> bool:
    """``P`` is its op's only statement (a Map, not a reduction's init or update)."""
    return sum(s.op_index == producer.op_index for s in scop.statements) == 1 and \
        producer.write.relation.is_injective()


def _stable_reads(scop: Scop, producer: Statement, writers) -> bool:
    """No array ``P`` reads is written by an op after ``P``'s."""
    return all(w.op_index < producer.op_index
               for r in producer.reads for w in writers.get(r.array, ()))


def _inline(scop: Scop, producer: Statement, consumer: Statement) -> Scop:
    t = producer.write.array
    instance_of = producer.write.relation.reverse()  # t element -> P instance
    reads: list[Access] = []
    loads: dict[int, object] = {}
    for k, read in enumerate(consumer.reads):
        if read.array != t:
            loads[k] = Load(len(reads))
            reads.append(read)
            continue
        to_producer = read.relation.apply_range(instance_of)
        shift = len(reads)
        reads.extend(Access(r.array, to_producer.apply_range(r.relation))
                     for r in producer.reads)
        loads[k] = _renumber(producer.body, lambda j, shift=shift: Load(shift + j))
    body = _renumber(consumer.body, lambda j: loads[j])
    merged = replace(consumer, reads=tuple(reads), body=body)
    statements = tuple(merged if s.name == consumer.name else s
                       for s in scop.statements if s.name != producer.name)
    domain = scop.domain.subtract(producer.domain)
    return replace(scop, statements=statements, order=scop.order.intersect_domain(domain),
                   arrays=tuple(a for a in scop.arrays if a.name != t), dependences=None)


def _renumber(body, load):
    """``body`` with every ``Load(j)`` replaced by ``load(j)``."""
    if isinstance(body, Load):
        return load(body.k)
    if isinstance(body, Call):
        return Call(body.fn, tuple(_renumber(a, load) for a in body.args))
    return body
