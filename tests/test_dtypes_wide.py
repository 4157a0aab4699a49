"""float64, float16 and the 8- to 64-bit signed and unsigned integers: through
arithmetic, comparisons, data movement, reductions, pooling and every Cast, against
onnxruntime where it has the kernel and against numpy (float64 math: libm's) elsewhere;
polyc's reference interpreter is checked beside polyc."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import polyc
from polyc.errors import UnsupportedDtypeError

from onnx_helpers import make_model, run_onnxruntime, run_polyc, run_reference

node = helper.make_node
T = TensorProto
ONNX = {"float32": T.FLOAT, "float64": T.DOUBLE, "float16": T.FLOAT16,
        "bfloat16": T.BFLOAT16, "int64": T.INT64,
        "int32": T.INT32, "int16": T.INT16, "int8": T.INT8, "uint64": T.UINT64,
        "uint32": T.UINT32, "uint16": T.UINT16, "uint8": T.UINT8, "bool": T.BOOL}
INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOATS = ("float64", "float16")


def inputs_of(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs: floats in [-4, 4), signed integers over their whole range (8 and
    16 bits) or in [-1000, 1000), unsigned ones over their range or below 2000, bools
    half true."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        ttype = value.type.tensor_type
        shape = [d.dim_value for d in ttype.shape.dim]
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(ttype.elem_type))
        if dtype.kind == "f" or dtype.name == "bfloat16":
            feeds[value.name] = rng.uniform(-4, 4, size=shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[value.name] = rng.random(size=shape) < 0.5
        else:
            info = np.iinfo(dtype)
            low, high = (info.min, info.max) if info.bits <= 16 else (
                max(info.min, -1000), 2000)
            feeds[value.name] = rng.integers(low, high, size=shape, endpoint=True,
                                             dtype=dtype)
    return feeds


def assert_same(got, want, name, ulps: float = 0) -> None:
    """Integers, bools and non-finite floats exactly (NaN where NaN); finite floats
    within ``ulps`` units in the last place of their own type."""
    assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, want.dtype)
    if want.dtype.name == "bfloat16":  # numpy's testing knows no NaN of it
        got, want = got.astype(np.float32), want.astype(np.float32)
    floating = want.dtype.kind == "f"
    exact = ~np.isfinite(want) if floating and ulps else np.ones(want.shape, bool)
    np.testing.assert_array_equal(got[exact], want[exact], err_msg=name)
    near = ~exact
    error = np.abs(got[near].astype(np.float64) - want[near])
    bound = ulps * np.spacing(np.abs(want[near])).astype(np.float64)
    assert np.all(error <= bound), (name, got[near][error > bound], want[near][error > bound])


def check(model, want=None, inputs=None, seed=0, ulps=0) -> None:
    """polyc and the reference interpreter against ``want`` (outputs by name), or
    against onnxruntime."""
    inputs = inputs_of(model, seed) if inputs is None else inputs
    want = run_onnxruntime(model, inputs) if want is None else want(**inputs)
    for got in (run_polyc(model, inputs), run_reference(model, inputs)):
        for name, expected in want.items():
            assert_same(got[name], expected, name, ulps)


def binary(op, dtype, out=None, shape=(5, 37)):
    return make_model([node(op, ["a", "b"], ["y"])],
                      [("a", shape, ONNX[dtype]), ("b", shape[-1:], ONNX[dtype])],
                      [("y", shape, ONNX[out or dtype])], opset=17)


# -- arithmetic and comparisons -----------------------------------------------------------

@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("dtype", INTS + FLOATS)
def test_arithmetic(op, dtype):
    """Wrapping integer arithmetic (8- and 16-bit inputs over their whole range), division
    truncated (unsigned: unsigned); float64 exact, float16 rounded once."""
    model = binary(op, dtype)
    inputs = inputs_of(model, 1)
    if op == "Div" and dtype in INTS:
        inputs["b"][inputs["b"] == 0] = 3  # onnxruntime traps on 0
    # a division by a float may be a multiplication by its reciprocal (fast-math): 1 ulp
    check(model, inputs=inputs, ulps=1 if op == "Div" else 0)


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "uint32", "uint64", "float64", "float16"])
def test_max_min(op, dtype):
    check(binary(op, dtype))


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("dtype", ["int16", "uint16"])
def test_max_min_without_an_onnxruntime_kernel(op, dtype):
    model = binary(op, dtype)
    check(model, lambda a, b: {"y": (np.maximum if op == "Max" else np.minimum)(a, b)})


@pytest.mark.parametrize("op", ["Less", "Greater", "Equal", "LessOrEqual"])
@pytest.mark.parametrize("dtype", INTS + FLOATS)
def test_comparisons(op, dtype):
    """Unsigned types compare unsigned: values past 2**(bits-1) are large, not negative."""
    model = binary(op, dtype, out="bool")
    inputs = inputs_of(model, 2)
    inputs["b"][:6] = inputs["a"][0, :6]
    if dtype.startswith("uint"):
        inputs["a"][1, :5] = np.iinfo(dtype).max - np.arange(5, dtype=dtype)
    check(model, inputs=inputs)


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64"])
def test_unsigned_division_modulo_and_sign(dtype):
    """Large unsigned values divide as unsigned; x / 0 and x % 0 give 0 (onnxruntime
    traps, so numpy with that rule is the reference)."""
    model = make_model([node("Div", ["a", "b"], ["q"]), node("Mod", ["a", "b"], ["r"]),
                        node("Sign", ["a"], ["s"])],
                       [("a", (40,), ONNX[dtype]), ("b", (40,), ONNX[dtype])],
                       [("q", (40,), ONNX[dtype]), ("r", (40,), ONNX[dtype]),
                        ("s", (40,), ONNX[dtype])])
    inputs = inputs_of(model, 3)
    info = np.iinfo(dtype)
    inputs["a"][:4] = [info.max, info.max - 1, info.max // 2 + 1, 0]
    inputs["b"][:6] = [3, 0, 7, 5, 0, 1]

    def want(a, b):
        safe = np.where(b == 0, 1, b)
        return {"q": np.where(b == 0, 0, a // safe).astype(dtype),
                "r": np.where(b == 0, 0, a % safe).astype(dtype), "s": np.sign(a)}
    check(model, want, inputs)


# -- float64 math: libm's double functions ------------------------------------------------

MATH64 = {"Exp": np.exp, "Log": np.log, "Tanh": np.tanh, "Sqrt": np.sqrt, "Sin": np.sin,
          "Sigmoid": lambda x: 1 / (1 + np.exp(-x)), "Erf": np.vectorize(__import__("math").erf)}


@pytest.mark.parametrize("op", sorted(MATH64))
def test_float64_math_is_double_precision(op):
    """Within 2 ulps of float64 numpy (float32's polynomials would be ~1e9 ulps off)."""
    model = make_model([node(op, ["x"], ["y"])], [("x", (3, 50), T.DOUBLE)],
                       [("y", (3, 50), T.DOUBLE)])
    inputs = inputs_of(model, 4)
    if op in ("Log", "Sqrt"):
        inputs["x"] = np.abs(inputs["x"]) + 1e-3
    check(model, lambda x: {"y": MATH64[op](x)}, inputs, ulps=2)


def test_float64_softmax_matmul_layernorm_to_double_precision():
    """A float64 block (MatMul, Softmax, LayerNormalization: plain loops, no float32
    recipe) within 1e-13 of the same math in numpy's long double; onnxruntime's double
    LayerNormalization is within 1e-10 of it (1.5e-11 off here)."""
    rng = np.random.default_rng(5)
    w, g, bt = rng.standard_normal((24, 16)), rng.standard_normal(16), rng.standard_normal(16)
    model = make_model([node("MatMul", ["x", "w"], ["m"]), node("Softmax", ["m"], ["s"]),
                        node("LayerNormalization", ["s", "g", "bt"], ["y"], axis=-1)],
                       [("x", (8, 24), T.DOUBLE)], [("y", (8, 16), T.DOUBLE)],
                       initializers=[("w", w), ("g", g), ("bt", bt)], opset=17)
    inputs = inputs_of(model, 6)
    m = inputs["x"].astype(np.longdouble) @ w.astype(np.longdouble)
    s = np.exp(m - m.max(axis=1, keepdims=True))
    s /= s.sum(axis=1, keepdims=True)
    centred = s - s.mean(axis=1, keepdims=True)
    exact = centred / np.sqrt((centred ** 2).mean(axis=1, keepdims=True) + 1e-5) * g + bt
    np.testing.assert_allclose(run_polyc(model, inputs)["y"], exact, rtol=0, atol=1e-13)
    np.testing.assert_allclose(run_onnxruntime(model, inputs)["y"], exact, rtol=0, atol=1e-10)


# -- float16: float32 inside, halves at the edges ----------------------------------------

def test_float16_block_matches_onnxruntime_bit_for_bit():
    """MatMul, Softmax and a sum in float16: onnxruntime computes them in float32 and
    rounds its outputs; so does polyc (its float16 temporaries hold float32s), so the
    outputs are the same halves (float32's last-bit differences do not reach them
    here)."""
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((32, 24)) * 0.3).astype(np.float16)
    model = make_model([node("MatMul", ["x", "w"], ["m"]), node("Softmax", ["m"], ["s"]),
                        node("Mul", ["s", "x2"], ["y"]),
                        node("ReduceSum", ["m", "axes"], ["r"], keepdims=0)],
                       [("x", (16, 32), T.FLOAT16), ("x2", (16, 24), T.FLOAT16)],
                       [("y", (16, 24), T.FLOAT16), ("r", (16,), T.FLOAT16)],
                       initializers=[("w", w), ("axes", np.array([1], np.int64))])
    check(model)


