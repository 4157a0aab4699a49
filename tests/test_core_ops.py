"""Core IR features the op lowerings build on: the scalar functions (comparisons,
select, rounding, pow, erf), the ``mul`` combiner and reads that leave their tensor
(``Read.outside``: fill, edge, reflect). Core graphs are compiled directly
(``polyc.compile`` accepts a core Graph) and checked against numpy and against the
reference interpreter, under every fusion and tiling option."""

from __future__ import annotations

import math

import numpy as np
import pytest

import polyc
from polyc.frontend import evaluate
from polyc.frontend.core import (
    Call,
    Const,
    Graph,
    Ix,
    Map,
    Read,
    Reduce,
    TensorInfo,
    View,
    expr_dtype,
)
from polyc.scop.build import build_scop

OPTIONS = [{}, {"tile": False}, {"fuse": "none"}, {"threads": 2}]

i0, i1 = Ix.var(0), Ix.var(1)


def graph(inputs: dict, ops: list, outputs: list[str], constants=None) -> Graph:
    """A core Graph over float32 inputs; shapes come from the inputs and the ops, the
    dtype of a Map from its expression (a comparison gives bool)."""
    tensors = {name: TensorInfo(name, shape) for name, shape in inputs.items()}
    for op in ops:
        shape = op.shape if isinstance(op, Map) else getattr(op, "out_shape", None)
        if shape is None:  # a View: the caller names its shape in inputs
            continue
        dtype = "float32"
        if isinstance(op, Map):
            dtype = expr_dtype(op.expr, lambda name: tensors[name].dtype)
        tensors[op.out] = TensorInfo(op.out, shape, dtype)
    constants = constants or {}
    for name, value in constants.items():
        tensors[name] = TensorInfo(name, value.shape)
    graph_inputs = tuple(tensors[n] for n in inputs if n not in constants
                         and not any(getattr(op, "out", None) == n for op in ops))
    return Graph("core", graph_inputs, tuple(tensors[n] for n in outputs), tensors,
                 constants, tuple(ops), 17)


def compiled_outputs(g: Graph, feeds: dict, **options) -> dict:
    return polyc.compile(g, **options).run(feeds)


def shifted(dy: int, dx: int) -> tuple[Ix, Ix]:
    """The index ``(i0 - dy, i1 - dx)``: reading a padded tensor's interior."""
    return Ix(((0, 1),), -dy), Ix(((1, 1),), -dx)


@pytest.fixture(scope="module")
def x():
    values = np.random.default_rng(0).standard_normal((5, 37)).astype(np.float32) * 3
    values[0, :4] = [0.5, -0.5, 2.5, -0.0]  # ties for round, a signed zero
    values[1, 0] = np.nan
    return values


UNARY = {
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "sign": np.sign,
    "erf": np.vectorize(math.erf, otypes=[np.float32]),
}


@pytest.mark.parametrize("fn", sorted(UNARY))
@pytest.mark.parametrize("options", OPTIONS[:2])
def test_unary_functions_match_numpy(fn, options, x):
    g = graph({"x": x.shape}, [Map("y", x.shape, Call(fn, (Read("x", (i0, i1)),)))], ["y"])
    out = compiled_outputs(g, {"x": x}, **options)["y"]
    expected = UNARY[fn](x)
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(evaluate(g, {"x": x})["y"], out, rtol=1e-6, atol=1e-6,
                               equal_nan=True)


BINARY = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
          "eq": np.equal, "pow": np.power}


@pytest.mark.parametrize("fn", sorted(BINARY))
def test_binary_functions_match_numpy(fn, x):
    y = np.round(np.random.default_rng(1).standard_normal(x.shape)).astype(np.float32)
    y[0, 0] = x[0, 0]  # equal operands
    g = graph({"x": x.shape, "y": y.shape},
              [Map("z", x.shape, Call(fn, (Read("x", (i0, i1)), Read("y", (i0, i1)))))], ["z"])
    out = compiled_outputs(g, {"x": x, "y": y})["z"]
    with np.errstate(all="ignore"):
        expected = BINARY[fn](x, y)
    assert out.dtype == expected.dtype
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6, equal_nan=True)


def test_select_picks_where_condition_is_nonzero(x):
    cond = Call("gt", (Read("x", (i0, i1)), Const(0.0)))
    expr = Call("select", (cond, Read("x", (i0, i1)), Call("mul", (Read("x", (i0, i1)),
                                                                   Const(0.1)))))
    g = graph({"x": x.shape}, [Map("y", x.shape, expr)], ["y"])
    out = compiled_outputs(g, {"x": x})["y"]
    np.testing.assert_allclose(out, np.where(x > 0, x, x * np.float32(0.1)), rtol=1e-6,
                               equal_nan=True)


def test_product_reduction(x):
    g = graph({"x": x.shape}, [Reduce("p", (5,), Const(1.0), x.shape, (i0,), "mul",
                                      Call("sign", (Read("x", (i0, i1)),)))], ["p"])
    finite = np.nan_to_num(x, nan=1.0)
    out = compiled_outputs(g, {"x": finite})["p"]
    np.testing.assert_array_equal(out, np.prod(np.sign(finite), axis=1))


