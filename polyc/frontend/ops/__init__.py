"""ONNX op lowerings: one function per ONNX op, named after it, in a versioned table.

Importing this package fills :data:`OPS`; :func:`lookup` picks the lowering of a node
for the model's opset. The modules group ops by the core op they lower to.
"""

from polyc.frontend.ops import (  # noqa: F401
    activation,
    col2im,
    constant,
    contrib_quantized,
    control,
    conv,
    cumulative,
    dft,
    einsum,
    elementwise,
    grid_sample,
    indicators,
    layout,
    legacy,
    linalg,
    norm,
    norm_transformer,
    pool,
    quantize,
    quantized_conv,
    recurrent,
    reduce,
    resize,
    roi_align,
    scatter,
    shape,
    slicing,
    topk,
    upsample,
)
from polyc.frontend.ops.registry import OPS, NodeContext, OpDef, lookup, onnx_op

__all__ = ["OPS", "NodeContext", "OpDef", "lookup", "onnx_op"]
