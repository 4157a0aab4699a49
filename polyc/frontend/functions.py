"""ONNX functions: an op polyc has no lowering for, written as its schema's function body.

Many ONNX ops are defined by a function: a body of other ONNX ops (Attention, the
training losses, RotaryEmbedding, GroupNormalization, ...), fixed or built from the node
and its input types (a context-dependent function). Where polyc has no lowering of its
own for such an op at the model's opset, :func:`expand_functions` replaces the node by
that body, then shape inference runs again, and the body's ops lower as any others (a
body may hold further function ops: Softmax cross-entropy calls NegativeLogLikelihood;
expansion repeats until none is left).

The body's values are renamed with a prefix unique to the node; the function's inputs
and outputs become the node's (a missing optional input is ``""``); an attribute that
refers to the node's (``ref_attr_name``) takes its value, or is dropped when the node
does not set it (the body's default applies). A body with control flow (If, Loop,
Scan: AffineGrid, LinearAttention) is not expanded: the node stays, refused as an op
without lowering.
"""

from __future__ import annotations

import onnx
from onnx import helper

from polyc.errors import UnsupportedOpError

ROUNDS = 4  # bodies inside bodies: Softmax cross-entropy -> NegativeLogLikelihoodLoss


def expand_functions(proto: onnx.ModelProto, opset: int, infer
                     ) -> tuple[onnx.ModelProto, tuple[str, ...]]:
    """``proto`` with each node that polyc cannot lower but the ONNX schema defines by a
    function replaced by that function's body; ``infer(proto)`` re-infers shapes after
    each round. Also the notes: which ops were expanded, how many nodes each."""
    notes: list[str] = []
    for round_ in range(ROUNDS):
        types = _value_types(proto.graph)
        nodes: list[onnx.NodeProto] = []
        count = len(notes)
        for k, node in enumerate(proto.graph.node):
            body = _function(node, opset, types)
            if body is None:
                nodes.append(node)
                continue
            prefix = f"{node.name or node.op_type}__{round_}_{k}__"
            inlined = _inlined(node, body, prefix)
            nodes.extend(inlined)
            name = node.name or f"{node.op_type}#{k}"
            notes.append(f"expanded {node.op_type} node '{name}' into its ONNX function "
                         f"({len(inlined)} nodes)")
        if len(notes) == count:
            break
        expanded = onnx.ModelProto()
        expanded.CopyFrom(proto)
        del expanded.graph.node[:]
        expanded.graph.node.extend(nodes)
        del expanded.graph.value_info[:]
        proto = infer(expanded)
    return proto, tuple(notes)


def defined_by_function(op_type: str, opset: int) -> bool:
    """Whether the ONNX op ``op_type`` has a function body at ``opset`` that
    :func:`expand_functions` may inline where polyc has no lowering of its own: a fixed
    body without control flow, or a context-dependent one (built per node)."""
    try:
        schema = onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return False
    fixed = [v for v in schema.function_opset_versions if v <= opset]
    if fixed:
        body = onnx.FunctionProto()
        body.ParseFromString(schema.get_function_with_opset_version(max(fixed)))
        return _flat(body)
    return any(v <= opset for v in schema.context_dependent_function_opset_versions)


def _function(node: onnx.NodeProto, opset: int, types) -> onnx.FunctionProto | None:
    """The function body of ``node`` at ``opset`` when polyc has no lowering for it."""
    from polyc.frontend import ops  # the package: every lowering registered (the ops
    # import the loader, which calls this module: imported when first called)

    if node.domain not in ops.registry.DEFAULT_DOMAINS:
        return None
    try:
        ops.lookup(node, opset, node.name)
        return None
    except UnsupportedOpError:
        pass
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
    except onnx.defs.SchemaError:
        return None
    body = onnx.FunctionProto()
    fixed = [v for v in schema.function_opset_versions if v <= opset]
    if fixed:
        body.ParseFromString(schema.get_function_with_opset_version(max(fixed)))
        return body if _flat(body) else None
    built = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    if not built:
        return None
    inputs = [types.get(name, onnx.TypeProto()).SerializeToString() for name in node.input]
    try:
        data = schema.get_context_dependent_function_with_opset_version(
            max(built), node.SerializeToString(), inputs)
    except Exception:  # noqa: BLE001 - onnx refuses the node: lowering will say why
        return None
    body.ParseFromString(data)
    return body if body.node and _flat(body) else None


def _flat(body: onnx.FunctionProto) -> bool:
    """Whether no node of ``body`` holds a subgraph (If, Loop, Scan: polyc lowers none,
    and their bodies would name the function's values unrenamed)."""
    graphs = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
    return not any(a.type in graphs for n in body.node for a in n.attribute)


def _value_types(graph: onnx.GraphProto) -> dict[str, onnx.TypeProto]:
    """The type of every value shape inference described, and of the initializers."""
    types = {v.name: v.type for v in (*graph.input, *graph.value_info, *graph.output)}
    for init in graph.initializer:
        types[init.name] = helper.make_tensor_type_proto(init.data_type, list(init.dims))
    return types


def _inlined(node: onnx.NodeProto, body: onnx.FunctionProto, prefix: str
             ) -> list[onnx.NodeProto]:
    """The body's nodes with the function's values renamed to the node's (see the
    module docstring)."""
    names = {name: node.input[k] if k < len(node.input) else ""
             for k, name in enumerate(body.input)}
    names.update({name: node.output[k] for k, name in enumerate(body.output)
                  if k < len(node.output) and node.output[k]})
    attributes = {a.name: a for a in node.attribute}

    def rename(name: str) -> str:
        return names.get(name, prefix + name if name else "")

    nodes = []
    for k, inner in enumerate(body.node):
        copy = onnx.NodeProto()
        copy.CopyFrom(inner)
        copy.name = prefix + (inner.name or f"{inner.op_type}_{k}")
        copy.input[:] = [rename(n) for n in inner.input]
        copy.output[:] = [rename(n) for n in inner.output]
        del copy.attribute[:]
        for attribute in inner.attribute:
            if not attribute.ref_attr_name:
                copy.attribute.append(attribute)
            elif attribute.ref_attr_name in attributes:
                given = onnx.AttributeProto()
                given.CopyFrom(attributes[attribute.ref_attr_name])
                given.name = attribute.name
                copy.attribute.append(given)
        nodes.append(copy)
    return nodes
