"""Rows of a window run together: a loop of rows around a whole vector loop, jammed.

A depthwise conv over NCHW rows is ``for (r ..) for (c ..) Y[r][c] = sum_{kh, kw}
X[r + kh][c + kw] * w[kh][kw]``, the ``c`` loop a vector loop: each output vector loads
25 input vectors (5x5), each 64-byte load crossing a cache line, and on this machine
kind such a load costs 1.6 cycles of the load port against 1 for a line it stays in
(FMAs with a memory operand, 0.456 against 0.289 ns): the loads, not the FMAs, bound it.
Output rows ``r`` and ``r + 1`` read four of their five input rows alike, so here the
``r`` loop runs :data:`ROWS` rows at a time around the vector loop, and for each vector
the rows' instances are emitted together (:func:`jammed_vectors`):

- a read that a row shift makes equal to one already loaded (same array, offset and
  guard) is not loaded again: two rows load 6 x 5 vectors for 2 x 25 FMAs;
- the terms of the long sum (:mod:`polyc.codegen.sums`) are added in the order of the
  memory they read, rows interleaved, into SUM_CHAINS / rows partial sums per row, so
  that a loaded vector serves every row right away: 25 weights, 4 sums and a few
  inputs stay in registers (emitted one row after the other, LLVM spilled 93 values).

The same holds for a channels-last depthwise conv, whose pixels are the rows of its
channel vectors. Running the rows together is legal: the vector loop's statement reads
nothing another instance writes (:func:`polyc.codegen.vector.loop_lanes`), and rows
left over run one at a time. When the float order must be kept each row's sum adds its
terms in their own order, the rows taking turns term by term.

Depthwise convs, 1 thread, time over onnxruntime's, 1 / 2 / 3 / 4 rows at a time: 5x5
240 channels at 28x28 (NCHW) 1.00 / 0.70 / 0.72 / 0.72; 3x3 32 channels at 112x112
(NCHW) 0.67 / 0.48 / 0.47 / 0.45; 5x5 1152 channels at 7x7 (channels-last) 0.96 /
0.80 / 0.76 / 0.96: 2 rows, 4 when the sum has at most :data:`FEW_TERMS` terms.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl
from llvmlite import ir

from polyc.codegen import parallel, scalars, sums, vector
from polyc.codegen.exprs import I64

ROWS = 2
FEW_TERMS = 16  # a sum of at most this many terms (3x3) leaves registers for WIDE_ROWS
WIDE_ROWS = 4


@dataclass(frozen=True)
class Rows:
    """The row iterator, its step, how many rows run together, and the long sum of the
    statement's body they add in interleaved order."""

    iterator: str
    step: int
    count: int
    total: object  # a subtree of the body (sums.long_sum)


def window_rows(emitter, node: isl.AstNode) -> tuple[parallel.Bounds, vector.Lanes, Rows] | None:
    """``(bounds, lanes, rows)`` when the ``for`` node ``node`` is a loop of rows around
    one whole vector loop (``lanes``) of a statement with a long sum (a window's) that
    reads an array at offsets a whole number of rows apart, else None. (Winograd's
    transforms of input tiles, a few terms each, ran 20-55% slower with their rows
    jammed.)"""
    bounds = parallel.loop_bounds(node)
    lanes = None if bounds is None else emitter.loop_lanes(node.for_get_body())
    if lanes is None or any(vector.uses(e, bounds.iterator) for e in (lanes.init, lanes.bound)):
        return None  # (the rows share the vector loop's bounds)
    total = sums.long_sum(emitter.program.instance(lanes.user).statement.body)
    offsets, arrays = emitter._offsets(lanes.user), emitter._arrays(lanes.user)
    if total is None or not _rows_apart(offsets[1:], arrays[1:], bounds.iterator):
        return None
    count = WIDE_ROWS if len(sums.terms(total)) <= FEW_TERMS else ROWS
    return bounds, lanes, Rows(bounds.iterator, bounds.step, count, total)


def _rows_apart(offsets, arrays, iterator: str) -> bool:
    """Whether two of the offsets into one array (names ``arrays``) differ by a nonzero
    whole number of their steps along ``iterator``."""
    seen: dict[str, list[vector.Linear]] = {}
    for offset, name in zip(offsets, arrays):
        form = None if isinstance(offset, tuple) else vector.linear(offset)
        if form is None or not form.get(iterator):
            continue
        for other in seen.setdefault(name, []):
            alike = all(form.get(k, 0) == other.get(k, 0) for k in {*form, *other} - {""})
            apart = form.get("", 0) - other.get("", 0)
            if alike and apart and apart % form[iterator] == 0:
                return True
        seen[name].append(form)
    return False


def jammed_rows(emitter, node: isl.AstNode, bounds: parallel.Bounds,
                lanes: vector.Lanes, rows: Rows) -> None:
    """The loop of rows ``node``, ``rows.count`` rows at a time around its vector loop
    (``lanes``), then the rows left one at a time."""
    b = emitter.builder
    slot = emitter._iterator_slot(rows.iterator)
    b.store(emitter.int_value(bounds.init), slot)

    def body():
        emitter.scope.append(rows.iterator)
        emitter.vector_loop(lanes, rows)
        emitter.scope.pop()

    emitter.chunks(slot, rows.count, emitter.int_value(bounds.last), body, "j", rows.step)
    trips = vector.iterations(bounds.init, bounds.last, rows.step)
    if trips is None or trips % rows.count:  # rows left over
        emitter.loop(node, b.load(slot, typ=I64))


