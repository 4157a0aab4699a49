"""Constant: the op that clean-up turns into a weight before lowering."""

from __future__ import annotations

import numpy as np

from polyc.frontend.ops.registry import onnx_op


@onnx_op("Constant", 1, 9, 11, 12, 13, 19, 21, 23, 24, 25)
def Constant(ctx, *, value=None, value_float=None, value_floats=None, value_int=None,
             value_ints=None, value_string=None, value_strings=None, sparse_value=None):
    """Constant: no core op; returns the value (a numpy array) that becomes a constant.

    ``value_float(s)`` give float32, ``value_int(s)`` int64 (shape constants);
    string and sparse values are not supported.
    """
    if value_string is not None or value_strings is not None:
        raise ctx.unsupported("string constants are not supported")
    if sparse_value is not None:
        raise ctx.unsupported("sparse_value constants are not supported")
    if value is not None:
        return np.asarray(value)
    if value_float is not None:
        return np.asarray(value_float, dtype=np.float32)
    if value_floats is not None:
        return np.asarray(value_floats, dtype=np.float32)
    if value_int is not None:
        return np.asarray(value_int, dtype=np.int64)
    if value_ints is not None:
        return np.asarray(value_ints, dtype=np.int64)
    raise ctx.unsupported("a Constant needs one of the value attributes")
