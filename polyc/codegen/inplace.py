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

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace

import islpy as isl

from polyc.errors import IllegalScheduleError
from polyc.islutil import linear_aff, offset_strides, united
from polyc.scheduler.legality import ParallelLoops, Times, respects_order
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
    done: dict[str, InPlace] = {}
    index = _Index(scop, schedule)
    settled: dict[str, tuple[str, frozenset[str]]] = {}
    orders = []
    for statement in scop.statements:
        array = statement.write.array
        found = _legal_buffer(index, statement, done, settled)
        if found is not None:
            buffer, hazards = found
            settled[buffer] = (array, frozenset(_sharing(done, buffer)))
            done[array] = InPlace(statement.name, array, buffer, scop.array(array).nbytes)
        else:
            found = _legal_output(index, statement, done)
            if found is None:
                continue
            memory, hazards = found
            settled.pop(memory, None)
            for name in _sharing(done, memory):
                done[name] = InPlace(_writer(scop, name), name, array, scop.array(name).nbytes)
        orders.append(hazards)
    if orders:
        scop = replace(scop, dependences=_union(scop.dependences, orders))
    return scop, tuple(done.values())


class _Index:
    """A SCoP's accesses by array, and each access's cells, computed once: the pass
    looks at the accesses of a few arrays per statement, not at every statement; the
    schedule's map and parallel loops, which the orders are checked against."""

    def __init__(self, scop: Scop, schedule: isl.Schedule):
        self.scop = scop
        self.times = Times(schedule.get_map())
        self.loops = ParallelLoops(schedule)
        self.reads: dict[str, list[tuple[Statement, Access]]] = defaultdict(list)
        self.writes: dict[str, list[Statement]] = defaultdict(list)
        for statement in scop.statements:
            for access in statement.reads:
                self.reads[access.array].append((statement, access))
            self.writes[statement.write.array].append(statement)
        self._cells: dict[int, isl.Map] = {}

    def cells(self, access: Access) -> isl.Map:
        """Instances -> the row-major offsets of the elements they touch, ``[offset]``."""
        key = id(access)
        if key not in self._cells:
            array = self.scop.array(access.array)
            space = access.relation.get_space().range()
            offset = isl.Map.from_aff(linear_aff(space, offset_strides(array.shape)))
            self._cells[key] = access.relation.apply_range(
                offset.set_tuple_name(isl.dim_type.out, "cell"))
        return self._cells[key]


def _legal_buffer(index: _Index, statement: Statement, done: Mapping[str, InPlace], settled
                  ) -> tuple[str, Dependences] | None:
    """The first memory ``statement`` may write into under ``schedule``, and the orders
    that needs; None if there is none. ``settled[memory]`` is ``(array, arrays)``: the
    last array written into ``memory`` and the arrays whose every access runs before
    that array's writer overwrites the cell (checked when it was placed)."""
    scop = index.scop
    if not _static_temp(scop, statement.write.array):
        return None
    nbytes = scop.array(statement.write.array).nbytes
    return _first_legal(index, statement, done, lambda memory: nbytes <= memory.nbytes,
                        settled)


def _legal_output(index: _Index, statement: Statement, done: Mapping[str, InPlace]
                  ) -> tuple[str, Dependences] | None:
    """When ``statement`` writes a graph output: the first memory of a temporary it
    reads that may move into the output's (that memory's own array), and the orders
    that needs; None if there is none."""
    output = index.scop.array(statement.write.array)
    if output.kind != "output" or output.symbolic:
        return None  # (a memory already in an output stays there: temporaries only)
    return _first_legal(index, statement, done,
                        lambda memory: memory.kind == "temp" and memory.nbytes <= output.nbytes,
                        {})


