"""int64, int32 and bool tensors at run time: graph inputs and outputs, casts, integer
arithmetic, comparisons and logic, reductions, gathers with run-time indices, ArgMax
and ArgMin. Every result is compared with onnxruntime on seeded inputs, exactly for
integer and bool results (float32 results within RTOL/ATOL), and with the frontend's
numpy reference interpreter."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import polyc
from polyc.errors import UnsupportedDtypeError
from polyc.frontend import import_model
from polyc.frontend.core import Lookup
from polyc.scop.build import build_scop

from onnx_helpers import ATOL, RTOL, make_model, run_onnxruntime, run_polyc, run_reference

F, I64, I32, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL
node = helper.make_node
NUMPY = {F: np.float32, I64: np.int64, I32: np.int32, B: np.bool_}


def typed_inputs(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs of each graph input's dtype: floats in [-4, 4), integers in
    [-50, 50), bools half true."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        ttype = value.type.tensor_type
        shape = [d.dim_value for d in ttype.shape.dim]
        dtype = NUMPY[ttype.elem_type]
        if dtype == np.float32:
            feeds[value.name] = rng.uniform(-4, 4, size=shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[value.name] = rng.random(size=shape) < 0.5
        else:
            feeds[value.name] = rng.integers(-50, 50, size=shape).astype(dtype)
    return feeds


def assert_same(got: np.ndarray, want: np.ndarray, name: str) -> None:
    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    assert got.shape == want.shape, name
    if want.dtype == np.float32:
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=name)
    else:
        np.testing.assert_array_equal(got, want, err_msg=name)


def check(model, inputs=None, seed=0, **options) -> dict:
    """polyc (compiled with ``options``) and the reference interpreter against
    onnxruntime."""
    inputs = typed_inputs(model, seed) if inputs is None else inputs
    expected = run_onnxruntime(model, inputs)
    for actual in (run_polyc(model, inputs, **options), run_reference(model, inputs)):
        assert set(actual) == set(expected)
        for name, want in expected.items():
            assert_same(actual[name], want, name)
    return expected


# -- inputs and outputs through a few ops ----------------------------------------------

@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Max", "Min"])
@pytest.mark.parametrize("dtype", [I64, I32])
def test_integer_arithmetic(op, dtype):
    model = make_model([node(op, ["a", "b"], ["y"])], [("a", (4, 37), dtype), ("b", (37,), dtype)],
                       [("y", (4, 37), dtype)])
    check(model)


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
@pytest.mark.parametrize("dtype", [F, I64, I32])
def test_comparisons_give_bool(op, dtype):
    model = make_model([node(op, ["a", "b"], ["y"])], [("a", (3, 40), dtype), ("b", (40,), dtype)],
                       [("y", (3, 40), B)], opset=16)
    inputs = typed_inputs(model, 1)
    inputs["b"][:5] = inputs["a"][0, :5]  # some equal pairs
    check(model, inputs)


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic_on_bool_inputs(op):
    model = make_model([node(op, ["a", "b"], ["t"]), node("Not", ["t"], ["y"])],
                       [("a", (5, 33), B), ("b", (33,), B)], [("y", (5, 33), B)])
    check(model)


def test_where_with_a_bool_condition_input():
    model = make_model([node("Where", ["c", "x", "y"], ["z"])],
                       [("c", (4, 20), B), ("x", (4, 20)), ("y", (20,))], [("z", (4, 20))])
    check(model)
    ints = make_model([node("Where", ["c", "x", "y"], ["z"])],
                      [("c", (20,), B), ("x", (3, 20), I64), ("y", (3, 20), I64)],
                      [("z", (3, 20), I64)])
    check(ints)


def test_long_integer_rows_use_vector_code_and_stay_exact():
    """64 x 100 elements: the vectorized path (16 lanes, masked tails) for int64, int32
    and bool statements; values beyond 2^53 keep every bit."""
    model = make_model([node("Add", ["a", "b"], ["s"]), node("Mul", ["s", "b"], ["y"]),
                        node("Greater", ["s", "b"], ["g"]), node("Not", ["g"], ["n"]),
                        node("Cast", ["s"], ["t"], to=I32)],
                       [("a", (64, 100), I64), ("b", (64, 100), I64)],
                       [("y", (64, 100), I64), ("n", (64, 100), B), ("t", (64, 100), I32)])
    inputs = typed_inputs(model, 2)
    inputs["a"][0, :4] = [2**53 + 1, 2**62, -(2**62) - 3, 2**40 + 7]
    check(model, inputs)
    check(model, inputs, tile=False)


# -- casts --------------------------------------------------------------------------------

SPECIAL = {
    F: np.array([-2.7, -0.5, -0.0, 0.0, 0.4, 2.5, 1e6 + 0.5, 16777217.0, -3e9, 3e9, 1e19,
                 -1e19, np.inf, -np.inf, np.nan, 2.0**31, -(2.0**31), 2.0**63], np.float32),
    I64: np.array([0, 1, -1, 7, -7, 2**24 + 1, 2**31, -(2**31) - 1, 2**53 + 1, -(2**53) - 3,
                   2**62 + 12345, np.iinfo(np.int64).max, np.iinfo(np.int64).min, 100, 255,
                   -256, 3, 4], np.int64),
    I32: np.array([0, 1, -1, 7, -7, 2**24 + 1, 2**30, -(2**30), np.iinfo(np.int32).max,
                   np.iinfo(np.int32).min, 100, 255, -256, 3, 4, 5, 6, 8], np.int32),
    B: np.array([True, False] * 9),
}


@pytest.mark.parametrize("source", [F, I64, I32, B])
@pytest.mark.parametrize("target", [F, I64, I32, B])
def test_cast_matrix(source, target):
    """Float -> integer truncates; NaN, infinities and out-of-range values give the
    integer minimum (onnxruntime on x86-64); int64 beyond 2^24 rounds to nearest."""
    model = make_model([node("Cast", ["x"], ["y"], to=target)], [("x", (18,), source)],
                       [("y", (18,), target)])
    check(model, {"x": SPECIAL[source]})


def test_castlike_takes_the_type_of_a_computed_tensor():
    model = make_model([node("Greater", ["x", "z"], ["g"]), node("Cast", ["x"], ["k"], to=I32),
                        node("CastLike", ["x", "g"], ["b"]), node("CastLike", ["g", "k"], ["i"])],
                       [("x", (6, 7)), ("z", (7,))], [("b", (6, 7), B), ("i", (6, 7), I32)],
                       opset=15)
    check(model)


# -- integer division and modulo -------------------------------------------------------

@pytest.mark.parametrize("dtype", [I64, I32])
def test_integer_division_truncates(dtype):
    model = make_model([node("Div", ["a", "b"], ["y"])], [("a", (4, 25), dtype),
                                                          ("b", (4, 25), dtype)],
                       [("y", (4, 25), dtype)])
    inputs = typed_inputs(model, 3)
    inputs["b"][inputs["b"] == 0] = 3  # onnxruntime traps on 0
    inputs["a"][0, :4], inputs["b"][0, :4] = [7, -7, 7, -7], [2, 2, -2, -2]
    check(model, inputs)


@pytest.mark.parametrize("dtype", [I64, I32])
@pytest.mark.parametrize("fmod", [0, 1])
def test_integer_modulo(dtype, fmod):
    model = make_model([node("Mod", ["a", "b"], ["y"], fmod=fmod)],
                       [("a", (4, 25), dtype), ("b", (25,), dtype)], [("y", (4, 25), dtype)])
    inputs = typed_inputs(model, 4)
    inputs["b"][inputs["b"] == 0] = -9
    check(model, inputs)


def test_float_fmod():
    model = make_model([node("Mod", ["a", "b"], ["y"], fmod=1)],
                       [("a", (4, 25)), ("b", (25,))], [("y", (4, 25))])
    check(model)


def test_integer_division_by_zero_gives_zero():
    """onnxruntime traps (SIGFPE); polyc gives 0 rather than LLVM's undefined result."""
    model = make_model([node("Div", ["a", "b"], ["q"]), node("Mod", ["a", "b"], ["r"])],
                       [("a", (4,), I64), ("b", (4,), I64)], [("q", (4,), I64), ("r", (4,), I64)])
    a = np.array([5, -5, np.iinfo(np.int64).min, 9], np.int64)
    b = np.array([0, 0, -1, 4], np.int64)
    out = run_polyc(model, {"a": a, "b": b})
    np.testing.assert_array_equal(out["q"], [0, 0, np.iinfo(np.int64).min, 2])
    np.testing.assert_array_equal(out["r"], [0, 0, 0, 1])


