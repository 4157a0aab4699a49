"""The C frontend (polyc.scop.c, `polyc cc`): PolyBench's 30 kernels read from their
sources and compiled, each checked against the same source built by the system C
compiler (tests/c_reference.py) on seeded inputs; the constructs of the SCoP subset;
and the errors for what is outside it, each naming the file and line."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.errors import NestError, PolycError
from polyc.scop.c import CSourceError, from_c

from c_reference import UTILITIES, inputs_for, polybench_sources, reference_library, run_reference

SOURCES = {path.stem: path for path in polybench_sources()}
# relative error allowed (|polyc - cc| / (1 + |cc|)): fast math reassociates sums
TOLERANCE = {"float64": 1e-9, "float32": 1e-4}
# Gram-Schmidt of more columns than rows normalises rounding noise (columns past the
# rank): compared with as many rows as columns
DEFINES = {"gramschmidt": ["M=24", "N=20"]}


def check_against_cc(kernel, library, seed=0, **options):
    data = inputs_for(kernel, seed)
    if kernel.name in ("kernel_cholesky", "kernel_lu", "kernel_ludcmp"):
        a = data["A"]  # well conditioned: symmetric positive definite
        data["A"] = (a @ a.T + np.eye(len(a)) * len(a)).astype(a.dtype)
    expected = run_reference(library, kernel, data, kernel.params)
    given = {name: value for name, value in data.items() if name in kernel.arrays}
    actual = kernel.compile(**options).run(given)
    compared = 0
    for name, want in expected.items():
        if name in actual and want.ndim:
            got = actual[name].astype(np.float64)
            error = np.max(np.abs(got - want) / (1 + np.abs(want)), initial=0.0)
            assert error <= TOLERANCE.get(str(want.dtype), 0), (name, error)
            compared += 1
    assert compared, "no array compared"


def test_the_thirty_polybench_kernels_are_found():
    assert len(SOURCES) == 30


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_a_polybench_kernel_computes_what_cc_computes(name, tmp_path):
    """With the schedule the cost model chooses (the default) and with Pluto's."""
    defines = ["MINI_DATASET", *DEFINES.get(name, [])]
    kernel = from_c(SOURCES[name], defines=defines, include=[UTILITIES])
    library = reference_library(SOURCES[name], tmp_path, defines=defines,
                                includes=[UTILITIES], extra=[UTILITIES / "polybench.c"])
    check_against_cc(kernel, library)
    check_against_cc(kernel, library, seed=1, scheduler="pluto")


def test_gemm_reads_its_parameters_from_the_call_in_main():
    kernel = from_c(SOURCES["gemm"], defines=["SMALL_DATASET"], include=[UTILITIES])
    assert kernel.name == "kernel_gemm"
    assert kernel.params == {"ni": 60, "nj": 70, "nk": 80}
    assert kernel.arrays == {"C": ("float64", (60, 70)), "beta": ("float64", ()),
                             "alpha": ("float64", ()), "A": ("float64", (60, 80)),
                             "B": ("float64", (80, 70))}
    assert [s.text for s in kernel.statements] == ["C[i][j] *= beta",
                                                   "C[i][j] += (alpha * A[i][k]) * B[k][j]"]
    assert kernel.statements[1].schedule == "{ [i, k, j] -> [0, i, 1, k, 0, j, 0] }"


@pytest.mark.parametrize("name, contractions", [("gemm", 1), ("2mm", 2), ("3mm", 3)])
def test_products_with_a_scalar_factor_get_the_contraction_recipe(name, contractions,
                                                                 tmp_path):
    """PolyBench's ``C[i][j] += alpha * A[i][k] * B[k][j]``: alpha, a scalar read from
    memory, is a constant factor of the register tile."""
    kernel = from_c(SOURCES[name], defines=["SMALL_DATASET"], include=[UTILITIES])
    compiled = kernel.compile()
    recipe = [d for d in compiled.schedule.decisions if "tiling: contraction" in d]
    assert len(recipe) == contractions, compiled.schedule.decisions
    library = reference_library(SOURCES[name], tmp_path, defines=["SMALL_DATASET"],
                                includes=[UTILITIES], extra=[UTILITIES / "polybench.c"])
    check_against_cc(kernel, library, seed=1)


