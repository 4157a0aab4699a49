"""Loop nests written directly (polyc.scop.nest): SCoPs, dependences and compiled results.

Each kernel is compiled with the "isl" and "original" schedulers and compared on
seeded random data with a plain Python/numpy loop implementation of the same program:
``rtol=1e-5, atol=1e-6`` where float sums may be reassociated or contracted (FMA),
exact equality where no arithmetic can be reordered.
"""

import islpy as isl
import numpy as np
import pytest

from polyc.errors import InputError, NestError, NotAffineError, ShapeError
from polyc.scheduler.notation import pluto_notation
from polyc.scop.dependences import compute_dependences
from polyc.scop.nest import LoopNest

SCHEDULERS = ["pluto", "isl", "original"]
RTOL, ATOL = 1e-5, 1e-6


def _random(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _umap(scop, text):
    return isl.UnionMap.read_from_str(scop.ctx, text)


# -- kernels ---------------------------------------------------------------------------

def matmul() -> LoopNest:
    nest = LoopNest("matmul", params=["M", "N", "K"])
    A, B, C = nest.array("A", ("M", "K")), nest.array("B", ("K", "N")), nest.array("C", ("M", "N"))
    nest.statement("S0", "{ [i, j] : 0 <= i < M and 0 <= j < N }", write=C["i", "j"], expr=0.0)
    nest.statement("S1", "{ [i, j, k] : 0 <= i < M and 0 <= j < N and 0 <= k < K }",
                   write=C["i", "j"], expr=C["i", "j"] + A["i", "k"] * B["k", "j"])
    return nest


def jacobi1d() -> LoopNest:
    """Imperfect: S1 and S2 share the t loop, their i loops one after the other."""
    nest = LoopNest("jacobi1d", params=["T", "N"])
    A, B = nest.array("A", ("N",)), nest.array("B", ("N",))
    domain = "{ [t, i] : 0 <= t < T and 1 <= i < N - 1 }"
    nest.statement("S1", domain, write=B["i"],
                   expr=(A["i - 1"] + A["i"] + A["i + 1"]) * 0.33333,
                   schedule="{ [t, i] -> [t, 0, i] }")
    nest.statement("S2", domain, write=A["i"], expr=B["i"], schedule="{ [t, i] -> [t, 1, i] }")
    return nest


def jacobi1d_reference(a, steps):
    a, b = a.copy(), np.zeros_like(a)
    for _ in range(steps):
        for i in range(1, len(a) - 1):
            b[i] = (a[i - 1] + a[i] + a[i + 1]) * np.float32(0.33333)
        for i in range(1, len(a) - 1):
            a[i] = b[i]
    return a, b


def seidel2d() -> LoopNest:
    """In place: A is read and written by the one statement."""
    nest = LoopNest("seidel2d", params=["T", "N"])
    A = nest.array("A", ("N", "N"))
    reads = [A[f"i + {di}", f"j + {dj}"] for di in (-1, 0, 1) for dj in (-1, 0, 1)]
    nest.statement("S", "{ [t, i, j] : 0 <= t < T and 1 <= i < N - 1 and 1 <= j < N - 1 }",
                   write=A["i", "j"], expr=sum(reads[1:], reads[0]) / 9.0)
    return nest


def seidel2d_reference(a, steps):
    a = a.copy()
    n = a.shape[0]
    for _ in range(steps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                a[i, j] = a[i - 1:i + 2, j - 1:j + 2].sum(dtype=np.float32) / np.float32(9)
    return a


def trisolv() -> LoopNest:
    """Forward substitution L x = b over the triangle { [i, j] : 0 <= j < i < N }."""
    nest = LoopNest("trisolv", params=["N"])
    L, b, x = nest.array("L", ("N", "N")), nest.array("b", ("N",)), nest.array("x", ("N",))
    nest.statement("S1", "{ [i] : 0 <= i < N }", write=x["i"], expr=b["i"],
                   schedule="{ [i] -> [i, 0, 0] }")
    nest.statement("S2", "{ [i, j] : 0 <= j < i < N }", write=x["i"],
                   expr=x["i"] - L["i", "j"] * x["j"], schedule="{ [i, j] -> [i, 1, j] }")
    nest.statement("S3", "{ [i] : 0 <= i < N }", write=x["i"], expr=x["i"] / L["i", "i"],
                   schedule="{ [i] -> [i, 2, 0] }")
    return nest


def trisolv_reference(lower, b):
    x = np.zeros_like(b)
    for i in range(len(b)):
        x[i] = b[i]
        for j in range(i):
            x[i] = x[i] - lower[i, j] * x[j]
        x[i] = x[i] / lower[i, i]
    return x


def independent() -> LoopNest:
    """Three statements that only read A: no dependences at all."""
    nest = LoopNest("independent", params=["M", "N"])
    A = nest.array("A", ("M", "N"))
    relu, neg_t, half_exp = (nest.array(n, s) for n, s in
                             [("R", ("M", "N")), ("T", ("N", "M")), ("E", ("M", "N"))])
    box = "{ [i, j] : 0 <= i < M and 0 <= j < N }"
    nest.statement("S1", box, write=relu["i", "j"], expr=nest.fn.max(A["i", "j"], 0.0))
    nest.statement("S2", box, write=neg_t["j", "i"], expr=-A["i", "j"])
    nest.statement("S3", box, write=half_exp["i", "j"], expr=nest.fn.exp(A["i", "j"]) * 0.5)
    return nest


# -- compiled results --------------------------------------------------------------

@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_matmul_with_init_statement(scheduler):
    compiled = matmul().compile(params={"M": 7, "N": 5, "K": 9}, scheduler=scheduler)
    a, b = _random(1, 7, 9), _random(2, 9, 5)
    out = compiled.run({"A": a, "B": b})  # C is only written: it may be omitted
    np.testing.assert_allclose(out["C"], a @ b, rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(out["A"], a)
    np.testing.assert_array_equal(out["B"], b)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_jacobi1d_imperfect_nest(scheduler):
    compiled = jacobi1d().compile(params={"T": 6, "N": 30}, scheduler=scheduler)
    a = _random(3, 30)
    before = a.copy()
    out = compiled.run({"A": a})
    expected_a, expected_b = jacobi1d_reference(a, 6)
    np.testing.assert_allclose(out["A"], expected_a, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(out["B"], expected_b, rtol=RTOL, atol=ATOL)
    assert out["B"][0] == 0 and out["B"][-1] == 0  # never written: zeros
    np.testing.assert_array_equal(a, before)  # the caller's array is not modified


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_seidel2d_in_place(scheduler):
    compiled = seidel2d().compile(params={"T": 3, "N": 12}, scheduler=scheduler)
    a = _random(4, 12, 12)
    out = compiled.run({"A": a})
    np.testing.assert_allclose(out["A"], seidel2d_reference(a, 3), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_trisolv_triangular_domain(scheduler):
    n = 16
    lower = np.tril(_random(5, n, n)) + n * np.eye(n, dtype=np.float32)
    b = _random(6, n)
    out = trisolv().compile(params={"N": n}, scheduler=scheduler).run({"L": lower, "b": b})
    np.testing.assert_allclose(out["x"], trisolv_reference(lower, b), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_independent_statements(scheduler):
    compiled = independent().compile(params={"M": 6, "N": 4}, scheduler=scheduler)
    a = _random(7, 6, 4)
    out = compiled.run({"A": a})
    np.testing.assert_array_equal(out["R"], np.maximum(a, 0))
    np.testing.assert_array_equal(out["T"], -a.T)
    np.testing.assert_allclose(out["E"], np.exp(a) * 0.5, rtol=RTOL, atol=ATOL)


def test_one_nest_compiles_at_several_parameter_values():
    nest = jacobi1d()
    for steps, n in [(1, 3), (4, 17)]:
        a = _random(n, n)
        out = nest.compile(params={"T": steps, "N": n}).run({"A": a})
        np.testing.assert_allclose(out["A"], jacobi1d_reference(a, steps)[0],
                                   rtol=RTOL, atol=ATOL)


def test_compiled_nest_inspects_and_records_its_schedule():
    compiled = jacobi1d().compile(params={"T": 2, "N": 8}, scheduler="original")
    assert compiled.schedule.scheduler == "original"
    text = compiled.inspect()
    for section in ("== SCOP ==", "== SCHEDULE ==", "== LOOPS ==", "T(S1): (t, 0, i)"):
        assert section in text
    assert "values T=2, N=8" in text
    assert "loop nest (T=2, N=8)" in compiled.report()


# -- the parametric SCoP -------------------------------------------------------------

def test_jacobi1d_scop_is_parametric_with_the_written_order():
    scop = jacobi1d().scop()
    assert scop.params == ("T", "N")
    assert [s.name for s in scop.statements] == ["S1", "S2"]
    assert scop.statement("S1").domain == isl.Set.read_from_str(
        scop.ctx, "[T, N] -> { S1[t, i] : 0 <= t < T and 1 <= i < N - 1 }")
    assert pluto_notation(scop.order, scop).splitlines() == ["T(S1): (t, 0, i)",
                                                             "T(S2): (t, 1, i)"]
    assert {a.name: a.kind for a in scop.arrays} == {"A": "inout", "B": "result"}
    assert scop.array("A").shape == ("N",)
    reads = [r.relation for r in scop.statement("S1").reads]
    assert reads[0].is_equal(isl.Map.read_from_str(
        scop.ctx, "[T, N] -> { S1[t, i] -> A[i - 1] : 0 <= t < T and 1 <= i < N - 1 }"))


def test_jacobi1d_dependences_are_exact_and_parametric():
    scop = compute_dependences(jacobi1d().scop())
    deps = scop.dependences
    interior = "1 <= i < N - 1"
    assert deps.raw.is_equal(_umap(scop, (
        "[T, N] -> { S1[t, i] -> S2[t, i] : 0 <= t < T and " + interior + ";"
        " S2[t, i] -> S1[t + 1, i2] : 0 <= t < T - 1 and " + interior +
        " and 1 <= i2 < N - 1 and i - 1 <= i2 <= i + 1 }")))
    assert deps.waw.is_equal(_umap(scop, (
        "[T, N] -> { S1[t, i] -> S1[t + 1, i] : 0 <= t < T - 1 and " + interior + ";"
        " S2[t, i] -> S2[t + 1, i] : 0 <= t < T - 1 and " + interior + " }")))


def test_default_order_runs_statements_in_textual_sequence():
    scop = compute_dependences(matmul().scop())
    assert {a.name: a.kind for a in scop.arrays} == {"A": "inout", "B": "inout", "C": "result"}
    assert scop.dependences.raw.is_equal(_umap(scop, (
        "[M, N, K] -> { S0[i, j] -> S1[i, j, 0] : 0 <= i < M and 0 <= j < N and K > 0;"
        " S1[i, j, k] -> S1[i, j, k + 1] : 0 <= i < M and 0 <= j < N and 0 <= k < K - 1 }")))


def test_trisolv_solution_vector_needs_no_initial_value():
    scop = trisolv().scop()
    assert {a.name: a.kind for a in scop.arrays} == {"L": "inout", "b": "inout", "x": "result"}


def test_independent_statements_have_no_dependences():
    deps = compute_dependences(independent().scop()).dependences
    assert deps.all.is_empty()


# -- errors ----------------------------------------------------------------------------

def _nest_with_a():
    nest = LoopNest("n", params=["N"])
    return nest, nest.array("A", ("N", "N"))


def test_non_affine_index_names_statement_and_index():
    nest, A = _nest_with_a()
    with pytest.raises(NotAffineError, match=r"S1: index 'i\*j' of A is not affine"):
        nest.statement("S1", "{ [i, j] : 0 <= i, j < N }", write=A["i", "j"], expr=A["i*j", "j"])
    with pytest.raises(NotAffineError, match=r"index 'i/2' of A is not an integer affine"):
        nest.statement("S2", "{ [i, j] : 0 <= i, j < N }", write=A["i/2", "j"], expr=1.0)


def test_unknown_array_is_named():
    nest, A = _nest_with_a()
    other = LoopNest("other").array("X", (4,))
    with pytest.raises(NestError, match=r"S1: unknown array 'X' \(declared in nest 'other'\)"):
        nest.statement("S1", "{ [i] : 0 <= i < 4 }", write=A["i", "i"], expr=other["i"])
    nest.statement("S1", "{ [i] : 0 <= i < N }", write=A["i", "i"], expr=1.0)
    with pytest.raises(InputError, match="unknown input 'Z'"):
        nest.compile(params={"N": 3}).run({"Z": np.zeros(3, np.float32)})


def test_unknown_parameter_is_named():
    nest, A = _nest_with_a()
    with pytest.raises(NestError, match=r"extent 'M' of array B: unknown name 'M'"):
        nest.array("B", ("M",))
    with pytest.raises(NestError, match=r"S1: index 'i \+ M' of A: unknown name 'M'"):
        nest.statement("S1", "{ [i] : 0 <= i < N }", write=A["i + M", "i"], expr=1.0)
    with pytest.raises(NestError, match=r"domain of S2: unknown name M"):
        nest.statement("S2", "{ [i] : 0 <= i < M }", write=A["i", "i"], expr=1.0)


def test_wrong_number_of_indices_is_named():
    nest, A = _nest_with_a()
    with pytest.raises(NestError, match=r"A has 2 dimension\(s\) but is indexed with 1: A\[i\]"):
        A["i"]


def test_missing_parameter_value_at_compile():
    nest = jacobi1d()
    with pytest.raises(NestError, match="no value for parameter N"):
        nest.compile(params={"T": 3})
    with pytest.raises(NestError, match="unknown parameter M"):
        nest.compile(params={"T": 3, "N": 5, "M": 1})
    with pytest.raises(NestError, match="outside the context"):
        nest.compile(params={"T": 0, "N": 5})


def test_missing_initial_value_of_an_array_that_is_read():
    compiled = jacobi1d().compile(params={"T": 1, "N": 5})
    with pytest.raises(InputError, match="missing input 'A'"):
        compiled.run({"B": np.zeros(5, np.float32)})


def test_access_outside_the_array_is_refused_at_compile():
    nest = LoopNest("oob", params=["N"])
    A = nest.array("A", ("N",))
    nest.statement("S1", "{ [i] : 0 <= i < N }", write=A["i"], expr=A["i + 1"])
    with pytest.raises(ShapeError, match=r"S1 reads A outside its shape \[4\]"):
        nest.compile(params={"N": 4})


def test_schedules_must_be_given_for_all_statements_and_order_all_instances():
    nest = LoopNest("bad", params=["N"])
    A, B = nest.array("A", ("N",)), nest.array("B", ("N",))
    nest.statement("S1", "{ [i] : 0 <= i < N }", write=A["i"], expr=1.0,
                   schedule="{ [i] -> [i] }")
    nest.statement("S2", "{ [i] : 0 <= i < N }", write=B["i"], expr=A["i"])
    with pytest.raises(NestError, match="give a schedule to every statement or to none"):
        nest.scop()
    nest = LoopNest("same_time", params=["N"])
    A, B = nest.array("A", ("N",)), nest.array("B", ("N",))
    nest.statement("S1", "{ [i] : 0 <= i < N }", write=A["i"], expr=1.0,
                   schedule="{ [i] -> [i] }")
    nest.statement("S2", "{ [i] : 0 <= i < N }", write=B["i"], expr=A["i"],
                   schedule="{ [i] -> [i] }")
    with pytest.raises(NestError, match="the same time"):
        nest.scop()