# -- reductions ---------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"])
@pytest.mark.parametrize("dtype", [I64, I32])
def test_integer_reductions(op, dtype):
    model = make_model([node(op, ["x", "axes"], ["y"], keepdims=0)], [("x", (3, 4, 5), dtype)],
                       [("y", (3, 5), dtype)],
                       initializers=[("axes", np.array([1], np.int64))], opset=18)
    inputs = typed_inputs(model, 5)
    if op == "ReduceProd":
        inputs["x"] = inputs["x"] % 5 - 2
    check(model, inputs)


def test_bool_reduce_max_and_min():
    model = make_model([node("ReduceMax", ["x", "one"], ["a"], keepdims=1),
                        node("ReduceMin", ["x", "zero"], ["o"], keepdims=0)],
                       [("x", (4, 6), B)], [("a", (4, 1), B), ("o", (6,), B)], opset=20,
                       initializers=[("one", np.array([1], np.int64)),
                                     ("zero", np.array([0], np.int64))])
    check(model, {"x": np.random.default_rng(6).random((4, 6)) < 0.7})


# -- ArgMax / ArgMin ----------------------------------------------------------------------

@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("axis", [0, -1])
def test_argmax_argmin(op, keepdims, last, axis):
    model = make_model([node(op, ["x"], ["y"], axis=axis, keepdims=keepdims,
                             select_last_index=last)], [("x", (5, 8))], [("y", None, I64)],
                       opset=13)
    x = np.round(typed_inputs(model, 7)["x"])  # few distinct values: ties
    x[1, 2] = x[2, 1] = np.nan
    x[0, 0] = np.nan  # a NaN first element
    x[3] = np.nan     # a row of NaN
    check(model, {"x": x})


