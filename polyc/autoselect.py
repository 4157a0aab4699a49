"""Choosing a loop nest's schedule among a few candidates: by a cost model
(``autoselect="model"``, the default of C kernels) or by measuring them
(``autoselect="measure"``).

The model (:mod:`polyc.scheduler.cost`) tiles Pluto's schedule and the original
order (tiled and not) and counts statement instances over the vector lanes their
innermost loop gets; it keeps Pluto's unless another is :data:`cost.MARGIN` times
cheaper, and keeps it anyway when the arrays exceed the L2 cache and the kernel does
at least :data:`REUSE` instances per element (it sees vectors, not caches: the tiles
may be what makes it fast) unless the other is :data:`VECTORS_WIN` times cheaper; a
kernel that does fewer than :data:`STREAMED` instances per element is not tiled. The
decisions give each candidate's estimate.

A schedule that wins on paper can lose on the machine: Pluto fuses and skews
jacobi-1d's two statements, and the skewed innermost loop carries a dependence, so
no vector code (0.43x gcc's time at PolyBench LARGE, where the original loops are
vectorized). With ``autoselect="measure"`` the nest is compiled with each candidate
(:data:`CANDIDATES`: the options given first, then Pluto's schedule, the original
order tiled and not), each runs on the same seeded inputs (floats in [0.5, 1.5),
integers in [0, 10)) :data:`RUNS` times after a first run, and the fastest median
is kept; the decisions list every candidate's time. A candidate whose first run takes
more than :data:`GIVE_UP` times the best so far is not run again. Compiling then
costs a compile and a few runs per candidate: the option is for kernels that run many
times, whose sizes are those compiled for.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import replace

import islpy as isl
import numpy as np

from polyc.codegen.vector import MARK as VECTOR_MARK
from polyc.codegen.vector import REGISTER_TILE
from polyc.islutil import statement_names
from polyc.scheduler import ScheduleResult, schedule
from polyc.scheduler.cost import choose, estimate, reuse
from polyc.scop.model import Scop
from polyc.tiling import tile
from polyc.tiling.cache import host_caches

CANDIDATES = (("pluto", True), ("original", True), ("original", False), ("isl", True))
RUNS = 3
GIVE_UP = 3.0
SEED = 0


def measured(compile_with: Callable[[str, bool], object], scheduler: str, tile: bool):
    """The fastest of the candidates ``compile_with(scheduler, tile)`` makes (a
    loaded :class:`polyc.pipeline.CompiledModel`), with the measurements appended to
    its schedule's decisions."""
    order = [(scheduler, tile), *(c for c in CANDIDATES if c != (scheduler, tile))]
    inputs = None
    results = []  # (median seconds or None, label, model)
    best = None
    for name, tiled in order:
        model = compile_with(name, tiled)
        if inputs is None:
            inputs = seeded_inputs(model.manifest)
        label = f"{name}{'' if tiled else ', untiled'}"
        first = _seconds(model, inputs)
        if best is not None and first > GIVE_UP * best:
            results.append((first, f"{label}: {first * 1e3:.3f} ms (one run)", model))
            continue
        median = statistics.median([first] + [_seconds(model, inputs) for _ in range(RUNS)])
        results.append((median, f"{label}: {median * 1e3:.3f} ms", model))
        best = median if best is None else min(best, median)
    chosen = min(results, key=lambda r: r[0])
    notes = "; ".join(text for _, text, _ in results)
    model = chosen[2]
    decision = f"autoselect: measured (median of {RUNS + 1} runs) {notes} -> " \
               f"{chosen[1].split(':')[0]}"
    return model.with_decisions(decision)


MODELLED = (("original", True), ("original", False))  # after the options given
# statement instances per array element from which a kernel whose arrays exceed L2
# keeps the tiles it was given (the model sees vectors, not caches) ...
REUSE = 16
# ... unless another candidate is this many times cheaper by the vectors: PolyBench
# LARGE on an AVX2 Zen 3 (25.8 and 27.5 MB of arrays, about 500 instances per element),
# Pluto's tiles without vectors against the original loops untiled with them (model 8x
# and 5.6x cheaper): jacobi-2d 1.47 s against 1.05 s (EXTRALARGE, 125 MB: 13.1 against
# 12.2 s), fdtd-2d 1.22 against 1.17 s; cholesky's 1.25x from tiles was at equal cost
VECTORS_WIN = 4
# statement instances per array element below which the kernel is not tiled: it uses
# each element about once, so a tile keeps nothing for later and breaks the rows the
# hardware prefetcher streams (trisolv LARGE, 0.5 per element of L: Pluto's schedule
# 3.4 ms tiled, 1.7 ms not; gesummv: 2.5 against 1.6 ms)
STREAMED = 1.5


