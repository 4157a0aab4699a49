"""Layout ops: each lowers to one core ``View`` (no data is moved)."""

from __future__ import annotations

from polyc.frontend.ops.indexing import size
from polyc.frontend.ops.registry import onnx_op


@onnx_op("Identity", 1, 13, 14, 16, 19, 21, 23, 24, 25)
def Identity(ctx, input):
    """Identity: output = View(reshape) of input to its own shape."""
    return ctx.view(input, input.shape, label="identity")


@onnx_op("Reshape", 5, 13, 14, 19, 21, 23, 24, 25)
def Reshape(ctx, data, shape, *, allowzero=0):
    """Reshape: View(reshape) of data; ``shape`` must be a constant.

    In ``shape``, -1 is inferred from the element count and 0 copies the input dim
    (unless ``allowzero``, where 0 is a zero-size dim).
    """
    requested = ctx.int_values(shape, "shape")
    dims = _reshape_dims(ctx, data.shape, requested, bool(allowzero))
    return ctx.view(data, dims, label="reshape")


def _reshape_dims(ctx, in_shape, requested, allowzero: bool) -> tuple[int, ...]:
    if allowzero and 0 in requested and -1 in requested:
        raise ctx.shape_error(f"shape {list(requested)} has both 0 and -1 with allowzero=1")
    if list(requested).count(-1) > 1:
        raise ctx.shape_error(f"shape {list(requested)} has more than one -1")
    dims = []
    for k, d in enumerate(requested):
        if d < -1:
            raise ctx.shape_error(f"shape {list(requested)} has a negative dim {d}")
        if d == 0 and not allowzero:
            if k >= len(in_shape):
                raise ctx.shape_error(f"shape {list(requested)} copies dim {k} "
                                      f"of {list(in_shape)}, which has no such dim")
            d = in_shape[k]
        dims.append(d)
    total = size(in_shape)
    if -1 in dims:
        known = size([d for d in dims if d != -1])
        if known == 0 or total % known:
            raise ctx.shape_error(f"cannot reshape {list(in_shape)} to {list(requested)}")
        dims[dims.index(-1)] = total // known
    if size(dims) != total:
        raise ctx.shape_error(f"cannot reshape {list(in_shape)} ({total} elements) "
                              f"to {list(requested)} ({size(dims)} elements)")
    return tuple(dims)


@onnx_op("Flatten", 11, 13, 21, 23, 24, 25)
def Flatten(ctx, input, *, axis=1):
    """Flatten: View(reshape) of input to (prod(dims[:axis]), prod(dims[axis:]))."""
    rank = len(input.shape)
    if not -rank <= axis <= rank:
        raise ctx.shape_error(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    dims = (size(input.shape[:axis]), size(input.shape[axis:]))
    return ctx.view(input, dims, label="flatten")


@onnx_op("Transpose", 1, 13, 21, 23, 24, 25)
def Transpose(ctx, data, *, perm=None):
    """Transpose: View(transpose, perm) of data; out.shape[k] = data.shape[perm[k]].

    ``perm`` defaults to the reversed axes.
    """
    rank = len(data.shape)
    perm = tuple(reversed(range(rank))) if perm is None else tuple(perm)
    if sorted(perm) != list(range(rank)):
        raise ctx.shape_error(f"perm {list(perm)} is not a permutation of {rank} axes")
    dims = tuple(data.shape[p] for p in perm)
    return ctx.view(data, dims, kind="transpose", perm=perm, label="transpose")