def test_float16_cast_rounds_to_nearest_even():
    x = np.array([1.0, 1 + 2**-11, 1 + 3 * 2**-11, 65504.0, 65520.0, 1e-8, -2.5e-8, 6e-8,
                  np.inf, np.nan], np.float32)
    model = make_model([node("Cast", ["x"], ["h"], to=T.FLOAT16),
                        node("Cast", ["d"], ["h2"], to=T.FLOAT16)],
                       [("x", (10,)), ("d", (10,), T.DOUBLE)],
                       [("h", (10,), T.FLOAT16), ("h2", (10,), T.FLOAT16)])
    check(model, lambda x, d: {"h": x.astype(np.float16),
                               "h2": d.astype(np.float32).astype(np.float16)},
          {"x": x, "d": x.astype(np.float64)})


# -- data movement, reductions, pooling -----------------------------------------------------

@pytest.mark.parametrize("dtype", INTS + FLOATS)
def test_data_movement(dtype):
    """Transpose, Concat, Slice, Gather and Reshape move every bit of every dtype."""
    model = make_model([node("Transpose", ["a"], ["t"], perm=[1, 0]),
                        node("Concat", ["t", "t"], ["c"], axis=0),
                        node("Gather", ["c", "i"], ["g"], axis=1),
                        node("Reshape", ["g", "shape"], ["y"])],
                       [("a", (6, 20), ONNX[dtype])], [("y", (4, 30), ONNX[dtype])],
                       initializers=[("i", np.array([5, 0, 2], np.int64)),
                                     ("shape", np.array([4, 30], np.int64))])
    check(model)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "float64", "float16"])
