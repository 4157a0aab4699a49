"""Layout ops: each lowers to core ``View`` ops (no data is moved)."""

from __future__ import annotations

from polyc.frontend.ops.indexing import normalize_axis, size
from polyc.frontend.ops.registry import onnx_op
from polyc.frontend.symbolic import Sym, SymbolicDimError


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
        if isinstance(d, Sym):  # from a shape computation: the input's symbolic dim
            dims.append(d)
            continue
        if d < -1:
            raise ctx.shape_error(f"shape {list(requested)} has a negative dim {d}")
        if d == 0 and not allowzero:
            if k >= len(in_shape):
                raise ctx.shape_error(f"shape {list(requested)} copies dim {k} "
                                      f"of {list(in_shape)}, which has no such dim")
            d = in_shape[k]
        dims.append(d)
    if any(isinstance(d, Sym) for d in in_shape):
        return _symbolic_reshape(ctx, in_shape, requested, dims)
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


def _symbolic_reshape(ctx, in_shape, requested, dims: list) -> tuple:
    """A reshape of a shape with symbolic dims: each must stay a dim of its own (copied
    by 0, or the -1 when the fixed dims account for every other element)."""
    def parts(shape):
        fixed = [d for d in shape if not isinstance(d, Sym)]
        return size(fixed), sorted(str(d) for d in shape if isinstance(d, Sym))

    total, symbols = parts(in_shape)
    known, kept = parts([d for d in dims if d != -1])
    missing = [s for s in symbols if s not in kept]
    if -1 in dims:
        if len(missing) == 1 and known == total:
            dims[dims.index(-1)] = next(d for d in in_shape if str(d) == missing[0])
        elif not missing and known and total % known == 0:
            dims[dims.index(-1)] = total // known
        else:
            raise SymbolicDimError(next(d for d in in_shape if isinstance(d, Sym)))
        known, kept = parts(dims)
    if kept != symbols or known != total:
        absent = [d for d in in_shape if isinstance(d, Sym) and str(d) not in kept]
        if absent:
            raise SymbolicDimError(absent[0])
        raise ctx.shape_error(f"cannot reshape {list(in_shape)} to {list(requested)}")
    return tuple(dims)


@onnx_op("Flatten", 1, 9, 11, 13, 21, 23, 24, 25)
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


def _axes_set(ctx, axes, rank: int, role: str) -> tuple[int, ...]:
    """``axes`` (each in ``[-rank, rank)``, no repeats) made non-negative, sorted."""
    try:
        normal = sorted(normalize_axis(int(a), rank) for a in axes)
    except ValueError as e:
        raise ctx.shape_error(f"{role}: {e}") from None
    if len(set(normal)) != len(normal):
        raise ctx.shape_error(f"{role} {list(axes)} repeat an axis")
    return tuple(normal)


def _squeeze(ctx, data, axes):
    rank = len(data.shape)
    if axes is None:
        axes = tuple(k for k, d in enumerate(data.shape) if d == 1)
    axes = _axes_set(ctx, axes, rank, "axes")
    wide = [a for a in axes if data.shape[a] != 1]
    if wide:
        raise ctx.shape_error(f"cannot squeeze axis {wide[0]} of {list(data.shape)}: "
                              "its size is not 1")
    dims = tuple(d for k, d in enumerate(data.shape) if k not in axes)
    return ctx.view(data, dims, label="squeeze")


@onnx_op("Squeeze", 1, 11)
def Squeeze_11(ctx, data, *, axes=None):
    """Squeeze-1/11 (axes attribute): View(reshape) of data without the size-1 ``axes``
    (without axes: every size-1 dim)."""
    return _squeeze(ctx, data, axes)


@onnx_op("Squeeze", 13, 21, 23, 24, 25)
def Squeeze(ctx, data, axes=None):
    """Squeeze (axes input): View(reshape) of data without the size-1 ``axes``
    (without axes: every size-1 dim)."""
    return _squeeze(ctx, data, None if axes is None else ctx.int_values(axes, "axes"))


