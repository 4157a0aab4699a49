"""Quantized operators from their QDQ form: ``DequantizeLinear -> Conv / MatMul / Gemm
-> QuantizeLinear`` becomes ``QLinearConv`` / ``QLinearMatMul`` / ``QGemm`` (onnxruntime's
com.microsoft op, as its own QDQ transformer writes it) on the 8-bit values.

A statically quantized model in the QDQ format (onnxruntime's default) writes each
quantized Conv as float arithmetic between a DequantizeLinear of its 8-bit input, one of
its 8-bit weights, one of its int32 bias, and a QuantizeLinear of its output. onnxruntime
runs that as a QLinearConv (int32 sums of the bytes, requantized once), and so does
polyc: the sums then go through the byte dot products
(:mod:`polyc.frontend.ops.byte_conv`), and the results agree with onnxruntime's bit
for bit, which the float form would not (its roundings differ).

Rewritten when every scale and zero point is a constant, the input and output are 8-bit
with one scale each, the weights are an 8-bit constant (one scale, or one per output
channel or column), a Conv's or Gemm's bias (if any) is an int32 constant dequantized
with zero point 0 and scale ``x_scale * w_scale`` (a Gemm's with alpha and beta 1;
transA 0), and
the op's result has no other reader. This runs before constant folding, which would
turn the weights' dequantization into float weights.
"""

from __future__ import annotations

import numpy as np
import onnx

from polyc.frontend.cleanup.editor import GraphEditor, copy_node, is_op, with_notes
from polyc.frontend.load import OnnxGraph
from polyc.frontend.ops.registry import CONTRIB_DOMAIN, attribute_values

BYTES = (np.uint8, np.int8)


def fuse_quantized_ops(graph: OnnxGraph) -> OnnxGraph:
    """Every QDQ Conv / MatMul (module docstring) as QLinearConv / QLinearMatMul; the
    DequantizeLinear nodes nothing else reads are left to dead-node removal."""
    editor = GraphEditor(graph)
    fused = 0
    for node in editor.walk():
        if is_op(node, "QuantizeLinear") and _fuse(editor, node):
            fused += 1
            continue
        editor.emit(node)
    return with_notes(editor.finish(), fused,
                      "fused {n} DequantizeLinear -> Conv/MatMul/Gemm -> QuantizeLinear "
                      "pattern{s} into QLinearConv/QLinearMatMul/QGemm")


def _fuse(editor: GraphEditor, quantize: onnx.NodeProto) -> bool:
    """Put the QLinear node in the place of the op ``quantize`` reads; False if the
    pattern does not hold."""
    op = editor.producer(quantize.input[0])
    if op is None or not is_op(op, "Conv", "MatMul", "Gemm") or len(op.output) != 1 \
            or editor.readers[op.output[0]] != 1 or op.output[0] in editor.graph.outputs:
        return False
    attributes = attribute_values(op)
    if op.op_type == "Gemm" and (attributes.get("transA", 0) or (
            len(op.input) > 2 and op.input[2] and (attributes.get("beta", 1.0) != 1.0
                                                   or attributes.get("alpha", 1.0) != 1.0))):
        return False  # QGemm's bias is at alpha * a_scale * b_scale
    y = _quantization(editor, quantize, output=True)
    x = _quantization(editor, editor.producer(op.input[0]))
    w = _quantization(editor, editor.producer(op.input[1]), channels=_channel_axis(op))
    if y is None or x is None or w is None or editor.constant(x[0]) is not None:
        return False
    bias = ""
    if op.op_type != "MatMul" and len(op.input) > 2 and op.input[2]:
        bias = _bias(editor, editor.producer(op.input[2]), x[1], w[1])
        if bias is None:
            return False
    if op.op_type == "Conv":
        fused = copy_node(op, inputs=[*x, *w, *y[1:]] + ([bias] if bias else []),
                          outputs=list(quantize.output))
        fused.op_type = "QLinearConv"
    elif op.op_type == "MatMul":
        fused = onnx.helper.make_node("QLinearMatMul", [*x, *w, *y[1:]],
                                      list(quantize.output), name=op.name)
    else:
        fused = onnx.helper.make_node(
            "QGemm", [*x, *w, bias, *y[1:]], list(quantize.output), name=op.name,
            domain=CONTRIB_DOMAIN, alpha=float(attributes.get("alpha", 1.0)),
            transB=int(attributes.get("transB", 0)))
    editor.replace_producer(op.output[0], fused)
    return True


def _channel_axis(op: onnx.NodeProto) -> int:
    """The axis of the weights along the output channels (columns): a Conv's 0, a
    MatMul's 1, a Gemm's 0 or 1 by ``transB``."""
    if op.op_type == "Gemm":
        return 0 if attribute_values(op).get("transB", 0) else 1
    return 0 if op.op_type == "Conv" else 1


def _quantization(editor: GraphEditor, node, *, output: bool = False,
                  channels: int | None = None):
    """``(8-bit value, scale, zero point)`` names of a DequantizeLinear (the value it
    reads) or, with ``output``, of a QuantizeLinear (the value it writes): constant
    scales and zero points of one value (``channels``: of the constant 8-bit weights,
    whose scales may also be one per index of that axis); None otherwise."""
    if node is None or not is_op(node, "QuantizeLinear" if output else "DequantizeLinear"):
        return None
    attributes = attribute_values(node)
    if attributes.get("block_size", 0) or attributes.get("output_dtype", 0) or \
            not attributes.get("saturate", 1) or len(node.input) < 3 or not node.input[2]:
        return None
    scale, zero = editor.constant(node.input[1]), editor.constant(node.input[2])
    if scale is None or zero is None or zero.dtype not in BYTES or scale.dtype != np.float32:
        return None
    value = node.output[0] if output else node.input[0]
    if channels is not None:
        w = editor.constant(value)
        if w is None or w.dtype != zero.dtype:
            return None
        axis = attributes.get("axis", 1)
        per_channel = (w.ndim == 2 or channels == 0) and scale.ndim == 1 and \
            scale.shape == (w.shape[channels],) and zero.shape == scale.shape and \
            axis % w.ndim == channels
        if not (scale.size == zero.size == 1 or per_channel):
            return None
    elif scale.size != 1 or zero.size != 1:
        return None
    return value, node.input[1], node.input[2]


def _bias(editor: GraphEditor, node, x_scale: str, w_scale: str) -> str | None:
    """The int32 bias a Conv's DequantizeLinear reads, when its zero point is 0 and its
    scale ``x_scale * w_scale`` (as QLinearConv takes it); else None."""
    if node is None or not is_op(node, "DequantizeLinear"):
        return None
    bias = editor.constant(node.input[0])
    scale = editor.constant(node.input[1])
    zero = editor.constant(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    if bias is None or bias.dtype != np.int32 or scale is None or (
            zero is not None and np.any(zero)):
        return None
    expected = editor.constant(x_scale) * editor.constant(w_scale)
    if np.broadcast_to(scale, bias.shape).shape != bias.shape or not np.allclose(
            np.broadcast_to(scale, bias.shape), np.broadcast_to(expected, bias.shape),
            rtol=1e-6, atol=0):
        return None
    return node.input[0]