def test_reductions(op, dtype):
    model = make_model([node(op, ["a"], ["y"], axes=[1], keepdims=0)],
                       [("a", (7, 45), ONNX[dtype])], [("y", (7,), ONNX[dtype])])
    check(model)


@pytest.mark.parametrize("dtype", ["int16", "uint16", "uint32", "uint64"])
def test_integer_sums_wrap(dtype):
    model = make_model([node("ReduceSum", ["a", "axes"], ["y"], keepdims=0)],
                       [("a", (6, 300), ONNX[dtype])], [("y", (6,), ONNX[dtype])],
                       initializers=[("axes", np.array([1], np.int64))])
    check(model, lambda a: {"y": a.sum(axis=1, dtype=dtype)})


@pytest.mark.parametrize("dtype", ["uint8", "int8", "float64", "float16"])
def test_max_pool_pads_with_the_lowest_value(dtype):
    model = make_model([node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                             strides=[2, 2])],
                       [("x", (1, 3, 9, 9), ONNX[dtype])], [("y", (1, 3, 5, 5), ONNX[dtype])])
    check(model, seed=8)


# -- Pow across types -----------------------------------------------------------------------

@pytest.mark.parametrize("base, exponent", [("float32", "int32"), ("float32", "int64"),
                                            ("float64", "float32"), ("int32", "float32"),
                                            ("int64", "int64"), ("float16", "float32")])
