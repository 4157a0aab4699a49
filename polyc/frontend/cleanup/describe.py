"""An :class:`OnnxGraph` as text (``describe``) and as an ONNX model again (``to_model``)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from polyc.frontend.cleanup.editor import counted
from polyc.frontend.load import OnnxGraph

SHOWN_VALUES = 8  # integer constants up to this size show their values


def describe(graph: OnnxGraph) -> str:
    """One line per input, constant, node and output; shapes where inference knows them.

    ``Reshape r: x[2, 6], r_shape -> y[3, 4]`` reads: op type, node name, inputs ->
    outputs; ``?`` is a dim shape inference could not determine. A constant shows as
    ``name: dtype[shape]``, with its values when it is a small integer tensor.
    """
    sizes = [counted(len(graph.inputs), "{n} input{s}"),
             counted(len(graph.constants), "{n} constant{s}"),
             counted(len(graph.nodes), "{n} node{s}")]
    lines = [f"graph '{graph.name}' (opset {graph.opset}): {', '.join(sizes)}"]
    lines += [f"  input {t.name}: {t.dtype}[{', '.join(map(str, t.shape))}]"
              for t in graph.inputs]
    lines += [f"  constant {_constant(name, value)}" for name, value in graph.constants.items()]
    for node in graph.nodes:
        inputs = ", ".join(_value(graph, i) if i else "_" for i in node.input)
        outputs = ", ".join(_value(graph, o) if o else "_" for o in node.output)
        lines.append(f"  {node.op_type} {node.name}: {inputs} -> {outputs}")
    lines += [f"  output {_value(graph, name)}" for name in graph.outputs]
    return "\n".join(lines)


def _constant(name: str, value: np.ndarray) -> str:
    text = f"{name}: {value.dtype}[{', '.join(map(str, value.shape))}]"
    if value.dtype.kind in "iub" and value.size <= SHOWN_VALUES:
        text += f" = {value.reshape(-1).tolist()}"
    return text


def _value(graph: OnnxGraph, name: str) -> str:
    if name in graph.constants:
        return name
    dims = graph.value_shapes.get(name)
    if dims is None:
        return name
    return f"{name}[{', '.join('?' if d is None else str(d) for d in dims)}]"


def to_model(graph: OnnxGraph) -> onnx.ModelProto:
    """``graph`` as an ONNX model: its constants as initializers, its outputs float32.

    The IR version is the lowest the opsets allow, which onnxruntime accepts.
    """
    inputs = [helper.make_tensor_value_info(
        t.name, helper.np_dtype_to_tensor_dtype(np.dtype(t.dtype)), t.shape)
        for t in graph.inputs]
    outputs = [helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT,
                                             graph.value_shapes.get(name))
               for name in graph.outputs]
    initializers = [numpy_helper.from_array(value, name)
                    for name, value in graph.constants.items()]
    opsets = [helper.make_opsetid(domain, version) for domain, version in graph.opset_imports]
    return helper.make_model(
        helper.make_graph(list(graph.nodes), graph.name, inputs, outputs,
                          initializer=initializers),
        opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))