def test_polyc_from_c_reads_a_source():
    kernel = polyc.from_c(SOURCES["atax"], defines=["MINI_DATASET"], include=[UTILITIES])
    assert kernel.name == "kernel_atax" and kernel.params == {"m": 38, "n": 42}


KERNEL = """
typedef float real;
#define N 24
static void kernel(int n, real A[N][N], real x[N], real y[N], real alpha)
{
  int i, j;
  real scale = 0.5f;
#pragma scop
  for (i = n - 1; i >= 0; i--) {          /* counts down */
    y[i] = 0;
    for (j = 0; j < (i < 10 ? i : 10); j += 2)   /* min bound, step 2 */
      y[i] += A[i][j] * x[j];
    if (i % 2 == 0 && i > 2)
      y[i] = y[i] * alpha;
    else
      y[i] = y[i] + scale;
  }
  for (i = 1; i < n; i++)
    x[i] = x[i] = x[i - 1] > y[i] ? sqrtf(x[i - 1]) : (real) (y[i] / 2.0);
#pragma endscop
}
void caller(real A[N][N], real x[N], real y[N]) { int n = N; kernel(n, A, x, y, 1.5f); }
"""


def test_the_subset_counts_down_steps_bounds_by_min_branches_and_converts(tmp_path):
    kernel = from_c(KERNEL)
    assert kernel.params == {"n": 24}
    assert kernel.arrays["A"] == ("float32", (24, 24))
    first = kernel.statements[0]
    assert first.schedule == "{ [i] -> [0, -i, 0] }"
    step = kernel.statements[1]
    assert "(j - 0) mod 2 = 0" in step.domain and "j < min(i, 10)" in step.domain
    library = reference_library(KERNEL, tmp_path)
    for seed in range(3):
        for options in ({}, {"scheduler": "original", "tile": False}):
            check_against_cc(kernel, library, seed, **options)


def test_a_named_function_without_pragmas_is_compiled_whole(tmp_path):
    text = """void scale(int n, double a[100], double s) {
      int i;
      for (i = 0; i < n; i++) a[i] = a[i] * s + i % 1;
    }"""
    with pytest.raises(CSourceError, match="no '#pragma scop'"):
        from_c(text)
    kernel = from_c(text.replace(" + i % 1", ""), function="scale")
    with pytest.raises(NestError, match="give a value to the parameter"):
        kernel.compile()
    out = kernel.compile(params={"n": 60}).run({"a": np.ones(100), "s": 3.0})
    np.testing.assert_array_equal(out["a"], [3.0] * 60 + [1.0] * 40)


def test_a_parameter_read_as_a_value_becomes_its_number():
    text = """void k(int n, double a[50]) {
      int i;
    #pragma scop
      for (i = 0; i < n; i++) a[i] = a[i] / n;
    #pragma endscop
    }"""
    kernel = from_c(text)
    out = kernel.compile(params={"n": 40}).run({"a": np.full(50, 8.0)})
    np.testing.assert_array_equal(out["a"], [0.2] * 40 + [8.0] * 10)


def test_emit_c_prints_the_loops_with_the_statements_as_macros(capsys):
    from polyc.cli import main
    main(["cc", str(SOURCES["gemm"]), "-I", str(UTILITIES), "-D", "MINI_DATASET",
          "--emit-c", "--scheduler", "original", "--no-tile"])
    text = capsys.readouterr().out
    assert "#define S0(i, j) C[(i)][(j)] *= beta" in text
    assert "#define S1(i, k, j) C[(i)][(j)] += (alpha * A[(i)][(k)]) * B[(k)][(j)]" in text
    assert "for (int c1 = 0; c1 <= 19; c1 += 1) {" in text and "S1(c1, c3, c5);" in text


