"""The Pluto scheduler finds Pluto's published transformations.

SCoPs are written here as isl literals (statement domains, accesses, original order);
schedules are compared as isl maps, and printed in Pluto notation as golden text.
"""

import time

import islpy as isl
import pytest

from polyc.frontend.core import Const
from polyc.fusion.groups import FusionGroups, fuse
from polyc.notation import pluto_notation
from polyc.scheduler import check_legality, schedule
from polyc.scop.build import build_scop
from polyc.scop.dependences import compute_dependences
from polyc.scop.model import Access, Array, Scop, Statement

from core_graphs import matmul_relu


def literal_scop(statements, order, arrays):
    """A SCoP from isl literals: (name, domain, write, [reads]) and the original order."""
    ctx = isl.Context()
    built = []
    for k, (name, domain, write, reads) in enumerate(statements):
        dom = isl.Set.read_from_str(ctx, domain)
        def access(text, dom=dom):
            relation = isl.Map.read_from_str(ctx, text).intersect_domain(dom)
            return Access(relation.get_tuple_name(isl.dim_type.out), relation)
        built.append(Statement(name, dom, access(write), tuple(access(r) for r in reads),
                               Const(0.0), k))
    order_map = isl.UnionMap.read_from_str(ctx, order)
    domain = isl.UnionSet.empty(isl.Space.params_alloc(ctx, 0))
    for statement in built:
        domain = domain.union(isl.UnionSet.from_set(statement.domain))
    schedule_tree = isl.Schedule.from_domain(domain).insert_partial_schedule(
        isl.MultiUnionPwAff.from_union_map(order_map.intersect_domain(domain)))
    arrays = tuple(Array(name, name, (), "temp") for name in arrays)
    return compute_dependences(Scop(ctx, arrays, tuple(built), schedule_tree, {}))


def pluto(scop, policy="max"):
    result = schedule(scop, fuse(scop, policy="max"), scheduler="pluto")
    check_legality(scop, result.schedule)
    return result


def jacobi_1d_single():
    return literal_scop(
        [("S", "[T, N] -> { S[t, i] : 0 <= t < T and 1 <= i < N - 1 }",
          "[T, N] -> { S[t, i] -> A[t + 1, i] }",
          ["[T, N] -> { S[t, i] -> A[t, i - 1] }", "[T, N] -> { S[t, i] -> A[t, i] }",
           "[T, N] -> { S[t, i] -> A[t, i + 1] }"])],
        "[T, N] -> { S[t, i] -> [t, i] }", ["A"])


def jacobi_1d_imperfect():
    dom = "0 <= t < T and 2 <= i < N - 1"
    return literal_scop(
        [("S1", "[T, N] -> { S1[t, i] : " + dom + " }", "[T, N] -> { S1[t, i] -> B[i] }",
          ["[T, N] -> { S1[t, i] -> A[i - 1] }", "[T, N] -> { S1[t, i] -> A[i] }",
           "[T, N] -> { S1[t, i] -> A[i + 1] }"]),
         ("S2", "[T, N] -> { S2[t, j] : 0 <= t < T and 2 <= j < N - 1 }",
          "[T, N] -> { S2[t, j] -> A[j] }", ["[T, N] -> { S2[t, j] -> B[j] }"])],
        "[T, N] -> { S1[t, i] -> [t, 0, i]; S2[t, j] -> [t, 1, j] }", ["A", "B"])


def test_time_stencil_is_skewed_into_a_permutable_band():
    scop = jacobi_1d_single()
    result = pluto(scop)
    assert pluto_notation(result.schedule, scop) == "T(S): (t, t + i)"
    expected = isl.UnionMap.read_from_str(
        scop.ctx, "[T, N] -> { S[t, i] -> [t, t + i] : 0 <= t < T and 1 <= i < N - 1 }")
    assert result.schedule.get_map().is_equal(expected)
    assert "band [ss]" in result.decisions[0]  # both rows carry the stencil's dependences


