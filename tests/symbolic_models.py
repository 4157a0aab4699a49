"""Models with a dynamic dim, for symbolic-dim tests and ``benchmarks/symbolic.py``.

Each builder returns an ONNX model (seeded random weights) whose input declares the
dim by name (``batch`` or ``seq``), and :func:`inputs` makes seeded inputs at a value.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 10  # onnxruntime 1.31 reads at most 13; onnx 1.23 writes 14


def _weights(rng, **shapes) -> list[onnx.TensorProto]:
    scale = lambda shape: 1 / np.sqrt(np.prod(shape[1:]) if len(shape) > 1 else 4)  # noqa: E731
    return [numpy_helper.from_array(
        (rng.standard_normal(shape) * scale(shape)).astype(np.float32), name)
        for name, shape in shapes.items()]


def _model(name, nodes, inputs, outputs, weights) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def _float(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def mlp(width: int = 256, hidden: int = 512, classes: int = 128, seed: int = 0
        ) -> onnx.ModelProto:
    """``x[batch, width]`` -> Gemm -> Relu -> Gemm -> Softmax."""
    rng = np.random.default_rng(seed)
    weights = _weights(rng, w1=(hidden, width), b1=(hidden,), w2=(hidden, classes),
                       b2=(classes,))
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["y"], axis=-1)]
    return _model("mlp", nodes, [_float("x", ["batch", width])],
                  [_float("y", ["batch", classes])], weights)


def cnn(size: int = 32, channels: tuple[int, int] = (16, 32), classes: int = 10,
        seed: int = 0) -> onnx.ModelProto:
    """``x[batch, 3, size, size]`` -> Conv/Relu/MaxPool -> Conv/Relu -> global average
    pool -> Flatten -> Gemm."""
    rng = np.random.default_rng(seed)
    c1, c2 = channels
    weights = _weights(rng, k1=(c1, 3, 3, 3), kb1=(c1,), k2=(c2, c1, 3, 3), kb2=(c2,),
                       fc=(classes, c2), fcb=(classes,))
    nodes = [helper.make_node("Conv", ["x", "k1", "kb1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "k2", "kb2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], transB=1)]
    return _model("cnn", nodes, [_float("x", ["batch", 3, size, size])],
                  [_float("y", ["batch", classes])], weights)


def encoder(model_dim: int = 64, heads: int = 4, ff: int = 128, seed: int = 0
            ) -> onnx.ModelProto:
    """One transformer-encoder layer over ``x[1, seq, model_dim]``: self-attention with
    ``heads`` heads (Reshape by ``[0, 0, heads, d]``, Transpose, MatMul, Softmax),
    residual and LayerNormalization, then a Relu feed-forward block."""
    rng = np.random.default_rng(seed)
    d = model_dim // heads
    weights = _weights(rng, wq=(model_dim, model_dim), wk=(model_dim, model_dim),
                       wv=(model_dim, model_dim), wo=(model_dim, model_dim),
                       w1=(model_dim, ff), w2=(ff, model_dim), g1=(model_dim,),
                       be1=(model_dim,), g2=(model_dim,), be2=(model_dim,))
    weights += [numpy_helper.from_array(np.array([0, 0, heads, d], np.int64), "split"),
                numpy_helper.from_array(np.array([0, 0, model_dim], np.int64), "merge"),
                numpy_helper.from_array(np.array(1 / np.sqrt(d), np.float32), "scale")]
    nodes = []
    for name in "qkv":
        nodes += [helper.make_node("MatMul", ["x", f"w{name}"], [f"{name}0"]),
                  helper.make_node("Reshape", [f"{name}0", "split"], [f"{name}1"])]
    nodes += [
        helper.make_node("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["q", "kt"], ["s0"]),
        helper.make_node("Mul", ["s0", "scale"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["a0"]),
        helper.make_node("Transpose", ["a0"], ["a1"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["a1", "merge"], ["a"]),
        helper.make_node("MatMul", ["a", "wo"], ["o"]),
        helper.make_node("Add", ["x", "o"], ["res1"]),
        helper.make_node("LayerNormalization", ["res1", "g1", "be1"], ["n1"], axis=-1),
        helper.make_node("MatMul", ["n1", "w1"], ["f0"]),
        helper.make_node("Relu", ["f0"], ["f1"]),
        helper.make_node("MatMul", ["f1", "w2"], ["f2"]),
        helper.make_node("Add", ["n1", "f2"], ["res2"]),
        helper.make_node("LayerNormalization", ["res2", "g2", "be2"], ["y"], axis=-1)]
    return _model("encoder", nodes, [_float("x", [1, "seq", model_dim])],
                  [_float("y", [1, "seq", model_dim])], weights)


def inputs(model: onnx.ModelProto, value: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded normal inputs with every named dim at ``value``."""
    rng = np.random.default_rng(seed)
    result = {}
    for spec in model.graph.input:
        dims = spec.type.tensor_type.shape.dim
        shape = [d.dim_value if d.HasField("dim_value") else value for d in dims]
        result[spec.name] = rng.standard_normal(shape).astype(np.float32)
    return result
