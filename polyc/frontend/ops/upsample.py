"""Upsample-7/9 and Resize-10: resampling by integer factors, nearest or linear.

Dim ``d`` of the output has size ``floor(n_d * scale_d)``, and its position ``o`` reads the
input at coordinate ``o / scale_d`` (the "asymmetric" transform these versions define).
Each scale must be an integer ``s`` or, for Resize-10, the exact reciprocal of one,
``1/k`` (0.5, 0.25, ..): then every read is affine.

- With ``1/k``, position ``o`` reads ``X[o*k]`` (in both modes).
- With ``s``, position ``o = i*s + r`` has coordinate ``i + r/s``. The output is built as
  a tensor with the two dims ``(n, s)`` for ``(i, r)``, then seen as ``n*s`` through a
  reshape View. Nearest reads ``X[i]``: one Map over all dims. Linear reads
  ``(1 - r/s) * X[i] + (r/s) * X[min(i + 1, n - 1)]`` (an edge read): per upsampled dim,
  one Map per phase ``r`` (its weights are constants), concatenated along the phase dim.
"""

from __future__ import annotations

from polyc.frontend.core import Call, Const, Ix, Read, identity_index
from polyc.frontend.ops.registry import onnx_op
from polyc.frontend.ops.slicing import concat

MODES = ("nearest", "linear")


@onnx_op("Upsample", 7)
def Upsample_7(ctx, X, *, mode="nearest", scales=None):
    """Upsample-7 (``scales`` attribute, each >= 1): see the module docstring."""
    if scales is None:
        raise ctx.shape_error("the attribute scales is required")
    return _resample(ctx, X, tuple(float(s) for s in scales), mode, upsample=True)


@onnx_op("Upsample", 9)
def Upsample(ctx, X, scales, *, mode="nearest"):
    """Upsample-9 (``scales`` input, a constant, each >= 1): see the module docstring."""
    return _resample(ctx, X, _constant_scales(ctx, scales), mode, upsample=True)


@onnx_op("Resize", 10)
def Resize_10(ctx, X, scales, *, mode="nearest"):
    """Resize-10 (``scales`` input, a constant): Upsample-9 that may also downsample by
    ``1/k``; see the module docstring."""
    return _resample(ctx, X, _constant_scales(ctx, scales), mode, upsample=False)


def _constant_scales(ctx, scales) -> tuple[float, ...]:
    value = ctx.constant_value(scales)
    if value is None:
        raise ctx.unsupported(f"input 'scales' must be a constant, but '{scales.name}' is "
                              "computed by the graph or a graph input")
    return tuple(float(s) for s in value.reshape(-1))


def _resample(ctx, X, scales, mode: str, *, upsample: bool):
    if mode not in MODES:
        raise ctx.unsupported(f"mode={mode!r} (nearest and linear are supported)")
    if len(scales) != len(X.shape):
        raise ctx.shape_error(f"scales {list(scales)} must have one value per dim of X "
                              f"{list(X.shape)}")
    if upsample and min(scales, default=1.0) < 1:
        raise ctx.shape_error(f"scales {list(scales)} must be >= 1")
    factors = [_factor(ctx, s) for s in scales]
    if mode == "nearest":
        return _nearest(ctx, X, factors)
    current = _nearest(ctx, X, [(1, down) for _, down in factors])
    for axis, (up, _) in enumerate(factors):
        if up > 1:
            current = _linear(ctx, current, axis, up)
    return current


def _factor(ctx, scale: float) -> tuple[int, int]:
    """``(s, 1)`` for an integer scale ``s``, ``(1, k)`` for the exact reciprocal of ``k``."""
    if scale >= 1 and scale == int(scale):
        return int(scale), 1
    if 0 < scale < 1 and (1 / scale) == int(1 / scale) and int(1 / scale) * scale == 1:
        return 1, int(1 / scale)
    raise ctx.unsupported(f"scale {scale}: only integer scales (and, for Resize-10, "
                          "exact reciprocals of integers such as 0.5) are supported")


def _nearest(ctx, X, factors):
    """Map over the dims ``(n, s)`` of every upsampled dim (``n // k`` for a downsampled
    one) reading ``X[.., i, ..]`` (``X[.., o*k, ..]``), seen in the output shape."""
    if all(f == (1, 1) for f in factors):
        return X
    dims, index, out_shape = [], [], []
    for n, (up, down) in zip(X.shape, factors):
        index.append(Ix.var(len(dims), down))
        dims.append(n // down)
        if up > 1:
            dims.append(up)
        out_shape.append(n // down * up)
    resampled = ctx.map(dims, Read(X.name, tuple(index)), label="upsample")
    if tuple(dims) == tuple(out_shape):
        return resampled
    return ctx.view(resampled, out_shape, label="upsample")


def _linear(ctx, T, axis: int, s: int):
    """T upsampled linearly by ``s`` along ``axis``: phase ``r`` is the Map
    ``P_r[.., i, 0, ..] = (1 - r/s) * T[.., i, ..] + (r/s) * T[.., i + 1, ..]`` (edge read),
    the phases concatenated along the new dim ``axis + 1``, seen as ``n*s`` along ``axis``."""
    rank = len(T.shape)
    ident = identity_index(rank + 1)
    index = ident[:axis + 1] + ident[axis + 2:]  # skip the phase variable
    after = list(index)
    after[axis] = Ix(((axis, 1),), 1)
    here, there = Read(T.name, index), Read(T.name, tuple(after), "edge")
    shape = T.shape[:axis + 1] + (1,) + T.shape[axis + 1:]
    phases = [ctx.view(T, shape, label="upsample_linear")]
    for r in range(1, s):
        w = r / s
        value = Call("add", (Call("mul", (Const(1 - w), here)), Call("mul", (Const(w), there))))
        phases.append(ctx.map(shape, value, label="upsample_linear"))
    joined = concat(ctx, phases, axis + 1, "upsample_linear")
    return ctx.view(joined, T.shape[:axis] + (T.shape[axis] * s,) + T.shape[axis + 1:],
                    label="upsample_linear")
