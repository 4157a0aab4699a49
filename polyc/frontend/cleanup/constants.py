"""Constant folding: Constant nodes, shapes known statically, all-constant nodes.

Folding evaluates a node with ``onnx.reference.ReferenceEvaluator`` on a one-node
model, so every op the evaluator knows folds (Shape arithmetic, Gather, Concat, Cast,
ConstantOfShape, Range, ...), whether or not polyc lowers it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from polyc.frontend.cleanup.describe import to_model
from polyc.frontend.cleanup.editor import SUBGRAPHS, GraphEditor, is_op, with_notes
from polyc.frontend.load import OnnxGraph, value_shapes_of
from polyc.frontend.ops import lookup
from polyc.frontend.ops.registry import (
    DEFAULT_DOMAINS,
    NodeContext,
    attribute_values,
    node_name,
)

# Ops whose result is not a function of their inputs: never folded.
NONDETERMINISTIC = frozenset({
    "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
    "Multinomial", "Bernoulli",
})
# Ops the reference evaluator computes otherwise than onnxruntime, whose results polyc
# follows: never folded (polyc lowers them, constant inputs and all). MaxPool: a window
# wholly in the padding gives 0 there, the lowest float in onnxruntime (graph fuzzer
# seed 5504, a MaxPool of a weight whose dilated windows skip its one pixel).
UNFAITHFUL = frozenset({"MaxPool"})
NEVER_FOLDED = NONDETERMINISTIC | UNFAITHFUL
SHAPE_NOTE = "folded {n} Shape/Size node{s} of static shapes into constants"
CONSTANT_NOTE = "folded {n} constant node{s}"


def fold_constant_nodes(graph: OnnxGraph) -> OnnxGraph:
    """``Constant`` nodes become constants (their attributes checked by ``ops.Constant``)."""
    constants = dict(graph.constants)
    kept = []
    for index, node in enumerate(graph.nodes):
        if not is_op(node, "Constant"):
            kept.append(node)
            continue
        name = node_name(node, index)
        opdef = lookup(node, graph.opset, name)
        ctx = NodeContext(node.op_type, name, graph.opset)
        constants[node.output[0]] = opdef.fn(ctx, **attribute_values(node))
    folded = len(graph.nodes) - len(kept)
    return with_notes(graph, folded, "turned {n} Constant node{s} into constants",
                      nodes=tuple(kept), constants=constants)


def fold_shapes_and_constants(graph: OnnxGraph) -> OnnxGraph:
    """``fold_shape_ops`` then ``fold_constants``, repeated while they fold something
    and a Shape or Size node still reads a value of unknown shape: before each repeat,
    ONNX shape inference runs again on the folded graph (a Reshape whose target just
    became a constant now has a static output shape). Notes count all rounds."""
    shapes = folded = rounds = 0
    failures: list[str] = []
    while True:
        graph, shape_count = _fold_shape_ops(graph)
        graph, count, round_failures = _fold_constants(graph)
        graph, branches = _inline_constant_ifs(graph)
        count += branches
        failures += [f for f in round_failures if f not in failures]
        if not shape_count + count:
            break
        shapes, folded, rounds = shapes + shape_count, folded + count, rounds + 1
        if not _reads_unknown_shape(graph):
            break
        graph = dataclasses.replace(graph, value_shapes=reinferred_shapes(graph))
    in_rounds = f" in {rounds} rounds" if rounds > 1 else ""
    graph = with_notes(graph, shapes, SHAPE_NOTE + in_rounds)
    graph = _with_failures(graph, failures)
    return with_notes(graph, folded, CONSTANT_NOTE + in_rounds)


def _inline_constant_ifs(graph: OnnxGraph) -> tuple[OnnxGraph, int]:
    """Each If whose condition is a constant replaced by the nodes of the branch it
    takes (its initializers constants, its outputs passed on by Identity nodes), so that
    the branch's shape computations fold with the rest of the graph."""
    editor = GraphEditor(graph)
    count = 0
    for node in editor.walk():
        cond = editor.constant(node.input[0]) if is_op(node, "If") else None
        if cond is None or cond.size != 1:
            editor.emit(node)
            continue
        name = "then_branch" if bool(cond.reshape(-1)[0]) else "else_branch"
        branch = next(a.g for a in node.attribute if a.name == name)
        for init in branch.initializer:
            editor.constants[init.name] = onnx.numpy_helper.to_array(init)
        for inner in branch.node:
            editor.emit(inner)
        for value, out in zip(branch.output, node.output):
            if out:
                editor.emit(onnx.helper.make_node("Identity", [value.name], [out]))
        count += 1
    return editor.finish(), count


def fold_shape_ops(graph: OnnxGraph) -> OnnxGraph:
    """``Shape`` (with Shape-15's ``start``/``end``) and ``Size`` of a value whose shape is
    static become int64 constants, so the shape computations reading them fold next."""
    graph, count = _fold_shape_ops(graph)
    return with_notes(graph, count, SHAPE_NOTE)


def _fold_shape_ops(graph: OnnxGraph) -> tuple[OnnxGraph, int]:
    editor = GraphEditor(graph)
    folded = 0
    for node in editor.walk():
        value = _shape_value(editor, node)
        if value is None:
            editor.emit(node)
            continue
        editor.constants[node.output[0]] = value
        editor.value_shapes[node.output[0]] = value.shape
        folded += 1
    return editor.finish(), folded