def jammed_vectors(emitter, lanes: vector.Lanes, mask, rows: Rows) -> None:
    """The vector instances of ``lanes.user`` at ``rows.count`` rows from the row
    iterator's current value, emitted together (see the module docstring)."""
    b = emitter.builder
    instance = emitter.program.instance(lanes.user)
    statement = instance.statement
    slot = emitter._iterator_slot(rows.iterator)
    first = b.load(slot, typ=I64)
    forms = [_read_form(instance, k, rows.iterator, lanes.iterator)
             for k in range(len(statement.reads))]
    loaded: dict[tuple, tuple[ir.Value, str]] = {}

    def at_row(copy: int) -> None:  # the iterator (for guards) and addresses of a row
        b.store(b.add(first, ir.Constant(I64, copy * rows.step)), slot)
        emitter.row_shift = (rows.iterator, first, copy * rows.step)

    def loader(copy: int):
        def load(k: int, at=None) -> tuple[ir.Value, str]:
            key = _shifted(forms[k], rows.iterator, copy * rows.step)
            if key is None or key not in loaded:
                at_row(copy)
                value = emitter.vector_load(lanes, k, mask)
                if key is None:
                    return value
                loaded[key] = value
            return loaded[key]
        return load

    memos: list[dict] = [{} for _ in range(rows.count)]
    _interleaved_sums(emitter, rows, forms, loader, memos)
    for copy in range(rows.count):
        value, dtype = emitter._body(statement.body, loader(copy), vector.LANES, memos[copy])
        at_row(copy)
        address = emitter._address(statement.write.array, instance.write)
        vector.store(b, scalars.to_memory(b, value, dtype,
                                          emitter._memory_type(statement.write.array)),
                     address, mask)
    emitter.row_shift = None
    b.store(first, slot)


def _interleaved_sums(emitter, rows: Rows, forms, loader, memos) -> None:
    """Each row's value of the long sum ``rows.total``, put in its memo: the rows'
    terms in the order of the memory they read, into partial sums per row (``forms``:
    the reads' :func:`_read_form`)."""
    terms = sums.terms(rows.total)
    if emitter.reassociate:
        positions = _positions(terms, forms, rows.iterator)
        order = sorted((position + copy * rows.step * step, copy, t) for copy in range(rows.count)
                       for t, (position, step) in enumerate(positions))
    else:  # each row's terms in their order: term by term, the rows in turn
        order = [(t, copy, t) for t in range(len(terms)) for copy in range(rows.count)]
    chains = max(1, sums.SUM_CHAINS // rows.count) if emitter.reassociate else 1
    partial: list[list] = [[] for _ in range(rows.count)]
    added = [0] * rows.count
    for _, copy, t in order:
        value = emitter._body(terms[t], loader(copy), vector.LANES, memos[copy])
        chain = added[copy] % chains
        if chain < len(partial[copy]):
            partial[copy][chain] = emitter.add(partial[copy][chain], value)
        else:
            partial[copy].append(value)
        added[copy] += 1
    for copy in range(rows.count):
        memos[copy][rows.total] = emitter.pairwise(partial[copy])


def _read_form(instance, k: int, row: str, lane: str) -> tuple | None:
    """Read ``k`` of ``instance`` as ``(array, offset, guard)``: the offset a linear form
    (a guarded read's unclamped one where its guard varies along the lanes of ``lane``,
    as it is loaded), the guard C text (one that does not use ``row``); None when the
    offset is not linear or the guard uses ``row``."""
    guard = instance.guards[k] if instance.guards else None
    lane_wise = guard is not None and vector.uses(guard, lane)
    offset = instance.unclamped[k] if lane_wise else instance.reads[k]
    form = None if offset is None or isinstance(offset, tuple) else vector.linear(offset)
    if form is None or (guard is not None and vector.uses(guard, row)):
        return None
    return instance.statement.reads[k].array, form, None if guard is None else guard.to_C_str()


def _shifted(read: tuple | None, row: str, shift: int) -> tuple | None:
    """What identifies a read (its :func:`_read_form`) with ``row`` moved by ``shift``:
    reads with equal keys load the same vector."""
    if read is None:
        return None
    array, form, guard = read
    moved = {**form, "": form.get("", 0) + form.get(row, 0) * shift}
    return array, tuple(sorted(moved.items())), guard


def _positions(terms, forms, row: str) -> list[tuple[int, int]]:
    """Where in memory each term reads at the first row, and how far that moves per
    unit of ``row``: the constant and ``row`` coefficient of the offset of its first
    read along ``row``; a term without one (a bias) goes with the next term that has
    one, and no position is below the one before."""
    found: list[tuple[int, int] | None] = []
    for term in terms:
        reads = [forms[load.k] for load in sums.loads(term) if forms[load.k] is not None]
        found.append(next(((form.get("", 0), form[row]) for _, form, _ in reads
                           if form.get(row)), None))
    positions: list[tuple[int, int]] = []
    later = None
    for value in reversed(found):
        later = value if value is not None else later
        positions.append(later if later is not None else (0, 0))
    positions.reverse()
    for t in range(1, len(positions)):
        if positions[t][0] < positions[t - 1][0]:
            positions[t] = positions[t - 1]
    return positions
