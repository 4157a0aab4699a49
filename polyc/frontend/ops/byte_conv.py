"""An 8-bit integer 2-D convolution with constant weights as byte dot products (core
``dot4``, :mod:`polyc.frontend.ops.byte_product` for the arithmetic).

- ``Xp[n, h, w, c] = X[n, c, h - begin_h, w - begin_w]``, channels-last, the channels
  rounded up to a multiple of 4; padding and the added channels hold x's zero point,
  so that they add nothing once the zero point is taken off. Four adjacent channels
  are one 32-bit load.
- ``Acc[n, oh, ow, m] = sum_{c4, kh, kw} dot4(Xp[n, oh*sh + kh*dh, ow*sw + kw*dw,
  4c4 .. 4c4+3], W[c4, kh, kw, m])``, the weights (minus 128 when uint8) four channels
  to an int32 word, packed at compile time: the direct-convolution contraction of
  float convs (output channels in the vector lanes, pixels in the register tile's
  rows), with int32 sums.
- ``Y[n, m, oh, ow] = Acc[..] (+ bias) - alpha * colsum(W')[m]`` with ``alpha`` x's zero
  point (plus 128 when int8), a Map that stays channels-last.

With ``beta`` the weights' zero point minus their offset (nonzero for asymmetric
weights: uint8 ones with another zero point than 128), also ``- beta[m] * R[n, oh, ow]
+ K * alpha * beta[m]``, ``R`` the window sums of ``x'`` (per pixel over the channels,
then over the taps; ``K`` the window's channels times taps, padding included, whose
terms cancel). The weights' zero point must be a constant; group convolutions have too
few channels per group: those stay the plain int32 loops.
"""

from __future__ import annotations

import numpy as np

from polyc.frontend.core import Call, Const, Ix, Read, identity_index
from polyc.frontend.ops.byte_product import (
    BYTES,
    OFFSET,
    corrected,
    shift,
    signed_weights,
    words,
)
from polyc.frontend.ops.indexing import first_element


def byte_conv(ctx, x, w, x_zero_point, w_zero_point, bias, group: int, win):
    """The int32 sums ``[N, M, OH, OW]`` (bias added), or None when the conv does not
    take this form."""
    weights = ctx.constant_value(w)
    if (x.dtype not in BYTES or w.dtype not in BYTES or weights is None or group != 1
            or win.rank != 2 or not isinstance(x.shape[1], int)):
        return None
    beta = _weight_shift(ctx, w, w_zero_point)
    if beta is None:
        return None
    n_size, channels = x.shape[:2]
    out_channels = w.shape[0]
    quads = -(-channels // 4)
    shifted = signed_weights(weights, w.dtype)
    extra = quads * 4 - channels
    shifted = np.pad(shifted, [(0, 0), (0, extra), (0, 0), (0, 0)])
    W = ctx.constant(words(shifted.transpose(1, 2, 3, 0)), label="conv_words")
    padded = _padded(ctx, x, x_zero_point, win, quads * 4)
    (sh, sw), (dh, dw) = win.strides, win.dilations
    n, m = Ix.var(0), Ix.var(3)
    rows, columns = Ix(((1, sh), (5, dh))), Ix(((2, sw), (6, dw)))
    quad = tuple(Read(padded.name, (n, rows, columns, Ix(((4, 4),), r))) for r in range(4))
    word = Read(W.name, (Ix.var(4), Ix.var(5), Ix.var(6), m))
    init = Const(0, "int32") if bias is None else Call("cast_int32", (Read(bias.name, (m,)),))
    extents = (n_size, *win.out, out_channels)
    acc = ctx.reduce(out_shape=extents, init=init, extents=extents + (quads, *win.kernel),
                     out_index=identity_index(4), combiner="add",
                     expr=Call("dot4", quad + (word,)), label="conv_bytes")
    offset = OFFSET if x.dtype == "int8" else 0
    alpha = shift(ctx, x_zero_point, offset, Ix.var(1))
    view = ctx.as_channels_last(acc, label="conv_bytes_channels")
    channel = (Ix.var(1),)
    beta_m = Read(ctx.constant(beta, label="weight_zero_points").name, channel) \
        if np.any(beta) else Const(0, "int32")
    value = corrected(
        ctx, Read(view.name, identity_index(4)), alpha,
        lambda: Read(ctx.constant(shifted.sum(axis=(1, 2, 3)).astype(np.int32),
                                  "weight_sums").name, channel), beta_m,
        lambda: Read(_window_sums(ctx, padded, win, offset).name,
                     (Ix.var(0), Ix.var(2), Ix.var(3))),
        quads * 4 * int(np.prod(win.kernel)))
    return ctx.map(view.shape, value, label="zero_points")


def _weight_shift(ctx, w, w_zero_point):
    """``beta[m]``: the weights' zero point minus the offset that makes them signed bytes
    (128 for uint8), int32 per output channel; None when the zero point comes at run
    time."""
    offset = OFFSET if w.dtype == "uint8" else 0
    value = np.zeros((), np.int32) if w_zero_point is None else ctx.constant_value(w_zero_point)
    if value is None:
        return None
    return np.broadcast_to(value.astype(np.int32).reshape(-1), (w.shape[0],)) - offset


def _window_sums(ctx, padded, win, offset: int):
    """``R[n, oh, ow]``: the sum of ``x' = Xp + offset`` over each window (every channel
    and tap, padding included): per pixel over its channels, then over the taps."""
    n_size, rows, columns, channels = padded.shape
    pixels = ctx.reduce(out_shape=(n_size, rows, columns), init=Const(0, "int32"),
                        extents=padded.shape, out_index=identity_index(3), combiner="add",
                        expr=Call("cast_int32", (Read(padded.name, identity_index(4)),)),
                        label="pixel_sums")
    (sh, sw), (dh, dw) = win.strides, win.dilations
    out = (n_size, *win.out)
    init = Const(channels * int(np.prod(win.kernel)) * offset, "int32")
    at = (Ix.var(0), Ix(((1, sh), (3, dh))), Ix(((2, sw), (4, dw))))
    return ctx.reduce(out_shape=out, init=init, extents=out + tuple(win.kernel),
                      out_index=identity_index(3), combiner="add",
                      expr=Read(pixels.name, at), label="window_sums")


def _padded(ctx, x, x_zero_point, win, channels: int):
    """``Xp[n, h, w, c]`` (module docstring) over the rows and columns the windows span."""
    index = (Ix.var(0), Ix.var(3), Ix(((1, 1),), -win.begin[0]), Ix(((2, 1),), -win.begin[1]))
    shape = (x.shape[0], win.span(0), win.span(1), channels)
    zero = ctx.constant_value(x_zero_point)
    if x_zero_point is None or zero is not None:
        fill = 0 if zero is None else int(zero.reshape(-1)[0])
        return ctx.map(shape, Read(x.name, index, "fill", fill), label="conv_bytes_pad")
    inside = ctx.constant(np.ones(x.shape[1:], x.dtype), "inside")
    value = Call("select", (Call("eq", (Read(inside.name, index[1:], "fill", 0),
                                        Const(1, x.dtype))),
                            Read(x.name, index, "fill", 0), first_element(x_zero_point)))
    return ctx.map(shape, value, label="conv_bytes_pad")
