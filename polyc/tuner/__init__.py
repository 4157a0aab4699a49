"""``polyc tune``: sweep schedules, tiling strategies and tile sizes for one target
(:mod:`polyc.tuner.targets`), time them, and keep the fastest correct one.

1. The points: every strategy of :func:`points` (a grid), or ``count`` of them drawn
   with a seed (``search="random"``); the loops as written (``original``) always
   come first, as the baseline every speed-up is against.
2. Each point is compiled and its outputs checked against the target's reference;
   a point that fails to compile or computes something else is recorded with why and
   never chosen. Compiling stops starting new points once ``budget`` seconds have gone.
3. The compiled points are timed interleaved: each round calls every one once, in
   turn, ``repeat`` rounds (so a slow phase of a noisy machine slows all alike), after
   one warm-up call each. Each point gets its median, its fastest and slowest call,
   and its speed-up over the baseline's median.

:mod:`polyc.tuner.results` writes the points as JSON and CSV, plots them and saves the
best point's options and its trace (:func:`polyc.trace.trace_of`), which
``polyc compile --trace-in`` / ``polyc cc --trace-in`` (or ``polyc.Trace.load(path)
.compiled(nest)``) compile again.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from polyc.errors import PolycError
from polyc.trace import trace_of
from polyc.tuner.targets import Target

BASELINE = "original"


@dataclass
class Point:
    label: str
    options: dict[str, Any]
    compile_s: float | None = None
    error: str | None = None  # did not compile, or computed something else
    times: list[float] = field(default_factory=list)
    # the best point's trace (polyc.trace.trace_of its compile), as JSON
    trace: dict[str, Any] | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None

    def row(self, baseline: float | None) -> dict[str, Any]:
        median = self.median
        return {"label": self.label, "options": self.options, "compile_s": self.compile_s,
                "median_s": median, "min_s": min(self.times) if self.times else None,
                "max_s": max(self.times) if self.times else None, "runs": len(self.times),
                "speedup": baseline / median if baseline and median else None,
                "error": self.error}


def points(target: Target, sizes: tuple[int, ...] | None = None) -> list[Point]:
    """The strategies tried on ``target``, the baseline (the loops as written) first:
    for loop nests the schedulers (Pluto, isl) tiled or not, Pluto's tiles without
    diamonds (parallelograms where it would make diamonds), with second-level tiles
    (``tile2``) and without the contraction recipe, Pluto's tiles at each size of
    ``sizes`` (every band member), and the cost model's choice; for models the
    fusion policies tiled or not and smart fusion at each tile size."""
    sizes = target.sizes if sizes is None else sizes
    if target.kind == "onnx":
        found = [Point(BASELINE, {"scheduler": "original", "fuse": "none", "tile": False})]
        found += [Point(f"{fuse}" + ("" if tile else ", untiled"),
                        {"fuse": fuse, "tile": tile})
                  for fuse in ("smart", "max", "none") for tile in (True, False)]
        found += [Point(f"smart, tiles {size}", {"fuse": "smart", "tile_size": size})
                  for size in sizes]
        return found
    found = [Point(BASELINE, {"scheduler": "original", "tile": False}),
             Point("pluto, untiled", {"scheduler": "pluto", "tile": False}),
             Point("pluto", {"scheduler": "pluto", "tile": True}),
             Point("pluto, no diamonds", {"scheduler": "pluto", "tile": True,
                                          "without": ["diamond"]}),
             Point("pluto, second-level tiles", {"scheduler": "pluto", "tile": True,
                                                 "tile2": True}),
             Point("pluto, no contraction recipe", {"scheduler": "pluto", "tile": True,
                                                    "without": ["recipe"]}),
             Point("isl", {"scheduler": "isl", "tile": True}),
             Point("cost model", {"autoselect": "model"})]
    found += [Point(f"pluto, tiles {size}", {"scheduler": "pluto", "tile": True,
                                             "tile_size": size}) for size in sizes]
    return found


def tune(target: Target, *, sizes: tuple[int, ...] | None = None, search: str = "grid",
         count: int | None = None, seed: int = 0, budget: float | None = None,
         repeat: int = 5, progress: bool | None = None,
         strategies: list[Point] | None = None) -> list[Point]:
    """Every point of the search compiled, checked and timed (see the module's
    docstring); the baseline first. ``strategies`` replaces :func:`points`' (the
    baseline is put first unless one is given)."""
    if search not in ("grid", "random"):
        raise PolycError(f"search is grid or random, got {search!r}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise PolycError(f"repeat must be a positive int, got {repeat!r}")
    chosen = points(target, sizes)
    if strategies is not None:
        given = [Point(p.label, dict(p.options)) for p in strategies]
        chosen = given if any(p.label == BASELINE for p in given) else [chosen[0], *given]
    if search == "random":
        rest = chosen[1:]
        random.Random(seed).shuffle(rest)
        chosen = [chosen[0], *rest[:max(0, (count or len(rest)) - 1)]]
    elif count is not None:
        chosen = chosen[:max(1, count)]
    show = sys.stderr.isatty() if progress is None else progress
    runnable = _compiled(target, chosen, budget, show)
    _timed(target, chosen, runnable, repeat, show)
    winner = best(chosen)
    if winner is not None:  # (its trace only: a schedule's text costs time)
        winner.trace = trace_of(runnable[winner.label].compilation).to_json()
    return chosen


def best(chosen: list[Point]) -> Point | None:
    """The point of the smallest median among the correct ones."""
    timed = [p for p in chosen if p.error is None and p.times]
    return min(timed, key=lambda p: p.median) if timed else None


def _compiled(target: Target, chosen: list[Point], budget: float | None, show: bool
              ) -> dict[str, Any]:
    """Compile and check each point (until the budget is spent): the runnable ones."""
    from rich.progress import Progress
    runnable, start = {}, time.perf_counter()
    with Progress(disable=not show, transient=True) as bar:
        task = bar.add_task("compile and check", total=len(chosen))
        for point in chosen:
            bar.update(task, description=f"compile {point.label}")
            if budget is not None and time.perf_counter() - start > budget \
                    and point.label != BASELINE:
                point.error = f"not tried: the budget of {budget:g} s was spent"
            else:
                runnable_ = _compile_one(target, point)
                if runnable_ is not None:
                    runnable[point.label] = runnable_
            bar.advance(task)
    return runnable


def _compile_one(target: Target, point: Point):
    begin = time.perf_counter()
    try:
        compiled = target.compile(point.options)
        point.compile_s = time.perf_counter() - begin
        wrong = target.check(compiled.run(target.inputs))
    except PolycError as error:
        point.error = f"{type(error).__name__}: {str(error).splitlines()[0]}"
        return None
    if wrong is not None:
        point.error = f"wrong result: {wrong}"
        return None
    return compiled


def _timed(target: Target, chosen: list[Point], runnable: Mapping[str, Any], repeat: int,
           show: bool) -> None:
    """Interleaved rounds of one call of each runnable point; each point gets its
    samples."""
    from rich.progress import Progress
    samples: dict[str, list[float]] = {label: [] for label in runnable}
    for compiled in runnable.values():
        compiled.run(target.inputs)  # warm-up
    with Progress(disable=not show, transient=True) as bar:
        task = bar.add_task("time (interleaved rounds)", total=repeat)
        for _ in range(repeat):
            for label, compiled in runnable.items():
                begin = time.perf_counter()
                compiled.run(target.inputs)
                samples[label].append(time.perf_counter() - begin)
            bar.advance(task)
    for point in chosen:
        point.times = samples.get(point.label, [])
