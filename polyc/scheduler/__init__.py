"""Schedulers (Pluto-style, isl's baseline, the original order) and legality."""

from polyc.scheduler import isl_scheduler, pluto  # noqa: F401  (register the schedulers)
from polyc.scheduler.base import SCHEDULERS, ScheduleResult, schedule  # noqa: F401
from polyc.scheduler.legality import check_legality  # noqa: F401
