"""Normalizations over channels or spatial dims: Maps over per-channel factors, with
Reduces for the statistics InstanceNormalization and LRN compute."""

from __future__ import annotations

from polyc.frontend.core import Call, Const, Ix, Read, identity_index
from polyc.frontend.ops.reduce import mean_over
from polyc.frontend.ops.registry import onnx_op


@onnx_op("BatchNormalization", 9, 14, 15)
def BatchNormalization(ctx, X, scale, B, input_mean, input_var, *, epsilon=1e-5,
                       momentum=0.9, training_mode=0):
    """BatchNormalization, inference form: Y[n, c, ..] = (X[n, c, ..] - mean[c]) * f[c] + B[c]
    with the Map ``f[c] = scale[c] / sqrt(var[c] + epsilon)``. ``momentum`` only matters
    in training; ``training_mode=1`` and the running-statistics outputs are not supported."""
    if training_mode != 0:
        raise ctx.unsupported(f"training_mode={training_mode} (only inference, "
                              "training_mode=0, is supported)")
    channels = _check_channels(ctx, X, scale=scale, B=B, input_mean=input_mean,
                               input_var=input_var)
    c = (Ix.var(0),)
    root = Call("sqrt", (Call("add", (Read(input_var.name, c), Const(float(epsilon)))),))
    factor = ctx.map((channels,), Call("div", (Read(scale.name, c), root)),
                     label="batch_norm_factor")
    return _normalized(ctx, X, Read(input_mean.name, (Ix.var(1),)),
                       Read(factor.name, (Ix.var(1),)), B, label="batch_norm")


@onnx_op("BatchNormalization", 7)
def BatchNormalization_7(ctx, X, scale, B, mean, var, *, epsilon=1e-5, momentum=0.9,
                         spatial=1):
    """BatchNormalization-7 (inference): with ``spatial=1`` as BatchNormalization-9; with
    ``spatial=0`` scale, B, mean and var have X's shape without the batch dim, one value
    per element: Y[n, i..] = (X[n, i..] - mean[i..]) * f[i..] + B[i..] with the Map
    ``f = scale / sqrt(var + epsilon)``."""
    if spatial:
        return BatchNormalization(ctx, X, scale, B, mean, var, epsilon=epsilon)
    rank = len(X.shape)
    for role, tensor in (("scale", scale), ("B", B), ("mean", mean), ("var", var)):
        if rank < 2 or tensor.shape != X.shape[1:]:
            raise ctx.shape_error(f"{role} {list(tensor.shape)} must have X's shape without "
                                  f"the batch dim, {list(X.shape[1:])}, with spatial=0")
    ident = identity_index(rank - 1)
    root = Call("sqrt", (Call("add", (Read(var.name, ident), Const(float(epsilon)))),))
    factor = ctx.map(scale.shape, Call("div", (Read(scale.name, ident), root)),
                     label="batch_norm_factor")
    per_element = identity_index(rank)[1:]
    centered = Call("sub", (Read(X.name, identity_index(rank)), Read(mean.name, per_element)))
    value = Call("add", (Call("mul", (centered, Read(factor.name, per_element))),
                         Read(B.name, per_element)))
    return ctx.map(X.shape, value, label="batch_norm")


@onnx_op("BatchNormalization", 6)
def BatchNormalization_6(ctx, X, scale, B, mean, var, *, epsilon=1e-5, is_test=0,
                         momentum=0.9, spatial=1):
    """BatchNormalization-6: as BatchNormalization-7 when ``is_test`` is set (inference);
    ``is_test=0`` (training: batch statistics) is not supported."""
    if not is_test:
        raise ctx.unsupported("is_test=0 (training mode, batch statistics) is not "
                              "supported; inference needs is_test=1")
    return BatchNormalization_7(ctx, X, scale, B, mean, var, epsilon=epsilon,
                                spatial=spatial)


