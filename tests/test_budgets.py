"""isl work that can blow up runs under an operation budget with a fallback that stays
legal, said in the schedule's decisions: dependence analysis (memory-based dependences),
isl's scheduler (the original order), AST generation (the untiled schedule's loops, then
a ResourceError). Budgets are made tiny here to force each fallback; every answer is
checked against numpy and every schedule by the legality checker (``check=True``)."""

import numpy as np
import pytest

from polyc import islserver
from polyc.errors import ResourceError
from polyc.islutil import OverBudget
from polyc.scop.dependences import compute_dependences
from polyc.scop.nest import LoopNest

N, T = 37, 5


def smoothing(parametric: bool = True) -> LoopNest:
    """T sweeps of a 3-point average from A into B, then B copied back into A: flow,
    anti and output dependences across sweeps. With ``parametric`` False the sizes are
    numbers in the domains, not parameters."""
    nest = LoopNest("smooth", params=["N", "T"] if parametric else [])
    n, t = ("N", "T") if parametric else (N, T)
    a, b = nest.array("A", (n,)), nest.array("B", (n,))
    sweep = f"{{ [t, i] : 0 <= t < {t} and 1 <= i < {n} - 1 }}"
    nest.statement("S1", sweep, write=b["i"], expr=(a["i - 1"] + a["i"] + a["i + 1"]) * 0.25,
                   schedule="{ [t, i] -> [t, 0, i] }")
    nest.statement("S2", sweep, write=a["i"], expr=b["i"], schedule="{ [t, i] -> [t, 1, i] }")
    return nest


def expected(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = a.copy(), np.zeros_like(a)
    for _ in range(T):
        b[1:-1] = (a[:-2] + a[1:-1] + a[2:]) * np.float32(0.25)
        a[1:-1] = b[1:-1]
    return a, b


def too_slow(monkeypatch, name: str) -> None:
    """The isl server's child takes too long on requests for the function ``name`` (a
    zero time limit would race with a fast answer; the child's own timeout is tested in
    test_islserver.py)."""
    real = islserver.call

    def call(function, texts, seconds):
        if function.__name__ == name:
            raise islserver.Unanswered(f"took over {seconds:g} s")
        return real(function, texts, seconds)

    monkeypatch.setattr(islserver, "call", call)


def check(compiled) -> None:
    a = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    want_a, want_b = expected(a)
    got = compiled.run({"A": a})
    np.testing.assert_allclose(got["A"], want_a, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["B"], want_b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("parametric", [False, True])
def test_dependences_over_budget_are_memory_based_and_cover_the_exact_ones(monkeypatch,
                                                                           parametric):
    """In process past its operations; with parameters (which isl hardly counts) in the
    isl server's child, past its seconds."""
    scop = smoothing(parametric).scop()
    exact = compute_dependences(scop).dependences
    if parametric:
        too_slow(monkeypatch, "dataflow")
    else:
        monkeypatch.setattr("polyc.scop.dependences.OPERATIONS", 1)
    approximate = compute_dependences(scop).dependences
    assert exact.exact and not approximate.exact
    for kind in ("raw", "war", "waw"):
        assert getattr(exact, kind).is_subset(getattr(approximate, kind))
    assert not approximate.raw.is_subset(exact.raw)  # earlier writes are not hidden
    params = {"N": N, "T": T} if parametric else None
    for scheduler in ("pluto", "isl"):
        compiled = smoothing(parametric).compile(params=params, scheduler=scheduler)
        assert any(d.startswith("dependences: memory-based") for d in compiled.schedule.decisions)
        check(compiled)


def seidel() -> LoopNest:
    """One statement: T in-place sweeps A[i] = (A[i - 1] + A[i] + A[i + 1]) / 4."""
    nest = LoopNest("seidel")
    a = nest.array("A", (N,))
    nest.statement("S1", f"{{ [t, i] : 0 <= t < {T} and 1 <= i < {N} - 1 }}", write=a["i"],
                   expr=(a["i - 1"] + a["i"] + a["i + 1"]) * 0.25)
    return nest


def test_isl_scheduler_over_budget_keeps_the_original_order(monkeypatch):
    """isl's scheduler runs in the isl server's child (isl hardly counts its LP work);
    past its seconds the group keeps its original order, one statement or several."""
    monkeypatch.setattr("polyc.scheduler.isl_scheduler.SECONDS", 0.0)
    too_slow(monkeypatch, "computed")
    compiled = seidel().compile(scheduler="isl", fast_math=False)
    assert any("isl's scheduler took over 0 s: original order of 1 statements" in d
               for d in compiled.schedule.decisions)
    a = np.random.default_rng(1).standard_normal(N).astype(np.float32)
    want = a.copy()
    for _ in range(T):
        for i in range(1, N - 1):
            want[i] = (want[i - 1] + want[i] + want[i + 1]) * np.float32(0.25)
    np.testing.assert_array_equal(compiled.run({"A": a})["A"], want)
    for parametric in (False, True):
        compiled = smoothing(parametric).compile(
            params={"N": N, "T": T} if parametric else None, scheduler="isl")
        assert any("isl's scheduler took over 0 s: original order" in d
                   for d in compiled.schedule.decisions)
        check(compiled)


def test_ast_over_budget_generates_the_untiled_schedule(monkeypatch):
    """The tiled schedule's AST over budget: the untiled one's loops; both over budget:
    a ResourceError, not a hang."""
    import polyc.pipeline as pipeline

    real, calls = pipeline.build_ast, []

    def first_over_budget(scop, schedule, storage=None, **options):
        calls.append(schedule)
        if len(calls) == 1:
            raise OverBudget("AST generation over budget (1 isl operations)")
        return real(scop, schedule, storage, **options)

    monkeypatch.setattr(pipeline, "build_ast", first_over_budget)
    compiled = smoothing().compile(params={"N": N, "T": T}, threads=1)
    assert len(calls) == 2
    decisions = compiled.schedule.decisions
    assert "AST generation over budget (1 isl operations): loops of the untiled schedule" \
        in decisions and "tiling: off" in decisions
    check(compiled)

    monkeypatch.setattr("polyc.codegen.ast.OPERATIONS", 1)
    monkeypatch.setattr(pipeline, "build_ast", real)
    with pytest.raises(ResourceError, match=r"AST generation over budget .*, tiled or not"):
        smoothing().compile(params={"N": N, "T": T})


def test_a_large_pluto_ilp_runs_apart_and_falls_back_past_its_seconds(monkeypatch):
    """isl counts little of a large ILP's work (a random graph's 69 variables and 696
    constraints ran past 60 s): Pluto solves one in the isl server's child and falls
    back to isl's scheduler past LARGE_ILP_SECONDS; small ILPs stay in process."""
    monkeypatch.setattr("polyc.scheduler.pluto.LARGE_ILP", (0, 0))
    compiled = smoothing().compile(params={"N": N, "T": T})  # solved apart, in time
    assert not any("fell back" in d for d in compiled.schedule.decisions)
    check(compiled)
    monkeypatch.setattr("polyc.scheduler.pluto.LARGE_ILP_SECONDS", 0.0)
    too_slow(monkeypatch, "lexmin")
    compiled = smoothing().compile(params={"N": N, "T": T})
    assert any("took over 0 s" in d for d in compiled.schedule.decisions)
    check(compiled)
