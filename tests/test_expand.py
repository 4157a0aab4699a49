"""Scalar expansion (polyc.scop.expand): which C locals are scratch, which expand and
to what, and the compiled results against numpy (rtol 1e-12: float64 sums of 24
terms) with the legality checker on."""

import numpy as np

from polyc.scop.c import from_c
from polyc.scop.dependences import compute_dependences
from polyc.scop.expand import expand_scalars

ROW_SUMS = """
void sums(int n, double A[24][24], double s[24]) {
  int i, j;
  double t;
#pragma scop
  for (i = 0; i < n; i++) {
    t = 0.0;
    for (j = 0; j < n; j++)
      t += A[i][j];
    s[i] = t;
  }
#pragma endscop
}
"""

# the last value of a row, then of a column, in one local: two webs
TWO_PASSES = """
void passes(int n, double A[24][24], double B[24][24], double C[24][24]) {
  int i, j;
  double t;
#pragma scop
  for (i = 0; i < n; i++) {
    t = 0.0;
    for (j = 0; j < n; j++) {
      B[i][j] = A[i][j] + 0.5 * t;
      t = A[i][j];
    }
  }
  for (j = 0; j < n; j++) {
    t = 0.0;
    for (i = 0; i < n; i++) {
      C[i][j] = B[i][j] + 0.5 * t;
      t = B[i][j];
    }
  }
#pragma endscop
}
"""


def _expanded(kernel, n):
    scop = compute_dependences(kernel.scop({"n": n}))
    return scop, expand_scalars(scop, {"n": n})


def test_a_running_sum_set_in_each_row_becomes_an_array_over_the_rows():
    kernel = from_c(ROW_SUMS)
    scop, expanded = _expanded(kernel, 24)
    assert scop.array("t").kind == "temp" and scop.array("t").shape == ()
    assert expanded.array("t").kind == "temp" and expanded.array("t").shape == (24,)
    for statement in expanded.statements:
        for access in (statement.write, *statement.reads):
            if access.array == "t":  # the row's own element: t[i]
                assert "-> t[i]" in str(access.relation), access.relation
    a = np.random.default_rng(0).uniform(0.5, 1.5, (24, 24))
    for options in ({}, {"scheduler": "pluto"}, {"expand": False}):
        compiled = kernel.compile(params={"n": 24}, **options)
        names = {a.name: a for a in compiled.compilation.scop.arrays}
        assert names["t"].shape == (() if options.get("expand") is False else (24,))
        out = compiled.run({"A": a})
        np.testing.assert_allclose(out["s"], a.sum(axis=1), rtol=1e-12)
        assert "t" not in out  # scratch: not returned


def test_a_local_in_two_loop_nests_becomes_one_array_per_nest():
    kernel = from_c(TWO_PASSES)
    _, expanded = _expanded(kernel, 24)
    shapes = {a.name: a.shape for a in expanded.arrays if a.name.startswith("t")}
    assert shapes == {"t_0": (24,), "t_1": (24,)}
    a = np.random.default_rng(1).uniform(0.5, 1.5, (24, 24))
    b = a + 0.5 * np.hstack([np.zeros((24, 1)), a[:, :-1]])
    c = b + 0.5 * np.vstack([np.zeros((1, 24)), b[:-1]])
    for options in ({}, {"scheduler": "pluto"}, {"scheduler": "isl"}):
        out = kernel.compile(params={"n": 24}, **options).run({"A": a})
        np.testing.assert_allclose(out["B"], b, rtol=1e-12)
        np.testing.assert_allclose(out["C"], c, rtol=1e-12)


def test_a_local_read_before_the_scop_writes_it_or_used_after_it_stays_a_scalar():
    live_in = ROW_SUMS.replace("double t;", "double t = 1.0;").replace(
        "    t = 0.0;\n", "    s[i] = t;\n")
    kernel = from_c(live_in)
    scop, expanded = _expanded(kernel, 24)
    assert scop.array("t").kind == "inout" and expanded is scop
    used_after = ROW_SUMS.replace("#pragma endscop\n", "#pragma endscop\n  s[0] = t;\n")
    kernel = from_c(used_after)
    scop, expanded = _expanded(kernel, 24)
    assert scop.array("t").kind == "result" and expanded is scop


def test_a_scalar_set_once_outside_the_loops_stays_a_scalar():
    text = ROW_SUMS.replace("  for (i = 0; i < n; i++) {\n    t = 0.0;\n",
                            "  t = 2.0;\n  for (i = 0; i < n; i++) {\n").replace(
        "      t += A[i][j];\n    s[i] = t;", "      s[i] += t * A[i][j];")
    kernel = from_c(text)
    scop, expanded = _expanded(kernel, 24)
    assert expanded is scop
    a = np.random.default_rng(2).uniform(0.5, 1.5, (24, 24))
    out = kernel.compile(params={"n": 24}).run({"A": a, "s": np.zeros(24)})
    np.testing.assert_allclose(out["s"], 2.0 * a.sum(axis=1), rtol=1e-12)
