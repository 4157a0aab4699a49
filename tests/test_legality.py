"""The legality checker accepts what the schedulers produce and names what it rejects."""

import islpy as isl
import pytest

from polyc.errors import IllegalScheduleError, PolycError
from polyc.fusion.groups import POLICIES, fuse
from polyc.notation import pluto_notation
from polyc.scheduler import check_legality, schedule
from polyc.scheduler.legality import Times, check_order, respects_order
from polyc.scop.build import build_scop
from polyc.scop.dependences import compute_dependences

from core_graphs import matmul_relu


@pytest.fixture
def scop():
    return compute_dependences(build_scop(matmul_relu(m=4, k=5, n=3)))


def _schedule_from_map(scop, text):
    """A flat schedule tree from a schedule map (a test-only way to write one)."""
    sched_map = isl.UnionMap.read_from_str(scop.ctx, text).intersect_domain(scop.domain)
    partial = isl.MultiUnionPwAff.from_union_map(sched_map)
    return isl.Schedule.from_domain(sched_map.domain()).insert_partial_schedule(partial)


@pytest.mark.parametrize("scheduler", ["pluto", "isl", "original"])
@pytest.mark.parametrize("policy", POLICIES)
def test_schedulers_produce_legal_schedules(scop, scheduler, policy):
    result = schedule(scop, fuse(scop, policy=policy), scheduler=scheduler)
    check_legality(scop, result.schedule)
    assert result.schedule.get_domain().is_equal(scop.domain)


def test_reversed_reduction_is_rejected_naming_the_dependence(scop):
    bad = _schedule_from_map(scop, (
        "{ S0_matmul_init[i, j] -> [0, i, j, 0]; S1_matmul_update[i, j, k] -> [1, i, j, -k];"
        " S2_relu[i, j] -> [2, i, j, 0] }"))
    with pytest.raises(IllegalScheduleError, match=r"S1_matmul_update -> S1_matmul_update"):
        check_legality(scop, bad)


def test_consumer_before_producer_is_rejected(scop):
    bad = _schedule_from_map(scop, (
        "{ S0_matmul_init[i, j] -> [1, i, j, 0]; S1_matmul_update[i, j, k] -> [2, i, j, k];"
        " S2_relu[i, j] -> [0, i, j, 0] }"))
    with pytest.raises(IllegalScheduleError, match=r"RAW dependence S1_matmul_update -> S2_relu"):
        check_legality(scop, bad)


@pytest.mark.parametrize("text, legal", [
    ("{ S0_matmul_init[i, j] -> [0, i, j, 0]; S1_matmul_update[i, j, k] -> [1, i, j, k];"
     " S2_relu[i, j] -> [2, i, j, 0] }", True),
    ("{ S0_matmul_init[i, j] -> [0, i, j, 0]; S1_matmul_update[i, j, k] -> [1, i, j, -k];"
     " S2_relu[i, j] -> [2, i, j, 0] }", False),  # a reversed reduction
    ("{ S0_matmul_init[i, j] -> [1, i, j, 0]; S1_matmul_update[i, j, k] -> [2, i, j, k];"
     " S2_relu[i, j] -> [0, i, j, 0] }", False),  # consumer first: ordered by the first dim
])
def test_respects_order_answers_what_check_order_raises_for(scop, text, legal):
    times = Times(_schedule_from_map(scop, text).get_map())
    assert respects_order(scop.dependences, times) == legal
    if legal:
        check_order(scop.dependences, times)
    else:
        with pytest.raises(IllegalScheduleError, match="is not respected"):
            check_order(scop.dependences, times)


def test_schedule_missing_a_statement_is_rejected(scop):
    partial = _schedule_from_map(scop, "{ S0_matmul_init[i, j] -> [0, i, j, 0] }")
    with pytest.raises(IllegalScheduleError, match="does not cover"):
        check_legality(scop, partial)


def test_isl_schedule_prints_in_pluto_notation(scop):
    result = schedule(scop, fuse(scop, policy="smart"), scheduler="isl")
    assert pluto_notation(result.schedule, scop).splitlines() == [
        "T(S0_matmul_init): (i0, i1, 0, 0)",
        "T(S1_matmul_update): (i0, i1, i2, 1)",
        "T(S2_relu): (i0, i1, 4, 2)",
    ]


def test_unknown_scheduler_and_policy_are_named(scop):
    with pytest.raises(PolycError, match="unknown scheduler 'magic'"):
        schedule(scop, fuse(scop), scheduler="magic")
    with pytest.raises(PolycError, match="unknown fusion policy 'some'"):
        fuse(scop, policy="some")


def test_dependences_checked_on_several_processes_name_the_violation(scop, monkeypatch):
    """Checked apart (polyc.workers), a violated dependence is named as in one process."""
    from polyc.scheduler import legality

    monkeypatch.setattr(legality, "PARALLEL_DEPENDENCES", 1)
    monkeypatch.setenv("POLYC_JOBS", "3")
    bad = _schedule_from_map(scop, (
        "{ S0_matmul_init[i, j] -> [0, i, j, 0]; S1_matmul_update[i, j, k] -> [1, i, j, -k];"
        " S2_relu[i, j] -> [2, i, j, 0] }"))
    with pytest.raises(IllegalScheduleError, match=r"S1_matmul_update -> S1_matmul_update"):
        check_legality(scop, bad)
    result = schedule(scop, fuse(scop, policy="smart"), scheduler="pluto")
    check_legality(scop, result.schedule)
