"""Ops polyc has no lowering for, compiled as their ONNX function bodies
(polyc/frontend/functions.py), against onnxruntime on seeded random inputs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import polyc
from polyc.errors import UnsupportedOpError
from polyc.frontend.functions import defined_by_function, expand_functions
from polyc.frontend.load import load_model

from onnx_helpers import make_model, run_onnxruntime, run_polyc

node = helper.make_node
I64 = TensorProto.INT64


def check(model, inputs, rtol=1e-5, atol=1e-5):
    want = run_onnxruntime(model, inputs)
    got = run_polyc(model, inputs)
    for name, expected in want.items():
        np.testing.assert_allclose(got[name], expected, rtol=rtol, atol=atol, err_msg=name)


def normal(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("causal", [0, 1])
def test_attention_with_grouped_heads(causal):
    """Attention-23 on 4-D inputs, 4 query heads over 2 key/value heads, with and
    without the causal mask."""
    rng = np.random.default_rng(0)
    model = make_model([node("Attention", ["q", "k", "v"], ["y"], is_causal=causal)],
                       [("q", (2, 4, 6, 8)), ("k", (2, 2, 7, 8)), ("v", (2, 2, 7, 8))],
                       [("y", (2, 4, 6, 8))], opset=23)
    check(model, {"q": normal(rng, 2, 4, 6, 8), "k": normal(rng, 2, 2, 7, 8),
                  "v": normal(rng, 2, 2, 7, 8)})


def test_attention_3d_with_a_float_mask_and_scale():
    rng = np.random.default_rng(1)
    model = make_model([node("Attention", ["q", "k", "v", "mask"], ["y"], q_num_heads=2,
                             kv_num_heads=2, scale=0.3)],
                       [("q", (1, 5, 16)), ("k", (1, 9, 16)), ("v", (1, 9, 16)),
                        ("mask", (5, 9))], [("y", (1, 5, 16))], opset=23)
    check(model, {"q": normal(rng, 1, 5, 16), "k": normal(rng, 1, 9, 16),
                  "v": normal(rng, 1, 9, 16), "mask": normal(rng, 5, 9)})


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_softmax_cross_entropy_with_weights_and_ignore_index(reduction):
    """SoftmaxCrossEntropyLoss (whose body holds NegativeLogLikelihoodLoss, expanded in
    turn) with class weights and an ignored label."""
    rng = np.random.default_rng(2)
    out = (5, 3) if reduction == "none" else ()
    model = make_model([node("SoftmaxCrossEntropyLoss", ["s", "labels", "w"], ["loss"],
                             ignore_index=1, reduction=reduction)],
                       [("s", (5, 7, 3)), ("labels", (5, 3), I64), ("w", (7,))],
                       [("loss", out)], opset=13)
    check(model, {"s": normal(rng, 5, 7, 3), "labels": rng.integers(0, 7, (5, 3)),
                  "w": rng.random(7).astype(np.float32)})


def test_negative_log_likelihood_loss():
    rng = np.random.default_rng(3)
    model = make_model([node("NegativeLogLikelihoodLoss", ["s", "labels"], ["loss"])],
                       [("s", (6, 4)), ("labels", (6,), I64)], [("loss", ())], opset=22)
    check(model, {"s": normal(rng, 6, 4), "labels": rng.integers(0, 4, 6)})


def test_group_normalization():
    rng = np.random.default_rng(4)
    model = make_model([node("GroupNormalization", ["x", "scale", "bias"], ["y"],
                             num_groups=2)],
                       [("x", (2, 4, 5, 5)), ("scale", (4,)), ("bias", (4,))],
                       [("y", (2, 4, 5, 5))], opset=21)
    check(model, {"x": normal(rng, 2, 4, 5, 5), "scale": normal(rng, 4),
                  "bias": normal(rng, 4)})


def test_expansion_is_noted_and_lowered_ops_stay():
    """LayerNormalization has a function body too, but polyc lowers it: only Attention
    is expanded, and the graph's notes say so."""
    model = make_model([node("Attention", ["q", "k", "v"], ["a"], name="att"),
                        node("LayerNormalization", ["a", "g"], ["y"], axis=-1)],
                       [("q", (1, 2, 3, 4)), ("k", (1, 2, 3, 4)), ("v", (1, 2, 3, 4)),
                        ("g", (4,))], [("y", (1, 2, 3, 4))], opset=23)
    graph = load_model(model)
    ops = [n.op_type for n in graph.nodes]
    assert "Attention" not in ops and ops.count("LayerNormalization") == 1
    assert any(note.startswith("expanded Attention node 'att' into its ONNX function")
               for note in graph.notes)


def test_a_body_with_control_flow_is_left_and_refused():
    """AffineGrid's body holds If nodes: not expanded, refused as an op without lowering."""
    assert not defined_by_function("AffineGrid", 20)
    model = make_model([node("AffineGrid", ["theta", "size"], ["grid"])],
                       [("theta", (1, 2, 3))], [("grid", (1, 4, 5, 2))],
                       initializers=[("size", np.array([1, 1, 4, 5], np.int64))], opset=20)
    proto, notes = expand_functions(model, 20, lambda p: p)
    assert notes == () and [n.op_type for n in proto.graph.node] == ["AffineGrid"]
    with pytest.raises(UnsupportedOpError, match="AffineGrid"):
        polyc.compile(model)


def test_ops_without_a_function_are_not_defined_by_one():
    assert not defined_by_function("LSTM", 22)
    assert not defined_by_function("NoSuchOp", 22)
    assert defined_by_function("Attention", 23) and not defined_by_function("Attention", 22)
    assert isinstance(onnx.defs.get_schema("Attention", 23), onnx.defs.OpSchema)