def modelled(unbound: Scop, scop: Scop, groups, scheduled: ScheduleResult, options):
    """The schedule to keep, whether to tile it and the tiling's result (SCoP and
    schedule): the options' (``scheduled``, tiled as the options say) or a cheaper
    candidate by the cost model. ``unbound`` is the SCoP before its parameters were
    bound (what schedulers take)."""
    candidates = [(scheduled, options.tile)]
    for name, tiled in MODELLED:
        if (name, tiled) != (options.scheduler, options.tile):
            other = schedule(unbound, groups, scheduler=name)
            candidates.append((other, tiled))
    estimates, tilings = [], []
    for result, tiled in candidates:
        tiled_scop, tiled_result = tile(scop, result, enabled=tiled, size=options.tile_size,
                                        blocking=options.blocking,
                                        parallel=options.threads != 1,
                                        without=options.without,
                                        tile2=options.tile2)
        tilings.append((tiled_scop, tiled_result))
        estimates.append(estimate(tiled_scop, tiled_result.schedule,
                                  fast_math=options.fast_math,
                                  register_tiled=_register_tiled(tiled_result.schedule)))
    k = choose(estimates)
    labels = [f"{r.scheduler}{'' if t else ', untiled'}" for r, t in candidates]
    size, per_element = reuse(scop, estimates[0].instances)
    kept = ""
    if k and size > host_caches().l2 and per_element >= REUSE \
            and estimates[0].cost < VECTORS_WIN * estimates[k].cost:
        kept = (f"; {size / 2**20:.3g} MB of arrays, more than L2, and "
                f"{per_element:.3g} instances per element: the tiles kept")
        k = 0
    chosen, tiled = candidates[k]
    tiled_scop, tiled_result = tilings[k]
    label = labels[k]
    if tiled and per_element < STREAMED:
        kept += f"; {per_element:.3g} instances per element: untiled"
        label, tiled = f"{chosen.scheduler}, untiled", False
        tiled_scop, tiled_result = tile(scop, chosen, enabled=False)
    note = "autoselect: model (instances over vector lanes) " + "; ".join(
        f"{name}: {e}" for name, e in zip(labels, estimates)) + kept + f" -> {label}"
    before = len(chosen.decisions)  # the tiling's own notes follow the scheduler's
    decisions = chosen.decisions + (note,)
    return (replace(chosen, decisions=decisions), tiled,
            (tiled_scop, replace(tiled_result, decisions=decisions
                                 + tiled_result.decisions[before:])))


def _register_tiled(tree: isl.Schedule) -> frozenset[str]:
    """The statements below a register-tile or vector mark of the tiling stage."""
    found: set[str] = set()

    def visit(node: isl.ScheduleNode) -> bool:
        if node.get_type() == isl.schedule_node_type.mark and \
                node.mark_get_id().get_name() in (REGISTER_TILE, VECTOR_MARK):
            found.update(statement_names(node.get_domain()))
            return False
        return True

    tree.get_root().foreach_descendant_top_down(visit)
    return frozenset(found)


def seeded_inputs(manifest) -> dict[str, np.ndarray]:
    """Values for every array the code reads or is given: the manifest's inputs and
    its outputs whose initial value is given."""
    rng = np.random.default_rng(SEED)
    arrays = {}
    for spec in [*manifest["inputs"], *(o for o in manifest["outputs"]
                                        if o.get("init") == "given")]:
        shape, dtype = tuple(spec["shape"]), np.dtype(spec["dtype"])
        if dtype.kind == "f":
            arrays[spec["name"]] = rng.uniform(0.5, 1.5, size=shape).astype(dtype)
        else:
            arrays[spec["name"]] = rng.integers(0, 10, size=shape).astype(dtype)
    return arrays


def _seconds(model, inputs) -> float:
    start = time.perf_counter()
    model.run(inputs)
    return time.perf_counter() - start
