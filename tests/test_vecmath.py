"""The vectorizable math builders compute what libm computes, and LLVM vectorizes them.

Each function is JIT-compiled in a loop ``y[i] = f(x[i])`` (the form the loop vectorizer
sees) and in an explicit ``<16 x float>`` form, run on seeded dense sweeps and special
values, and compared in ulp with the float64 numpy reference rounded to float32. The
bounds are the ones documented in ``polyc/codegen/vecmath.py``. Then whole ONNX models
using these functions are compared with onnxruntime, with and without fast math.
"""

from __future__ import annotations

import ctypes
import math
import re

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir
from onnx import helper

import polyc
from polyc.codegen import target, vecmath
from polyc.codegen.exprs import F32, I64

from onnx_helpers import ATOL, RTOL, make_model, run_onnxruntime, run_polyc

VEC = ir.VectorType(F32, 16)
PTR = ir.PointerType()
N_SWEEP = 1_000_000
LIBM = ("@expf", "@logf", "@tanhf", "@erff", "@exp", "@log", "@tanh", "@erf")
INF, NAN = math.inf, math.nan


def _sigmoid64(x):
    return np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))),
                    np.exp(-np.abs(x)) / (1 + np.exp(-np.abs(x))))


REFERENCES = {
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "sigmoid": _sigmoid64,
    "erf": np.frompyfunc(math.erf, 1, 1),
}
MAX_ULP = {"exp": 1.062, "log": 0.827, "tanh": 1.364, "sigmoid": 3.149, "erf": 1.118}
# Cephes' form of exp (every form but 16 lanes on AVX-512F hosts) keeps its own bounds
CEPHES_ULP = {"exp": 1.011, "log": 0.827, "tanh": 1.331, "sigmoid": 2.402, "erf": 1.083}


def _bound(name: str, form: str) -> float:
    """The bound of ``name`` in ``form`` (``loop``, ``scalar`` or ``vector``) here."""
    table = form == "vector" and vecmath._table_form(VEC)
    return (MAX_ULP if table else CEPHES_ULP)[name]


def _positive_bits(rng, size, lo, hi):
    """Floats with bit patterns uniform in [bits(lo), bits(hi)]: every exponent equally."""
    bounds = np.array([lo, hi], dtype=np.float32).view(np.int32)
    return rng.integers(bounds[0], bounds[1], size=size, dtype=np.int32).view(np.float32)


def _sweep(name: str, rng) -> np.ndarray:
    """Seeded dense inputs across the useful range of ``name``, both signs where relevant."""
    n = N_SWEEP // 2
    if name == "exp":
        dense = rng.uniform(-104, 89, n)
        fine = _positive_bits(rng, n, 1e-30, 104) * rng.choice([-1, 1], n)
    elif name == "log":
        dense = rng.uniform(0.5, 2.0, n)
        fine = _positive_bits(rng, n, 1e-45, 3.4e38)
    else:
        dense = rng.uniform(-10, 10, n)
        fine = _positive_bits(rng, n, 1e-30, 30) * rng.choice([-1, 1], n)
    return np.concatenate([dense, fine]).astype(np.float32)


SPECIAL = np.array([0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 1e-45, -1e-45, 1e-40, -1e-40,
                    1.1754944e-38, 3.4028235e38, -3.4028235e38, 0.5, 2.0, 9.0, 9.1, -9.1,
                    20.0, -20.0, 88.72283, 88.72284, 88.8, 89.0, -87.33654, -87.4, -100.0,
                    -103.97, -103.98, -104.0, -105.0, 16.6, 16.7, 3.9, 4.0, -4.0],
                   dtype=np.float32)


