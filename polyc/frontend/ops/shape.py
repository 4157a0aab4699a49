"""Ops that make a tensor of a new shape from a shape-like constant: Expand, Tile and
ConstantOfShape (core ``Map`` ops, plus a ``View`` for Tile).

Shape, Size and Range compute integer or shape-derived values that clean-up folds into
constants whenever shapes are static, which polyc requires; one that reaches lowering
would have to produce an int64 tensor (or read float constants) at run time: refused.
"""

from __future__ import annotations

import numpy as np

from polyc.frontend.core import DTYPES, Const, Ix, Read
from polyc.frontend.ops.indexing import broadcast_index, broadcast_shapes
from polyc.frontend.ops.registry import onnx_op


@onnx_op("Expand", 8, 13)
def Expand(ctx, input, shape):
    """Expand: Map out[i] = input[bcast(i)] over broadcast(input.shape, shape); ``shape``
    must be a constant."""
    requested = ctx.int_values(shape, "shape")
    try:
        out_shape = broadcast_shapes(input.shape, requested)
    except ValueError as e:
        raise ctx.shape_error(str(e)) from None
    if out_shape == input.shape:
        return ctx.view(input, input.shape, label="identity")
    return ctx.map(out_shape, Read(input.name, broadcast_index(input.shape, out_shape)),
                   label="expand")


@onnx_op("Tile", 6, 13)
def Tile(ctx, input, repeats):
    """Tile: a Map over the interleaved shape (r0, n0, r1, n1, ..) reading
    input[i1, i3, ..], seen as (r0*n0, r1*n1, ..) through a reshape View (a dim repeated
    once is not split). ``repeats`` must be a constant."""
    reps = ctx.int_values(repeats, "repeats")
    if len(reps) != len(input.shape) or any(r < 0 for r in reps):
        raise ctx.shape_error(f"repeats {list(reps)} must be {len(input.shape)} "
                              "non-negative counts, one per dim")
    if all(r == 1 for r in reps):
        return ctx.view(input, input.shape, label="identity")
    dims, index = [], []
    for n, r in zip(input.shape, reps):
        if r != 1:
            dims.append(r)
        index.append(Ix.var(len(dims)))
        dims.append(n)
    tiled = ctx.map(dims, Read(input.name, tuple(index)), label="tile")
    return ctx.view(tiled, [n * r for n, r in zip(input.shape, reps)], label="tile_shape")


@onnx_op("ConstantOfShape", 9, 20, 21, 23, 24, 25)
def ConstantOfShape(ctx, input, *, value=None):
    """ConstantOfShape: Map out[i] = value over the constant shape ``input``.

    ``value`` (a one-element tensor, default float32 0) is float32, int64, int32 or bool.
    """
    dims = ctx.int_values(input, "input")
    if any(d < 0 for d in dims):
        raise ctx.shape_error(f"shape {list(dims)} has a negative dim")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value)
    if value.size != 1:
        raise ctx.shape_error(f"value must hold one element, it has {value.size}")
    if value.dtype.name not in DTYPES:
        raise ctx.dtype_error(f"makes a tensor of dtype {value.dtype.name}; polyc computes "
                              f"with {', '.join(DTYPES)}")
    return ctx.map(dims, Const.of(value.reshape(-1)[0], value.dtype.name),
                   label="constant_of_shape")


def _must_fold(ctx, what: str):
    return ctx.unsupported(f"{what}; clean-up folds it into a constant when the shapes and "
                           "inputs it depends on are static, but here it was left to the "
                           "lowering, which cannot make integer tensors")


@onnx_op("Shape", 1, 13, 15, 19, 21, 23, 24, 25)
def Shape(ctx, data, *, start=0, end=None):
    """Shape: refused (an int64 tensor, folded into a constant by clean-up)."""
    dims = list(data.shape)[slice(start, end)]
    raise _must_fold(ctx, f"its value {dims} is an int64 tensor")


@onnx_op("Size", 1, 13, 19, 21, 23, 24, 25)
def Size(ctx, data):
    """Size: refused (an int64 scalar, folded into a constant by clean-up)."""
    raise _must_fold(ctx, f"its value {int(np.prod(data.shape))} is an int64 scalar")


@onnx_op("Range", 11, 27)
def Range(ctx, start, limit, delta, *, stash_type=1):
    """Range: refused (folded into a constant by clean-up when its inputs are constants)."""
    raise ctx.unsupported("clean-up folds a Range of constant inputs into a constant; with "
                          "inputs computed at run time its length is not known when "
                          "compiling")
