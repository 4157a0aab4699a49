"""Ops whose output shape depends on the values, left to the runtime: a
NonMaxSuppression, Unique or Compress whose outputs only the graph's outputs take runs
after the compiled code, on its inputs, which become outputs of the compiled code
(those that are not inputs of the model; :mod:`polyc.runtime.host`, the issue's "a
plain function on its input boxes").

The pass removes such nodes, lists each (op, input names, output names, attributes) in
``graph.host`` and keeps the model's output order in ``graph.results``. A node of these
ops whose output another node reads is refused with a clear error: its output's length
is known only at run time, and the compiled code has static shapes.
"""

from __future__ import annotations

import dataclasses

from polyc.errors import UnsupportedOpError
from polyc.frontend.cleanup.editor import is_op, reader_counts
from polyc.frontend.load import OnnxGraph
from polyc.frontend.ops.registry import attribute_values, node_name

# op -> (ONNX versions the runtime implements, attributes it takes)
HOST_OPS = {"NonMaxSuppression": ((10, 11), ("center_point_box",)),
            "Unique": ((11, 28), ("axis", "sorted")),
            "Compress": ((9, 11, 28), ("axis",))}


def split_host_ops(graph: OnnxGraph) -> OnnxGraph:
    """``graph`` without its host ops (module docstring), their inputs added to the
    outputs."""
    host, kept = [], []
    readers = reader_counts(graph)
    for index, node in enumerate(graph.nodes):
        if not is_op(node, *HOST_OPS):
            kept.append(node)
            continue
        host.append(_host_step(graph, node, node_name(node, index), readers))
    if not host:
        return graph
    produced = {name for step in host for name in step["outputs"] if name}
    outputs = [o for o in graph.outputs if o not in produced]
    inputs = {t.name for t in graph.inputs}
    outputs += [name for step in host for name in step["inputs"]
                if name and name not in produced and name not in inputs]
    if not outputs:  # every input a model input: the compiled code copies one of them
        kept, outputs = _copied_input(graph, kept, host[0])
    notes = tuple(f"runs {step['op']} node '{step['node']}' after the compiled code (its "
                  "output's length depends on the values)" for step in host)
    return dataclasses.replace(graph, nodes=tuple(kept), outputs=tuple(dict.fromkeys(outputs)),
                               host=graph.host + tuple(host),
                               results=graph.results or tuple(graph.outputs),
                               notes=graph.notes + notes)


def _copied_input(graph: OnnxGraph, kept: list, step: dict) -> tuple[list, list[str]]:
    """The nodes with an Identity of the step's first input appended, which the step
    reads instead, and the compiled code's one output: its result (the compiled code
    needs one)."""
    import onnx

    source = next(name for name in step["inputs"] if name)
    taken = {o for node in graph.nodes for o in node.output} | {t.name for t in graph.inputs}
    copy = f"{source}_for_{step['op']}"
    while copy in taken:
        copy += "_"
    step["inputs"] = [copy if name == source else name for name in step["inputs"]]
    identity = onnx.helper.make_node("Identity", [source], [copy], name=f"{copy}_copy")
    return [*kept, identity], [copy]


def _host_step(graph: OnnxGraph, node, name: str, readers) -> dict:
    import onnx

    versions, attributes = HOST_OPS[node.op_type]
    version = onnx.defs.get_schema(node.op_type, graph.opset, "").since_version
    if version not in versions:
        raise UnsupportedOpError(node.op_type, name, graph.opset,
                                 f"version {version} (the runtime runs versions "
                                 f"{', '.join(map(str, versions))})")
    values = attribute_values(node)
    unknown = sorted(set(values) - set(attributes))
    if unknown:
        raise UnsupportedOpError(node.op_type, name, graph.opset,
                                 f"attribute(s) {', '.join(unknown)} not supported")
    outputs = [o for o in node.output if o]
    read = [o for o in outputs if readers[o] > (o in graph.outputs)]
    if read:
        raise UnsupportedOpError(node.op_type, name, graph.opset,
                                 f"its output '{read[0]}' is read by other nodes; polyc runs "
                                 f"{node.op_type} after the compiled code, so its output "
                                 "(of a length known only at run time) can only be a "
                                 "graph output")
    return {"op": node.op_type, "node": name, "inputs": list(node.input),
            "outputs": list(node.output), "attributes": {k: int(v) for k, v in values.items()}}