def test_pow_with_an_exponent_of_another_type(base, exponent):
    """An integer base is raised in float64 and truncated (onnxruntime's std::pow)."""
    model = make_model([node("Pow", ["x", "e"], ["y"])],
                       [("x", (4, 10), ONNX[base]), ("e", (10,), ONNX[exponent])],
                       [("y", (4, 10), ONNX[base])], opset=15)
    rng = np.random.default_rng(9)
    x = rng.uniform(0.5, 3, size=(4, 10))
    e = rng.integers(0, 4, size=10) if exponent.startswith("int") else rng.uniform(-2, 2, 10)
    check(model, inputs={"x": x.astype(base), "e": e.astype(exponent)}, ulps=1)


# -- every Cast -------------------------------------------------------------------------------

def special(dtype: str) -> np.ndarray:
    """20 values of ``dtype``: its extremes, small and rounding cases, out-of-range and
    non-finite floats."""
    if dtype == "bool":
        return np.array([True, False] * 10)
    if dtype.startswith(("float", "bfloat")):
        values = [-2.7, -0.5, -0.0, 0.4, 2.5, 127.5, 200.7, 300.7, 40000.5, -70000.0, 3e9,
                  -3e9, 5e9, 1e19, -1e19, 2.0**63, np.inf, -np.inf, np.nan, 65504.0]
        with np.errstate(over="ignore"):
            return np.array(values).astype(dtype)
    info = np.iinfo(dtype)
    values = [0, 1, 7, info.max, info.min, info.max - 1, 100, 127, 128, 255, 256, 32767,
              32768, 65535, 2**24 + 1, 2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, 3]
    return np.array(values, dtype=np.uint64 if dtype == "uint64" else np.int64).astype(dtype)


DTYPES = tuple(ONNX)


@pytest.mark.parametrize("source", DTYPES)
@pytest.mark.parametrize("target", DTYPES)
def test_cast_between_every_pair(source, target):
    """Against onnxruntime on 20 special values. Float -> integer as onnxruntime on
    x86-64 (``core.CASTS``); the one case it answers otherwise (float16 -inf and NaN to
    uint32: 0, through its scalar path) is checked against polyc's rule."""
    model = make_model([node("Cast", ["x"], ["y"], to=ONNX[target])],
                       [("x", (20,), ONNX[source])], [("y", (20,), ONNX[target])])
    x = special(source)
    if "bfloat16" in (source, target):  # onnxruntime takes no bfloat16 arrays from numpy:
        check(model, lambda x: {"y": bfloat16_cast(x, source, target)}, {"x": x})
        return
    want = run_onnxruntime(model, {"x": x})
    if (source, target) == ("float16", "uint32"):
        want["y"][~np.isfinite(x) & ~(x > 0)] = 2**31
    check(model, lambda x: want, {"x": x})


def bfloat16_cast(x, source, target):
    """A Cast from or to bfloat16 through float32: onnxruntime's Cast to or from float32
    (exact from bfloat16), ml_dtypes' rounding to bfloat16 (nearest-even)."""
    def ort_cast(value, to):
        model = make_model([node("Cast", ["x"], ["y"], to=ONNX[to])],
                           [("x", value.shape, ONNX[value.dtype.name])],
                           [("y", value.shape, ONNX[to])])
        return run_onnxruntime(model, {"x": value})["y"]
    single = x.astype(np.float32) if source == "bfloat16" else ort_cast(x, "float32")
    return single.astype("bfloat16") if target == "bfloat16" else ort_cast(single, target)


# -- what stays refused ----------------------------------------------------------------------

def test_float8_e8m0_input_is_refused_naming_the_tensor():
    model = make_model([node("Cast", ["h"], ["y"], to=T.FLOAT)], [("h", (3,), T.FLOAT8E8M0)],
                       [("y", (3,))], opset=24)
    with pytest.raises(UnsupportedDtypeError, match="graph input 'h' has dtype float8_e8m0"):
        polyc.compile(model)


