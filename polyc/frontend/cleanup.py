"""Step 2 of the frontend: graph clean-up on the ONNX level.

``cleanup`` removes nodes that do not contribute to a graph output, turns ``Constant``
nodes into constants, folds every node whose inputs are all constants (evaluated by
``onnx.reference.ReferenceEvaluator`` on a one-node model), and drops constants no
node reads. What it did is recorded in ``OnnxGraph.notes``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from polyc.frontend.load import OnnxGraph
from polyc.frontend.ops import lookup
from polyc.frontend.ops.registry import DEFAULT_DOMAINS, NodeContext, attribute_values, node_name

# Ops whose result is not a function of their inputs: never folded.
NONDETERMINISTIC = frozenset({
    "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
    "Multinomial", "Bernoulli",
})
SUBGRAPHS = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


def cleanup(graph: OnnxGraph) -> OnnxGraph:
    """Dead nodes removed, Constant and all-constant nodes folded, unused constants dropped."""
    graph = remove_dead_nodes(graph)
    graph = fold_constant_nodes(graph)
    graph = fold_constants(graph)
    return drop_unused_constants(graph)


def _with_notes(graph: OnnxGraph, count: int, text: str, **changes) -> OnnxGraph:
    notes = graph.notes + (text.format(n=count, s="" if count == 1 else "s"),) \
        if count else graph.notes
    return dataclasses.replace(graph, notes=notes, **changes)


def remove_dead_nodes(graph: OnnxGraph) -> OnnxGraph:
    """Only the nodes a graph output depends on, in their original order."""
    live = set(graph.outputs)
    kept = []
    for node in reversed(graph.nodes):
        if not any(o in live for o in node.output):
            continue
        kept.append(node)
        live.update(_names_read(node))
    kept.reverse()
    removed = len(graph.nodes) - len(kept)
    return _with_notes(graph, removed, "removed {n} dead node{s}", nodes=tuple(kept))


def _names_read(node: onnx.NodeProto) -> set[str]:
    """Every value name ``node`` reads, including those read inside its subgraphs."""
    names = {i for i in node.input if i}
    for attr in node.attribute:
        for sub in [attr.g, *attr.graphs] if attr.type in SUBGRAPHS else []:
            for inner in sub.node:
                names |= _names_read(inner)
    return names


def fold_constant_nodes(graph: OnnxGraph) -> OnnxGraph:
    """``Constant`` nodes become constants (their attributes checked by ``ops.Constant``)."""
    constants = dict(graph.constants)
    kept = []
    for index, node in enumerate(graph.nodes):
        if node.op_type != "Constant" or node.domain not in DEFAULT_DOMAINS:
            kept.append(node)
            continue
        name = node_name(node, index)
        opdef = lookup(node, graph.opset, name)
        ctx = NodeContext(node.op_type, name, graph.opset)
        constants[node.output[0]] = opdef.fn(ctx, **attribute_values(node))
    folded = len(graph.nodes) - len(kept)
    return _with_notes(graph, folded, "turned {n} Constant node{s} into constants",
                       nodes=tuple(kept), constants=constants)


def _foldable(node: onnx.NodeProto, constants) -> bool:
    inputs = [i for i in node.input if i]
    return (bool(inputs) and all(i in constants for i in inputs)
            and node.domain in DEFAULT_DOMAINS
            and node.op_type not in NONDETERMINISTIC
            and not any(a.type in SUBGRAPHS for a in node.attribute))


def fold_constants(graph: OnnxGraph) -> OnnxGraph:
    """Every node whose inputs are all constants is evaluated; its outputs become constants.

    A node the reference evaluator cannot run stays in the graph (and is noted), so
    lowering then either handles it or reports it as unsupported.
    """
    constants = dict(graph.constants)
    kept, notes = [], []
    for index, node in enumerate(graph.nodes):
        if not _foldable(node, constants):
            kept.append(node)
            continue
        try:
            values = _evaluate_node(node, constants, graph.opset_imports)
        except Exception as e:  # noqa: BLE001 - any evaluator failure means "do not fold"
            kept.append(node)
            notes.append(f"could not fold {node.op_type} node '{node_name(node, index)}': "
                         f"{str(e).splitlines()[0] if str(e) else type(e).__name__}")
            continue
        constants.update(values)
    folded = len(graph.nodes) - len(kept)
    graph = dataclasses.replace(graph, notes=graph.notes + tuple(notes))
    return _with_notes(graph, folded, "folded {n} constant node{s}",
                       nodes=tuple(kept), constants=constants)


def _evaluate_node(node: onnx.NodeProto, constants, opset_imports) -> dict[str, np.ndarray]:
    """The outputs of ``node`` run alone on constant inputs by the ONNX reference evaluator."""
    helper = onnx.helper
    names = list(dict.fromkeys(i for i in node.input if i))
    inputs = [helper.make_tensor_value_info(
        n, helper.np_dtype_to_tensor_dtype(constants[n].dtype), constants[n].shape)
        for n in names]
    outputs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    model = helper.make_model(
        helper.make_graph([node], "fold", inputs, outputs),
        opset_imports=[helper.make_opsetid(domain, version) for domain, version in opset_imports])
    results = ReferenceEvaluator(model).run(None, {n: constants[n] for n in names})
    return {o.name: np.asarray(r) for o, r in zip(outputs, results)}


def drop_unused_constants(graph: OnnxGraph) -> OnnxGraph:
    """Constants that no node reads and that are no graph output are dropped."""
    used = set(graph.outputs)
    for node in graph.nodes:
        used |= _names_read(node)
    constants = {k: v for k, v in graph.constants.items() if k in used}
    dropped = len(graph.constants) - len(constants)
    return _with_notes(graph, dropped, "dropped {n} unused constant{s}", constants=constants)
