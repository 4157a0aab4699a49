"""Schedulers (isl's baseline, the original order; Pluto's comes next) and legality."""

from polyc.scheduler import isl_scheduler  # noqa: F401  (registers "isl", "original")
from polyc.scheduler.base import SCHEDULERS, ScheduleResult, schedule  # noqa: F401
from polyc.scheduler.legality import check_legality  # noqa: F401
