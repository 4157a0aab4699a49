"""isl's own scheduler (``isl_schedule_constraints_compute_schedule``) as a baseline,
and the original program order (``scheduler="original"``) for comparison and debugging.
"""

from __future__ import annotations

import islpy as isl

from polyc import islserver
from polyc.config import SYSTEMS, log_section
from polyc.scheduler.base import group_dependences, group_domain, register
from polyc.scop.model import Scop

# isl counts few of the operations of its scheduler's LP solver against a context's
# budget: a random nest's two statements with parameters ran past 120 s within 2e7
# operations, random graphs' groups of 5 and 15 statements past 90 and 300 s, and one
# statement of a random 4-deep nest (program fuzzer seeds 2901, 2990) for minutes. The
# schedule is therefore computed in the isl server's child (:mod:`polyc.islserver`),
# given SECONDS; past them, or when isl fails, the group keeps its original order,
# which is legal by definition.
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
    context = "" if scop.context is None else str(scop.context)
    try:
        note, schedule = islserver.call(computed, [str(constraints), context],
                                        SECONDS).split("\n", 1)
    except islserver.Unanswered as why:
        schedule, _ = original_schedule(scop, group)
        return schedule, (f"isl's scheduler {why}: original order of {len(group)} "
                          "statements",)
    schedule = isl.Schedule.read_from_str(scop.ctx, schedule)
    return schedule, tuple(notes + ([note] if note else []))


def computed(ctx: isl.Context, constraints: str, context: str) -> str:
    """isl's schedule for schedule constraints given as text, under the parameter
    ``context`` (text, or empty) if it can: a first line saying if it could not, then
    the schedule's text (for the isl server's child)."""
    constraints = isl.ScheduleConstraints.read_from_str(ctx, constraints)
    if context:
        try:
            bounded = constraints.set_context(isl.Set.read_from_str(ctx, context))
            return f"\n{bounded.compute_schedule()}"
        except isl.Error:
            pass
    return f"{WITHOUT_CONTEXT if context else ''}\n{constraints.compute_schedule()}"


@register("original")
def original_schedule(scop: Scop, group: tuple[str, ...], policy: str = "smart"):
    """The original program order (``Scop.order``) of the group's statements: textual
    order, loops shared as the program shares them."""
    schedule = scop.order.intersect_domain(group_domain(scop, group))
    return schedule, (f"original order of {len(group)} statements",)
