"""Parallel loops: one ``parallel`` mark per outermost loop nest, above its outermost
parallel loop.

In each outermost band (a band with no band above it) the first member that is
coincident (no dependence crosses two of its iterations, given the loops outside it)
and runs :data:`MIN_ITERATIONS` or more iterations is split into a band of its own
with a ``parallel`` mark above it::

    band [t, i, j]  (coincident: s p p)    ->    band [t]
                                                   mark parallel
                                                     band [i]
                                                       band [j]

    T(S): (t, i, j) unchanged; loop i runs on threads, one region per t.

When no member of an outermost band qualifies, the bands right below it are looked at
instead: the contraction recipe's cache-block band ``[j/nc, k/kc]`` often has one
column block, so its packing copy gets a mark on its panels and its register-tile band
one on ``i/mc`` (or ``j/nr``), in each ``k`` block. No root-to-leaf path gets two
marks. Code generation outlines the marked loop to the OpenMP runtime
(:mod:`polyc.codegen.parallel`); the legality checker proves that it carries no
dependence (:func:`polyc.scheduler.legality.check_parallel`).

A loop nest whose regions would hold fewer than :data:`MIN_INSTANCES` statement
instances each stays serial: an OpenMP region costs 6-13 us on two threads. A whole
program of fewer than :data:`MIN_PROGRAM_INSTANCES` instances stays serial too: its
regions (a thread woken for each) cost more than its work on two threads saves.
"""

from __future__ import annotations

import dataclasses
import math

import islpy as isl

from polyc.islutil import (
    map_bottom_up,
    marks_named,
    outer_schedule,
    single_multi_aff,
    span,
    statement_names,
    union_maps,
    union_sets,
)
from polyc.marks import PARALLEL as MARK
from polyc.marks import TRANSPOSE as TRANSPOSE_MARK
from polyc.marks import VECTOR as VECTOR_MARK
from polyc.notation import format_aff
from polyc.scheduler.base import ScheduleResult
from polyc.scop.model import Scop

# Statement instances per region below which a loop nest stays serial: elementwise
# work of about 30-100 us, several times the cost of a region.
MIN_INSTANCES = 1 << 17
# Fewer iterations leave threads idle or unequal: a 1000x1100x1200 matmul's two column
# blocks of 1008 and 192 columns ran 1.2x faster on two threads, its 8 row blocks 1.4x.
MIN_ITERATIONS = 4
# Inside a recurrence's time loop (an LSTM's cell after its recurrent product, a region
# of threads each step already) from this many instances a step: the batch-16 LSTM of
# benchmarks/recurrent.py (2 x 4096 cell instances a step) on 2 threads, the cell
# serial 10.43 ms, in parallel 9.75 (onnxruntime 10.3-10.5 in the same runs).
RECURRENT_MIN_INSTANCES = 1 << 12
# A program of fewer instances in all stays serial. Measured on two threads (compiled
# serial / with parallel marks, 200 interleaved calls, one run): the int8 MLP of
# benchmarks/models.py (2^18.7 instances) 0.018 / 0.044 ms, the float 2-layer MLP
# (2^20.6) 0.036 / 0.046 ms; from about 2^22 on, threads paid in most models (bert_int8,
# 2^21.97: 0.141 / 0.128 ms; bert_layer, 2^23.7: 0.287 / 0.235 ms).
MIN_PROGRAM_INSTANCES = 1 << 21
_SKIP_BELOW = (VECTOR_MARK, TRANSPOSE_MARK, MARK)  # marks whose subtrees get no parallel mark


def parallelize(scop: Scop, result: ScheduleResult, *, threads: int | None
                ) -> ScheduleResult:
    """The pipeline stage: ``result`` with parallel marks (:func:`mark_parallel`) and a
    decision per mark; ``threads=1`` leaves the schedule serial, and a schedule that has
    parallel marks already (placed by hand) keeps them and gets no others."""
    marked = len(marks_named(result.schedule, MARK))
    if threads == 1:
        notes = ["off (threads=1)"]
        schedule = result.schedule
    elif marked:  # (marked by hand: polyc.steer.Schedule.parallel)
        notes = [f"as marked ({marked} loop{'s' if marked > 1 else ''})"]
        schedule = result.schedule
    elif (total := program_instances(scop, result.schedule)) is not None \
            and total < MIN_PROGRAM_INSTANCES:
        notes = [f"off ({total} statement instances in all, below {MIN_PROGRAM_INSTANCES})"]
        schedule = result.schedule
    else:
        schedule, notes = mark_parallel(scop, result.schedule)
    return dataclasses.replace(result, schedule=schedule, decisions=result.decisions
                               + tuple(f"parallel: {n}" for n in notes))


