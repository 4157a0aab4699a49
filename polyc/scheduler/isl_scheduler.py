"""isl's own scheduler (``isl_schedule_constraints_compute_schedule``) as a baseline,
and the original program order (``scheduler="original"``) for comparison and debugging.
"""

from __future__ import annotations

import islpy as isl

from polyc.config import SYSTEMS, log_section
from polyc.islutil import OverBudget, budget, forked
from polyc.scheduler.base import group_dependences, group_domain, register
from polyc.scop.model import Scop

# isl operations for one group's schedule (some 30 s). isl counts few of the
# operations of its scheduler's LP solver: a random nest's two statements with
# parameters ran past 120 s within 2e7, random graphs' groups of 5 and 15 statements
# past 90 and 300 s. A group of two statements or more is therefore scheduled in a
# forked child given SECONDS (a fork costs 10-30 ms); a single statement, whose
# schedule isl finds at once, in process within OPERATIONS. Past either limit, or when
# isl fails, the group keeps its original order, which is legal by definition.
OPERATIONS = 100_000_000
SECONDS = 10.0

# isl can fail under the parameter context where it succeeds without ("unable to carry
# dependences" with N >= 1 when a dependence's distance is N - 1, found by the program
# fuzzer); a schedule legal for every parameter value is legal in the context.
WITHOUT_CONTEXT = "isl's scheduler failed with the parameter context, not without it"


@register("isl")
def isl_schedule(scop: Scop, group: tuple[str, ...], policy: str = "smart"):
    """Validity, coincidence and proximity on every dependence of the group (isl fuses
    as it sees fit: the policy only shapes the groups)."""
    domain = group_domain(scop, group)
    deps = group_dependences(scop, domain)
    log_section(SYSTEMS, f"isl scheduler constraints for {', '.join(group)}",
                lambda: f"domain: {domain}\nvalidity/coincidence/proximity: {deps}")
    constraints = (isl.ScheduleConstraints.on_domain(domain)
                   .set_validity(deps).set_coincidence(deps).set_proximity(deps))
    notes = [f"isl compute_schedule over {len(group)} statements"]
    try:
        if len(group) == 1:
            with budget(scop.ctx, OPERATIONS, "isl's scheduler"):
                schedule, note = _computed(constraints, scop.context)
        else:
            schedule, note = _computed_apart(constraints, scop.context, scop.ctx)
    except (OverBudget, isl.Error) as err:
        schedule, _ = original_schedule(scop, group)
        return schedule, (f"{_first_line(err)}: original order of {len(group)} statements",)
    return schedule, tuple(notes + ([note] if note else []))


def _computed(constraints: isl.ScheduleConstraints, context: isl.Set | None
              ) -> tuple[isl.Schedule, str]:
    """isl's schedule, under ``context`` if it can (else a note that it could not)."""
    if context is None:
        return constraints.compute_schedule(), ""
    try:
        return constraints.set_context(context).compute_schedule(), ""
    except isl.Error:
        return constraints.compute_schedule(), WITHOUT_CONTEXT


def _computed_apart(constraints: isl.ScheduleConstraints, context: isl.Set | None,
                    ctx: isl.Context) -> tuple[isl.Schedule, str]:
    """:func:`_computed` in a forked child given SECONDS; OverBudget past them or when
    the child fails."""
    def compute() -> str:
        schedule, note = _computed(constraints, context)
        return f"{note}\n{schedule}"

    text = forked(compute, SECONDS)
    if text is None:
        raise OverBudget(f"isl's scheduler failed or took over {SECONDS:g} s")
    note, schedule = text.split("\n", 1)
    return isl.Schedule.read_from_str(ctx, schedule), note


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0]


@register("original")
def original_schedule(scop: Scop, group: tuple[str, ...], policy: str = "smart"):
    """The original program order (``Scop.order``) of the group's statements: textual
    order, loops shared as the program shares them."""
    schedule = scop.order.intersect_domain(group_domain(scop, group))
    return schedule, (f"original order of {len(group)} statements",)