def test_cast_to_float8_e8m0_is_refused_naming_node_and_tensor():
    model = make_model([node("Cast", ["x"], ["d"], to=T.FLOAT8E8M0, name="to8"),
                        node("Cast", ["d"], ["y"], to=T.FLOAT)], [("x", (3,))], [("y", (3,))],
                       opset=24)
    with pytest.raises(UnsupportedDtypeError, match="Cast node 'to8'.*'x' to dtype float8_e8m0"):
        polyc.compile(model)


# -- float16 = float32 rounded at the end ---------------------------------------------------

HALF_OPS = {
    "Exp": {}, "Tanh": {}, "Sigmoid": {}, "Erf": {}, "HardSwish": {}, "Elu": {"alpha": 0.7},
    "LeakyRelu": {"alpha": 0.1}, "Softplus": {}, "Softmax": {}, "LogSoftmax": {},
    "Hardmax": {}, "ReduceMean": {"keepdims": 0}, "ReduceL2": {}, "GlobalAveragePool": {},
    "LpNormalization": {}, "LRN": {"size": 3}, "DepthToSpace": {"blocksize": 2},
    "AveragePool": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
    "MaxPool": {"kernel_shape": [2, 2], "strides": [2, 2]},
}


@pytest.mark.parametrize("op", sorted(HALF_OPS))
def test_float16_op_is_its_float32_op_rounded(op):
    """A float16 model's output is, bit for bit, the float32 model's on the same
    (half-valued) inputs rounded to float16: the float16 semantics in one line, checked
    on ops whose lowering builds constants and temporaries of its own (counts, ones,
    positions)."""
    def model(dtype):
        return make_model([node(op, ["x"], ["y"], **HALF_OPS[op])], [("x", (1, 4, 6, 6), dtype)],
                          [helper.make_tensor_value_info("y", 0, None)], opset=18)
    x = np.random.default_rng(10).uniform(-2, 2, size=(1, 4, 6, 6)).astype(np.float16)
    half = run_polyc(model(T.FLOAT16), {"x": x})["y"]
    single = run_polyc(model(T.FLOAT), {"x": x.astype(np.float32)})["y"]
    assert half.dtype == np.float16
    np.testing.assert_array_equal(half, single.astype(np.float16))


# -- bitwise ops, shifts, Mod-28 ---------------------------------------------------------------

@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", INTS)
def test_bitwise(op, dtype):
    check(make_model([node(op, ["a", "b"], ["y"])],
                     [("a", (5, 37), ONNX[dtype]), ("b", (37,), ONNX[dtype])],
                     [("y", (5, 37), ONNX[dtype])], opset=18))


@pytest.mark.parametrize("dtype", INTS)
def test_bitwise_not(dtype):
    check(make_model([node("BitwiseNot", ["a"], ["y"])], [("a", (5, 37), ONNX[dtype])],
                     [("y", (5, 37), ONNX[dtype])], opset=18))


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", ["uint8", "uint32", "uint64"])
def test_bit_shift_of_unsigned_integers(direction, dtype):
    """BitShift-11 against onnxruntime (no uint16 kernel there: the next test covers
    it), amounts below the width."""
    model = make_model([node("BitShift", ["x", "y"], ["z"], direction=direction)],
                       [("x", (4, 30), ONNX[dtype]), ("y", (30,), ONNX[dtype])],
                       [("z", (4, 30), ONNX[dtype])], opset=11)
    inputs = inputs_of(model, 11)
    inputs["y"] = (inputs["y"] % (np.iinfo(dtype).bits)).astype(dtype)
    check(model, inputs=inputs)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint16"])
