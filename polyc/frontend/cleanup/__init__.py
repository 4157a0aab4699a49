"""Step 2 of the frontend: graph clean-up on the ONNX level.

``cleanup`` lists the passes in order. Each is a function ``OnnxGraph -> OnnxGraph``
that records what it did in ``OnnxGraph.notes``; one module per family of passes:

- ``host_ops``: NonMaxSuppression, Unique, Compress on the graph's outputs, left to
  the runtime;
- ``dead``: nodes no output depends on, constants nothing reads;
- ``constants``: Constant nodes, Shape/Size of static shapes, all-constant nodes
  (evaluated by ``onnx.reference``), If nodes of constant conditions (the branch they
  take, inlined), to a fixed point;
- ``identities``: Identity and inference Dropout;
- ``quantized``: DequantizeLinear -> Conv/MatMul -> QuantizeLinear as QLinearConv /
  QLinearMatMul (before constant folding dequantizes the weights);
- ``batchnorm``: BatchNormalization folded into the Conv or Gemm before it;
- ``layout``: Flatten/Squeeze/Unsqueeze as Reshape, Reshape and Transpose chains.

``describe`` renders a graph as text (``polyc inspect --graph``); ``to_model`` turns it
back into an ONNX model.
"""

from __future__ import annotations

from polyc.frontend.cleanup.batchnorm import fold_batch_norm
from polyc.frontend.cleanup.constants import (
    fold_constant_nodes,
    fold_constants,
    fold_shape_ops,
    fold_shapes_and_constants,
)
from polyc.frontend.cleanup.dead import drop_unused_constants, remove_dead_nodes
from polyc.frontend.cleanup.describe import describe, to_model
from polyc.frontend.cleanup.host_ops import split_host_ops
from polyc.frontend.cleanup.identities import remove_identities
from polyc.frontend.cleanup.layout import canonical_reshapes, collapse_layout_chains
from polyc.frontend.cleanup.quantized import fuse_quantized_ops
from polyc.frontend.load import OnnxGraph


def cleanup(graph: OnnxGraph) -> OnnxGraph:
    """The clean-up passes in order; ``graph.notes`` gains what each one did."""
    graph = remove_dead_nodes(split_host_ops(graph))
    graph = fold_constant_nodes(graph)
    graph = remove_dead_nodes(fuse_quantized_ops(graph))
    graph = fold_shapes_and_constants(graph)
    graph = remove_identities(graph)
    graph = fold_shapes_and_constants(graph)  # what a removed Dropout's mask feeds
    graph = fold_batch_norm(graph)
    graph = canonical_reshapes(graph)
    graph = collapse_layout_chains(graph)
    graph = remove_dead_nodes(graph)
    return drop_unused_constants(graph)


__all__ = [
    "canonical_reshapes", "cleanup", "collapse_layout_chains", "describe",
    "drop_unused_constants", "fold_batch_norm", "fold_constant_nodes", "fold_constants",
    "fold_shape_ops", "fold_shapes_and_constants", "fuse_quantized_ops", "remove_dead_nodes",
    "remove_identities", "split_host_ops",
    "to_model",
]
