"""ConvInteger and QLinearConv: convolutions of 8-bit integers summed in int32.

One Reduce over ``(n, g, m, o.., c, k..)`` (``g`` the group, ``m`` its output channels,
``c`` its input channels, ``o`` the output pixels, ``k`` the kernel offsets) of
``(x - x_zero_point) * (w - w_zero_point)`` in int32, seen as ``[N, M, o..]``; the
padding reads x's zero point (a constant), or is multiplied by 0 (a read of ones
outside which reads 0, when the zero point comes at run time), so it adds nothing.
QLinearConv adds its int32 bias and requantizes as QLinearMatMul does:
``clamp(round(acc * x_scale * w_scale / y_scale) + y_zero_point)`` (``w_scale`` and
``w_zero_point`` one value or one per output channel).
2-D convolutions by constant weights whose zero point their byte offset cancels run as
byte dot products (:mod:`polyc.frontend.ops.byte_conv`); grouped (depthwise), 1-D and
3-D ones whose sums stay below 2**24 as the float conv (exact: integers in float32);
the others as plain loops.
"""

from __future__ import annotations

import numpy as np

from polyc.frontend.core import Call, Const, Ix, Read, identity_index
from polyc.frontend.ops.byte_conv import byte_conv
from polyc.frontend.ops.conv import Conv
from polyc.frontend.ops.indexing import first_element, value_at
from polyc.frontend.ops.quantize import requantized, shifted
from polyc.frontend.ops.registry import onnx_op
from polyc.frontend.ops.window import window


@onnx_op("ConvInteger", 10)
def ConvInteger(ctx, x, w, x_zero_point=None, w_zero_point=None, *, auto_pad="NOTSET",
                dilations=None, group=1, kernel_shape=None, pads=None, strides=None):
    """ConvInteger: Y[n, m, o..] = sum (x - x_zero_point) * (w - w_zero_point), int32."""
    return _integer_conv(ctx, x, w, x_zero_point, w_zero_point, None, group, kernel_shape,
                         auto_pad=auto_pad, dilations=dilations, pads=pads, strides=strides)


@onnx_op("QLinearConv", 10)
def QLinearConv(ctx, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
                y_zero_point, B=None, *, auto_pad="NOTSET", dilations=None, group=1,
                kernel_shape=None, pads=None, strides=None):
    """QLinearConv: ConvInteger's sum plus the int32 bias ``B``, requantized to
    ``y_zero_point``'s type (module docstring)."""
    acc = _integer_conv(ctx, x, w, x_zero_point, w_zero_point, B, group, kernel_shape,
                        auto_pad=auto_pad, dilations=dilations, pads=pads, strides=strides)
    channels = w.shape[0]
    for scale, role in ((x_scale, "x_scale"), (w_scale, "w_scale"), (y_scale, "y_scale")):
        size = int(np.prod(scale.shape))
        if size != 1 and (role != "w_scale" or tuple(scale.shape) != (channels,)):
            raise ctx.unsupported(f"{role} of shape {list(scale.shape)}: one value (or one "
                                  "per output channel for w_scale)")
    w_factor = value_at(w_scale, (Ix.var(1),))
    factor = Call("div", (Call("mul", (Call("cast_float32", (first_element(x_scale),)),
                                        Call("cast_float32", (w_factor,)))),
                          Call("cast_float32", (first_element(y_scale),))))
    return requantized(ctx, acc, factor, y_zero_point)