def _ulp_error(actual: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|actual - exact| in ulp of the exact (float64) value at float32 precision;
    denormals in units of 2^-149. Where exact rounds to an infinity, or is NaN, the
    result must be exactly that value (error 0, else inf)."""
    with np.errstate(over="ignore"):
        rounded = exact.astype(np.float32)
    special = ~np.isfinite(rounded)
    _, exponent = np.frexp(np.abs(exact))
    ulp = np.maximum(np.ldexp(1.0, exponent - 24), 2.0 ** -149)
    with np.errstate(invalid="ignore"):
        error = np.abs(actual.astype(np.float64) - exact) / ulp
    same = (actual == rounded) | (np.isnan(actual) & np.isnan(rounded))
    error = np.where(special, np.where(same, 0.0, INF), error)
    return np.where(np.isnan(error), INF, error)


def _reference(name: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(REFERENCES[name](x.astype(np.float64)), dtype=np.float64)


# --- JIT-compiled loops -------------------------------------------------------------

def _scalar_loop(module: ir.Module, emit) -> None:
    """``void f(float* x, float* y, i64 n)``: y[i] = emit(x[i]) for i < n."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64]), name="f")
    x, y, n = fn.args
    x.add_attribute("noalias")
    y.add_attribute("noalias")
    entry, body, done = (fn.append_basic_block(s) for s in ("entry", "body", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", n, ir.Constant(I64, 0)), body, done)
    b.position_at_end(body)
    i = b.phi(I64)
    value = b.load(b.gep(x, [i], inbounds=True, source_etype=F32), typ=F32)
    b.store(emit(b, value), b.gep(y, [i], inbounds=True, source_etype=F32))
    step = b.add(i, ir.Constant(I64, 1))
    i.add_incoming(ir.Constant(I64, 0), entry)
    i.add_incoming(step, body)
    b.cbranch(b.icmp_signed("<", step, n), body, done)
    b.position_at_end(done)
    b.ret_void()


def _vector_function(module: ir.Module, emit) -> None:
    """``void g(<16 x float>* x, <16 x float>* y)``: 16 lanes at once, no loop."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR]), name="g")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.store(emit(b, b.load(fn.args[0], typ=VEC, align=4)), fn.args[1], align=4)
    b.ret_void()


class Compiled:
    """One function's loop ``f`` and vector form ``g``, optimised at O3 and JIT-compiled;
    keeps the execution engine alive as long as the entry points."""

    def __init__(self, emit):
        module = ir.Module(name="vecmath_test")
        _scalar_loop(module, emit)
        _vector_function(module, emit)
        tm = target.host_target_machine(jit=True)
        parsed = target.parse(str(module), tm)
        target.optimize(parsed, tm)
        self.optimized_ir = str(parsed)
        self.engine = llvm.create_mcjit_compiler(parsed, tm)
        self.engine.finalize_object()
        self._f = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
            self.engine.get_function_address("f"))
        self._g = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(
            self.engine.get_function_address("g"))

    def loop(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float32)
        y = np.empty_like(x)
        self._f(x.ctypes.data, y.ctypes.data, x.size)
        return y

    def vector(self, x: np.ndarray) -> np.ndarray:
        """The explicit 16-lane form, on ``x`` padded to a multiple of 16."""
        padded = np.zeros(-(-x.size // 16) * 16, dtype=np.float32)
        padded[:x.size] = x
        y = np.empty_like(padded)
        for start in range(0, padded.size, 16):
            self._g(padded[start:].ctypes.data, y[start:].ctypes.data)
        return y[:x.size]

    def scalar(self, x: np.ndarray) -> np.ndarray:
        """The loop's scalar code (one element per call: the vector loop never runs)."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        y = np.empty_like(x)
        for k in range(x.size):
            self._f(x[k:].ctypes.data, y[k:].ctypes.data, 1)
        return y


_COMPILED: dict[str, Compiled] = {}


def compiled(name: str) -> Compiled:
    if name not in _COMPILED:
        _COMPILED[name] = Compiled(getattr(vecmath, name))
    return _COMPILED[name]


FUNCTIONS = list(MAX_ULP)

# --- accuracy ------------------------------------------------------------------------

@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("form", ["loop", "vector"])
def test_max_ulp_error_on_a_dense_sweep(name, form):
    x = _sweep(name, np.random.default_rng(0))
    y = getattr(compiled(name), form)(x)
    error = _ulp_error(y, _reference(name, x))
    worst = int(np.argmax(error))
    assert error[worst] <= _bound(name, form), f"{name}({x[worst]!r}) = {y[worst]!r}"


@pytest.mark.parametrize("name", FUNCTIONS)
def test_special_values_in_every_form(name):
    """Loop (vector body and remainder), one element at a time, explicit 16 lanes."""
    function = compiled(name)
    exact = _reference(name, SPECIAL)
    for form in (function.loop, function.scalar, function.vector):
        y = form(SPECIAL)
        error = _ulp_error(y, exact)
        bad = error > _bound(name, form.__name__)
        assert not bad.any(), f"{name} {form.__name__}: {dict(zip(SPECIAL[bad], y[bad]))}"


@pytest.mark.parametrize("name", FUNCTIONS)
def test_explicit_vector_form_matches_the_loop(name):
    """Bit for bit, but where exp takes its table form (16 lanes on AVX-512F hosts):
    there the 16-lane form of the functions built on exp is another approximation
    (each form within the bound, see the sweep) and the forms differ in the last bits."""
    x = _sweep(name, np.random.default_rng(1))[::16][:16 * 2048]
    function = compiled(name)
    vector, loop = function.vector(x), function.loop(x)
    if name == "log" or not vecmath._table_form(VEC):
        np.testing.assert_array_equal(vector.view(np.int32), loop.view(np.int32))
    else:
        exact = _reference(name, x)
        assert (vector != loop).any()
        assert (_ulp_error(vector, exact) <= _bound(name, "vector")).all()
        assert (_ulp_error(loop, exact) <= _bound(name, "loop")).all()


EXACT = {  # name -> [(x, f(x))]: infinities, zeros with their sign, saturation
    "exp": [(0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, 0.0), (88.72284, INF), (89.0, INF),
            (-104.0, 0.0), (-1000.0, 0.0), (1e-45, 1.0)],
    "log": [(1.0, 0.0), (0.0, -INF), (-0.0, -INF), (INF, INF), (-1.0, NAN), (-INF, NAN),
            (-1e-45, NAN)],
    "tanh": [(0.0, 0.0), (-0.0, -0.0), (INF, 1.0), (-INF, -1.0), (9.1, 1.0), (-20.0, -1.0),
             (3.4028235e38, 1.0), (1e-45, 1e-45)],
    "sigmoid": [(0.0, 0.5), (-0.0, 0.5), (INF, 1.0), (-INF, 0.0), (17.0, 1.0),
                (-104.0, 0.0), (3.4028235e38, 1.0), (-3.4028235e38, 0.0)],
    "erf": [(0.0, 0.0), (-0.0, -0.0), (INF, 1.0), (-INF, -1.0), (3.92, 1.0), (-10.0, -1.0),
            (1e-45, 1e-45)],
}


@pytest.mark.parametrize("name", FUNCTIONS)
def test_exact_special_values(name):
    x = np.array([p[0] for p in EXACT[name]] + [NAN], dtype=np.float32)
    expected = np.array([p[1] for p in EXACT[name]] + [NAN], dtype=np.float32)
    function = compiled(name)
    for form in (function.loop, function.scalar, function.vector):
        y = form(x)
        np.testing.assert_array_equal(y, expected, err_msg=f"{name} {form.__name__}")
        number = ~np.isnan(expected)  # a NaN's sign is not specified
        np.testing.assert_array_equal(np.signbit(y[number]), np.signbit(expected[number]))


@pytest.mark.parametrize("name", ["exp", "sigmoid"])
def test_portable_scaling_gives_the_same_bits_as_scalef(name, monkeypatch):
    """exp's 2^n: ``llvm.ldexp`` (one vscalefps) where the host has AVX-512F, two
    integer-built powers of two elsewhere; both round once, so they agree bit for bit
    (including denormal results, overflow to +inf and NaN)."""
    x = np.concatenate([_sweep(name, np.random.default_rng(2))[::8], SPECIAL,
                        np.array([-87.4, -90.0, -103.0, 88.7, 88.8], dtype=np.float32)])
    default = compiled(name)
    assert ("@llvm.ldexp." in default.optimized_ir) == vecmath.scalef_available()
    monkeypatch.setattr(vecmath, "scalef_available", lambda: False)
    portable = Compiled(getattr(vecmath, name))
    assert "@llvm.ldexp." not in portable.optimized_ir
    for form in ("loop", "scalar", "vector"):
        want = getattr(default, form)(x if form != "scalar" else x[:2000])
        got = getattr(portable, form)(x if form != "scalar" else x[:2000])
        np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32), err_msg=form)


def test_denormal_results_and_arguments():
    """exp and sigmoid round into the denormals gradually; log reads denormals exactly."""
    x = np.array([-87.4, -90.0, -100.0, -103.0], dtype=np.float32)
    for name in ("exp", "sigmoid"):
        y = compiled(name).loop(x)
        assert ((y > 0) & (y < 1.1754944e-38)).all(), name
        assert _ulp_error(y, _reference(name, x)).max() <= 1
    tiny = np.array([1e-45, 3e-42, 1e-39, 1.17e-38], dtype=np.float32)
    assert _ulp_error(compiled("log").loop(tiny), _reference("log", tiny)).max() <= 1


# --- vectorization -------------------------------------------------------------------

@pytest.mark.parametrize("name", FUNCTIONS)
def test_llvm_vectorizes_the_loop_without_libm(name):
    ir_text = compiled(name).optimized_ir
    loop = ir_text[ir_text.index("define void @f("):ir_text.index("define void @g(")]
    lanes = {int(n) for n in re.findall(r"<(\d+) x float>", loop)}
    assert lanes and max(lanes) >= 4, f"the loop over {name} was not vectorized"
    assert not [call for call in LIBM if call + "(" in ir_text], ir_text
    assert "call <16 x float> @llvm.fma.v16f32" in ir_text[ir_text.index("define void @g("):]


# --- end to end ----------------------------------------------------------------------

def _unary_model(op: str, shape, **attributes):
    return make_model([helper.make_node(op, ["x"], ["y"], **attributes)], [("x", shape)],
                      [("y", shape)])


def _chain_model(shape):
    """Exp, Log, Tanh, Sigmoid and Softmax in one graph: log(exp(x) + 1) ... softmax."""
    one = ("one", np.ones((1,), dtype=np.float32))
    nodes = [helper.make_node("Exp", ["x"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"]),
             helper.make_node("Log", ["e1"], ["softplus"]),
             helper.make_node("Tanh", ["softplus"], ["t"]),
             helper.make_node("Sigmoid", ["x"], ["s"]),
             helper.make_node("Mul", ["t", "s"], ["ts"]),
             helper.make_node("Softmax", ["ts"], ["y"], axis=-1)]
    return make_model(nodes, [("x", shape)], [("y", shape)], initializers=[one])


def _inputs(op: str, shape, seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs spanning each function's interesting range (Log: positive)."""
    rng = np.random.default_rng(seed)
    lo, hi = {"Log": (1e-6, 50.0), "Exp": (-60.0, 60.0), "Softmax": (-30.0, 30.0)}.get(
        op, (-12.0, 12.0))
    return {"x": rng.uniform(lo, hi, size=shape).astype(np.float32)}


LIBM_INTRINSICS = ("@llvm.exp.", "@llvm.log.", "@llvm.tanh.")


@pytest.mark.parametrize("fast_math", [True, False])
@pytest.mark.parametrize("op", ["Exp", "Tanh", "Log", "Sigmoid", "Softmax"])
def test_model_matches_onnxruntime(op, fast_math):
    shape = [7, 131]  # rows that end in a partial vector
    model = _unary_model(op, shape, **({"axis": -1} if op == "Softmax" else {}))
    inputs = _inputs(op, shape, seed=3)
    compiled_model = polyc.compile(model, fast_math=fast_math)
    assert not [name for name in LIBM_INTRINSICS if name in compiled_model.compilation.llvm_ir]
    np.testing.assert_allclose(compiled_model.run(inputs)["y"],
                               run_onnxruntime(model, inputs)["y"], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("fast_math", [True, False])
def test_chain_of_every_function_matches_onnxruntime(fast_math):
    shape = [4, 3, 67]
    model = _chain_model(shape)
    inputs = _inputs("Chain", shape, seed=5)
    np.testing.assert_allclose(run_polyc(model, inputs, fast_math=fast_math)["y"],
                               run_onnxruntime(model, inputs)["y"], rtol=RTOL, atol=ATOL)