def test_polyc_cc_summarises_and_inspects(capsys, monkeypatch):
    from polyc.cli import main
    monkeypatch.chdir(UTILITIES.parent)  # relative paths, from another folder than the source's
    main(["cc", "linear-algebra/solvers/lu/lu.c", "-I", "utilities", "-D", "MINI_DATASET",
          "--param", "n=12"])
    text = capsys.readouterr().out
    assert "kernel_lu in" in text and "parameters n=12" in text
    assert "S1: A[i][j] /= A[j][j]" in text and "schedule:" in text
    main(["cc", str(SOURCES["lu"]), "-I", str(UTILITIES), "-D", "MINI_DATASET", "--inspect"])
    assert "S2" in capsys.readouterr().out


BAD = [
    ("for (i = 0; i < n; i++) while (a[i] > 1) a[i] = a[i] / 2;", r"<C text>:5: a while loop"),
    ("for (i = 0; i < n; i++) a[i * i] = 0;", r"<C text>:5: i \* i multiplies two variables"),
    ("for (i = 0; i < n; i++) a[(i - 5) / 2] = 0;", r"<C text>:5: .* can be negative"),
    ("for (i = 0; i < n; i++) a[i] = p[i];", r"<C text>:5: p is a pointer"),
    ("for (i = 0; i < n; i++) { a[i] = 0; n = 2; }", r"writes n, which loop bounds"),
    ("for (i = 0; i < n; i++) { a[i] = 0; i = i + 1; }", r"assigns its iterator i"),
    ("for (i = 0; i < n; i = i * 2) a[i] = 0;", r"steps by i = i \* 2"),
    ("for (i = 0; i < n; i++) a[i] = g(a[i]);", r"<C text>:5: the call g\(a\[i\]\)"),
    ("for (i = 0; i < n; i++) a[i] = a[i][0];", r"a\[i\]\[0\] has 2 subscript\(s\), a has 1"),
    ("for (i = 0; i < n; i++) a[i] = i;", r"the value of the loop iterator i"),
    ("for (i = 0; i < a[0]; i++) a[i] = 0;", r"a\[0\] is not an affine expression"),
]


@pytest.mark.parametrize("body, message", BAD, ids=[m for _, m in BAD])
def test_what_the_subset_leaves_out_is_an_error_naming_the_line(body, message):
    text = ("double g(double x);\nvoid k(int n, double a[100], double *p) {\n  int i;\n"
            f"#pragma scop\n  {body}\n#pragma endscop\n}}\n")
    with pytest.raises(CSourceError, match=message):
        from_c(text)


def test_source_errors_name_the_file(tmp_path):
    missing = tmp_path / "missing.c"
    with pytest.raises(CSourceError, match="cannot read the C source .*missing.c"):
        from_c(missing)
    bad = tmp_path / "bad.c"
    bad.write_text("#include \"nowhere.h\"\nvoid k() {}\n")
    with pytest.raises(CSourceError, match=r"bad.c: the C preprocessor .* failed:\n.*nowhere.h"):
        from_c(bad)
    bad.write_text("void k(int n) {\n  int i\n  for (;;) {}\n}\n")
    with pytest.raises(CSourceError, match=r"cannot parse .*bad.c as C .*bad.c:3"):
        from_c(bad)
    bad.write_text("void k(int n, double a[4]) {\n#pragma scop\n  a[0] = 1;\n}\n")
    with pytest.raises(CSourceError, match=r"bad.c:2: '#pragma scop' has no '#pragma endscop'"):
        from_c(bad)
    two = "void f(double a[4]) {\n#pragma scop\na[0] = 1;\n#pragma endscop\n}\n"
    with pytest.raises(CSourceError, match=r"several functions .* \(f, g\): name one"):
        from_c(two + two.replace("void f", "void g"))
    with pytest.raises(CSourceError, match=r"no function 'h'; it defines f"):
        from_c(two, function="h")
    with pytest.raises(CSourceError, match=r"no C compiler 'no-such-cc' on the PATH"):
        from_c(two, cc="no-such-cc")