def mark_parallel(scop: Scop, schedule: isl.Schedule, *, min_instances: int | None = None
                  ) -> tuple[isl.Schedule, list[str]]:
    """``schedule`` with a ``parallel`` mark above the outermost parallel loop of each
    outermost loop nest, and a note per mark (e.g. ``S1: loop i0/128 (c2)``, ``c2``
    being the loop's AST iterator); loop nests with fewer than ``min_instances``
    (default :data:`MIN_INSTANCES`) statement instances per region stay serial.
    Schedule maps are unchanged: bands are only split.
    The marks rely on the coincident flags; check them with
    :func:`polyc.scheduler.legality.check_parallel`."""
    notes: list[str] = []
    min_instances = MIN_INSTANCES if min_instances is None else min_instances

    def visit(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if node.get_type() == isl.schedule_node_type.band:
            member = _target(scop, node, min_instances)
            if member is not None:
                return _mark(node, member, notes)
        return node

    return map_bottom_up(schedule, visit), notes


def _target(scop: Scop, band: isl.ScheduleNode, min_instances: int) -> int | None:
    """The member of ``band`` to run in parallel, or None."""
    outer_bands = []
    node = band
    while node.has_parent():
        node = node.parent()
        kind = node.get_type()
        if kind == isl.schedule_node_type.mark and node.mark_get_id().get_name() in _SKIP_BELOW:
            return None
        if kind == isl.schedule_node_type.band:
            outer_bands.append(node)
    recurrent = _recurrent(scop, band)
    if len(outer_bands) > 1 and not recurrent:  # (a recurrence's: its time loop, a tile)
        return None
    if any(_parallel_member(scop, outer, min_instances) is not None for outer in outer_bands):
        return None
    if recurrent:
        min_instances = min(min_instances, RECURRENT_MIN_INSTANCES)
    return _parallel_member(scop, band, min_instances)


def _recurrent(scop: Scop, band: isl.ScheduleNode) -> bool:
    """Whether every statement under ``band`` runs inside a recurrence's time loop."""
    return all(scop.statement(name).recurrent for name in statement_names(band.get_domain()))


def _parallel_member(scop: Scop, band: isl.ScheduleNode, min_instances: int) -> int | None:
    """The first coincident member of ``band`` that runs :data:`MIN_ITERATIONS` or more
    iterations (and two or more for one value of the loops outside it), if its regions
    would be large enough."""
    if band.get_domain().is_empty():  # e.g. a tensor with a zero extent
        return None
    times = _times(scop, band)
    prefix = times.dim(isl.dim_type.set) - band.band_n_member()
    for k in range(band.band_n_member()):
        if not band.band_member_get_coincident(k):
            continue
        values = span(times, prefix + k)
        if (values is not None and values < MIN_ITERATIONS) or not _varies(times, prefix + k):
            continue
        if _instances(scop, band) >= min_instances * _regions(times, prefix + k):
            return k
        return None
    return None


def _times(scop: Scop, band: isl.ScheduleNode) -> isl.Set:
    """The schedule times of the band's instances: outer band members, then its own."""
    domain = band.get_domain()
    outer = outer_schedule(band, domain)
    own = band.band_get_partial_schedule_union_map().intersect_domain(domain)
    times = isl.Set.from_union_set(outer.flat_range_product(own).range())
    if scop.sizing_context is not None:
        times = times.intersect_params(scop.sizing_context)
    return times


def _varies(times: isl.Set, dim: int) -> bool:
    """Whether time dimension ``dim`` takes two values for one value of the dims before."""
    n = times.dim(isl.dim_type.set)
    upto = times.project_out(isl.dim_type.set, dim + 1, n - dim - 1)
    per_prefix = isl.Map.from_domain(upto).move_dims(isl.dim_type.out, 0, isl.dim_type.in_,
                                                     dim, 1)
    pairs = per_prefix.reverse().apply_range(per_prefix)  # values with a common prefix
    return not pairs.subtract(isl.Map.identity(pairs.get_space())).is_empty()


def _regions(times: isl.Set, dim: int) -> int:
    """How many times the loop ``dim`` starts: the bounding box of the dims before it."""
    count = 1
    for d in range(dim):
        count *= span(times, d) or 1
    return count


def program_instances(scop: Scop, schedule: isl.Schedule) -> int | None:
    """Statement instances of the whole program (bounding boxes at the bound
    parameters), or None when a dimension's extent is not known."""
    total = 0
    for domain in union_sets(schedule.get_domain()):
        extents = _extents(scop, domain)
        if None in extents:
            return None
        total += math.prod(extents)
    return total


def _instances(scop: Scop, band: isl.ScheduleNode) -> int:
    """Statement instances below ``band`` (their bounding boxes, at the bound parameters;
    a dimension of unknown extent counts once)."""
    return sum(math.prod(e or 1 for e in _extents(scop, domain))
               for domain in union_sets(band.get_domain()))


def _extents(scop: Scop, domain: isl.Set) -> list[int | None]:
    if scop.sizing_context is not None:
        domain = domain.intersect_params(scop.sizing_context)
    return [span(domain, d) for d in range(domain.dim(isl.dim_type.set))]


def _mark(band: isl.ScheduleNode, member: int, notes: list[str]) -> isl.ScheduleNode:
    """Split ``band`` so that ``member`` is a band of its own, mark it; the node returned
    is at ``band``'s position."""
    notes.append(_note(band, member))
    node = band.band_split(member).child(0) if member > 0 else band
    if node.band_n_member() > 1:
        node = node.band_split(1)
    # One loop, not isl's separated or unrolled copies of it (isolate options stay on
    # the band below, where band_split put them).
    node = node.band_set_ast_build_options(isl.UnionSet.empty(isl.Space.params_alloc(
        node.get_ctx(), 0)))
    node = node.band_member_set_ast_loop_type(0, isl.ast_loop_type.default)
    node = node.insert_mark(isl.Id(MARK, context=node.get_ctx()))
    return node.parent() if member > 0 else node


def _note(band: isl.ScheduleNode, member: int) -> str:
    """``S1_matmul_update: loop i0/128 (c2)``: statements, the loop, its AST iterator."""
    names = sorted(statement_names(band.get_domain()))
    row = isl.UnionMap.from_union_pw_aff(band.band_get_partial_schedule().get_at(member))
    (first,) = [m for m in union_maps(row) if m.get_tuple_name(isl.dim_type.in_) == names[0]]
    depth = band.get_schedule_depth() + member
    return f"{', '.join(names)}: loop {_row_text(first)} (c{depth})"


def _row_text(row: isl.Map) -> str:
    multi = single_multi_aff(row)
    return str(row) if multi is None else format_aff(multi.get_at(0))