def test_bit_shift_28_signed_and_out_of_range(direction, dtype):
    """BitShift-28: arithmetic right shifts of signed values; an amount that is negative
    or at least the width gives 0, or -1 for a right shift of a negative value (numpy's
    shifts with that rule are the reference: onnxruntime has no version 28)."""
    bits = np.iinfo(dtype).bits
    model = make_model([node("BitShift", ["x", "y"], ["z"], direction=direction)],
                       [("x", (24,), ONNX[dtype]), ("y", (24,), ONNX[dtype])],
                       [("z", (24,), ONNX[dtype])], opset=28)
    x = inputs_of(model, 12)["x"]
    x[:4] = [-1, np.iinfo(dtype).min, np.iinfo(dtype).max, 5] if dtype != "uint16" else \
        [1, 2, 65535, 5]
    amounts = [0, 1, bits - 1, bits, bits + 3, 3] * 4
    if dtype != "uint16":
        amounts[5::6] = [-1] * 4
    y = np.array(amounts).astype(dtype)

    def want(x, y):
        inside = (y.astype(np.int64) >= 0) & (y.astype(np.int64) < bits)
        safe = np.where(inside, y, 0).astype(dtype)
        shifted = np.left_shift(x, safe) if direction == "LEFT" else np.right_shift(x, safe)
        fill = np.where((x < 0) & (direction == "RIGHT"), -1, 0).astype(dtype)
        return {"z": np.where(inside, shifted, fill).astype(dtype)}
    check(model, want, {"x": x, "y": y})


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_mod_28_on_floats_is_numpy_mod(dtype):
    """Mod-28 with fmod=0 on floats: the sign of the divisor, and the spec's special
    cases (signed zeros, infinities, NaN), which numpy.mod follows."""
    x = np.array([5.5, -5.5, 5.5, -5.5, 0.0, -0.0, 0.0, np.inf, 3.0, 3.0, -3.0, 1.0,
                  np.nan, 7.25, -0.5, 6.0], dtype)
    d = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, -3.0, 2.0, 0.0, np.inf, np.inf, -np.inf,
                  1.0, 0.5, 0.25, 3.0], dtype)
    model = make_model([node("Mod", ["x", "d"], ["y"])],
                       [("x", (16,), ONNX[dtype]), ("d", (16,), ONNX[dtype])],
                       [("y", (16,), ONNX[dtype])], opset=28)
    got = run_polyc(model, {"x": x, "d": d})["y"]
    with np.errstate(all="ignore"):
        want = np.mod(x, d)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_bfloat16_block_is_its_float32_block_rounded():
    """bfloat16, as float16: float32 inside, one rounding (nearest-even, ml_dtypes') of
    each output."""
    def model(dtype):
        return make_model([node("MatMul", ["x", "w"], ["m"]), node("Softmax", ["m"], ["y"])],
                          [("x", (6, 16), dtype), ("w", (16, 10), dtype)], [("y", (6, 10), dtype)])
    rng = np.random.default_rng(13)
    x, w = (rng.standard_normal(s).astype("bfloat16") for s in ((6, 16), (16, 10)))
    narrow = run_polyc(model(T.BFLOAT16), {"x": x, "w": w})["y"]
    single = run_polyc(model(T.FLOAT), {"x": x.astype(np.float32), "w": w.astype(np.float32)})["y"]
    assert narrow.dtype.name == "bfloat16"
    np.testing.assert_array_equal(narrow.view(np.uint16), single.astype("bfloat16").view(np.uint16))


# -- BitCast ---------------------------------------------------------------------------------

@pytest.mark.parametrize("source,target", [("float32", "int32"), ("int32", "float32"),
                                           ("float64", "uint64"), ("int16", "uint16"),
                                           ("uint8", "int8"), ("bool", "uint8")])
def test_bitcast_keeps_the_bits(source, target):
    """The bytes numpy's view gives: NaN payloads, -0.0 and wrapped integers included."""
    x = special(source)
    model = make_model([node("BitCast", ["x"], ["y"], to=ONNX[target])],
                       [("x", x.shape, ONNX[source])], [("y", x.shape, ONNX[target])], opset=26)
    check(model, lambda x: {"y": x.view(target)}, {"x": x})


def test_bitcast_of_a_narrow_float_is_refused():
    model = make_model([node("BitCast", ["x"], ["y"], to=T.INT16, name="bits")],
                       [("x", (3,), T.FLOAT16)], [("y", (3,), T.INT16)], opset=26)
    with pytest.raises(UnsupportedDtypeError, match="BitCast node 'bits'.*narrow floats"):
        polyc.compile(model)