def test_jacobi_1d_imperfect_fuses_with_skew_and_shift():
    scop = jacobi_1d_imperfect()
    result = pluto(scop)
    assert pluto_notation(result.schedule, scop).splitlines() == [
        "T(S1): (t, 2*t + i, 0)", "T(S2): (t, 2*t + j + 1, 1)"]


@pytest.mark.parametrize("policy", ["none", "smart", "max"])
def test_matmul_keeps_i_j_k_and_marks_i_j_parallel(policy):
    scop = compute_dependences(build_scop(matmul_relu(m=8, k=6, n=5)))
    result = schedule(scop, fuse(scop, policy=policy), scheduler="pluto")
    check_legality(scop, result.schedule)
    update = [d for d in result.decisions if "S1_matmul_update: (i0, i1, i2)" in d]
    assert update and "[pps]" in update[0]


def test_policies_differ_on_a_producer_consumer_pair():
    """Pluto's maxfuse on one group fuses the Relu into the product's loops, nofuse
    distributes them. The fusion policy max keeps a contraction's group apart and has
    it scheduled as under smart (its recipe needs the product's band alone), so its
    Relu is distributed too."""
    scop = compute_dependences(build_scop(matmul_relu(m=8, k=6, n=5)))
    one_group = FusionGroups("max", (tuple(s.name for s in scop.statements),))
    fused = schedule(scop, one_group, scheduler="pluto")
    distributed = schedule(scop, fuse(scop, policy="none"), scheduler="pluto")
    as_max = schedule(scop, fuse(scop, policy="max"), scheduler="pluto")
    assert pluto_notation(fused.schedule, scop).splitlines()[2] == "T(S2_relu): (i0, i1, 5, 2)"
    for result in (distributed, as_max):
        assert pluto_notation(result.schedule, scop).splitlines()[2] == \
            "T(S2_relu): (2, i0, i1, 0)"


def _slow_farkas_nest():
    """A random nest (found by a fuzzer) with one 8-D dependence of 20 constraints whose
    Farkas coefficients isl took 63-80 s to enumerate."""
    from polyc.scop.nest import LoopNest

    nest = LoopNest("f", params=["N", "M", "K"], context="{ : N >= 6 and M >= 5 and K >= 1 }")
    s0, a, b = nest.array("s0", (1,)), nest.array("A", (7,)), nest.array("B", (4, 5, 5))
    nest.statement("S1", "{ [i, j, k, l] : 0 <= i < M - 1 and i <= j < i + K and "
                         "1 <= k < N - 1 and 0 <= l < -k + K }", write=s0["0"], expr=a["i"] / 7.0)
    nest.statement("S2", "{ [i, j, k, l] : 0 <= i < M and 1 <= j < M and 0 <= k < K - 1 and "
                         "0 <= l < -j + K }", write=a["-i + N - 1"],
                   expr=-(0.5 * (a["-i + N"] + b["j - 1", "M - 1", "i"])))
    return nest


def test_a_dependence_too_costly_for_farkas_falls_back_to_isl():
    """Its coefficients run in a child process with COEFFICIENT_SECONDS to answer; the
    group then takes isl's schedule (said in the decisions), and the program computes
    what the original order does, bit for bit."""
    import time

    import numpy as np

    from polyc.scheduler import pluto

    nest, params = _slow_farkas_nest(), {"N": 6, "M": 5, "K": 9}
    start = time.perf_counter()
    compiled = nest.compile(params=params, scheduler="pluto", fast_math=False)
    assert time.perf_counter() - start < 10 * pluto.COEFFICIENT_SECONDS
    assert any("pluto fell back to isl's scheduler for S1, S2: the Farkas coefficients of a "
               "dependence with 20 constraints took over" in d
               for d in compiled.schedule.decisions)
    rng = np.random.default_rng(3)
    arrays = {"A": rng.standard_normal(7).astype(np.float32),
              "B": rng.standard_normal((4, 5, 5)).astype(np.float32)}
    original = nest.compile(params=params, scheduler="original", fast_math=False)
    for name, value in original.run(arrays).items():
        np.testing.assert_array_equal(compiled.run(arrays)[name], value)


