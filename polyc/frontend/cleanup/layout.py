"""Layout ops: Flatten, Squeeze and Unsqueeze as Reshape; chains of Reshape or Transpose
collapsed into one node; Reshape and Transpose that change nothing removed.

Lowering turns Reshape and Transpose into views (no data moves), so after this a chain
of layout ops is at most one view of its source.
"""

from __future__ import annotations

import numpy as np
import onnx

from polyc.frontend.cleanup.editor import GraphEditor, copy_node, is_op, with_notes
from polyc.frontend.load import OnnxGraph
from polyc.frontend.ops.registry import attribute_values

ALLOWZERO_OPSET = 14  # Reshape-14 added allowzero: a 0 in the target is a zero dim


def canonical_reshapes(graph: OnnxGraph) -> OnnxGraph:
    """Flatten, Squeeze and Unsqueeze whose input and output shapes are static become a
    Reshape of the input to the output shape (a new int64 constant), so that lowering
    only needs Reshape. The node keeps its name."""
    editor = GraphEditor(graph)
    turned = 0
    for node in editor.walk():
        target = _static_target(editor, node) if is_op(
            node, "Flatten", "Squeeze", "Unsqueeze") else None
        if target is None:
            editor.emit(node)
            continue
        editor.emit(_reshape(editor, node, node.input[0], target))
        turned += 1
    return with_notes(editor.finish(), turned,
                      "turned {n} Flatten/Squeeze/Unsqueeze node{s} into Reshape")


def _static_target(editor: GraphEditor, node: onnx.NodeProto) -> tuple[int, ...] | None:
    """The static output shape of ``node``, if its input's is static too and a Reshape
    at this opset can express it (a zero dim needs ``allowzero``)."""
    out = editor.static_shape(node.output[0])
    if out is None or editor.static_shape(node.input[0]) is None:
        return None
    if 0 in out and editor.graph.opset < ALLOWZERO_OPSET:
        return None
    return out


def _reshape(editor: GraphEditor, node, data: str, target: tuple[int, ...]):
    """A Reshape named like ``node``, writing its output: ``data`` to shape ``target``."""
    shape = editor.add_constant(f"{node.output[0]}_shape", np.array(target, dtype=np.int64))
    allowzero = {"allowzero": 1} if 0 in target else {}
    return onnx.helper.make_node("Reshape", [data, shape], [node.output[0]], name=node.name,
                                 **allowzero)


def collapse_layout_chains(graph: OnnxGraph) -> OnnxGraph:
    """A Reshape of a Reshape reads the inner one's input; a Transpose of a Transpose
    becomes one with the composed ``perm``; then a Reshape to its input's own shape or
    a Transpose with the identity ``perm`` is removed (a graph output keeps its name, as
    in ``remove_identities``). An inner node nothing else reads is dead afterwards."""
    editor = GraphEditor(graph)
    merged = removed = 0
    for node in editor.walk():
        if is_op(node, "Reshape", "Transpose"):
            inner = editor.producer(node.input[0])
            combined = _combined(editor, inner, node) if inner is not None else None
            if combined is not None:
                node, merged = combined, merged + 1
            if _changes_nothing(editor, node) and editor.bypass(node.output[0], node.input[0]):
                removed += 1
                continue
        editor.emit(node)
    graph = with_notes(editor.finish(), merged,
                       "merged {n} Reshape/Transpose node{s} with the one before it")
    return with_notes(graph, removed, "removed {n} Reshape/Transpose node{s} that changed "
                      "nothing")


def _combined(editor: GraphEditor, inner: onnx.NodeProto, outer: onnx.NodeProto):
    """``outer`` reading ``inner``'s input instead, or None when that is not possible."""
    if not is_op(inner, outer.op_type):
        return None
    if outer.op_type == "Transpose":
        first, second = _perm(editor, inner), _perm(editor, outer)
        if first is None or second is None:
            return None
        return copy_node(outer, inputs=[inner.input[0]], perm=[first[k] for k in second])
    target = editor.constant(outer.input[1])
    if target is not None and (attribute_values(outer).get("allowzero", 0) or 0 not in target):
        return copy_node(outer, inputs=[inner.input[0], outer.input[1]])
    out = _static_target(editor, outer)  # a 0 copied a dim of inner's output
    return _reshape(editor, outer, inner.input[0], out) if out is not None else None


def _perm(editor: GraphEditor, node: onnx.NodeProto) -> list[int] | None:
    """The ``perm`` of a Transpose (reversed axes by default, which needs the rank)."""
    perm = attribute_values(node).get("perm")
    if perm is not None:
        return list(perm)
    rank = editor.rank(node.input[0])
    return None if rank is None else list(reversed(range(rank)))


def _changes_nothing(editor: GraphEditor, node: onnx.NodeProto) -> bool:
    if node.op_type == "Transpose":
        perm = _perm(editor, node)
        return perm is not None and perm == sorted(perm)
    shape = editor.static_shape(node.input[0])
    return shape is not None and shape == editor.static_shape(node.output[0])
