"""Nodes that pass their input through: Identity, and Dropout at inference."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx

from polyc.frontend.cleanup.editor import GraphEditor, counted, is_op
from polyc.frontend.load import OnnxGraph
from polyc.frontend.ops.registry import attribute_values

# Dropout-12 added training_mode and defined the mask at inference: all true.
# (Dropout-10 leaves it open: onnxruntime gives all false, onnx.reference all true.)
TRAINING_MODE_OPSET = 12
LEGACY_OPSET = 7  # Dropout-6 is at inference only with is_test=1


def remove_identities(graph: OnnxGraph) -> OnnxGraph:
    """Identity and inference Dropout nodes are removed; their readers read the input.

    A Dropout is at inference when it has no ``training_mode`` input or a constant false
    one (``ratio`` does not matter then); with another it stays, and lowering rejects
    it. A Dropout ``mask`` that is read becomes an all-true constant, which needs its
    shape to be static and opset 12 or newer. A removed node's output that is a graph
    output keeps its name: the node computing the input is renamed instead, and where
    there is none (the input is a graph input or a constant) the node stays.
    """
    editor = GraphEditor(graph)
    removed = {"Identity": 0, "Dropout": 0}
    for node in editor.walk():
        if is_op(node, "Identity") and editor.bypass(node.output[0], node.input[0]):
            removed["Identity"] += 1
        elif is_op(node, "Dropout") and _remove_dropout(editor, node):
            removed["Dropout"] += 1
        else:
            editor.emit(node)
    graph = editor.finish()
    notes = [counted(n, f"removed {{n}} {op} node{{s}}") for op, n in removed.items() if n]
    return dataclasses.replace(graph, notes=graph.notes + tuple(notes))


def _remove_dropout(editor: GraphEditor, node: onnx.NodeProto) -> bool:
    """Bypass an inference Dropout, its read mask made a constant; False if it stays."""
    if editor.graph.opset < LEGACY_OPSET and not attribute_values(node).get("is_test", 0):
        editor.notes.append(f"kept Dropout node '{node.name}': is_test=0 asks for training")
        return False
    training = node.input[2] if len(node.input) > 2 else ""
    value = editor.constant(training)
    if training and (value is None or value.reshape(-1)[0]):
        state = "not a constant" if value is None else "true"
        editor.notes.append(f"kept Dropout node '{node.name}': training_mode is {state}")
        return False
    mask = node.output[1] if len(node.output) > 1 else ""
    shape = None
    if mask and editor.readers[mask] and editor.graph.opset < TRAINING_MODE_OPSET:
        editor.notes.append(f"kept Dropout node '{node.name}': its mask '{mask}' is read, "
                            "and Dropout-10 does not define it at inference")
        return False
    if mask and editor.readers[mask]:
        shape = editor.static_shape(mask) or editor.static_shape(node.input[0])
        if shape is None:
            editor.notes.append(f"kept Dropout node '{node.name}': its mask '{mask}' is "
                                "read and its shape is not static")
            return False
    if not editor.bypass(node.output[0], node.input[0]):
        return False
    if shape is not None:
        editor.constants[mask] = np.ones(shape, dtype=bool)
        editor.value_shapes[mask] = shape
        editor.notes.append(f"the mask '{mask}' of Dropout node '{node.name}' became an "
                            "all-true constant")
    return True
