"""Folds along a vector loop (polyc/codegen/folds.py): a Softmax row's exp and sum, an
Exp and its ReduceMax, run 16 lanes at a time with a vector of partial sums or maxima.
Results against onnxruntime and a float64 numpy reference on seeded random inputs,
with rows that leave lanes over, NaN and infinities; loops without exp and builds
without fast-math keep the scalar loop LLVM vectorizes."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import polyc

from onnx_helpers import make_model, random_inputs, run_onnxruntime

FOLDED = ".fheader"  # the block of a loop run in the fold form
RTOL, ATOL = 1e-5, 1e-6


def rows_model(op: str, shape) -> object:
    return make_model([helper.make_node(op, ["x"], ["y"], axis=-1)], [("x", list(shape))],
                      ["y"], opset=17)


def softmax64(x: np.ndarray, log: bool) -> np.ndarray:
    x = x.astype(np.float64)
    shifted = x - x.max(axis=-1, keepdims=True)
    total = np.exp(shifted).sum(axis=-1, keepdims=True)
    return shifted - np.log(total) if log else np.exp(shifted) / total


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape,threads", [((5, 37), 1), ((3, 64), 1), ((2, 3, 200), 1),
                                          ((7, 37), 2)])
def test_softmax_rows_fold_their_sums(op, shape, threads):
    """On one thread, and on two (the row loop parallel, the fold in each thread's
    outlined loop body)."""
    model = rows_model(op, shape)
    compiled = polyc.compile(model, threads=threads)
    assert FOLDED in compiled.compilation.llvm_ir
    inputs = {"x": (random_inputs(model, 11)["x"] * 20).astype(np.float32)}
    got = compiled.run(inputs)["y"]
    np.testing.assert_allclose(got, run_onnxruntime(model, inputs)["y"], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got, softmax64(inputs["x"], op == "LogSoftmax"), rtol=RTOL,
                               atol=ATOL)


def test_special_values_in_folded_rows():
    """A NaN makes its row NaN; -inf entries get probability 0; values near float32's
    largest are shifted by the row's maximum first; lanes past the row's end (37 = 2
    vectors + 5 lanes) add nothing."""
    model = rows_model("Softmax", (4, 37))
    compiled = polyc.compile(model, threads=1)
    assert FOLDED in compiled.compilation.llvm_ir
    x = np.random.default_rng(3).standard_normal((4, 37)).astype(np.float32)
    x[0, 20] = np.nan
    x[1, [0, 17, 36]] = -np.inf
    x[2, :] += np.float32(3e38)
    x[3, 36] = 80.0  # one lane past 2 vectors: the maximum sits in the masked chunk
    got = compiled.run({"x": x})["y"]
    assert np.isnan(got[0]).all()
    assert (got[1, [0, 17, 36]] == 0).all()
    np.testing.assert_allclose(got[1:], softmax64(x[1:], False), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got.sum(axis=-1)[1:], 1.0, rtol=1e-5)


def test_an_exp_and_its_maximum_fold_in_one_loop():
    """An elementwise statement (Exp, an output) beside a max fold over what it writes."""
    model = make_model([helper.make_node("Exp", ["x"], ["e"]),
                        helper.make_node("ReduceMax", ["e"], ["y"], axes=[1], keepdims=1)],
                       [("x", [6, 45])], ["y", "e"], opset=17)
    compiled = polyc.compile(model, threads=1)
    assert FOLDED in compiled.compilation.llvm_ir
    inputs = random_inputs(model, 5)
    inputs["x"][2, 44] = np.nan  # the maximum keeps NaN, as numpy.maximum (onnxruntime's
    got = compiled.run(inputs)  # ReduceMax skips it: compared without that row)
    expected = run_onnxruntime(model, inputs)
    np.testing.assert_allclose(got["e"], expected["e"], rtol=RTOL, atol=ATOL)
    rows = [0, 1, 3, 4, 5]
    np.testing.assert_allclose(got["y"][rows], expected["y"][rows], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got["y"][:, 0], np.exp(inputs["x"].astype(np.float64)).max(1),
                               rtol=RTOL, atol=ATOL)  # NaN at row 2 on both sides


def test_loops_without_exp_or_fast_math_keep_the_scalar_loop():
    """A ReduceSum row (no exp: LLVM's four vectors of partial sums are faster), and a
    Softmax built without fast-math, whose sums keep the program's order."""
    reduce = make_model([helper.make_node("ReduceSum", ["x", "axes"], ["y"])],
                        [("x", [4, 64])], ["y"],
                        initializers=[("axes", np.array([1], np.int64))], opset=17)
    assert FOLDED not in polyc.compile(reduce, threads=1).compilation.llvm_ir
    model = rows_model("Softmax", (3, 50))
    exact = polyc.compile(model, threads=1, fast_math=False)
    assert FOLDED not in exact.compilation.llvm_ir
    inputs = random_inputs(model, 9)
    np.testing.assert_allclose(exact.run(inputs)["y"], softmax64(inputs["x"], False),
                               rtol=RTOL, atol=ATOL)