def _shape_value(editor: GraphEditor, node: onnx.NodeProto) -> np.ndarray | None:
    """The value of a Shape or Size node, if the shape it reads is static."""
    if not is_op(node, "Shape", "Size"):
        return None
    shape = editor.static_shape(node.input[0])
    if shape is None:
        return None
    if node.op_type == "Size":
        return np.array(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
    attributes = attribute_values(node)
    # Shape-15 clamps start and end into [0, rank] after adding rank to negative ones:
    # exactly what a Python slice does.
    return np.array(shape[attributes.get("start", 0):attributes.get("end")], dtype=np.int64)


def _reads_unknown_shape(graph: OnnxGraph) -> bool:
    for node in graph.nodes:
        if is_op(node, "Shape", "Size") and node.input[0] not in graph.constants:
            dims = graph.value_shapes.get(node.input[0])
            if dims is None or None in dims:
                return True
    return False


def reinferred_shapes(graph: OnnxGraph) -> dict[str, tuple[int | None, ...]]:
    """``graph.value_shapes`` completed by ONNX shape inference on the graph as it is
    now (its constants as initializers); the old shapes where inference fails."""
    shapes = dict(graph.value_shapes)
    try:
        inferred = onnx.shape_inference.infer_shapes(to_model(graph))
    except (onnx.shape_inference.InferenceError, RuntimeError, ValueError):
        return shapes
    for name, dims in value_shapes_of(inferred.graph).items():
        old = shapes.get(name)
        if old is None or sum(d is None for d in dims) < sum(d is None for d in old):
            shapes[name] = dims
    return shapes


def _foldable(node: onnx.NodeProto, constants) -> bool:
    inputs = [i for i in node.input if i]
    return (bool(inputs) and all(i in constants for i in inputs)
            and node.domain in DEFAULT_DOMAINS
            and node.op_type not in NEVER_FOLDED
            and not any(a.type in SUBGRAPHS for a in node.attribute))


def fold_constants(graph: OnnxGraph) -> OnnxGraph:
    """Every node whose inputs are all constants is evaluated; its outputs become constants.

    A node the reference evaluator cannot run stays in the graph (and is noted once), so
    lowering then either handles it or reports it as unsupported.
    """
    graph, count, failures = _fold_constants(graph)
    return with_notes(_with_failures(graph, failures), count, CONSTANT_NOTE)


def _with_failures(graph: OnnxGraph, failures: list[str]) -> OnnxGraph:
    """``graph`` noting each node that could not be folded, once."""
    new = tuple(f for f in failures if f not in graph.notes)
    return dataclasses.replace(graph, notes=graph.notes + new)


def _fold_constants(graph: OnnxGraph) -> tuple[OnnxGraph, int, list[str]]:
    constants = dict(graph.constants)
    kept, failures = [], []
    for index, node in enumerate(graph.nodes):
        if not _foldable(node, constants):
            kept.append(node)
            continue
        try:
            values = _evaluate_node(node, constants, graph.opset_imports)
        except Exception as e:  # noqa: BLE001 - any evaluator failure means "do not fold"
            kept.append(node)
            failures.append(f"could not fold {node.op_type} node '{node_name(node, index)}': "
                            f"{str(e).splitlines()[0] if str(e) else type(e).__name__}")
            continue
        constants.update(values)
    folded = len(graph.nodes) - len(kept)
    return dataclasses.replace(graph, nodes=tuple(kept), constants=constants), folded, failures


# ops the reference evaluator implements from a later version only, whose meaning on
# the types the earlier versions take is the same: evaluated at that version
# (DequantizeLinear-10/13 of int8 weights: "No implementation ... version 17")
LATER_VERSION = {"DequantizeLinear": 19, "QuantizeLinear": 19}


def _evaluate_node(node: onnx.NodeProto, constants, opset_imports) -> dict[str, np.ndarray]:
    """The outputs of ``node`` run alone on constant inputs by the ONNX reference evaluator."""
    helper = onnx.helper
    if node.domain in ("", "ai.onnx") and node.op_type in LATER_VERSION:
        opset_imports = [(d, max(v, LATER_VERSION[node.op_type]) if d in ("", "ai.onnx")
                          else v) for d, v in opset_imports]
    names = list(dict.fromkeys(i for i in node.input if i))
    inputs = [helper.make_tensor_value_info(
        n, helper.np_dtype_to_tensor_dtype(constants[n].dtype), constants[n].shape)
        for n in names]
    outputs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    model = helper.make_model(
        helper.make_graph([node], "fold", inputs, outputs),
        opset_imports=[helper.make_opsetid(domain, version) for domain, version in opset_imports])
    results = [np.asarray(r) for r in
               ReferenceEvaluator(model).run(None, {n: constants[n] for n in names})]
    _check_shapes(model, results)
    return {o.name: r for o, r in zip(outputs, results)}


def _check_shapes(model: onnx.ModelProto, results: list[np.ndarray]) -> None:
    """ValueError when a result's shape is not the one ONNX shape inference gives (the
    reference evaluator's MaxPool with ceil_mode made [1, 18, 2, 7] of a [1, 18, 1, 6]
    input where inference and onnxruntime give [1, 18, 1, 6]): the node is not folded."""
    inferred = onnx.shape_inference.infer_shapes(model).graph.output
    for info, result in zip(inferred, results):
        dims = info.type.tensor_type.shape.dim
        shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in dims)
        if info.type.tensor_type.HasField("shape") and None not in shape \
                and shape != result.shape:
            raise ValueError(f"the reference evaluator gives shape {list(result.shape)}, "
                             f"shape inference {list(shape)}")