def test_cc_errors_are_polyc_errors_on_the_command_line(tmp_path, capsys):
    from polyc.cli import main
    source = tmp_path / "k.c"
    source.write_text("void k(int n, double a[8]) {\n#pragma scop\n  a[n * n] = 0;\n"
                      "#pragma endscop\n}\n")
    assert main(["cc", str(source)]) != 0
    assert "k.c:3: n * n multiplies two variables" in capsys.readouterr().err
    assert issubclass(CSourceError, PolycError)


def _dump(binary) -> str:
    import subprocess
    done = subprocess.run([str(binary)], capture_output=True, text=True, check=True)
    return done.stderr


def test_polybench_main_linked_with_the_drop_in_object_dumps_what_cc_dumps(tmp_path):
    """PolyBench's own program, its kernel's definition replaced by polyc's object
    (`polyc cc -o`), prints the arrays the program built by cc prints."""
    import subprocess

    from polyc.cli import main
    from polyc.scop.c import caller_source
    defines = ["SMALL_DATASET", "POLYBENCH_DUMP_ARRAYS"]
    for name in ("gemm", "durbin", "seidel-2d"):
        source = SOURCES[name]
        assert main(["cc", str(source), "-I", str(UTILITIES), *(f"-D{d}" for d in defines),
                     "-o", str(tmp_path / f"{name}.o")]) == 0
        symbols = subprocess.run(["nm", "-g", "--defined-only", str(tmp_path / f"{name}.o")],
                                 capture_output=True, text=True, check=True).stdout
        assert [line.split()[-1] for line in symbols.splitlines()] == \
            [f"kernel_{name.replace('-', '_')}"]
        caller = tmp_path / f"{name}_main.c"
        caller.write_text(caller_source(from_c(source, defines=defines, include=[UTILITIES])))
        polyc_binary, cc_binary = tmp_path / f"{name}_polyc", tmp_path / f"{name}_cc"
        subprocess.run(["cc", "-O2", *(f"-D{d}" for d in defines), str(caller),
                        str(UTILITIES / "polybench.c"),
                        f"-I{UTILITIES}", str(tmp_path / f"{name}.o"), "-lm", "-o",
                        str(polyc_binary)], check=True, capture_output=True)
        subprocess.run(["cc", "-O2", *(f"-D{d}" for d in defines), f"-I{UTILITIES}",
                        str(source), str(UTILITIES / "polybench.c"), "-lm", "-o",
                        str(cc_binary)], check=True, capture_output=True)
        want, got = _dump(cc_binary), _dump(polyc_binary)
        assert "begin dump" in want
        # the same arrays and values, printed with two decimals (fast math reassociates
        # sums: a value may round to the next hundredth)
        assert [w for w in want.split() if not _number(w)] == \
            [g for g in got.split() if not _number(g)]
        numbers = np.array([float(w) for w in want.split() if _number(w)])
        np.testing.assert_allclose([float(g) for g in got.split() if _number(g)], numbers,
                                   rtol=1e-12, atol=0.0100001, err_msg=name)


def _number(word: str) -> bool:
    try:
        float(word)
        return True
    except ValueError:
        return False


def test_the_drop_in_library_runs_the_original_loops_for_other_parameters(tmp_path):
    import ctypes

    from polyc.runtime.c_library import c_library
    kernel = from_c(SOURCES["durbin"], defines=["MINI_DATASET"], include=[UTILITIES])
    assert kernel.params == {"n": 40}
    path = c_library(kernel, tmp_path / "durbin.so")
    library = ctypes.CDLL(str(path))
    reference = reference_library(SOURCES["durbin"], tmp_path, defines=["MINI_DATASET"],
                                  includes=[UTILITIES], extra=[UTILITIES / "polybench.c"])
    for n in (40, 25):  # polyc's code, then the original loops (its local array z too)
        data = inputs_for(kernel, seed=n)
        want = run_reference(reference, kernel, data, {"n": n})
        got = run_reference(library, kernel, data, {"n": n})
        np.testing.assert_allclose(got["y"], want["y"], rtol=1e-9, atol=1e-12)
    with pytest.raises(polyc.OutputError, match="which this command reads"):
        c_library(kernel, SOURCES["durbin"], reads=[SOURCES["durbin"]])


