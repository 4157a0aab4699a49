"""The scheduler interface: every scheduler (isl's, the original order, Pluto's)
maps a SCoP with dependences and fusion groups to an isl schedule tree plus a record
of what it decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import islpy as isl

from polyc import progress
from polyc.errors import PolycError
from polyc.fusion.groups import FusionGroups
from polyc.islutil import ordered, sequence, statement_names, union_of
from polyc.scop.model import Scop


@dataclass(frozen=True)
class ScheduleResult:
    """A schedule tree and the decisions that produced it (printable, replayable)."""

    scheduler: str
    schedule: isl.Schedule
    decisions: tuple[str, ...] = ()

    def __str__(self) -> str:
        from polyc.scheduler.notation import pluto_notation
        lines = [f"scheduler: {self.scheduler}"]
        lines += [f"  {d}" for d in self.decisions]
        return "\n".join(lines) + "\n" + pluto_notation(self.schedule)


# A group scheduler (scop, group, fusion policy) returns the schedule of one fusion
# group and its decisions.
GroupScheduler = Callable[..., tuple[isl.Schedule, tuple[str, ...]]]

SCHEDULERS: dict[str, GroupScheduler] = {}


def register(name: str):
    def decorate(fn: GroupScheduler) -> GroupScheduler:
        SCHEDULERS[name] = fn
        return fn
    return decorate


def schedule(scop: Scop, groups: FusionGroups, *, scheduler: str = "pluto") -> ScheduleResult:
    """Schedule each fusion group with ``scheduler``; groups run in sequence."""
    if scheduler not in SCHEDULERS:
        raise PolycError(f"unknown scheduler {scheduler!r}; choose one of "
                         f"{', '.join(sorted(SCHEDULERS))}")
    if scop.dependences is None:
        raise PolycError("dependences must be computed before scheduling")
    parts, decisions = [], []
    for k, group in enumerate(groups.groups):
        part, notes = SCHEDULERS[scheduler](scop, group, groups.policy)
        parts.append(part)
        progress.step(k + 1, len(groups.groups))
        decisions += [f"G{k}: {note}" for note in notes]
    if not scop.dependences.exact:
        decisions.insert(0, "dependences: memory-based (dependence analysis over its budget, "
                            "scop.dependences.OPERATIONS)")
    if not parts:
        return ScheduleResult(scheduler, scop.order, tuple(decisions))
    return ScheduleResult(scheduler, ordered(sequence(parts)), tuple(decisions))


def group_domain(scop: Scop, group: tuple[str, ...]) -> isl.UnionSet:
    return union_of(scop.ctx, (scop.statement(name).domain for name in group))


def group_dependences(scop: Scop, domain: isl.UnionSet) -> isl.UnionMap:
    """All dependences with both ends inside ``domain``."""
    among = scop.dependences.among(statement_names(domain))
    return among.intersect_domain(domain).intersect_range(domain)