def _unsqueeze(ctx, data, axes):
    rank = len(data.shape) + len(axes)
    axes = _axes_set(ctx, axes, rank, "axes")
    rest = iter(data.shape)
    dims = tuple(1 if k in axes else next(rest) for k in range(rank))
    return ctx.view(data, dims, label="unsqueeze")


@onnx_op("Unsqueeze", 1, 11)
def Unsqueeze_11(ctx, data, *, axes):
    """Unsqueeze-1/11 (axes attribute): View(reshape) of data with size-1 dims inserted at
    ``axes`` (axes of the output)."""
    return _unsqueeze(ctx, data, axes)


@onnx_op("Unsqueeze", 13, 21, 23, 24, 25)
def Unsqueeze(ctx, data, axes):
    """Unsqueeze (axes input): View(reshape) of data with size-1 dims inserted at
    ``axes`` (axes of the output)."""
    return _unsqueeze(ctx, data, ctx.int_values(axes, "axes"))


def _blocks(ctx, input, blocksize: int, mode: str):
    """(b, c, h, w) of a 4-D input; checks ``blocksize`` and ``mode``."""
    if mode not in ("DCR", "CRD"):
        raise ctx.unsupported(f"mode={mode!r} (DCR and CRD are supported)")
    if len(input.shape) != 4:
        raise ctx.shape_error(f"input {list(input.shape)} must be 4-D")
    if blocksize < 1:
        raise ctx.shape_error(f"blocksize {blocksize} must be positive")
    return input.shape


def _rearranged(ctx, input, split, perm, out_shape, label: str):
    """View(reshape) to ``split``, View(transpose) by ``perm``, View(reshape) to
    ``out_shape``."""
    parts = ctx.view(input, split, label=f"{label}_split")
    moved = ctx.view(parts, [split[p] for p in perm], kind="transpose", perm=perm,
                     label=f"{label}_transpose")
    return ctx.view(moved, out_shape, label=label)


@onnx_op("DepthToSpace", 1, 11, 13, 28)
def DepthToSpace(ctx, input, *, blocksize, mode="DCR"):
    """DepthToSpace: three Views, as in the ONNX definition (s = blocksize):
    DCR: reshape (b, s, s, c/s^2, h, w), transpose (0, 3, 4, 1, 5, 2);
    CRD: reshape (b, c/s^2, s, s, h, w), transpose (0, 1, 4, 2, 5, 3);
    then reshape (b, c/s^2, h*s, w*s)."""
    b, c, h, w = _blocks(ctx, input, blocksize, mode)
    s = blocksize
    if c % (s * s):
        raise ctx.shape_error(f"{c} channels do not divide by blocksize^2 = {s * s}")
    depth = c // (s * s)
    if mode == "DCR":
        split, perm = (b, s, s, depth, h, w), (0, 3, 4, 1, 5, 2)
    else:
        split, perm = (b, depth, s, s, h, w), (0, 1, 4, 2, 5, 3)
    return _rearranged(ctx, input, split, perm, (b, depth, h * s, w * s), "depth_to_space")


def _space_to_depth(ctx, input, blocksize: int, mode: str):
    b, c, h, w = _blocks(ctx, input, blocksize, mode)
    s = blocksize
    if h % s or w % s:
        raise ctx.shape_error(f"spatial dims {h}x{w} do not divide by blocksize {s}")
    perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    return _rearranged(ctx, input, (b, c, h // s, s, w // s, s), perm,
                       (b, c * s * s, h // s, w // s), "space_to_depth")


@onnx_op("SpaceToDepth", 1, 13)
def SpaceToDepth_1(ctx, input, *, blocksize):
    """SpaceToDepth-1/13: reshape (b, c, h/s, s, w/s, s), transpose (0, 3, 5, 1, 2, 4),
    reshape (b, c*s^2, h/s, w/s): three Views (s = blocksize)."""
    return _space_to_depth(ctx, input, blocksize, "DCR")


@onnx_op("SpaceToDepth", 28)
def SpaceToDepth(ctx, input, *, blocksize, mode="DCR"):
    """SpaceToDepth-28: as SpaceToDepth-13 for DCR; CRD transposes by
    (0, 1, 3, 5, 2, 4) instead: three Views."""
    return _space_to_depth(ctx, input, blocksize, mode)