def _first_legal(index: _Index, statement: Statement, done: Mapping[str, InPlace], usable,
                 settled) -> tuple[str, Dependences] | None:
    """The memory of the first of ``statement``'s :func:`_sources` that is ``usable``
    (given its memory's Array) and whose sharing with ``statement``'s write the schedule
    respects, and the orders that needs; None if there is none.

    When the source is the last array written into its memory (``settled``), the
    accesses of the arrays settled before it need no check: each runs before the
    source's writer overwrites the cell, which runs before ``statement`` reads the
    source there (a dependence the schedule respects), in the same instance that
    overwrites it again. A chain of n in-place ops is then n small checks, not n^2."""
    scop = index.scop
    for source in _sources(index, statement):
        memory = done[source].buffer if source in done else source
        if not usable(scop.array(memory)):
            continue
        sharing = _sharing(done, memory)
        last, before = settled.get(memory, ("", frozenset()))
        if last == source:
            sharing -= before
        hazards = _hazards(index, statement, sharing)
        if _respected(index, hazards):
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


def _respected(index: _Index, hazards: Dependences) -> bool:
    """Whether the schedule runs the orders ``hazards`` forward, none across the
    iterations of a parallel loop."""
    if not respects_order(hazards, index.times):
        return False
    try:
        index.loops.check(hazards, index.scop.context)
    except IllegalScheduleError:
        return False
    return True


def _sources(index: _Index, statement: Statement) -> list[str]:
    """The temporaries ``statement`` may write into, from its accesses alone."""
    scop, target = index.scop, statement.write.array
    if not _plain(statement.write):
        return []
    if index.writes[target] != [statement]:
        return []
    if any(r.array == target for r in statement.reads):
        return []
    if not statement.write.relation.is_injective():
        return []
    written = index.cells(statement.write)
    return [name for name in dict.fromkeys(r.array for r in statement.reads)
            if _static_temp(scop, name) and _itemsize(scop, name) == _itemsize(scop, target)
            and all(_plain(r) and index.cells(r).is_equal(written)
                    for r in statement.reads if r.array == name)]


def _hazards(index: _Index, statement: Statement, sharing: set[str]) -> Dependences:
    """The orders writing ``statement``'s array into the memory of the arrays
    ``sharing`` needs, as dependences: every access to a cell of that memory before
    the instance that overwrites the cell (WAR from reads, WAW from writes; the
    statement's own read in the same instance comes first anyway); every read of the
    written array after the instance writing the element (RAW)."""
    overwrite = index.cells(statement.write).reverse()
    war, waw = [], []
    for array in sharing:
        for other, access in index.reads[array]:
            pairs = index.cells(access).apply_range(overwrite)
            if other is statement:
                pairs = pairs.subtract(isl.Map.identity(pairs.get_space()))
            war.append(isl.UnionMap.from_map(pairs))
        waw += [isl.UnionMap.from_map(index.cells(other.write).apply_range(overwrite))
                for other in index.writes[array]]
    raw = [isl.UnionMap.from_map(statement.write.relation.apply_range(access.relation.reverse()))
           for other, access in index.reads[statement.write.array] if other is not statement]
    empty = isl.UnionMap.empty(isl.Space.params_alloc(index.scop.ctx, 0))
    return Dependences(raw=united(raw) if raw else empty, war=united(war) if war else empty,
                       waw=united(waw) if waw else empty)


def _union(deps: Dependences | None, more: list[Dependences]) -> Dependences:
    """``deps`` (if any) and every one of ``more``, united kind by kind."""
    parts = ([deps] if deps is not None else []) + more
    return Dependences(*(united([getattr(d, kind) for d in parts])
                         for kind in ("raw", "war", "waw")),
                       exact=deps is None or deps.exact)


def _plain(access: Access) -> bool:
    """An access whose relation is the element touched: no bounds, no run-time index."""
    return access.address is None and access.guard is None and access.lookup is None


def _static_temp(scop: Scop, name: str) -> bool:
    array = scop.array(name)
    return array.kind == "temp" and not array.symbolic


def _itemsize(scop: Scop, name: str) -> int:
    return scop.array(name).itemsize
