"""The description of a random ONNX graph (:class:`GraphCase`) and its ONNX model.

A :class:`GraphCase` is a description, not a model: graph inputs and weights
(:class:`Leaf`, values drawn from the case's data seed), op records (:class:`Node`,
constant inputs such as axes and shapes written out as :class:`Literal`), the graph
outputs and the compile :class:`~polyc.fuzz.Config`. :func:`model` builds the ONNX model
(opset :data:`OPSET`) from it, so shrinking works on descriptions; :func:`reference` is
onnxruntime's value of every node.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from polyc.fuzz import Config

OPSET = 17
IR_VERSION = 10  # onnxruntime 1.31 reads IR versions up to 13; onnx 1.23 writes 14
MAX_ELEMENTS = 20_000  # no tensor larger than this
ONNX_TYPES = {"float32": TensorProto.FLOAT, "int64": TensorProto.INT64,
              "bool": TensorProto.BOOL}


# -- the description ---------------------------------------------------------------------

@dataclass(frozen=True)
class Leaf:
    """A graph input (``weight`` false) or an initializer. Values: floats uniform in
    [low, high), integers uniform in [low, high], bools fair; with ``signed`` the
    magnitude is drawn so and the sign at random (divisors)."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    low: float = -2.0
    high: float = 2.0
    signed: bool = False
    weight: bool = False


@dataclass(frozen=True)
class Literal:
    """A constant input written out (axes, starts, target shapes, clip bounds)."""

    dtype: str
    shape: tuple[int, ...]
    values: tuple


@dataclass(frozen=True)
class Node:
    """One ONNX node with one output; ``inputs`` are value names, :class:`Literal` or
    ``""`` (an omitted optional input); ``attrs`` are (name, value) pairs."""

    op: str
    inputs: tuple
    output: str
    attrs: tuple = ()


@dataclass(frozen=True)
class GraphCase:
    """A graph to compile and compare, with the options it compiles under."""

    leaves: tuple[Leaf, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[str, ...]
    config: Config
    data_seed: int


def leaf_values(leaf: Leaf, data_seed: int) -> np.ndarray:
    """The values of ``leaf``: a function of the data seed and the leaf's name and spec."""
    rng = np.random.default_rng([data_seed, zlib.crc32(leaf.name.encode())])
    if leaf.dtype == "bool":
        return rng.random(leaf.shape) < 0.5
    if leaf.dtype == "int64":
        values = rng.integers(int(leaf.low), int(leaf.high) + 1, leaf.shape, dtype=np.int64)
    else:
        values = rng.uniform(leaf.low, leaf.high, leaf.shape).astype(np.float32)
    if leaf.signed:
        values = values * rng.choice(np.array([-1, 1], values.dtype), leaf.shape)
    return values


def feeds(case: GraphCase) -> dict[str, np.ndarray]:
    """The values of the case's graph inputs."""
    return {leaf.name: leaf_values(leaf, case.data_seed)
            for leaf in case.leaves if not leaf.weight}


# -- building the ONNX model ---------------------------------------------------------------

def _literal_name(node: Node, position: int) -> str:
    return f"{node.output}_c{position}"


def _node_proto(node: Node) -> onnx.NodeProto:
    inputs = [_literal_name(node, i) if isinstance(x, Literal) else x
              for i, x in enumerate(node.inputs)]
    return helper.make_node(node.op, inputs, [node.output], name=node.output,
                            **dict(node.attrs))


def _literals(node: Node) -> list[onnx.TensorProto]:
    return [numpy_helper.from_array(np.array(x.values, dtype=x.dtype).reshape(x.shape),
                                    _literal_name(node, i))
            for i, x in enumerate(node.inputs) if isinstance(x, Literal)]


def model(case: GraphCase, outputs: tuple[str, ...] | None = None) -> onnx.ModelProto:
    """The ONNX model of ``case`` (with ``outputs`` as its outputs if given), its output
    types inferred, checked by ``onnx.checker`` (full check)."""
    outputs = case.outputs if outputs is None else outputs
    inputs = [helper.make_tensor_value_info(leaf.name, ONNX_TYPES[leaf.dtype], leaf.shape)
              for leaf in case.leaves if not leaf.weight]
    weights = [numpy_helper.from_array(leaf_values(leaf, case.data_seed), leaf.name)
               for leaf in case.leaves if leaf.weight]
    weights += [t for node in case.nodes for t in _literals(node)]
    graph = helper.make_graph([_node_proto(n) for n in case.nodes], "fuzz", inputs,
                              [helper.make_value_info(o, onnx.TypeProto()) for o in outputs],
                              initializer=weights)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    proto.ir_version = IR_VERSION
    proto = onnx.shape_inference.infer_shapes(proto, strict_mode=True)
    onnx.checker.check_model(proto, full_check=True)
    return proto


def run_onnxruntime(proto: onnx.ModelProto, inputs: dict) -> dict[str, np.ndarray]:
    """onnxruntime's outputs of ``proto`` (CPU provider)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4  # refusals are raised; shrinking meets many
    session = onnxruntime.InferenceSession(proto.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs), strict=True))


def reference(case: GraphCase) -> dict[str, np.ndarray]:
    """onnxruntime's value of every node output of ``case`` (and of every leaf)."""
    values = {leaf.name: leaf_values(leaf, case.data_seed) for leaf in case.leaves}
    every = tuple(node.output for node in case.nodes)
    values.update(run_onnxruntime(model(case, every), feeds(case)))
    return values

