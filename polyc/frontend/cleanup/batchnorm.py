"""Batch-norm folding: an inference BatchNormalization after a Conv or Gemm disappears
into the weights and bias of that node.

At inference BN is per channel ``c``: ``y = s[c] * x + t[c]`` with
``s = scale / sqrt(var + epsilon)`` and ``t = bias - mean * s``. When ``x`` is output
channel ``c`` of a Conv (``W``'s dim 0) or column ``c`` of a Gemm, scaling that
channel's weights by ``s[c]`` and setting its bias to ``s[c] * b[c] + t[c]`` computes
``y`` directly.
"""

from __future__ import annotations

import numpy as np
import onnx

from polyc.frontend.cleanup.editor import GraphEditor, copy_node, is_op, with_notes
from polyc.frontend.load import OnnxGraph
from polyc.frontend.ops.registry import attribute_values

LEGACY_OPSET = 7  # BatchNormalization-6 infers only with is_test=1


def fold_batch_norm(graph: OnnxGraph) -> OnnxGraph:
    """Every inference BatchNormalization (one output) whose input ``X`` is computed by a
    Conv (constant ``W``, optional constant ``B``; any ``group``) or a Gemm (constant
    ``B``, ``transB`` 0 or 1, optional constant ``C``) that nothing else reads, and that
    is no graph output, is folded into that node, which then writes the BN's output.

    New weights are new float32 constants (the old ones may have other readers); a BN
    that stays is noted with the reason.
    """
    editor = GraphEditor(graph)
    folded = 0
    for node in editor.walk():
        if not _inference_bn(node, graph.opset):
            editor.emit(node)
            continue
        reason = _fold(editor, node)
        if reason is None:
            folded += 1
            continue
        editor.notes.append(f"kept BatchNormalization node '{node.name}': {reason}")
        editor.emit(node)
    return with_notes(editor.finish(), folded,
                      "folded {n} BatchNormalization node{s} into the Conv/Gemm before it")


def _inference_bn(node: onnx.NodeProto, opset: int) -> bool:
    """A per-channel inference BN: one output, no training mode (BN-6 ``is_test`` set) and
    the statistics per channel (BN-6/7 ``spatial``)."""
    outputs = [o for o in node.output if o]
    attributes = attribute_values(node)
    return (is_op(node, "BatchNormalization") and len(outputs) == 1
            and not attributes.get("training_mode", 0) and attributes.get("spatial", 1)
            and (opset >= LEGACY_OPSET or attributes.get("is_test", 0)))


def _fold(editor: GraphEditor, bn: onnx.NodeProto) -> str | None:
    """Fold ``bn`` into the node before it; None if done, else why not."""
    x = bn.input[0]
    params = [editor.constant(name) for name in bn.input[1:5]]
    if len(params) < 4 or any(p is None for p in params):
        return "scale, B, input_mean and input_var must be constants"
    producer = editor.producer(x)
    if producer is None or not is_op(producer, "Conv", "Gemm") or producer.output[0] != x:
        return f"its input '{x}' is not computed by a Conv or Gemm"
    if editor.readers[x] != 1:
        return f"'{x}' ({producer.op_type} node '{producer.name}') has other readers"
    scale, bias, mean, var = (p.astype(np.float64) for p in params)
    factor = scale / np.sqrt(var + attribute_values(bn).get("epsilon", 1e-5))
    shift = bias - mean * factor
    fold = _into_conv if producer.op_type == "Conv" else _into_gemm
    return fold(editor, producer, factor, shift, bn.output[0])


def _into_conv(editor: GraphEditor, conv, factor, shift, out: str) -> str | None:
    w = editor.constant(conv.input[1])
    has_bias = len(conv.input) > 2 and bool(conv.input[2])
    b = editor.constant(conv.input[2]) if has_bias else None
    if w is None or w.dtype != np.float32 or (has_bias and b is None):
        return f"Conv node '{conv.name}' needs constant float32 weights and bias"
    if w.shape[0] != factor.size:
        return f"{factor.size} channels, but Conv node '{conv.name}' has {w.shape[0]}"
    weights = w * factor.reshape(-1, *[1] * (w.ndim - 1))
    bias = (b if has_bias else 0.0) * factor + shift
    inputs = [conv.input[0], _new_constant(editor, conv.input[1], weights),
              _new_constant(editor, conv.input[2] if has_bias else f"{out}_bias", bias)]
    editor.replace_producer(conv.output[0], copy_node(conv, inputs=inputs, outputs=[out]))
    return None


def _into_gemm(editor: GraphEditor, gemm, factor, shift, out: str) -> str | None:
    """Gemm ``Y = alpha * A' B' + beta * C``: column ``c`` of ``B'`` is scaled, and the new
    ``C`` is ``s * beta * C + t`` (broadcast to a row or a matrix) with ``beta`` 1."""
    attributes = attribute_values(gemm)
    b = editor.constant(gemm.input[1])
    has_c = len(gemm.input) > 2 and bool(gemm.input[2])
    c = editor.constant(gemm.input[2]) if has_c else None
    if b is None or b.dtype != np.float32 or (has_c and c is None):
        return f"Gemm node '{gemm.name}' needs a constant float32 B and C"
    trans_b = attributes.get("transB", 0)
    columns = b.shape[0] if trans_b else b.shape[1]
    if columns != factor.size:
        return f"{factor.size} channels, but Gemm node '{gemm.name}' has {columns} columns"
    weights = b * (factor[:, None] if trans_b else factor[None, :])
    bias = (attributes.get("beta", 1.0) * c if has_c else 0.0) * factor + shift
    inputs = [gemm.input[0], _new_constant(editor, gemm.input[1], weights),
              _new_constant(editor, gemm.input[2] if has_c else f"{out}_bias", bias)]
    folded = copy_node(gemm, inputs=inputs, outputs=[out], beta=1.0)
    editor.replace_producer(gemm.output[0], folded)
    return None


def _new_constant(editor: GraphEditor, base: str, value: np.ndarray) -> str:
    return editor.add_constant(f"{base}_bnfold", np.asarray(value, dtype=np.float32))
