"""Tiling of permutable bands (rectangular, multi-level, register tiles, skewed).

Not implemented yet: the pass returns the schedule unchanged and records that, so the
pipeline has its place and later work only fills it in.
"""

from __future__ import annotations

import dataclasses

from polyc.scheduler.base import ScheduleResult
from polyc.scop.model import Scop


def tile(scop: Scop, result: ScheduleResult) -> ScheduleResult:
    """T(S) unchanged: no band is tiled yet."""
    del scop
    return dataclasses.replace(result, decisions=result.decisions + ("tiling: none",))
