"""In place: an elementwise statement stores its result in the memory of a temporary it
reads, when that temporary's element is dead once read.

A statement ``S: t2[w(s)] = f(.., t1[r(s)], ..)`` may store ``t2`` in ``t1``'s memory
(``t1`` itself may live in another's, for a chain) when, checked with isl:

- ``t1`` and ``t2`` are temporaries of static size with elements of one size (the
  shapes may differ: a Relu reading a convolution's ``[c, h*w]`` output as
  ``[c, h, w]``), ``S`` is the only writer of ``t2`` and does not read it;
- every read of ``t1`` in ``S`` touches the memory cell (row-major offset) that ``S``
  writes, and the write is injective: each instance reads exactly the cell it writes,
  and no other instance of ``S`` touches that cell;
- under the final schedule, every other access to a cell of ``t1``'s memory (by any
  array stored there) runs before the instance of ``S`` that overwrites the cell, and
  every read of ``t2`` after the instance that writes it. These orders are checked as
  dependences by the legality checker, parallel loops included (a hazard across two
  iterations of a parallel loop is refused).

Then a cell holds ``t1``'s element until ``S`` reads it and ``t2``'s from the store in
the same instance on. Nothing is renamed: each array keeps its shape and accesses, and
:attr:`polyc.codegen.ast.LoopProgram.storage` says which memory it uses, so code
generation passes one pointer, once, to each function for arrays in one memory (two
``noalias`` parameters never point to the same memory), and buffer planning sees one
lifetime. The orders are added to the SCoP's dependences. Statements are tried in
program order, so chains (``t2 = f(t1)``, then ``t3 = g(t2)``) share one memory.

The other way round, when ``t2`` is a graph output (the caller's array, of static size)
and the rest holds, ``t1`` and every array in its memory are stored in ``t2``'s memory
instead: Softmax's exponentials go into its output, which the last pass divides in
place, instead of scratch the size of the output.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import islpy as isl
import numpy as np

from polyc.errors import IllegalScheduleError
from polyc.islutil import linear_aff, offset_strides
from polyc.scheduler.legality import check_order, check_parallel
from polyc.scop.model import Access, Dependences, Scop, Statement


@dataclass(frozen=True)
class InPlace:
    """``statement`` writes ``array`` into the memory of ``buffer`` (a temporary that
    uses its own memory)."""

    statement: str
    array: str
    buffer: str
    nbytes: int

    def __str__(self) -> str:
        return f"in place: {self.statement} writes {self.array} into {self.buffer}"


def write_in_place(scop: Scop, schedule: isl.Schedule) -> tuple[Scop, tuple[InPlace, ...]]:
    """Every statement that may write in place does; the SCoP with the orders that
    needs among its dependences, and what was done."""
    times, done = schedule.get_map(), {}
    for statement in scop.statements:
        array = statement.write.array
        found = _legal_buffer(scop, statement, done, schedule, times)
        if found is not None:
            buffer, hazards = found
            done[array] = InPlace(statement.name, array, buffer, scop.array(array).nbytes)
        else:
            found = _legal_output(scop, statement, done, schedule, times)
            if found is None:
                continue
            memory, hazards = found
            for name in _sharing(done, memory):
                done[name] = InPlace(_writer(scop, name), name, array, scop.array(name).nbytes)
        scop = replace(scop, dependences=_union(scop.dependences, hazards))
    return scop, tuple(done.values())


def _legal_buffer(scop: Scop, statement: Statement, done: Mapping[str, InPlace],
                  schedule: isl.Schedule, times: isl.UnionMap
                  ) -> tuple[str, Dependences] | None:
    """The first memory ``statement`` may write into under ``schedule``, and the orders
    that needs; None if there is none."""
    if not _static_temp(scop, statement.write.array):
        return None
    nbytes = scop.array(statement.write.array).nbytes
    return _first_legal(scop, statement, done, schedule, times,
                        lambda memory: nbytes <= memory.nbytes)


def _legal_output(scop: Scop, statement: Statement, done: Mapping[str, InPlace],
                  schedule: isl.Schedule, times: isl.UnionMap
                  ) -> tuple[str, Dependences] | None:
    """When ``statement`` writes a graph output: the first memory of a temporary it
    reads that may move into the output's (that memory's own array), and the orders
    that needs; None if there is none."""
    output = scop.array(statement.write.array)
    if output.kind != "output" or output.symbolic:
        return None  # (a memory already in an output stays there: temporaries only)
    return _first_legal(scop, statement, done, schedule, times,
                        lambda memory: memory.kind == "temp" and memory.nbytes <= output.nbytes)


def _first_legal(scop: Scop, statement: Statement, done: Mapping[str, InPlace],
                 schedule: isl.Schedule, times: isl.UnionMap, usable
                 ) -> tuple[str, Dependences] | None:
    """The memory of the first of ``statement``'s :func:`_sources` that is ``usable``
    (given its memory's Array) and whose sharing with ``statement``'s write the schedule
    respects, and the orders that needs; None if there is none."""
    for source in _sources(scop, statement):
        memory = done[source].buffer if source in done else source
        if not usable(scop.array(memory)):
            continue
        hazards = _hazards(scop, statement, _sharing(done, memory))
        if _respected(scop, hazards, schedule, times):
            return memory, hazards
    return None


def storage(done: tuple[InPlace, ...]) -> dict[str, str]:
    """``{array: the temporary or graph output whose memory it uses}`` for
    :class:`LoopProgram`."""
    return {d.array: d.buffer for d in done}


def _writer(scop: Scop, array: str) -> str:
    """The first statement that writes ``array``."""
    return next(s.name for s in scop.statements if s.write.array == array)


def _sharing(done: Mapping[str, InPlace], buffer: str) -> set[str]:
    """The arrays stored in ``buffer``'s memory, itself included."""
    return {buffer} | {name for name, d in done.items() if d.buffer == buffer}


def _respected(scop: Scop, hazards: Dependences, schedule: isl.Schedule,
               times: isl.UnionMap) -> bool:
    try:
        check_order(hazards, times)
        check_parallel(replace(scop, dependences=hazards), schedule)
    except IllegalScheduleError:
        return False
    return True


def _sources(scop: Scop, statement: Statement) -> list[str]:
    """The temporaries ``statement`` may write into, from its accesses alone."""
    target = statement.write.array
    if not _plain(statement.write):
        return []
    if any(s.write.array == target for s in scop.statements if s is not statement):
        return []
    if any(r.array == target for r in statement.reads):
        return []
    if not statement.write.relation.is_injective():
        return []
    written = _cells(scop, statement.write)
    return [name for name in dict.fromkeys(r.array for r in statement.reads)
            if _static_temp(scop, name) and _itemsize(scop, name) == _itemsize(scop, target)
            and all(_plain(r) and _cells(scop, r).is_equal(written)
                    for r in statement.reads if r.array == name)]


def _hazards(scop: Scop, statement: Statement, sharing: set[str]) -> Dependences:
    """The orders writing ``statement``'s array into the memory of the arrays
    ``sharing`` needs, as dependences: every access to a cell of that memory before
    the instance that overwrites the cell (WAR from reads, WAW from writes; the
    statement's own read in the same instance comes first anyway); every read of the
    written array after the instance writing the element (RAW)."""
    target = statement.write.array
    overwrite = _cells(scop, statement.write).reverse()
    raw = war = waw = isl.UnionMap.empty(isl.Space.params_alloc(scop.ctx, 0))
    for other in scop.statements:
        for access in other.reads:
            if access.array in sharing:
                pairs = _cells(scop, access).apply_range(overwrite)
                if other is statement:
                    pairs = pairs.subtract(isl.Map.identity(pairs.get_space()))
                war = war.union(pairs)
            if access.array == target and other is not statement:
                raw = raw.union(statement.write.relation.apply_range(access.relation.reverse()))
        if other.write.array in sharing:
            waw = waw.union(_cells(scop, other.write).apply_range(overwrite))
    return Dependences(raw=raw, war=war, waw=waw)


def _cells(scop: Scop, access: Access) -> isl.Map:
    """Instances -> the row-major offsets of the elements they touch, ``[offset]``."""
    array = scop.array(access.array)
    space = access.relation.get_space().range()
    offset = isl.Map.from_aff(linear_aff(space, offset_strides(array.shape)))
    return access.relation.apply_range(offset.set_tuple_name(isl.dim_type.out, "cell"))


def _union(deps: Dependences | None, more: Dependences) -> Dependences:
    if deps is None:
        return more
    return Dependences(deps.raw.union(more.raw), deps.war.union(more.war),
                       deps.waw.union(more.waw))


def _plain(access: Access) -> bool:
    """An access whose relation is the element touched: no bounds, no run-time index."""
    return access.address is None and access.guard is None and access.lookup is None


def _static_temp(scop: Scop, name: str) -> bool:
    array = scop.array(name)
    return array.kind == "temp" and not array.symbolic


def _itemsize(scop: Scop, name: str) -> int:
    return np.dtype(scop.array(name).dtype).itemsize
