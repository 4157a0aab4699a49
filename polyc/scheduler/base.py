"""The scheduler interface: every scheduler (isl's, the original order, Pluto's)
maps a SCoP with dependences and fusion groups to an isl schedule tree plus a record
of what it decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import islpy as isl

from polyc import progress, workers
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
        from polyc.notation import pluto_notation
        lines = [f"scheduler: {self.scheduler}"]
        lines += [f"  {d}" for d in self.decisions]
        return "\n".join(lines) + "\n" + pluto_notation(self.schedule)


# A group scheduler (scop, group, fusion policy) returns the schedule of one fusion
# group and its decisions.
GroupScheduler = Callable[..., tuple[isl.Schedule, tuple[str, ...]]]

SCHEDULERS: dict[str, GroupScheduler] = {}
# Groups per process at least when groups are scheduled on several (a fork and the
# schedules' text cost some milliseconds)
PARALLEL_GROUPS = 8


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
    for k, (part, notes) in enumerate(_schedule_groups(scop, groups, SCHEDULERS[scheduler])):
        parts.append(part)
        decisions += [f"G{k}: {note}" for note in notes]
    if not scop.dependences.exact:
        decisions.insert(0, "dependences: memory-based (dependence analysis over its budget, "
                            "scop.dependences.OPERATIONS)")
    if not parts:
        return ScheduleResult(scheduler, scop.order, tuple(decisions))
    return ScheduleResult(scheduler, ordered(sequence(parts)), tuple(decisions))


def _schedule_groups(scop: Scop, groups: FusionGroups, scheduler: GroupScheduler
                     ) -> list[tuple[isl.Schedule, tuple[str, ...]]]:
    """Each group's schedule and decisions: in this process, or with several jobs and
    at least PARALLEL_GROUPS groups, the groups dealt out to forked processes
    (:mod:`polyc.workers`; densenet121's 363 groups: 8.75 -> 4.56 s on 2 cores), whose
    schedules come back as text."""
    count = len(groups.groups)
    jobs = min(workers.jobs(), count // PARALLEL_GROUPS)
    if jobs < 2:
        found = []
        for k, group in enumerate(groups.groups):
            found.append(scheduler(scop, group, groups.policy_of(k)))
            progress.step(k + 1, count)
        return found
    shares = workers.deal([len(group) ** 2 for group in groups.groups], jobs)

    def share(indices: list[int], report: bool):
        def run():
            texts = []
            for done, k in enumerate(indices, 1):
                part, notes = scheduler(scop, groups.groups[k], groups.policy_of(k))
                texts.append((k, part if report else str(part), notes))
                if report:  # this process only: the others may not touch the terminal
                    progress.step(min(done * jobs, count), count)  # about as far as they
            return texts
        return run

    found = {}
    for answers in workers.run_all([share(s, k == 0) for k, s in enumerate(shares)],
                                   "scheduling"):
        for k, part, notes in answers:
            found[k] = (part if isinstance(part, isl.Schedule)
                        else isl.Schedule.read_from_str(scop.ctx, part), notes)
    return [found[k] for k in range(count)]


def group_domain(scop: Scop, group: tuple[str, ...]) -> isl.UnionSet:
    return union_of(scop.ctx, (scop.statement(name).domain for name in group))


def group_dependences(scop: Scop, domain: isl.UnionSet, *, pieces: bool = False
                      ) -> isl.UnionMap:
    """All dependences with both ends inside ``domain`` (``pieces``: as the analysis
    gave them, :attr:`polyc.scop.model.Dependences.pieces`)."""
    among = scop.dependences.among(statement_names(domain), pieces=pieces)
    return among.intersect_domain(domain).intersect_range(domain)