@onnx_op("InstanceNormalization", 6, 22)
def InstanceNormalization(ctx, input, scale, B, *, epsilon=1e-5):
    """InstanceNormalization: per (n, c) over the spatial dims, ``mean`` and ``var`` (the
    mean of ``(x - mean)^2``) by ReduceMean; the Map ``f[n, c] = scale[c] /
    sqrt(var[n, c] + epsilon)``; Y = (X - mean[n, c]) * f[n, c] + B[c]."""
    _check_channels(ctx, input, scale=scale, B=B)
    rank = len(input.shape)
    if rank < 3:
        raise ctx.shape_error(f"input {list(input.shape)} must have at least one spatial dim")
    axes = tuple(range(2, rank))
    mean = mean_over(ctx, input, axes, 1)
    per_instance = (Ix.var(0), Ix.var(1)) + (Ix.constant(0),) * (rank - 2)
    centered = Call("sub", (Read(input.name, identity_index(rank)),
                            Read(mean.name, per_instance)))
    squares = ctx.map(input.shape, Call("mul", (centered, centered)),
                      label="instance_norm_square")
    var = mean_over(ctx, squares, axes, 1)
    ident = identity_index(rank)
    root = Call("sqrt", (Call("add", (Read(var.name, ident), Const(float(epsilon)))),))
    factor = ctx.map(var.shape, Call("div", (Read(scale.name, (Ix.var(1),)), root)),
                     label="instance_norm_factor")
    return _normalized(ctx, input, Read(mean.name, per_instance),
                       Read(factor.name, per_instance), B, label="instance_norm")


@onnx_op("LRN", 1, 13)
def LRN(ctx, X, *, alpha=1e-4, beta=0.75, bias=1.0, size=None):
    """LRN: ``s[n, c, ..] = sum_j X[n, c + j - lo, ..]^2`` over ``j < size`` (a Reduce,
    0 outside the channels; ``lo = floor((size - 1) / 2)``), then the Map
    ``Y = X / (bias + alpha / size * s)^beta``."""
    if size is None or size < 1:
        raise ctx.shape_error(f"size={size} must be a positive integer (it is required)")
    rank = len(X.shape)
    if rank < 2:
        raise ctx.shape_error(f"X {list(X.shape)} must be (batch, channels, ..)")
    ident = identity_index(rank)
    window = (Ix.var(0), Ix(((1, 1), (rank, 1)), -((size - 1) // 2))) + ident[2:]
    x = Read(X.name, window, "fill", 0.0)
    sums = ctx.reduce(out_shape=X.shape, init=Const(0.0), extents=X.shape + (size,),
                      out_index=ident, combiner="add", expr=Call("mul", (x, x)),
                      label="lrn_square_sum")
    scaled = Call("mul", (Const(float(alpha) / size), Read(sums.name, ident)))
    base = Call("add", (Const(float(bias)), scaled))
    denominator = Call("pow", (base, Const(float(beta))))
    return ctx.map(X.shape, Call("div", (Read(X.name, ident), denominator)), label="lrn")


def _check_channels(ctx, X, **per_channel) -> int:
    """X's channel count, after checking that X is (N, C, ..) and every tensor in
    ``per_channel`` is (C,)."""
    if len(X.shape) < 2:
        raise ctx.shape_error(f"X {list(X.shape)} must be (batch, channels, ..)")
    channels = X.shape[1]
    for role, tensor in per_channel.items():
        if tensor.shape != (channels,):
            raise ctx.shape_error(f"{role} {list(tensor.shape)} must be [{channels}] "
                                  "(one per channel)")
    return channels


def _normalized(ctx, X, mean: Read, factor: Read, B, *, label: str):
    """The Map Y = (X - mean) * factor + B[c] (``mean``/``factor`` read at Y's index)."""
    ident = identity_index(len(X.shape))
    centered = Call("sub", (Read(X.name, ident), mean))
    value = Call("add", (Call("mul", (centered, factor)), Read(B.name, (Ix.var(1),))))
    return ctx.map(X.shape, value, label=label)