def test_argmax_on_integers():
    model = make_model([node("ArgMax", ["x"], ["y"], axis=1, select_last_index=1)],
                       [("x", (6, 9), I32)], [("y", None, I64)], opset=13)
    inputs = typed_inputs(model, 8)
    inputs["x"] = inputs["x"] // 20  # ties
    check(model, inputs)


# -- gathers with indices computed at run time --------------------------------------------

@pytest.mark.parametrize("fuse,scheduler", [("smart", "pluto"), ("max", "pluto"),
                                            ("none", "pluto"), ("max", "isl")])
def test_gather_with_run_time_indices(fuse, scheduler):
    """t = x * 2 then g = Gather(t, idx) along rows and y = g + t: the gather may read any
    row of t, so every row of t must be written before; negative indices count from
    the end."""
    model = make_model([node("Mul", ["x", "two"], ["t"]),
                        node("Gather", ["t", "idx"], ["g"], axis=0),
                        node("Add", ["g", "t"], ["y"])],
                       [("x", (6, 40)), ("idx", (6,), I64)], [("y", (6, 40))],
                       initializers=[("two", np.array(2.0, np.float32))])
    inputs = typed_inputs(model, 9)
    inputs["idx"] = np.array([5, -1, 0, -6, 3, 2], np.int64)
    check(model, inputs, fuse=fuse, scheduler=scheduler)


def test_run_time_gather_reads_the_whole_indexed_dim():
    model = make_model([node("Gather", ["x", "idx"], ["y"], axis=1)],
                       [("x", (3, 7, 2)), ("idx", (4,), I32)], [("y", (3, 4, 2))])
    graph = import_model(model)
    (op,) = graph.ops
    assert isinstance(op.expr, Lookup) and op.expr.axis == 1
    statement = build_scop(graph).statements[0]
    lookup = next(r for r in statement.reads if r.lookup is not None)
    ctx = lookup.relation.get_ctx()
    whole = __import__("islpy").Map.read_from_str(
        ctx, "{ S0_gather[i0, i1, i2] -> x[i0, o1, i2] : 0 <= i0 < 3 and 0 <= i1 < 4 and "
             "0 <= i2 < 2 and 0 <= o1 < 7 }")
    assert lookup.relation.is_equal(whole)
    inputs = typed_inputs(model, 10)
    inputs["idx"] = np.array([6, -7, 3, -2], np.int32)
    check(model, inputs)


def test_gather_of_a_view_and_of_int_data():
    model = make_model([node("Transpose", ["x"], ["t"], perm=[1, 0]),
                        node("Gather", ["t", "idx"], ["y"], axis=0),
                        node("Gather", ["k", "idx"], ["z"], axis=1)],
                       [("x", (5, 4)), ("idx", (2, 3), I64), ("k", (2, 4), I64)],
                       [("y", (2, 3, 5)), ("z", (2, 2, 3), I64)])
    inputs = typed_inputs(model, 11)
    inputs["idx"] = np.array([[0, 3, -1], [2, -4, 1]], np.int64)
    check(model, inputs)


def test_out_of_range_indices_are_clamped():
    """onnxruntime refuses them; polyc reads the nearest row, never outside the tensor."""
    model = make_model([node("Gather", ["x", "idx"], ["y"], axis=0)],
                       [("x", (4, 3)), ("idx", (4,), I64)], [("y", (4, 3))])
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = run_polyc(model, {"x": x, "idx": np.array([9, -9, 2, -1], np.int64)})["y"]
    np.testing.assert_array_equal(out, x[[3, 0, 2, 3]])


