"""Tiling: the schedule tree of the scheduler, rewritten for locality and vectors.

Today: rectangular tiling of permutable bands with a cache-derived tile size, and the
intra-tile order chosen for stride-1 innermost access (:mod:`polyc.tiling.rectangular`).
"""

from __future__ import annotations

import dataclasses

from polyc.errors import PolycError
from polyc.scheduler.base import ScheduleResult
from polyc.scop.model import Scop
from polyc.tiling.rectangular import tile_bands


def tile(scop: Scop, result: ScheduleResult, *, enabled: bool = True,
         size: int | None = None) -> ScheduleResult:
    """``result`` with its permutable bands tiled (``size`` per member, or from the
    host's cache sizes); ``enabled=False`` keeps the schedule as the scheduler left it."""
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise PolycError(f"tile_size must be a positive int, got {size!r}")
    if not enabled:
        return dataclasses.replace(result, decisions=result.decisions + ("tiling: off",))
    schedule, notes = tile_bands(scop, result.schedule, size)
    notes = notes or ["no permutable band of two or more loops"]
    return dataclasses.replace(result, schedule=schedule,
                               decisions=result.decisions + tuple(f"tiling: {n}" for n in notes))
