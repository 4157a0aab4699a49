"""isl's own scheduler (``isl_schedule_constraints_compute_schedule``) as a baseline,
and the original program order (``scheduler="original"``) for comparison and debugging.
"""

from __future__ import annotations

import islpy as isl

from polyc.config import SYSTEMS, log_section
from polyc.errors import PolycError
from polyc.scheduler.base import group_dependences, group_domain, register
from polyc.scop.model import Scop


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
        if scop.context is None:
            return constraints.compute_schedule(), tuple(notes)
        try:
            return constraints.set_context(scop.context).compute_schedule(), tuple(notes)
        except isl.Error:
            # isl can fail with the context where it succeeds without: "unable to carry
            # dependences" with N >= 1 when a dependence's distance is N - 1 (the fuzzer's
            # programs). A schedule legal for every parameter value is legal in the context.
            notes.append("isl's scheduler failed with the parameter context, not without it")
            return constraints.compute_schedule(), tuple(notes)
    except isl.Error as err:
        raise PolycError(f"isl's scheduler failed on {', '.join(group)}: {err}") from err


@register("original")
def original_schedule(scop: Scop, group: tuple[str, ...], policy: str = "smart"):
    """The original program order (``Scop.order``) of the group's statements: textual
    order, loops shared as the program shares them."""
    schedule = scop.order.intersect_domain(group_domain(scop, group))
    return schedule, (f"original order of {len(group)} statements",)
