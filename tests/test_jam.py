"""Rows of a window run together (polyc/codegen/jam.py): a depthwise conv's loop of rows
around its vector loop runs 2 or 4 rows per vector, loading each input vector once.
Results against onnxruntime (seeded random inputs and weights), and without fast-math
bit for bit against each row's sum in the order the ONNX kernel window gives."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import polyc
from polyc.scop.nest import LoopNest

from onnx_helpers import make_model, random_inputs, run_onnxruntime

RTOL, ATOL = 1e-4, 1e-5
JAMMED = ".jheader"  # the block of a loop of rows run together


def depthwise(x_shape, kernel, *, silu=False, **attrs):
    """A depthwise conv (seeded random weights and bias), then SiLU if asked."""
    rng = np.random.default_rng(7)
    channels = x_shape[1]
    weights = [("w", rng.standard_normal((channels, 1, *kernel)).astype(np.float32)),
               ("b", rng.standard_normal(channels).astype(np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c" if silu else "y"], group=channels,
                              kernel_shape=list(kernel), **attrs)]
    if silu:
        nodes += [helper.make_node("Sigmoid", ["c"], ["s"]),
                  helper.make_node("Mul", ["c", "s"], ["y"])]
    return make_model(nodes, [("x", x_shape)], ["y"], initializers=weights)


CASES = {  # NCHW rows (row counts that leave rows over: 2 and 4 at a time), a SiLU
    # epilogue, and narrow rows run channels-last (pixels as the rows of channel vectors)
    "5x5": ((1, 5, 29, 28), (5, 5), {"pads": [2, 2, 2, 2]}, False),
    "5x5_silu": ((1, 3, 27, 40), (5, 5), {"pads": [2, 2, 2, 2]}, True),
    "3x3": ((1, 4, 23, 37), (3, 3), {"pads": [1, 1, 1, 1]}, False),
    "3x3_channels_last": ((1, 32, 9, 9), (3, 3), {"pads": [1, 1, 1, 1]}, True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rows_of_a_window_run_together(case):
    x_shape, kernel, attrs, silu = CASES[case]
    model = depthwise(x_shape, kernel, silu=silu, **attrs)
    compiled = polyc.compile(model, threads=1)
    assert JAMMED in compiled.compilation.llvm_ir
    inputs = random_inputs(model, 3)
    np.testing.assert_allclose(compiled.run(inputs)["y"], run_onnxruntime(model, inputs)["y"],
                               rtol=RTOL, atol=ATOL)


def test_jammed_rows_keep_each_sums_order_without_fast_math():
    """Without fast-math every output is bias + x*w over the taps in row-major order,
    each product and sum rounded to float32: the rows run together add their terms in
    that order too (the interleaving only moves terms of other rows between them)."""
    model = depthwise((1, 3, 21, 19), (5, 5), pads=[2, 2, 2, 2])
    compiled = polyc.compile(model, fast_math=False, threads=1)
    assert JAMMED in compiled.compilation.llvm_ir
    inputs = random_inputs(model, 4)
    w = {i.name: i for i in model.graph.initializer}
    weights = np.frombuffer(w["w"].raw_data, np.float32).reshape(3, 1, 5, 5) \
        if w["w"].raw_data else np.array(w["w"].float_data, np.float32).reshape(3, 1, 5, 5)
    bias = np.frombuffer(w["b"].raw_data, np.float32) if w["b"].raw_data \
        else np.array(w["b"].float_data, np.float32)
    padded = np.pad(inputs["x"], ((0, 0), (0, 0), (2, 2), (2, 2)))
    expected = np.broadcast_to(bias[None, :, None, None], (1, 3, 21, 19)).astype(np.float32)
    for kh in range(5):
        for kw in range(5):
            tap = padded[:, :, kh:kh + 21, kw:kw + 19] * weights[None, :, 0, kh, kw, None, None]
            expected = (expected + tap.astype(np.float32)).astype(np.float32)
    np.testing.assert_array_equal(compiled.run(inputs)["y"], expected)


def test_elementwise_rows_are_not_jammed():
    """Rows that share no input (an elementwise Relu) run one at a time."""
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", [1, 3, 20, 40])], ["y"])
    assert JAMMED not in polyc.compile(model, threads=1).compilation.llvm_ir


@pytest.mark.parametrize("triangular", [False, True])
def test_a_window_over_rows_of_a_loop_nest(triangular):
    """A loop nest summing a 3x3 window: rows run together over a rectangular domain;
    over a triangular one (each row's vector loop has its own bounds) one at a time.
    Results match numpy either way."""
    n = 40
    domain = "{ [i, j] : 0 <= i < N and 0 <= j <= i }" if triangular else \
        "{ [i, j] : 0 <= i < N and 0 <= j < N }"
    nest = LoopNest("window", params=["N"])
    A = nest.array("A", ("N + 2", "N + 2"))
    B = nest.array("B", ("N", "N"))
    terms = [A[f"i + {a}", f"j + {b}"] * float(3 * a + b + 1) for a in range(3) for b in range(3)]
    expr = terms[0]
    for term in terms[1:]:
        expr = expr + term
    nest.statement("S", domain, write=B["i", "j"], expr=expr)
    compiled = nest.compile(params={"N": n})
    assert (JAMMED in compiled.compilation.llvm_ir) != triangular
    rng = np.random.default_rng(8)
    arrays = {"A": rng.standard_normal((n + 2, n + 2)).astype(np.float32),
              "B": np.zeros((n, n), np.float32)}
    expected = sum(arrays["A"][a:a + n, b:b + n] * np.float32(3 * a + b + 1)
                   for a in range(3) for b in range(3))
    if triangular:
        expected = np.tril(expected)
    np.testing.assert_allclose(compiled.run(arrays)["B"], expected, rtol=RTOL, atol=ATOL)