def padded(mode: str, fill: float = 0.0):
    """``p = pad(x, 1 row before/after, 2 columns before/after)``, then ``relu(p)``."""
    shape = (5 + 2, 37 + 4)
    ops = [Map("p", shape, Read("x", shifted(1, 2), mode, fill)),
           Map("y", shape, Call("relu", (Read("p", (i0, i1)),)))]
    return graph({"x": (5, 37)}, ops, ["p", "y"])


@pytest.mark.parametrize("mode, numpy_mode", [("fill", "constant"), ("edge", "edge"),
                                              ("reflect", "reflect")])
@pytest.mark.parametrize("options", OPTIONS)
def test_bounded_reads_pad_like_numpy(mode, numpy_mode, options, x):
    x = np.nan_to_num(x)
    g = padded(mode, fill=-2.5)
    extra = {"constant_values": -2.5} if numpy_mode == "constant" else {}
    expected = np.pad(x, ((1, 1), (2, 2)), mode=numpy_mode, **extra)
    out = compiled_outputs(g, {"x": x}, **options)
    np.testing.assert_array_equal(out["p"], expected)
    np.testing.assert_array_equal(out["y"], np.maximum(expected, 0))
    np.testing.assert_array_equal(evaluate(g, {"x": x})["p"], expected)


def test_fill_read_keeps_dependences_exact():
    """The relation of a fill read holds only elements inside the tensor; the loads go
    through the clamped address; the guard is where the read is inside."""
    scop = build_scop(padded("fill"))
    read = scop.statements[0].reads[0]
    assert read.relation.range().dim_max_val(1).to_python() == 36
    assert read.address.range().dim_min_val(1).to_python() == 0
    assert read.guard.is_strict_subset(scop.statements[0].domain)
    assert read.fill == 0.0


def test_bounded_read_of_a_view(x):
    """Borders apply to the view's shape (a transpose here), not to its storage."""
    x = np.nan_to_num(x)
    ops = [View("t", "x", "transpose", (1, 0)),
           Map("y", (37 + 2, 5), Read("t", shifted(1, 0), "edge"))]
    g = graph({"x": x.shape, "t": (37, 5)}, ops, ["y"])
    out = compiled_outputs(g, {"x": x})["y"]
    np.testing.assert_array_equal(out, np.pad(x.T, ((1, 1), (0, 0)), mode="edge"))


def test_window_sum_over_fill_reads(x):
    """A 3-wide window sum with zero halo (the shape of LRN and of padded pooling)."""
    x = np.nan_to_num(x)
    window = Ix(((1, 1), (2, 1)), -1)  # i1 + k - 1
    g = graph({"x": x.shape}, [Reduce("s", x.shape, Const(0.0), x.shape + (3,), (i0, i1),
                                      "add", Read("x", (i0, window), "fill"))], ["s"])
    expected = sum(np.pad(x, ((0, 0), (1, 1)))[:, k:k + 37] for k in range(3))
    for options in OPTIONS:
        out = compiled_outputs(g, {"x": x}, **options)["s"]
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_unknown_outside_mode_is_rejected():
    with pytest.raises(ValueError, match="outside mode"):
        Read("x", (i0,), "wrap")


def test_relu_keeps_nan(x):
    """Core ``relu`` is numpy.maximum(x, 0): NaN stays NaN (as onnxruntime)."""
    g = graph({"x": x.shape}, [Map("y", x.shape, Call("relu", (Read("x", (i0, i1)),)))], ["y"])
    for options in OPTIONS[:2]:
        out = compiled_outputs(g, {"x": x}, **options)["y"]
        np.testing.assert_array_equal(out, np.maximum(x, 0))


@pytest.mark.parametrize("options", OPTIONS)
def test_positions_read_as_loop_iterators(options, x):
    """A ``positions`` vector is the loop iterator's value: read along the vectorized
    loop (lanes j, j+1, ..) and across it (one i in every lane), never stored."""
    m, n = x.shape
    tensors = {t.name: t for t in (TensorInfo("x", x.shape), TensorInfo("y", x.shape),
                                   TensorInfo("p", (n,), "int64"),
                                   TensorInfo("q", (m,), "int64"))}
    along = Call("cast_float32", (Read("p", (i1,)),))
    across = Call("cast_float32", (Read("q", (i0,)),))
    pick = Call("select", (Call("gt", (Read("x", (i0, i1)), Const(0.0))), along, across))
    g = Graph("positions", (tensors["x"],), (tensors["y"],), tensors, {},
              (Map("y", x.shape, pick, label="pick"),), 17, positions=frozenset({"p", "q"}))
    j, i = np.meshgrid(np.arange(n), np.arange(m))
    want = np.where(x > 0, j, i).astype(np.float32)
    np.testing.assert_array_equal(evaluate(g, {"x": x})["y"], want)
    compiled = polyc.compile(g, **options)
    np.testing.assert_array_equal(compiled.run({"x": x})["y"], want)
    assert not compiled.compilation.plan.constants and "p" not in compiled.compilation.plan.inputs