def _integer_conv(ctx, x, w, x_zero_point, w_zero_point, bias, group: int, kernel_shape,
                  **attributes):
    if len(x.shape) < 3 or len(w.shape) != len(x.shape):
        raise ctx.shape_error(f"x {list(x.shape)} and w {list(w.shape)} must be (N, C, ..) "
                              "and (M, C/group, ..) of one rank")
    n, channels = x.shape[:2]
    out_channels, per_group = w.shape[:2]
    rank = len(x.shape) - 2
    kernel = tuple(kernel_shape) if kernel_shape is not None else tuple(w.shape[2:])
    if group < 1 or channels != per_group * group or out_channels % group or \
            tuple(w.shape[2:]) != kernel:
        raise ctx.shape_error(f"x {list(x.shape)} and w {list(w.shape)} do not fit "
                              f"group={group}, kernel_shape {list(kernel)}")
    win = window(ctx, x.shape[2:], kernel, **attributes)
    out_per_group = out_channels // group
    # loops: n, g, m, o.. (rank), c, k.. (rank)
    c = Ix.var(3 + rank)
    channel = Ix(((1, per_group), (3 + rank, 1)))
    out_channel = Ix(((1, out_per_group), (2, 1)))
    if x_zero_point is not None and int(np.prod(x_zero_point.shape)) != 1:
        raise ctx.unsupported(f"x_zero_point of shape {list(x_zero_point.shape)}: one value")
    words = byte_conv(ctx, x, w, x_zero_point, w_zero_point, bias, group, win)
    if words is not None:
        return words
    if group > 1 or rank != 2:  # (a 2-D conv of one group might take Winograd's)
        exact = _in_floats(ctx, x, w, x_zero_point, w_zero_point, bias, group, kernel,
                           attributes)
        if exact is not None:
            return exact
    value = ctx.constant_value(x_zero_point)
    spatial = win.index(3, 4 + rank)
    if x_zero_point is None or value is not None:  # the padding reads the zero point
        fill = 0 if value is None else int(value.reshape(-1)[0])
        read_x = Read(x.name, (Ix.var(0), channel) + spatial, "fill", fill)
        shifted_x = _minus(ctx, read_x, x_zero_point)
    else:  # a zero point known at run time: x - zero_point times 1 inside, 0 outside
        inside = ctx.constant(np.ones(x.shape[2:], np.int32), "inside")
        read_x = Read(x.name, (Ix.var(0), channel) + spatial, "fill", 0)
        shifted_x = Call("mul", (_minus(ctx, read_x, x_zero_point),
                                 Read(inside.name, spatial, "fill", 0)))
    read_w = Read(w.name, (out_channel, c) + tuple(Ix.var(4 + rank + d) for d in range(rank)))
    shifted_w = _minus(ctx, read_w, w_zero_point, out_channel, out_channels)
    out_shape = (n, group, out_per_group) + win.out
    init = Const(0, "int32") if bias is None else \
        Call("cast_int32", (Read(bias.name, (out_channel,)),))
    acc = ctx.reduce(out_shape=out_shape, init=init,
                     extents=out_shape + (per_group,) + kernel,
                     out_index=identity_index(len(out_shape)), combiner="add",
                     expr=Call("mul", (shifted_x, shifted_w)), label="conv_integer")
    return ctx.view(acc, (n, out_channels) + win.out, label="conv_integer_channels")


def _in_floats(ctx, x, w, x_zero_point, w_zero_point, bias, group, kernel, attributes):
    """A conv by constant weights as the float Conv of ``x - x_zero_point`` by
    ``w - w_zero_point``, cast to int32, when every partial sum is an integer below
    2**24 (exact in float32, in any order): the float recipes (depthwise, grouped, 1-D
    and 3-D convs), not int32 loops. None when the bound does not hold."""
    weights = ctx.constant_value(w)
    w_zero = 0 if w_zero_point is None else ctx.constant_value(w_zero_point)
    if weights is None or w_zero is None:
        return None
    w_shift = weights.astype(np.int64) - np.asarray(w_zero, np.int64).reshape(
        (-1,) + (1,) * (weights.ndim - 1))
    low, high = np.iinfo(x.dtype).min, np.iinfo(x.dtype).max
    x_zero = ctx.constant_value(x_zero_point)
    zero = 0 if x_zero_point is None else None if x_zero is None else int(x_zero.reshape(-1)[0])
    x_bound = high - low if zero is None else max(zero - low, high - zero)
    terms = w.shape[1] * int(np.prod(kernel))  # products summed per output
    if terms * x_bound * int(np.abs(w_shift).max(initial=0)) >= 2 ** 24:
        return None
    rank = len(x.shape)
    value = Call("cast_float32", (Read(x.name, identity_index(rank)),))
    if x_zero_point is not None:
        value = Call("sub", (value, Call("cast_float32", (first_element(x_zero_point),))))
    floats = ctx.map(x.shape, value, label="conv_integer_floats")
    wf = ctx.constant(w_shift.astype(np.float32), label="conv_integer_weights")
    y = Conv(ctx, floats, wf, group=group, kernel_shape=list(kernel), **attributes)
    total = Call("cast_int32", (Read(y.name, identity_index(len(y.shape))),))
    if bias is not None:
        total = Call("add", (total, Call("cast_int32", (Read(bias.name, (Ix.var(1),)),))))
    return ctx.map(y.shape, total, label="conv_integer_sums")


def _minus(ctx, read, zero_point, channel_index=None, channels: int = 0):
    """``read - zero_point`` in int32 (:func:`quantize.shifted`): the zero point one
    value, or one per output channel at ``channel_index``."""
    if zero_point is not None and int(np.prod(zero_point.shape)) != 1 and (
            channel_index is None or tuple(zero_point.shape) != (channels,)):
        raise ctx.unsupported(f"zero point of shape {list(zero_point.shape)}: one value, or "
                              "one per output channel for w")
    return shifted(read, zero_point, (channel_index,))
