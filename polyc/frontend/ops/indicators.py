"""Tensors of indicators: OneHot and EyeLike, each one Map comparing positions."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from polyc.frontend.core import DTYPES, Call, Const, Ix, Read
from polyc.frontend.load import dtype_name
from polyc.frontend.ops.indexing import normalize_axis
from polyc.frontend.ops.registry import onnx_op


@onnx_op("OneHot", 9, 11, 28)
def OneHot(ctx, indices, depth, values, *, axis=-1):
    """OneHot: ``out[.., d, ..] = values[1] if indices[..] == d else values[0]``, the new
    dim of extent ``depth`` (a constant) at ``axis``; an index below 0 counts from the
    end (``+ depth``), one outside ``[-depth, depth)`` matches no d. Float indices are
    truncated (as onnxruntime casts them to int64)."""
    value = ctx.constant_value(depth)
    if value is None or np.size(value) != 1 or int(np.reshape(value, -1)[0]) < 1:
        raise ctx.unsupported("depth must be a constant holding one positive number")
    n, rank = int(np.reshape(value, -1)[0]), len(indices.shape) + 1
    try:
        axis = normalize_axis(axis, rank)
    except ValueError as e:
        raise ctx.shape_error(str(e)) from None
    if len(values.shape) != 1 or values.shape[0] != 2:
        raise ctx.shape_error(f"values must hold [off, on], got shape {list(values.shape)}")
    kept = tuple(Ix.var(k) for k in range(rank) if k != axis)
    index = Call("cast_int64", (Read(indices.name, kept),)) \
        if indices.dtype != "int64" else Read(indices.name, kept)
    wrapped = Call("select", (Call("lt", (index, Const(0, "int64"))),
                              Call("add", (index, Const(n, "int64"))), index))
    position = Read(ctx.positions(n).name, (Ix.var(axis),))
    on, off = (Read(values.name, (Ix.constant(k),)) for k in (1, 0))
    shape = indices.shape[:axis] + (n,) + indices.shape[axis:]
    return ctx.map(shape, Call("select", (Call("eq", (wrapped, position)), on, off)),
                   label="one_hot")


@onnx_op("EyeLike", 9, 22)
def EyeLike(ctx, input, *, dtype=None, k=0):
    """EyeLike: ones on the ``k``-th diagonal of a 2-D tensor shaped like ``input``
    (``j - i == k``), zeros elsewhere, of ``dtype`` (default: the input's)."""
    if len(input.shape) != 2:
        raise ctx.shape_error(f"input must be 2-D, got shape {list(input.shape)}")
    target = input.dtype if dtype is None else dtype_name(dtype) \
        if dtype in TensorProto.DataType.values() else str(dtype)
    if target not in DTYPES:
        raise ctx.dtype_error(f"makes a tensor of dtype {target}; polyc computes with "
                              f"{', '.join(DTYPES)}")
    rows, cols = (Read(ctx.positions(n).name, (Ix.var(d),))
                  for d, n in enumerate(input.shape))
    on = Call("eq", (Call("sub", (cols, rows)), Const(int(k), "int64")))
    return ctx.map(input.shape, Call(f"cast_{target}", (on,)), label="eye_like")

