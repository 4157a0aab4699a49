"""Loop nests written directly (polyc.scop.nest): the parametric SCoP, its dependences,
compiling at parameter values, and the errors of the API. Kernels come from
:mod:`polyc.scop.polybench`; ``rtol=1e-5, atol=1e-6`` against numpy references.
"""

import islpy as isl
import numpy as np
import pytest

from polyc.errors import InputError, NestError, NotAffineError, ShapeError
from polyc.notation import pluto_notation
from polyc.scop.dependences import compute_dependences
from polyc.scop.nest import LoopNest
from polyc.scop.polybench import independent, jacobi1d, jacobi1d_reference, matmul, trisolv

RTOL, ATOL = 1e-5, 1e-6


def _random(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _umap(scop, text):
    return isl.UnionMap.read_from_str(scop.ctx, text)


# -- compiled results (every kernel of polybench.py: tests/test_polybench.py) -----------

def test_one_nest_compiles_at_several_parameter_values():
    nest = jacobi1d()
    for steps, n in [(1, 3), (4, 17)]:
        a = _random(n, n)
        out = nest.compile(params={"T": steps, "N": n}).run({"A": a})
        expected = jacobi1d_reference({"T": steps, "N": n}, {"A": a})
        np.testing.assert_allclose(out["A"], expected["A"],
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
        "[M, N, K] -> { S1[i, j] -> S2[i, j, 0] : 0 <= i < M and 0 <= j < N and K > 0;"
        " S2[i, j, k] -> S2[i, j, k + 1] : 0 <= i < M and 0 <= j < N and 0 <= k < K - 1 }")))


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


def test_isl_scheduler_retries_without_the_parameter_context():
    """isl's scheduler fails ("unable to carry dependences") on this nest under the
    default context N >= 1 and M >= 1 (S1 -> S2 has distance N - 1), and succeeds
    without it; the fuzzer (polyc.fuzz.programs) found it."""
    nest = LoopNest("carry", params=["N", "M"])
    C = nest.array("C", (3, 5))
    nest.statement("S1", "{ [i] : 1 <= i <= M - 1 }", write=C["i + N", "i"], expr=C["i", "i"],
                   schedule="{ [i] -> [0, i, 0] }")
    nest.statement("S2", "{ [i, j] : 1 <= i <= M - 1 and 0 <= j <= M }", write=C["i + 1", "j"],
                   expr=C["i", "j + M"], schedule="{ [i, j] -> [0, i, 1, j, 0] }")
    c = _random(0, 3, 5)
    out = nest.compile(params={"N": 1, "M": 2}, scheduler="isl").run({"C": c})
    expected = c.copy()
    expected[2, 1] = expected[1, 1]  # S1, i = 1
    expected[2, 0:3] = expected[1, 2:5]  # S2, i = 1
    np.testing.assert_array_equal(out["C"], expected)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32"])
def test_arrays_of_other_types_and_scalars(dtype):
    nest = LoopNest("axpy", params=["N"])
    x, y, a = nest.array("x", ("N",), dtype), nest.array("y", ("N",), dtype), \
        nest.array("a", (), dtype)
    nest.statement("S0", "{ [i] : 0 <= i < N }", write=y["i"],
                   expr=a[()] * x["i"] + y["i"] + (0.1 if dtype != "int32" else 0))
    rng = np.random.default_rng(4)
    xs = (rng.standard_normal(50) * 8).astype(dtype)
    ys = (rng.standard_normal(50) * 8).astype(dtype)
    out = nest.compile(params={"N": 50}).run({"x": xs, "y": ys, "a": np.array(3, dtype)})
    assert out["y"].dtype == np.dtype(dtype)
    if dtype == "float64":  # the number is the float64 0.1, not float32's
        np.testing.assert_allclose(out["y"], 3.0 * xs + ys + 0.1, rtol=1e-14, atol=1e-14)
    elif dtype == "float32":
        np.testing.assert_allclose(out["y"], np.float32(3) * xs + ys + np.float32(0.1),
                                   rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(out["y"], 3 * xs + ys)


def test_an_expression_of_another_type_than_the_written_array_is_named():
    nest = LoopNest("mixed", params=["N"])
    x, y = nest.array("x", ("N",), "float32"), nest.array("y", ("N",), "float64")
    with pytest.raises(NestError, match=r"S0: the expression is float32, the array y it "
                                        r"writes float64 \(convert with fn.cast_float64\)"):
        nest.statement("S0", "{ [i] : 0 <= i < N }", write=y["i"], expr=x["i"] * 2.0)
    nest.statement("S0", "{ [i] : 0 <= i < N }", write=y["i"],
                   expr=nest.fn.cast_float64(x["i"]) * 2.0)
    with pytest.raises(NestError, match=r"S1: add needs its operands to have one dtype"):
        nest.statement("S1", "{ [i] : 0 <= i < N }", write=y["i"], expr=x["i"] + y["i"])
    with pytest.raises(NestError, match="dtype 'complex64' is not one of"):
        nest.array("z", ("N",), "complex64")
