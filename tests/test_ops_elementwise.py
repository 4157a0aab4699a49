"""Elementwise ops (activations, math, variadic, logic, casts, Dropout) compiled by
polyc and compared with onnxruntime, and their reference-interpreter run too.

Inputs are seeded and include NaN, +-inf, +-0, ties for Round and large magnitudes, so
the NaN and infinity behaviour is compared as well (NaNs must sit where onnxruntime's
are). Tolerances rtol=1e-4, atol=1e-5. Logic ops give bool, which a graph output cannot
be: they are tested inside graphs ending in Where or Cast to FLOAT.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import polyc
from polyc.errors import ShapeError, UnsupportedOpError
from polyc.frontend import import_model
from polyc.frontend.core import Map
from polyc.frontend.ops import OPS

from onnx_helpers import make_model, run_onnxruntime, run_polyc, run_reference

RTOL, ATOL = 1e-4, 1e-5
NEWEST = onnx.defs.onnx_opset_version()
BOOL, FLOAT = TensorProto.BOOL, TensorProto.FLOAT
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 100.0, -100.0,
           1e-3, -1e-3, 1.0, -1.0]


def node(op, inputs, outputs=("y",), **attrs):
    return helper.make_node(op, list(inputs), list(outputs), **attrs)


def values(shape, seed: int, special: bool = True) -> np.ndarray:
    """Seeded float32 values in [-4, 4), the first ones replaced by SPECIAL."""
    x = np.asarray(np.random.default_rng(seed).uniform(-4, 4, size=shape), np.float32)
    if special:
        flat = x.reshape(-1)
        count = min(len(SPECIAL), flat.size)
        flat[:count] = SPECIAL[:count]
    return x


def check(model, feeds, **options):
    """polyc (with ``options``) and the reference interpreter match onnxruntime."""
    expected = run_onnxruntime(model, feeds)
    actual = run_polyc(model, feeds, **options)
    reference = run_reference(model, feeds)
    for name, want in expected.items():
        assert actual[name].shape == want.shape, name
        np.testing.assert_allclose(actual[name], want, rtol=RTOL, atol=ATOL, err_msg=name)
        np.testing.assert_allclose(reference[name], want, rtol=RTOL, atol=ATOL, err_msg=name)


def check_unary(op, attrs, opset, shape=(4, 9), seed=0):
    model = make_model([node(op, ["x"], **attrs)], [("x", shape)], ["y"], opset=opset)
    check(model, {"x": values(shape, seed)})


# -- activations -----------------------------------------------------------------------

ACTIVATIONS = [
    ("LeakyRelu", {}, 11), ("LeakyRelu", {"alpha": 0.3}, 16),
    ("Elu", {}, 11), ("Elu", {"alpha": 0.5}, 22),
    ("Selu", {}, 11), ("Selu", {"alpha": 1.5, "gamma": 2.0}, 22),
    ("HardSigmoid", {}, 11), ("HardSigmoid", {"alpha": 0.4, "beta": 0.3}, 22),
    ("HardSwish", {}, 14), ("HardSwish", {}, 22),
    ("Softplus", {}, 11), ("Softplus", {}, 22),
    ("Softsign", {}, 11), ("Softsign", {}, 22),
    ("Mish", {}, 18), ("Mish", {}, 22),
    ("Celu", {}, 12), ("Celu", {"alpha": 2.0}, 22),
    ("ThresholdedRelu", {}, 11), ("ThresholdedRelu", {"alpha": 0.5}, 22),
    ("Gelu", {}, 20), ("Gelu", {"approximate": "tanh"}, 20),
    ("Gelu", {"approximate": "none"}, 22),
    ("Swish", {}, 24), ("Swish", {"alpha": 0.7}, 24),
    ("Shrink", {}, 9), ("Shrink", {"lambd": 1.0, "bias": 0.3}, 9),
]


@pytest.mark.parametrize("op,attrs,opset", ACTIVATIONS)
def test_activation(op, attrs, opset):
    check_unary(op, attrs, opset, shape=(3, 13), seed=opset)


def test_softplus_keeps_relative_precision_for_very_negative_x():
    """log(1 + e^x) is e^x there; log(1 + t) alone would round to 0 below x = -16.6."""
    x = np.linspace(-90, 5, 97, dtype=np.float32)
    model = make_model([node("Softplus", ["x"])], [("x", x.shape)], ["y"])
    expected = np.log1p(np.exp(x.astype(np.float64)))
    np.testing.assert_allclose(run_polyc(model, {"x": x})["y"], expected, rtol=1e-5, atol=0)


@pytest.mark.parametrize("opset", [11, 16])
@pytest.mark.parametrize("slope_shape", [(), (1,), (9,), (4, 1), (4, 9)])
def test_prelu_slope_broadcasts_to_x(slope_shape, opset):
    slope = ("slope", values(slope_shape, 1, special=False) / 4)
    model = make_model([node("PRelu", ["x", "slope"])], [("x", (4, 9))], ["y"],
                       initializers=[slope], opset=opset)
    check(model, {"x": values((4, 9), 2)})


def test_prelu_slope_as_graph_input():
    model = make_model([node("PRelu", ["x", "slope"])], [("x", (2, 3, 5)), ("slope", (3, 1))],
                       ["y"])
    check(model, {"x": values((2, 3, 5), 3), "slope": values((3, 1), 4, special=False)})


# -- math ------------------------------------------------------------------------------

@pytest.mark.parametrize("op,opset", [("Reciprocal", 11), ("Reciprocal", 13), ("Sign", 11),
                                      ("Sign", 13), ("Floor", 11), ("Floor", 13),
                                      ("Ceil", 11), ("Ceil", 13), ("Round", 11),
                                      ("Round", 22), ("Erf", 11), ("Erf", 13),
                                      ("Sin", 7), ("Cos", 22), ("Tan", 7), ("Asin", 22),
                                      ("Acos", 7), ("Atan", 22), ("Sinh", 9),
                                      ("Cosh", 22), ("Asinh", 9), ("Acosh", 22),
                                      ("Atanh", 9)])
def test_unary_math(op, opset):
    check_unary(op, {}, opset)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inverse_hyperbolic_functions_at_their_edges(dtype):
    """libm's asinh/acosh/atanh: tiny and huge arguments, the ends of the domains (NaN
    outside, infinities at atanh(+-1)) against numpy."""
    x = np.array([0.0, -0.0, 1e-30, -1e-8, 0.5, 1.0, -1.0, 1.5, 1e20, -1e30, 3e38, -2.0,
                  np.inf, -np.inf, np.nan], dtype)
    kind = FLOAT if dtype == "float32" else TensorProto.DOUBLE
    for op, fn in (("Asinh", np.arcsinh), ("Acosh", np.arccosh), ("Atanh", np.arctanh)):
        model = make_model([node(op, ["x"], ["y"])], [("x", x.shape, kind)],
                           [("y", x.shape, kind)], opset=9)
        got = run_polyc(model, {"x": x})["y"]
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(got, fn(x), rtol=2e-7 if dtype == "float32" else 1e-15,
                                       err_msg=op)


@pytest.mark.parametrize("exponent", [2.0, 3.0, 0.5, 1.0, -1.0, 1.7, -0.5, 0.0])
def test_pow_constant_scalar_exponent(exponent):
    model = make_model([node("Pow", ["x", "e"])], [("x", (4, 9))], ["y"],
                       initializers=[("e", np.float32(exponent))], opset=15)
    check(model, {"x": values((4, 9), 5)})


def test_pow_special_exponents_lower_without_powf():
    for exponent, fn in [(2.0, "mul"), (3.0, "mul"), (0.5, "select"), (-1.0, "div")]:
        model = make_model([node("Pow", ["x", "e"])], [("x", (3,))], ["y"],
                           initializers=[("e", np.float32(exponent))])
        (op,) = import_model(model).ops
        assert isinstance(op, Map) and op.expr.fn == fn and "pow" not in str(op.expr)


@pytest.mark.parametrize("opset", [12, 13, 15])
def test_pow_integer_constant_exponent(opset):
    model = make_model([node("Pow", ["x", "e"])], [("x", (2, 5))], ["y"],
                       initializers=[("e", np.array([3], np.int64))], opset=opset)
    check(model, {"x": values((2, 5), 6)})


@pytest.mark.parametrize("x_shape,e_shape", [((4, 9), (4, 9)), ((4, 9), (9,)),
                                             ((4, 1), (1, 9)), ((4, 9), ())])
def test_pow_tensor_exponent_broadcasts(x_shape, e_shape):
    model = make_model([node("Pow", ["x", "e"])], [("x", x_shape), ("e", e_shape)], ["y"])
    exponent = np.asarray(values(e_shape, 8, special=False) / 2, np.float32)
    check(model, {"x": values(x_shape, 7), "e": exponent})


CLIP_CASES = [
    ("no bounds", [], []),
    ("min", ["lo"], [("lo", -1.0)]),
    ("max", ["", "hi"], [("hi", 0.5)]),
    ("both", ["lo", "hi"], [("lo", -1.0), ("hi", 0.5)]),
    ("min > max", ["lo", "hi"], [("lo", 2.0), ("hi", 1.0)]),
    ("NaN min", ["lo", "hi"], [("lo", np.nan), ("hi", 1.0)]),
]


@pytest.mark.parametrize("opset", [11, 12, 13])
@pytest.mark.parametrize("case,bounds,consts", CLIP_CASES, ids=[c[0] for c in CLIP_CASES])
def test_clip_constant_bounds(case, bounds, consts, opset):
    model = make_model([node("Clip", ["x", *bounds])], [("x", (4, 9))], ["y"],
                       initializers=[(n, np.float32(v)) for n, v in consts], opset=opset)
    check(model, {"x": values((4, 9), 9)})


def test_clip_bounds_as_graph_inputs():
    model = make_model([node("Clip", ["x", "lo", "hi"])],
                       [("x", (4, 9)), ("lo", ()), ("hi", ())], ["y"])
    check(model, {"x": values((4, 9), 10), "lo": np.array(-0.5, np.float32),
                  "hi": np.array(1.5, np.float32)})


# -- variadic --------------------------------------------------------------------------

VARIADIC_SHAPES = [[(4, 9)], [(4, 9), (4, 9)], [(4, 9), (9,), (4, 1)],
                   [(2, 1, 3), (4, 1), (), (1, 4, 3)]]


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
@pytest.mark.parametrize("shapes", VARIADIC_SHAPES, ids=lambda s: f"{len(s)}inputs")
def test_variadic(op, shapes, opset):
    names = [f"x{k}" for k in range(len(shapes))]
    model = make_model([node(op, names)], list(zip(names, shapes)), ["y"], opset=opset)
    check(model, {n: values(s, k) for k, (n, s) in enumerate(zip(names, shapes))})


def test_variadic_op_is_one_map():
    model = make_model([node("Sum", ["a", "b", "c", "d"])],
                       [(n, (3, 4)) for n in "abcd"], ["y"])
    (op,) = import_model(model).ops
    assert isinstance(op, Map) and str(op.expr).count("add(") == 3


def _longest_add_chain(llvm_ir: str) -> int:
    """The most fadd instructions that depend on one another in ``llvm_ir``."""
    depth: dict[str, int] = {}
    for line in llvm_ir.splitlines():
        found = re.match(r'\s*(%"?[\w.]+"?) = fadd [^%]*(%"?[\w.]+"?), (%"?[\w.]+"?)', line)
        if found:
            result, x, y = found.groups()
            depth[result] = 1 + max(depth.get(x, 0), depth.get(y, 0))
    return max(depth.values())


def test_a_long_sum_is_interleaved_partial_sums_unless_bit_exact():
    """A Sum of 9 inputs is one statement adding 9 loads. With fast math (the default)
    they are summed as 4 interleaved partial sums added pairwise, 4 dependent adds
    instead of 8 (the latency of a 5x5 window's 25 taps); without, in the program's
    order, bit for bit numpy's left-to-right float32 sum."""
    names = [f"x{k}" for k in range(9)]
    model = make_model([node("Sum", names)], [(n, (100,)) for n in names], ["y"])
    inputs = {n: values((100,), k, special=False) for k, n in enumerate(names)}
    ordered = functools.reduce(np.add, (inputs[n] for n in names))
    fast = polyc.compile(model)
    assert _longest_add_chain(fast.compilation.llvm_ir) == 4
    np.testing.assert_allclose(fast.run(inputs)["y"], ordered, rtol=1e-6, atol=1e-4)
    exact = polyc.compile(model, fast_math=False)
    assert _longest_add_chain(exact.compilation.llvm_ir) == 8
    np.testing.assert_array_equal(exact.run(inputs)["y"], ordered)


# -- Dropout ---------------------------------------------------------------------------

def test_dropout_10_is_identity():
    model = make_model([node("Dropout", ["x"], ratio=0.3)], [("x", (4, 9))], ["y"], opset=11)
    check(model, {"x": values((4, 9), 11)})


@pytest.mark.parametrize("opset", [12, 13, 22])
def test_dropout_inference_with_ratio_and_training_mode_false(opset):
    consts = [("ratio", np.float32(0.4)), ("mode", np.array(False))]
    model = make_model([node("Dropout", ["x", "ratio", "mode"], ["y", "unused_mask"])],
                       [("x", (4, 9))], ["y"], initializers=consts, opset=opset)
    check(model, {"x": values((4, 9), 12)})


def test_dropout_mask_is_all_true_in_inference():
    nodes = [node("Dropout", ["x"], ["d", "mask"]), node("Cast", ["mask"], ["m"], to=FLOAT),
             node("Add", ["d", "m"])]
    model = make_model(nodes, [("x", (4, 9))], ["y"], opset=13)
    check(model, {"x": values((4, 9), 13)})


# -- logic -----------------------------------------------------------------------------

COMPARISONS = [("Equal", 11), ("Equal", 13), ("Equal", 19), ("Less", 11), ("Less", 13),
               ("LessOrEqual", 12), ("LessOrEqual", 16), ("Greater", 11), ("Greater", 13),
               ("GreaterOrEqual", 12), ("GreaterOrEqual", 16)]


@pytest.mark.parametrize("op,opset", COMPARISONS)
def test_comparison_in_where(op, opset):
    """Where(op(a, b), a, b), broadcasting (4, 9) against (9,); NaN compares false."""
    nodes = [node(op, ["a", "b"], ["c"]), node("Where", ["c", "a", "b"])]
    model = make_model(nodes, [("a", (4, 9)), ("b", (9,))], ["y"], opset=opset)
    b = values((9,), 15)
    b[1] = 0.0  # meets a's zeros
    check(model, {"a": values((4, 9), 14), "b": b})


@pytest.mark.parametrize("op", ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"])
def test_comparison_cast_to_float(op):
    nodes = [node(op, ["a", "b"], ["c"]), node("Cast", ["c"], to=FLOAT)]
    model = make_model(nodes, [("a", (4, 9)), ("b", (4, 1))], ["y"], opset=16)
    check(model, {"a": values((4, 9), 16), "b": np.float32([[0.0], [0.5], [np.nan], [1.0]])})


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_binary_logic(op):
    nodes = [node("Greater", ["a", "zero"], ["p"]), node("Less", ["b", "half"], ["q"]),
             node(op, ["p", "q"], ["r"]), node("Cast", ["r"], to=FLOAT)]
    model = make_model(nodes, [("a", (4, 9)), ("b", (9,))], ["y"],
                       initializers=[("zero", np.float32(0)), ("half", np.float32(0.5))])
    check(model, {"a": values((4, 9), 17), "b": values((9,), 18)})


def test_not_and_bool_constant_condition():
    cond = ("cond", np.array([[True], [False], [True], [False]]))
    nodes = [node("Not", ["cond"], ["n"]), node("Less", ["a", "b"], ["l"]),
             node("And", ["n", "l"], ["c"]), node("Where", ["c", "a", "b"])]
    model = make_model(nodes, [("a", (4, 9)), ("b", (4, 9))], ["y"], initializers=[cond])
    check(model, {"a": values((4, 9), 19), "b": values((4, 9), 20)})


@pytest.mark.parametrize("opset", [11, 16])
def test_where_three_way_broadcast(opset):
    nodes = [node("Greater", ["c", "zero"], ["cond"]), node("Where", ["cond", "x", "y0"])]
    model = make_model(nodes, [("c", (2, 1, 5)), ("x", (3, 1)), ("y0", (1, 1, 5))], ["y"],
                       initializers=[("zero", np.float32(0))], opset=opset)
    check(model, {"c": values((2, 1, 5), 21), "x": values((3, 1), 22),
                  "y0": values((1, 1, 5), 23)})


@pytest.mark.parametrize("opset", [11, 13, 20])
def test_isnan(opset):
    nodes = [node("IsNaN", ["x"], ["n"]), node("Cast", ["n"], to=FLOAT)]
    check(make_model(nodes, [("x", (4, 9))], ["y"], opset=opset), {"x": values((4, 9), 24)})


@pytest.mark.parametrize("opset", [11, 20])
@pytest.mark.parametrize("negative,positive", [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_isinf(negative, positive, opset):
    nodes = [node("IsInf", ["x"], ["n"], detect_negative=negative, detect_positive=positive),
             node("Cast", ["n"], to=FLOAT)]
    check(make_model(nodes, [("x", (4, 9))], ["y"], opset=opset), {"x": values((4, 9), 25)})


# -- casts -----------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [11, 13, 19, 21, 23])
def test_cast_to_bool_and_back(opset):
    """NaN, inf and -0 as bool: true, true, false."""
    nodes = [node("Cast", ["x"], ["b"], to=BOOL), node("Cast", ["b"], ["f"], to=FLOAT),
             node("Cast", ["f"], to=FLOAT)]
    check(make_model(nodes, [("x", (4, 9))], ["y"], opset=opset), {"x": values((4, 9), 26)})


def test_castlike_to_a_float_graph_input():
    nodes = [node("Less", ["x", "t"], ["b"]), node("CastLike", ["b", "t"], ["f"]),
             node("CastLike", ["half", "x"], ["h"]), node("Mul", ["f", "h"])]
    model = make_model(nodes, [("x", (4, 9)), ("t", (9,))], ["y"],
                       initializers=[("half", np.float32(0.5))], opset=15)
    check(model, {"x": values((4, 9), 27), "t": values((9,), 28)})


def test_newest_opset_against_onnx_reference():
    """Celu-28 and Cast-28 (newer than onnxruntime): the ONNX reference evaluator."""
    nodes = [node("Celu", ["x"], ["c"], alpha=1.5), node("Cast", ["c"], ["b"], to=BOOL),
             node("Cast", ["b"], ["f"], to=FLOAT), node("Add", ["c", "f"])]
    model = make_model(nodes, [("x", (4, 9))], ["y"], opset=28)
    x = values((4, 9), 29)
    (expected,) = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_allclose(run_polyc(model, {"x": x})["y"], expected, rtol=RTOL, atol=ATOL)


# -- a chain under every option ----------------------------------------------------------

@pytest.mark.parametrize("options", [{}, {"fuse": "none"}, {"tile": False}, {"fuse": "max"}])
def test_chain_under_options(options):
    nodes = [node("Gelu", ["a"], ["g"]), node("Clip", ["b", "lo", "hi"], ["c"]),
             node("Greater", ["g", "c"], ["m"]), node("Where", ["m", "g", "c"], ["w"]),
             node("Mish", ["w"], ["h"]), node("Max", ["h", "a", "c"], ["mx"]),
             node("Pow", ["mx", "two"], ["p"]), node("Mean", ["p", "b"])]
    consts = [("lo", np.float32(-1)), ("hi", np.float32(1)), ("two", np.float32(2))]
    model = make_model(nodes, [("a", (16, 33)), ("b", (33,))], ["y"], initializers=consts,
                       opset=20)
    check(model, {"a": values((16, 33), 30), "b": values((33,), 31)}, **options)


# -- versions and errors -----------------------------------------------------------------

MY_OPS = sorted({
    "LeakyRelu", "PRelu", "ThresholdedRelu", "Elu", "Celu", "Selu", "HardSigmoid",
    "HardSwish", "Softplus", "Softsign", "Mish", "Gelu", "Erf", "Pow", "Reciprocal", "Sign",
    "Floor", "Ceil", "Round", "Clip", "Max", "Min", "Sum", "Mean", "Dropout", "Equal", "Less",
    "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor", "Where", "IsNaN",
    "IsInf", "Cast", "CastLike"})


@pytest.mark.parametrize("op", MY_OPS)
def test_every_version_from_opset_11_is_registered(op):
    for opset in range(11, NEWEST + 1):
        try:
            schema = onnx.defs.get_schema(op, opset, "")
        except onnx.defs.SchemaError:
            continue  # not an op yet at this opset
        assert (op, schema.since_version) in OPS, f"{op}-{schema.since_version}"


def compile_error(nodes, inputs, initializers=(), opset=20, out_shape=(3,)):
    model = make_model(nodes, inputs, [("y", out_shape)], initializers=initializers,
                       opset=opset, check=False)
    return lambda: run_polyc(model, {})


@pytest.mark.parametrize("nodes,inputs,consts,match", [
    ([node("Gelu", ["x"], approximate="erf")], [("x", (3,))], [], "approximate='erf'"),
    ([node("Dropout", ["x", "", "mode"])], [("x", (3,))], [("mode", np.array(True))],
     r"training_mode=true \(random dropout\) is not supported"),
    ([node("Greater", ["s", "s"], ["m"]), node("Dropout", ["x", "", "m"])],
     [("x", (3,)), ("s", ())], [], "training_mode must be absent or a constant false"),
])
def test_unsupported(nodes, inputs, consts, match):
    with pytest.raises(UnsupportedOpError, match=match):
        compile_error(nodes, inputs, consts)()


def test_clip_bound_must_be_scalar():
    run = compile_error([node("Clip", ["x", "lo"])], [("x", (3,))],
                        [("lo", np.float32([0, 1, 2]))])
    with pytest.raises(ShapeError, match="'min' must be a scalar"):
        run()


def test_prelu_slope_must_broadcast_to_x():
    run = compile_error([node("PRelu", ["x", "s"])], [("x", (3,))],
                        [("s", np.float32([[1], [2]]))])
    with pytest.raises(ShapeError, match="slope: cannot broadcast"):
        run()


def test_trigonometric_ops_in_an_artifact_link_libm(tmp_path):
    import polyc
    model = make_model([node("Sin", ["x"], ["s"]), node("Cosh", ["s"], ["y"])], [("x", (3, 17))],
                       ["y"], opset=22)
    feeds = {"x": values((3, 17), 5)}
    polyc.compile(model).save(tmp_path / "trig.so")
    got = polyc.load(tmp_path / "trig.so").run(feeds)["y"]
    np.testing.assert_allclose(got, run_onnxruntime(model, feeds)["y"], rtol=RTOL, atol=ATOL)