def test_dependence_through_a_reshape_has_its_redundant_floors_dropped():
    """A grouped, dilated, strided Conv read through a Reshape: a dependence between its
    update and the copy has 22 constraints and 3 redundant existential variables (floor
    and mod) and no parameters; its Farkas coefficients ran in process for minutes (the
    graph fuzzer's seed 298). isl's detect_equalities drops them: Pluto schedules it."""
    import numpy as np
    from onnx import helper

    import polyc

    from onnx_helpers import make_model

    w = np.random.default_rng(0).uniform(-1, 1, (18, 1, 2, 1)).astype(np.float32)
    model = make_model([helper.make_node("Conv", ["x", "w"], ["c"], group=6, dilations=[2, 2],
                                         pads=[1, 0, 1, 0], strides=[2, 1]),
                        helper.make_node("Reshape", ["c", "s"], ["y"])],
                       [("x", (1, 6, 8, 4))], ["y"], opset=17,
                       initializers=[("w", w), ("s", np.array([-1, 3, 2], np.int64))])
    start = time.perf_counter()
    compiled = polyc.compile(model, tile=False, threads=1)
    assert time.perf_counter() - start < 30
    assert not [d for d in compiled.schedule.decisions if "fell back" in d]


def test_coefficients_from_the_child_process_equal_the_direct_ones(monkeypatch):
    """The isl server's path returns the same sets as computing in process (isl text
    round trip): with every request computed in process instead, the schedule of a
    kernel is the same."""
    from polyc import islserver
    from polyc.scop.polybench import KERNELS

    kernel = KERNELS["jacobi-1d"]
    served = kernel.build().compile(params=kernel.params).inspect()
    ctx = isl.Context()
    monkeypatch.setattr(islserver, "call", lambda function, texts, seconds:
                        function(ctx, *texts))
    assert kernel.build().compile(params=kernel.params).inspect() == served


def test_merged_dependences_are_split_into_the_analysis_pieces_for_farkas(monkeypatch):
    """heat-3d: isl merges the seven reads' dependences between its two statements into
    polyhedra of 25 or more constraints, whose Farkas duals took 0.4-0.7 s each; Pluto
    takes the analysis' pieces instead (more polyhedra, each with fewer constraints:
    mostly equalities) and finds the same schedule."""
    from polyc.islutil import items, union_maps
    from polyc.scheduler import pluto
    from polyc.scop.polybench import KERNELS
    scop = compute_dependences(KERNELS["heat-3d"].build().scop())
    deps = scop.dependences
    assert deps.pieces.is_equal(deps.all)  # the same relation...
    merged = sum(m.n_basic_map() for m in union_maps(deps.all))
    assert sum(m.n_basic_map() for m in union_maps(deps.pieces)) > merged  # ...in pieces
    asked = []
    real = pluto._edges

    def edges(found, pieces=None):
        result = real(found, pieces)
        asked.append(([e.relation.n_constraint() for e in result],
                      max(b.n_constraint() for m in union_maps(found)
                          for b in items(m.get_basic_map_list()))))
        return result

    monkeypatch.setattr(pluto, "_edges", edges)
    groups = fuse(scop, policy="smart")
    split = schedule(scop, groups, scheduler="pluto")
    (constraints, largest), = asked
    assert largest >= pluto.MERGED_CONSTRAINTS and max(constraints) < largest
    assert len(constraints) > merged
    monkeypatch.setattr(pluto, "MERGED_CONSTRAINTS", 10 ** 9)
    whole = schedule(scop, groups, scheduler="pluto")
    assert asked[1][0] and max(asked[1][0]) == asked[1][1]  # merged polyhedra this time
    assert split.schedule.get_map().is_equal(whole.schedule.get_map())
    check_legality(scop, split.schedule)
