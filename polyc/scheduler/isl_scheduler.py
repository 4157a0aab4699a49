"""isl's own scheduler (``isl_schedule_constraints_compute_schedule``) as a baseline,
and the original program order (``scheduler="original"``) for comparison and debugging.
"""

from __future__ import annotations

import islpy as isl

from polyc.config import SYSTEMS, log_section
from polyc.errors import PolycError
from polyc.islutil import OverBudget, budget
from polyc.scheduler.base import group_dependences, group_domain, register
from polyc.scop.model import Scop

# isl operations for one group's schedule (some 30 s); past them the group keeps its
# original order, which is legal by definition.
OPERATIONS = 100_000_000


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
    if scop.context is not None:
        constraints = constraints.set_context(scop.context)
    try:
        with budget(scop.ctx, OPERATIONS, "isl's scheduler"):
            schedule = constraints.compute_schedule()
    except OverBudget as err:
        schedule, _ = original_schedule(scop, group)
        return schedule, (f"{err}: original order of {len(group)} statements",)
    except isl.Error as err:
        raise PolycError(f"isl's scheduler failed on {', '.join(group)}: {err}") from err
    return schedule, (f"isl compute_schedule over {len(group)} statements",)


@register("original")
def original_schedule(scop: Scop, group: tuple[str, ...], policy: str = "smart"):
    """The original program order (``Scop.order``) of the group's statements: textual
    order, loops shared as the program shares them."""
    schedule = scop.order.intersect_domain(group_domain(scop, group))
    return schedule, (f"original order of {len(group)} statements",)