def test_autoselect_measures_every_candidate_and_keeps_a_correct_one(tmp_path):
    kernel = from_c(SOURCES["jacobi-1d"], defines=["SMALL_DATASET"], include=[UTILITIES])
    compiled = kernel.compile(autoselect="measure")
    (decision,) = [d for d in compiled.schedule.decisions if d.startswith("autoselect")]
    for label in ("pluto:", "original:", "original, untiled:", "isl:"):
        assert label in decision
    chosen = decision.rsplit("-> ", 1)[1]
    assert chosen in ("pluto", "original", "original, untiled", "isl")
    library = reference_library(SOURCES["jacobi-1d"], tmp_path, defines=["SMALL_DATASET"],
                                includes=[UTILITIES], extra=[UTILITIES / "polybench.c"])
    data = inputs_for(kernel, seed=2)
    want = run_reference(library, kernel, data, kernel.params)
    got = compiled.run({n: v for n, v in data.items() if n in kernel.arrays})
    for name in ("A", "B"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-12)
    with pytest.raises(PolycError, match="autoselect must be one of None, model, measure"):
        kernel.compile(autoselect="guess")


def test_autoselect_needs_parameter_values():
    from polyc.scop.polybench import KERNELS
    nest = KERNELS["jacobi-1d"].build()
    with pytest.raises(PolycError, match="keep no parameter symbolic"):
        nest.compile(params={"T": 4}, symbolic=["N"], autoselect="measure")


def test_the_drop_in_runs_the_function_around_its_scop_with_its_globals(tmp_path):
    """What the function does before and after its SCoP still happens (a local set
    before it, a result written after it), a global array is the program's, and
    other parameter values run the original statements."""
    import subprocess

    from polyc.runtime.c_library import c_library
    source = tmp_path / "k.c"
    source.write_text("""extern double G[16];
void k(int n, double a[16], double s[1]) {
  int i;
  double t = 2.0;
  s[0] = 100.0;
  t = t * 3.0;
#pragma scop
  for (i = 0; i < n; i++)
    a[i] = a[i] * t + G[i];
#pragma endscop
  s[0] = s[0] + a[1];
}
""")
    main = tmp_path / "main.c"
    main.write_text("""#include <stdio.h>
double G[16];
void k(int n, double a[16], double s[1]);
int main(void) {
  double a[16], s[1];
  for (int n = 12; n <= 16; n += 4) {
    for (int i = 0; i < 16; i++) { a[i] = i + 0.25; G[i] = 0.5 * i; }
    k(n, a, s);
    for (int i = 0; i < 16; i++) printf("%.17g\\n", a[i]);
    printf("%.17g\\n", s[0]);
  }
  return 0;
}
""")
    kernel = from_c(source)
    assert kernel.params == {} and kernel.arrays["t"] == ("float64", ())  # t: set before
    c_library(kernel, tmp_path / "k.o", params={"n": 12})
    for name, parts in (("polyc", [main, tmp_path / "k.o"]), ("cc", [main, source])):
        subprocess.run(["cc", "-O2", *map(str, parts), "-lm", "-o", str(tmp_path / name)],
                       check=True, capture_output=True)
    outputs = [subprocess.run([str(tmp_path / name)], capture_output=True, text=True,
                              check=True).stdout for name in ("polyc", "cc")]
    got, want = ([float(v) for v in out.split()] for out in outputs)
    assert len(want) == 34 and want[16] == 100.0 + 1.25 * 6 + 0.5
    np.testing.assert_allclose(got, want, rtol=1e-15)