def test_run_time_gather_of_a_view_is_no_epilogue():
    """A Gather at a run-time index reading a Transpose: smart fusion asked whether it
    reads the transpose's elements at the offsets it writes (an epilogue) and took the
    flat offset of its lookup read, which reads the whole indexed dim (isl: "map is not
    single-valued"). Found by the graph fuzzer (polyc.fuzz.graphs, seed 10)."""
    model = make_model([node("Transpose", ["x"], ["t"], perm=[1, 0]),
                        node("Gather", ["t", "idx"], ["y"], axis=1)],
                       [("x", (8, 8)), ("idx", (), I64)], [("y", (8,))])
    inputs = typed_inputs(model, 15)
    inputs["idx"] = np.array(-3, np.int64)
    check(model, inputs)


def test_run_time_gather_fused_with_a_concat():
    """fuse="max" puts a Gather along the last dim at run-time indices in one band with
    a Concat, whose reads are guarded: the border split asked for the lane stride of
    the lookup read, which has no element per instance (isl: "map is not
    single-valued"); such a band keeps its whole split. Fuzzer seed 87."""
    model = make_model([node("Concat", ["a", "b"], ["c"], axis=0),
                        node("Gather", ["b", "idx"], ["y"], axis=2)],
                       [("a", (6, 9, 6)), ("b", (1, 9, 6)), ("idx", (4, 3), I64)],
                       [("c", (7, 9, 6)), ("y", (1, 9, 4, 3))])
    inputs = typed_inputs(model, 16)
    inputs["idx"] = np.random.default_rng(16).integers(-6, 6, (4, 3)).astype(np.int64)
    check(model, inputs, fuse="max")


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("constant", [False, True])
def test_gather_elements(axis, constant):
    shape, ishape = (4, 5), (3, 5) if axis == 0 else (4, 2)
    n = shape[axis]
    rng = np.random.default_rng(12)
    idx = rng.integers(-n, n, size=ishape).astype(np.int64)
    inputs = [("x", shape)] + ([] if constant else [("idx", ishape, I64)])
    model = make_model([node("GatherElements", ["x", "idx"], ["y"], axis=axis)], inputs,
                       [("y", ishape)], initializers=[("idx", idx)] if constant else [])
    feeds = typed_inputs(model, 13)
    if not constant:
        feeds["idx"] = idx
    check(model, feeds)


def test_embedding_lookup_and_layer():
    """int64 token ids -> Gather from a constant table -> MatMul -> Add -> Relu, as a
    transformer's input."""
    rng = np.random.default_rng(14)
    table = rng.standard_normal((50, 16)).astype(np.float32)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    bias = rng.standard_normal(8).astype(np.float32)
    model = make_model([node("Gather", ["table", "ids"], ["e"], axis=0),
                        node("MatMul", ["e", "w"], ["m"]), node("Add", ["m", "bias"], ["a"]),
                        node("Relu", ["a"], ["y"])],
                       [("ids", (2, 5), I64)], [("y", (2, 5, 8))],
                       initializers=[("table", table), ("w", w), ("bias", bias)])
    ids = rng.integers(-50, 50, size=(2, 5)).astype(np.int64)
    check(model, {"ids": ids})


# -- JIT and AOT round trips, errors ------------------------------------------------------

def _int_model():
    return make_model([node("Gather", ["x", "ids"], ["g"], axis=0),
                       node("ArgMax", ["g"], ["am"], axis=1, keepdims=0),
                       node("Add", ["am", "ids"], ["s"]),
                       node("Greater", ["s", "zero"], ["pos"])],
                      [("x", (6, 9)), ("ids", (4,), I64)],
                      [("s", (4,), I64), ("pos", (4,), B)],
                      initializers=[("zero", np.array(0, np.int64))])


def test_jit_and_aot_round_trip_with_int_inputs_and_outputs(tmp_path):
    model = _int_model()
    inputs = typed_inputs(model, 15)
    inputs["ids"] = np.array([5, 0, -2, 3], np.int64)
    expected = run_onnxruntime(model, inputs)
    compiled = polyc.compile(model)
    assert [(s.name, s.dtype) for s in compiled.inputs] == [("x", np.float32), ("ids", np.int64)]
    assert [(s.name, s.dtype) for s in compiled.outputs] == [("s", np.int64), ("pos", np.bool_)]
    path = tmp_path / "ints.so"
    compiled.save(path)
    for runner in (compiled, polyc.load(path)):
        out = runner.run(inputs)
        for name, want in expected.items():
            assert_same(out[name], want, name)
    with pytest.raises(polyc.InputError, match="dtype int32, expected int64"):
        compiled.run({**inputs, "ids": inputs["ids"].astype(np.int32)})


def test_float_only_op_on_integers_is_refused_naming_the_node():
    model = make_model([node("Exp", ["k"], ["y"], name="e")], [("k", (3,), I64)],
                       [("y", (3,), I64)], check=False)
    with pytest.raises(UnsupportedDtypeError, match=r"Exp node 'e' .*'k' \(int64\)"):
        polyc.compile(model)
