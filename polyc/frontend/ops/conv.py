"""Convolutions: im2col, then one matrix product per group.

A Conv over ``r`` spatial dims lowers to

- a Map ``col[n, c, k.., o..] = X[n, c, o*s + k*d - begin ..]`` (a bounded read: 0 in
  the padding), left out when it would copy X (1x1 kernel, stride 1, no pads);
- a Reduce over ``(n, g, mg, p, q)``, one reduction loop, which the contraction tiler
  packs and register-tiles like a matmul:
  ``Y[n, g*M/G + mg, p] = B[..] + sum_q Wm[g*M/G + mg, q] * Col[n, g*C/G*K + q, p]``
  with ``Col`` (N, C*K, P) and ``Wm`` (M, C/G*K) Views of ``col`` and ``W``
  (``K`` = prod(kernel), ``P`` = prod(output spatial dims));
- a View of Y as (N, M, O..).

Most 2-D convs skip im2col: they are direct (:func:`_direct_lowering`), a Reduce with
the kernel loops as further reductions over a padded copy of X (:func:`_direct`,
:func:`_flat_direct`).

A depthwise Conv (one input channel per output channel) has nothing to share between
output channels: it is a direct Reduce over (n, c, o.., k..) of a zero-padded input.
ConvTranspose is a Conv with stride 1 over the input upsampled by zero insertion.

Why not one Reduce over (n, m, o.., c, k..) as written in the ONNX definition: it has
``r + 1`` reduction loops, which Pluto takes 10-16 s to schedule even at tiny sizes,
and its loops ran 5x slower than the packed product (1x64x56x56, 3x3: 14 ms with isl's
scheduler, 2.7 ms im2col + product).
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np

from polyc.frontend.core import Call, Const, Ix, Read, identity_index
from polyc.frontend.ops import winograd
from polyc.frontend.ops.indexing import size
from polyc.frontend.ops.registry import onnx_op
from polyc.frontend.ops.window import (
    AUTO_PADS,
    Window,
    padded_read,
    spatial_attribute,
    tap_read,
    window,
)

# Depthwise kernels of at most this many positions (7x7) are summed in one statement.
UNROLLED_KERNEL = 49
# A depthwise conv over an NCHW input (a graph input) whose output rows are narrower
# than this is run over a channels-last copy of it, vectorized along channels: its NCHW
# rows are one vector each, mostly masked lanes.
NARROW_ROWS = 12
# A 2-D conv with a kernel larger than 1x1 to a multiple of DIRECT_CHANNELS output
# channels (a vector's lanes) is direct, channels in the lanes (_direct), at any stride
# and size. 3x3 convs + Relu, 1 thread, time over onnxruntime's, the flat direct conv
# (_flat_direct) or im2col before -> _direct: stride 1, 64ch at 56x56 1.03 -> 0.96,
# 128ch at 28x28 1.02 -> 0.94, 256ch at 14x14 1.10 -> 0.98, 512ch at 7x7 1.10 -> 0.94,
# 16->64 at 55x55 1.01 -> 0.91, 160->192 at 7x7 1.05 -> 0.86, 128ch at 4x4 1.10 ->
# 1.00; stride 2 (weights beyond L2 had gone to im2col), 256ch at 28x28 1.17 -> 0.92,
# 512ch at 14x14 1.14 -> 1.01, 96ch at 28x28 1.26 -> 0.88, 128ch at 8x8 1.02 -> 0.93.
# 1x1 convs over NCHW inputs stay products (2048->512 at 7x7 1.10 -> 1.33, 1x1 stride 2
# 1024->2048 at 14x14 1.10 -> 1.33); over channels-last inputs they are direct.
DIRECT_CHANNELS = 16
# Other output channel counts are rounded up to a multiple of DIRECT_CHANNELS (weights
# and bias padded with zeros at compile time, the extra channels computed and never
# read) when that adds at most a third, 24 -> 32, 40 -> 48, 1000 -> 1008 (see
# _direct_lowering for which convs). A 24-channel 1x1 conv had been a product over
# NCHW pixels, so the depthwise conv after the next expansion read NCHW data:
# EfficientNet's 5x5 stride-2 depthwise conv over 144 channels at 56x56 took 0.53 ms
# (a gather per tap), onnxruntime 0.03-0.05 ms.
DIRECT_MAX_PADDING = 4 / 3
# Except 8 more than whole vectors, up to this many (24, 40, 56): those are computed as
# they are, the register tile's last 8 channels a half vector (ends_in_half_vector).
# 1x1 conv 96 -> 24 + Relu at 56x56, channels-last, 1 thread: 0.165 ms as 32
# channels, 0.085 ms for a conv to 16.
HALF_VECTOR_CHANNELS = 56
# Other channel counts, stride 1: a direct conv over a flat pixel grid of the padded
# width (_flat_direct), when that grid rounded up to whole 64-wide register tiles is at
# most DIRECT_MAX_WASTE times the pixels; the grid is then rounded up to whole vectors
# only (DIRECT_COLUMNS).
DIRECT_TILE_COLUMNS = 64
DIRECT_COLUMNS = 16
# At most this many pixels computed per output pixel (7x7: 64 for 49; 4x4: 64 for 16,
# which im2col ran in a quarter of the time).
DIRECT_MAX_WASTE = 1.5
DIRECT_MIN_CHANNELS = 8  # fewer output channels than a register tile's rows: im2col
# A product's pixel count is padded to a multiple of this (a vector's lanes), when its
# output channels do not fill whole vectors (else it is transposed, see _product) and
# that computes at most PRODUCT_MAX_WASTE times the pixels. A 1x1 conv 2048->512 at 7x7
# (49 pixels as 64) took 0.80-0.88 ms padded, 0.72 ms with one masked column.
PRODUCT_COLUMNS = 16
PRODUCT_MAX_WASTE = 1.2
# Fewer pixels than this make no register tile (at least 32 columns) or few: such a
# product is transposed (ResNet-18's 3x3 convs 128->128 at 4x4, 16 pixels, by im2col:
# 0.130 ms as a product over pixels, which the tiler left to plain loops, onnxruntime
# 0.039 ms).
PRODUCT_MIN_COLUMNS = 64
# A register tile of a direct conv broadcasts from its pixels' windows, 3 x 15 pixels of
# a 3x3 stride-2 conv: with pixels 2 KB apart (512 channels-last channels) their lines
# all fall in 2 of L1's 64 sets. The padded copy of such an input gets PITCH_CHANNELS
# more channels, so pixels lie 33 lines apart (3x3 convs 512ch, 1 thread, the conv's
# time: stride 2 from 14x14 to 7x7 1.95 -> 1.42 ms, stride 1 at 7x7 1.34 -> 1.29 ms).
PITCH_ALIASING = 128
PITCH_CHANNELS = 16


@onnx_op("Conv", 1, 11, 22)
def Conv(ctx, X, W, B=None, *, auto_pad="NOTSET", dilations=None, group=1,
         kernel_shape=None, pads=None, strides=None):
    """Conv: Y[n, m, o..] = B[m] + sum_{c, k..} X[n, g*C/G + c, o*s + k*d - begin ..] * W[m, c, k..]
    (0 where the index leaves X), as im2col and a product (see the module docstring)."""
    groups = _check_shapes(ctx, X, W, B, group, kernel_shape, transposed=False)
    win = window(ctx, X.shape[2:], W.shape[2:], strides=strides, dilations=dilations,
                 pads=pads, auto_pad=auto_pad)
    if groups == X.shape[1] == W.shape[0]:
        value = ctx.constant_value(W)
        taps = value is not None and win.rank == 2 and size(win.kernel) <= UNROLLED_KERNEL
        if taps and ctx.channels_last(X) is None and _narrow_rows(X, win):
            X = ctx.as_channels_last(ctx.stored_channels_last(X, label="depthwise_nhwc"),
                                     label="depthwise_nhwc")
        if taps and ctx.channels_last(X) is not None:
            # taps read along channels (the vector lanes): weights [kh, kw, c]
            weights = ctx.constant(value[:, 0].transpose(1, 2, 0).copy(), "conv_taps")
            return _depthwise_map(ctx, X, weights, B, win, taps_last=False)
        weights = ctx.view(W, (groups,) + W.shape[2:], label="conv_weights")
        return _depthwise(ctx, X, weights, B, win)
    transform = winograd.transform(ctx, X, W, B, win, groups)
    if transform is not None:
        return winograd.lower(ctx, X, W, B, win, transform)
    constant = ctx.constant_value(W) is not None and (B is None or ctx.constant_value(B)
                                                       is not None)
    direct = _direct_lowering(groups, win, W, channels_last=ctx.channels_last(X) is not None,
                              constant=constant)
    if direct is not None:
        return direct(ctx, X, W, B, win)
    X = ctx.channels_first(X)
    col = _im2col(ctx, X, win)
    weights = ctx.view(W, (W.shape[0], size(W.shape[1:])), label="conv_weights")
    return _product(ctx, col, weights, B, groups, win.out)


@onnx_op("ConvTranspose", 1, 11, 22)
def ConvTranspose(ctx, X, W, B=None, *, auto_pad="NOTSET", dilations=None, group=1,
                  kernel_shape=None, output_padding=None, output_shape=None, pads=None,
                  strides=None):
    """ConvTranspose: Y[n, g*M/G + mg, o..] = B[..] + sum X[n, g*C/G + c, i..] *
    W[g*C/G + c, mg, k..] over every (c, i.., k..) with ``i*s + k*d - begin = o``.

    Lowered as a Conv with stride 1 over X upsampled by zero insertion
    (``U[n, c, i*s ..] = X[n, c, i ..]``, 0 elsewhere; see ``_zero_inserted``) and padded
    by ``(K-1)*d - begin`` before, with the kernel flipped and its channel axes swapped
    (a Map over W). The output size is ``(D-1)*s + (K-1)*d + 1 + output_padding - begin - end``.

    Pads follow onnxruntime: with ``output_shape`` the total is the full size minus
    ``output_shape``; with ``auto_pad`` SAME_* the full size minus ``D*s``; either total
    is split with the odd one at the end for SAME_UPPER, else at the beginning; other
    pads come from ``pads`` (VALID: none). SAME_* never pads negatively (the output
    keeps the full size when it is smaller than ``D*s``). ConvTranspose-1 documents the
    odd pad on the other side; onnxruntime splits it this way at every version.
    """
    groups = _check_shapes(ctx, X, W, B, group, kernel_shape, transposed=True)
    if auto_pad not in AUTO_PADS:
        raise ctx.unsupported(f"auto_pad '{auto_pad}' (expected one of {', '.join(AUTO_PADS)})")
    r, spatial, kernel = len(X.shape) - 2, X.shape[2:], W.shape[2:]
    strides = spatial_attribute(ctx, "strides", strides, r, 1)
    dilations = spatial_attribute(ctx, "dilations", dilations, r, 1)
    extra = _output_padding(ctx, output_padding, r)
    full = tuple((dim - 1) * s + (k - 1) * d + 1 + a
                 for dim, s, k, d, a in zip(spatial, strides, kernel, dilations, extra))
    begin, end = _transpose_pads(ctx, spatial, strides, full, output_shape, pads, auto_pad)
    out = tuple(f - b - e for f, b, e in zip(full, begin, end))
    if any(o < 1 for o in out):
        raise ctx.shape_error(f"the output size {list(out)} is not positive")
    shift = tuple((k - 1) * d - b for k, d, b in zip(kernel, dilations, begin))
    win = Window(kernel, (1,) * r, dilations, shift, (0,) * r, out)
    upsampled = _zero_inserted(ctx, ctx.channels_first(X), strides)
    depthwise = groups == X.shape[1] == W.shape[1] * groups
    flipped = _flipped(ctx, W, groups, depthwise=depthwise)
    bounded = upsampled is not X  # see _zero_inserted
    if depthwise:
        return _depthwise(ctx, upsampled, flipped, B, win, bounded=bounded)
    col = _im2col(ctx, upsampled, win, bounded=bounded)
    return _product(ctx, col, flipped, B, groups, out)


def _check_shapes(ctx, X, W, B, group: int, kernel_shape, *, transposed: bool) -> int:
    """The group count, after checking X, W, B and ``kernel_shape`` (shape errors).

    W is (M, C/G, K..) for Conv and (C, M/G, K..) for ConvTranspose; B is (M,).
    """
    if len(X.shape) < 3 or len(W.shape) != len(X.shape):
        raise ctx.shape_error(f"X {list(X.shape)} and W {list(W.shape)} must both be "
                              "(batch, channels, spatial..) with at least one spatial dim")
    if group < 1:
        raise ctx.shape_error(f"group={group} must be positive")
    c_size = X.shape[1]
    w_in = W.shape[0] if transposed else W.shape[1] * group
    if c_size % group or w_in != c_size:
        raise ctx.shape_error(f"X has {c_size} channels, W {list(W.shape)} expects "
                              f"{w_in} with group={group}")
    m_size = W.shape[1] * group if transposed else W.shape[0]
    if m_size % group:
        raise ctx.shape_error(f"{m_size} output channels are not divisible by group={group}")
    if kernel_shape is not None and tuple(kernel_shape) != W.shape[2:]:
        raise ctx.shape_error(f"kernel_shape {list(kernel_shape)} differs from the kernel "
                              f"dims {list(W.shape[2:])} of W")
    if B is not None and B.shape != (m_size,):
        raise ctx.shape_error(f"B {list(B.shape)} must be [{m_size}] (one per output channel)")
    return group


def _direct_lowering(groups: int, win: Window, W, *, channels_last: bool = False,
                     constant: bool = False):
    """How a 2-D, ungrouped conv with weights ``W`` is direct, or None (im2col).

    To a multiple of :data:`DIRECT_CHANNELS` output channels (whole vectors) with output
    rows of a known width, a conv with a kernel larger than 1x1, or any conv over a
    channels-last input, is :func:`_direct`. So is a conv to other channel counts over
    a channels-last input when its weights and bias are ``constant`` and rounding the
    channels up to whole vectors adds at most :data:`DIRECT_MAX_PADDING` (its output is
    then channels-last too). Else a conv with a kernel larger than 1x1,
    stride 1 and at least :data:`DIRECT_MIN_CHANNELS` output channels is
    :func:`_flat_direct` when that computes at most :data:`DIRECT_MAX_WASTE` times its
    output pixels; else a conv with a kernel larger than 1x1 is :func:`_direct` with its
    channels rounded up as above (a strided one over an NCHW input, which im2col ran:
    3->24 channels, 3x3, stride 2 at 224x224 + Relu 0.385 -> 0.291 ms, onnxruntime 0.276;
    at stride 1 the flat direct conv was faster, 16->24 at 56x56 0.124 against 0.160)."""
    if groups != 1 or win.rank != 2:
        return None
    pointwise = size(win.kernel) == 1
    m_size = W.shape[0]
    rows = isinstance(win.out[1], int) and (channels_last or not pointwise)
    paddable = constant and _whole_vectors(m_size) <= DIRECT_MAX_PADDING * m_size
    if rows and (m_size % DIRECT_CHANNELS == 0 or channels_last and paddable):
        return _direct
    if (not pointwise and set(win.strides) == {1} and m_size >= DIRECT_MIN_CHANNELS
            and _flat_grid(win, DIRECT_TILE_COLUMNS)[1] <= DIRECT_MAX_WASTE * size(win.out)):
        return _flat_direct
    return _direct if rows and paddable else None


def _direct(ctx, X, W, B, win: Window):
    """A direct convolution, output channels along the vector lanes:

    - ``Xp[n, c, r, w] = X[n, c, r - begin_h, w - begin_w]`` (0 outside), as many rows
      and columns as the windows span;
    - ``Yt[n, oh, ow, m] = B[m] + sum_{c, kh, kw} W[m, c, kh, kw] *
      Xp[n, c, oh*sh + kh*dh, ow*sw + kw*dw]``;
    - ``Y[n, m, oh, ow] = Yt[n, oh, ow, m]``, a View: the output is channels-last
      (:mod:`polyc.frontend.channels_last`).

    ``Xp`` is X itself when no window leaves it. Over a channels-last X, ``Xp`` is
    channels-last too and the product reads it as it is. Output channels that do not
    fill whole vectors are rounded up (:data:`DIRECT_MAX_PADDING`): ``W`` and ``B``
    constants padded with zeros, ``Y`` a view of the first M channels of ``Yt``.

    The product is a contraction with three reduction loops (c, kh, kw), which the
    tiler runs inside a register tile of pixels ``ow`` of one output row (broadcasts
    of ``Xp``, ``sw`` apart, as cheap as adjacent ones) by output channels (vectors of
    the weights, packed at compile time): no im2col. The output rows ``oh`` are a batch
    loop that the packed weights do not vary with, so each cache block of them serves
    every row (:mod:`polyc.tiling.microkernel`). The sum runs over ``(c, kh, kw)`` in
    row-major order after ``B``, as im2col's product did.
    """
    n_size, c_size = X.shape[:2]
    channels = W.shape[0]
    m_size = _stored_channels(channels)
    if m_size != channels:
        W, B = _more_channels(ctx, W, B, m_size)
    (oh, ow), (kh, kw), (sh, sw), (dh, dw) = win.out, win.kernel, win.strides, win.dilations
    inside = win.inside(X.shape[2:]) and not any(win.begin)
    padded = X if inside else _padded(ctx, X, win, win.span(0), win.span(1))
    n, m = Ix.var(0), Ix.var(3)
    x = Read(padded.name, (n, Ix.var(4), Ix(((1, sh), (5, dh))), Ix(((2, sw), (6, dw)))))
    w = Read(W.name, (m, Ix.var(4), Ix.var(5), Ix.var(6)))
    init = Const(0.0) if B is None else Read(B.name, (m,))
    extents = (n_size, oh, ow, m_size)
    product = ctx.reduce(out_shape=extents, init=init, extents=extents + (c_size, kh, kw),
                         out_index=(n, Ix.var(1), Ix.var(2), m), combiner="add",
                         expr=Call("mul", (w, x)), label="conv_transposed")
    return ctx.as_channels_last(product, label="conv", channels=channels)


def _stored_channels(count):
    """The output channels a direct conv to ``count`` computes: ``count`` itself when
    :func:`ends_in_half_vector`, else whole vectors."""
    return count if ends_in_half_vector(count) else _whole_vectors(count)


def ends_in_half_vector(count) -> bool:
    """Whether a direct conv to ``count`` output channels computes just those, its
    register tile's last 8 a half vector: 8 more than whole vectors, more than one
    vector and at most :data:`HALF_VECTOR_CHANNELS` (the tiler's rule too,
    :mod:`polyc.tiling.microkernel`)."""
    return isinstance(count, int) and DIRECT_CHANNELS < count <= HALF_VECTOR_CHANNELS \
        and count % DIRECT_CHANNELS == DIRECT_CHANNELS // 2


def _whole_vectors(count, lanes: int = DIRECT_CHANNELS):
    """``count`` rounded up to a multiple of ``lanes`` (symbolic: as it is)."""
    return -(-count // lanes) * lanes if isinstance(count, int) else count


def _more_channels(ctx, W, B, m_size: int):
    """Constant ``W`` and ``B`` with zero output channels appended up to ``m_size``."""
    w = ctx.constant_value(W)
    extra = m_size - w.shape[0]
    W = ctx.constant(np.pad(w, [(0, extra)] + [(0, 0)] * (w.ndim - 1)), "conv_weights")
    if B is not None:
        B = ctx.constant(np.pad(ctx.constant_value(B), (0, extra)), "conv_bias")
    return W, B


def _flat_grid(win: Window, columns: int = DIRECT_COLUMNS) -> tuple[int, int]:
    """The padded width ``Wp`` of a flat direct conv's pixel grid and its pixel count
    (``OH*Wp`` rounded up to ``columns``)."""
    wp = win.out[1] + (win.kernel[1] - 1) * win.dilations[1]
    return wp, -(-win.out[0] * wp // columns) * columns


def _flat_direct(ctx, X, W, B, win: Window):
    """A stride-1 direct convolution over the padded input, rows of ``Wp`` = padded
    width, output channels as the register tile's rows:

    - ``Xp[n, c, r, w] = X[n, c, r - begin_h, w - begin_w]`` (0 outside), ``Wp = OW +
      (KW-1)*dw`` columns and as many rows as the reads below reach;
    - ``Y'[n, m, p] = B[m] + sum_{c, kh, kw} W[m, c, kh, kw] * Xp[n, c, kh*dh*Wp + kw*dw + p]``
      over ``p < P``, reading ``Xp`` flat per channel: output pixel ``(oh, ow)`` is
      ``p = oh*Wp + ow``, and its window element ``(kh, kw)`` lies ``kh*dh*Wp + kw*dw``
      further on. The ``Wp - OW`` columns past each row's end, and the pixels from
      ``OH*Wp`` up to ``P`` (``OH*Wp`` rounded up to :data:`DIRECT_COLUMNS`, so that
      register tiles are whole vectors), compute values nobody reads; in exchange every read
      is affine and stride 1 along ``p``, the vector lanes;
    - ``Y[n, m, oh, ow] = Y'[n, m, oh*Wp + ow]`` (a Map, which activations join).

    For output channels that do not fill whole vectors (:func:`_direct` otherwise);
    the tiler reads ``Xp`` as it is (:mod:`polyc.tiling.contraction`).
    """
    X = ctx.channels_first(X)
    n_size, c_size = X.shape[:2]
    m_size = W.shape[0]
    (oh, ow), (kh, kw), (dh, dw) = win.out, win.kernel, win.dilations
    wp, pixels = _flat_grid(win)
    rows = -(-((kh - 1) * dh * wp + (kw - 1) * dw + pixels) // wp)
    padded = _padded(ctx, X, win, rows, wp)
    flat = ctx.view(padded, (n_size, c_size * rows * wp), label="conv_pad")
    n, m, p = Ix.var(0), Ix.var(1), Ix.var(2)
    x = Read(flat.name, (n, Ix(((3, rows * wp), (4, dh * wp), (5, dw), (2, 1)))))
    w = Read(W.name, (m, Ix.var(3), Ix.var(4), Ix.var(5)))
    init = Const(0.0) if B is None else Read(B.name, (m,))
    extents = (n_size, m_size, pixels)
    product = ctx.reduce(out_shape=extents, init=init, extents=extents + (c_size, kh, kw),
                         out_index=(n, m, p), combiner="add", expr=Call("mul", (w, x)),
                         label="conv")
    index = (Ix.var(0), Ix.var(1), Ix(((2, wp), (3, 1))))
    return ctx.map((n_size, m_size, oh, ow), Read(product.name, index), label="conv_crop")


def _padded(ctx, X, win: Window, rows: int, columns: int):
    """``Xp[n, c, r, w] = X[n, c, r - begin_h, w - begin_w]`` over ``rows x columns``
    (0 outside X): a direct conv's padded copy; of a channels-last X whose pixels lie
    a multiple of :data:`PITCH_ALIASING` channels apart, with :data:`PITCH_CHANNELS`
    more channels (zeros the conv never reads)."""
    index = identity_index(2) + (Ix(((2, 1),), -win.begin[0]), Ix(((3, 1),), -win.begin[1]))
    channels = X.shape[1]
    if ctx.channels_last(X) is not None and isinstance(channels, int) \
            and channels % PITCH_ALIASING == 0:
        channels += PITCH_CHANNELS
    return ctx.map((X.shape[0], channels, rows, columns), Read(X.name, index, "fill", 0.0),
                   label="conv_pad")


def _im2col(ctx, src, win: Window, *, bounded: bool = False):
    """``Col`` (N, C*K, P): ``src[n, c, o*s + k*d - begin ..]`` at row ``(c, k..)``
    and column ``(o..)`` (0 outside ``src``; a bounded read if ``bounded`` or needed);
    a View of ``src`` when that is ``src``."""
    r = win.rank
    n_size, c_size = src.shape[:2]
    shape = (n_size, c_size * size(win.kernel), size(win.out))
    same = (win.out == src.shape[2:] and set(win.kernel) == {1} and set(win.strides) == {1}
            and not any(win.begin) and not bounded)
    if same:
        return ctx.view(src, shape, label="im2col")
    read = padded_read(src, win, 2 + r, 2, identity_index(2), 0.0, bounded=bounded)
    col = ctx.map((n_size, c_size) + win.kernel + win.out, read, label="im2col")
    return ctx.view(col, shape, label="im2col")


def _product(ctx, col, weights, B, groups: int, out: tuple[int, ...]):
    """``Y[n, g*Mg + mg, p] = B[..] + sum_q weights[g*Mg + mg, q] * col[n, g*Q + q, p]``
    (Mg = M/G output channels and Q columns of ``weights`` per group), viewed as (N, M, out..).

    The contraction tiler puts the loop along which Y is stride 1 in vector lanes. When
    the pixel count ``P`` is not a multiple of :data:`PRODUCT_COLUMNS` (a vector's lanes),
    a partial register tile's accumulators would be masked vectors kept in memory: a 1x1
    conv 1024->256 at 14x14 (``P`` = 196) took 0.93 ms against 0.62 ms for onnxruntime,
    and 0.68 ms over 13x16 pixels. So, with ``P`` rounded up to ``P'``:

    - if ``P' = P`` and at least :data:`PRODUCT_MIN_COLUMNS`, the product runs as it is;
    - else, if ``Mg`` is a multiple of :data:`PRODUCT_COLUMNS`, it is computed transposed,
      ``Yt[n, g, p, mg]`` (output channels in the lanes, pixels the tile's rows) and a Map
      writes ``Y[n, g, mg, o..] = Yt[n, g, p, mg]``: no pixel computed twice, and the
      activations read in place as the tile's broadcasts, not packed at run time (the
      1x1 conv above over 13x16 pixels and cropped 0.996-1.020 ms, transposed
      0.909-0.927 ms, onnxruntime 0.957-0.987, two interleaved runs);
    - else, if ``P'`` is at most :data:`PRODUCT_MAX_WASTE` times ``P`` and at least
      :data:`PRODUCT_MIN_COLUMNS`, the product runs over ``P'`` pixels, reading 0 past
      ``col``'s end, and a Map crops it to (N, M, out..);
    - else as it is.
    """
    n_size, _, p_size = col.shape
    m_size, q_size = weights.shape
    mg = m_size // groups
    padded = _whole_vectors(p_size, PRODUCT_COLUMNS)
    if padded != p_size or padded < PRODUCT_MIN_COLUMNS:
        if mg % PRODUCT_COLUMNS == 0:
            return _transposed_product(ctx, col, weights, B, groups, out)
        if padded > PRODUCT_MAX_WASTE * p_size or padded < PRODUCT_MIN_COLUMNS:
            padded = p_size
    n, g_mg, p, q = Ix.var(0), Ix(((1, mg), (2, 1))), Ix.var(3), Ix.var(4)
    w = Read(weights.name, (g_mg, q))
    x = Read(col.name, (n, Ix(((1, q_size), (4, 1))), p),
             *(("fill", 0.0) if padded != p_size else ()))
    init = Const(0.0) if B is None else Read(B.name, (Ix.var(1),))
    y = ctx.reduce(out_shape=(n_size, m_size, padded), init=init,
                   extents=(n_size, groups, mg, padded, q_size), out_index=(n, g_mg, p),
                   combiner="add", expr=Call("mul", (w, x)), label="conv")
    if padded == p_size:
        return ctx.view(y, (n_size, m_size) + out, label="conv")
    pixel = _flat_pixel(out, 2)
    return ctx.map((n_size, m_size) + out, Read(y.name, (Ix.var(0), Ix.var(1), pixel)),
                   label="conv_crop")


def _transposed_product(ctx, col, weights, B, groups: int, out: tuple[int, ...]):
    """``Yt[n, g, p, mg] = B[..] + sum_q col[n, g*Q + q, p] * weights[g*Mg + mg, q]`` and
    ``Y[n, g, mg, o..] = Yt[n, g, p, mg]`` viewed as (N, M, out..) (see :func:`_product`);
    the sum over ``q`` runs in the same order."""
    n_size, _, p_size = col.shape
    m_size, q_size = weights.shape
    mg = m_size // groups
    n, g, p, m, q = (Ix.var(k) for k in range(5))
    w = Read(weights.name, (Ix(((1, mg), (3, 1))), q))
    x = Read(col.name, (n, Ix(((1, q_size), (4, 1))), p))
    init = Const(0.0) if B is None else Read(B.name, (Ix(((1, mg), (3, 1))),))
    yt = ctx.reduce(out_shape=(n_size, groups, p_size, mg), init=init,
                    extents=(n_size, groups, p_size, mg, q_size), out_index=(n, g, p, m),
                    combiner="add", expr=Call("mul", (x, w)), label="conv_transposed")
    pixel = _flat_pixel(out, 3)
    y = ctx.map((n_size, groups, mg) + out, Read(yt.name, (Ix.var(0), Ix.var(1), pixel,
                                                           Ix.var(2))), label="conv_untranspose")
    return ctx.view(y, (n_size, m_size) + out, label="conv")


def _flat_pixel(out: tuple[int, ...], first: int) -> Ix:
    """The row-major pixel number of the output position at loop variables ``first..``."""
    strides = [1] * len(out)
    for d in range(len(out) - 2, -1, -1):
        strides[d] = strides[d + 1] * out[d + 1]
    return Ix(tuple((first + d, stride) for d, stride in enumerate(strides)))


def _narrow_rows(X, win: Window) -> bool:
    """Whether an NCHW depthwise conv's output rows are narrower than NARROW_ROWS (most
    of each row vector's lanes masked) over whole vectors of channels (see
    NARROW_ROWS)."""
    channels = X.shape[1]
    return (isinstance(channels, int) and channels % DIRECT_CHANNELS == 0
            and isinstance(win.out[-1], int) and win.out[-1] < NARROW_ROWS)


def _depthwise(ctx, src, weights, B, win: Window, *, bounded: bool = False):
    """One input channel per output channel (G = C = M): im2col would copy every input
    element K times for a product without reuse. With at most :data:`UNROLLED_KERNEL`
    kernel positions (and no zero insertion) the sum over them is written out: one
    elementwise Map (:func:`_depthwise_map`); else a direct Reduce over (n, c, o.., k..):
    ``Y[n, c, o..] = B[c] + sum_k Xp[n, c, o*s + k*d ..] * weights[c, k..]``, where ``Xp``
    is ``src`` padded with zeros (a Map, unless every window stays inside ``src``); with
    ``bounded``, ``src`` read with a bounded read instead."""
    if not bounded and size(win.kernel) <= UNROLLED_KERNEL:
        return _depthwise_map(ctx, src, weights, B, win)
    src = ctx.channels_first(src)
    r = win.rank
    n_size, c_size = src.shape[:2]
    o_var, k_var = 2, 2 + r
    if bounded or win.inside(src.shape[2:]):
        padded = src
    else:
        span = tuple(win.span(d) for d in range(r))
        index = identity_index(2) + tuple(Ix(((2 + d, 1),), -win.begin[d]) for d in range(r))
        padded = ctx.map((n_size, c_size) + span, Read(src.name, index, "fill", 0.0),
                         label="pad")
        win = replace(win, begin=(0,) * r)
    x = padded_read(padded, win, o_var, k_var, identity_index(2), 0.0, bounded=bounded)
    w = Read(weights.name, (Ix.var(1),) + tuple(Ix.var(k_var + d) for d in range(r)))
    init = Const(0.0) if B is None else Read(B.name, (Ix.var(1),))
    return ctx.reduce(out_shape=(n_size, c_size) + win.out, init=init,
                      extents=(n_size, c_size) + win.out + win.kernel,
                      out_index=identity_index(2 + r), combiner="add",
                      expr=Call("mul", (x, w)), label="depthwise_conv")


def _depthwise_map(ctx, src, weights, B, win: Window, *, taps_last: bool = True):
    """``Y[n, c, o..] = B[c] + X[n, c, o*s + k0*d - begin ..] * weights[c, k0..] + ..`` over
    the kernel positions ``k0, k1, ..`` in row-major order (the Reduce's order, so sums
    are the same bit for bit), reads outside X giving 0: one Map, whose statement keeps
    its window in registers and writes each output once. Its bounded reads are
    unguarded in the interior (:mod:`polyc.tiling.borders`): no padded copy of X.
    Without ``taps_last``, ``weights`` is ``[k.., c]`` (read along channels over a
    channels-last X)."""
    n_size, c_size = src.shape[:2]
    total = Const(0.0) if B is None else Read(B.name, (Ix.var(1),))
    for position in itertools.product(*(range(k) for k in win.kernel)):
        x = tap_read(src, win, dict(enumerate(position)), 0.0)
        taps = tuple(Ix.constant(k) for k in position)
        w = Read(weights.name, (Ix.var(1),) + taps if taps_last else taps + (Ix.var(1),))
        total = Call("add", (total, Call("mul", (x, w))))
    return ctx.map((n_size, c_size) + win.out, total, label="depthwise_conv")


def _zero_inserted(ctx, X, strides: tuple[int, ...]):
    """``U[n, c, i*s ..] = X[n, c, i ..]``, 0 elsewhere, of shape (N, C, D1*s1, ..): a Map
    ``U'[n, c, i1, p1, ..] = X[n, c, i1 + D1*p1, ..]`` (a bounded read that leaves X unless
    every phase ``p`` is 0) viewed as U; X itself for unit strides.

    Its readers read it with a bounded read too, which keeps the producer inliner from
    testing the injectivity of a read through the view (seconds in isl)."""
    if set(strides) == {1}:
        return X
    spatial = X.shape[2:]
    shape = X.shape[:2] + tuple(v for dim, s in zip(spatial, strides) for v in (dim, s))
    index = identity_index(2) + tuple(Ix(((2 + 2 * d, 1), (3 + 2 * d, dim)))
                                      for d, dim in enumerate(spatial))
    upsampled = ctx.map(shape, Read(X.name, index, "fill", 0.0), label="zero_insert")
    dims = tuple(dim * s for dim, s in zip(spatial, strides))
    return ctx.view(upsampled, X.shape[:2] + dims, label="zero_insert")


def _flipped(ctx, W, groups: int, *, depthwise: bool):
    """ConvTranspose's W (C, Mg, K..) as a Conv weight matrix (M, C/G * K):
    ``Wf[g, mg, c, k..] = W[g*C/G + c, mg, K-1-k ..]`` (a Map), viewed as (M, C/G*K).
    For a depthwise one (Mg = C/G = 1) the Map ``Wf[g, k..] = W[g, 0, K-1-k ..]`` itself."""
    c_size, mg = W.shape[:2]
    kernel = W.shape[2:]
    cg = c_size // groups
    flip = tuple(Ix((((1 if depthwise else 3) + d, -1),), k - 1)
                 for d, k in enumerate(kernel))
    if depthwise:
        return ctx.map((groups,) + kernel, Read(W.name, (Ix.var(0), Ix.constant(0)) + flip),
                       label="flip")
    index = (Ix(((0, cg), (2, 1))), Ix.var(1)) + flip
    flipped = ctx.map((groups, mg, cg) + kernel, Read(W.name, index), label="flip")
    return ctx.view(flipped, (groups * mg, cg * size(kernel)), label="flip")


def _output_padding(ctx, output_padding, r: int) -> tuple[int, ...]:
    if output_padding is None:
        return (0,) * r
    values = tuple(int(a) for a in output_padding)
    if len(values) != r or any(a < 0 for a in values):
        raise ctx.shape_error(f"output_padding {list(values)} must be {r} non-negative values")
    return values


def _transpose_pads(ctx, spatial, strides, full, output_shape, pads, auto_pad):
    """(begin, end) pads of a ConvTranspose whose uncropped output (with output padding)
    has size ``full``; a target size larger than ``full`` pads the end with zeros (a
    negative end)."""
    r = len(spatial)
    if output_shape is not None:
        target = tuple(int(v) for v in output_shape)[-r:]
        if len(target) != r:
            raise ctx.shape_error(f"output_shape {list(output_shape)} must give the {r} "
                                  "spatial dims")
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):  # never smaller than the full size
        target = tuple(min(d * s, f) for d, s, f in zip(spatial, strides, full))
    elif auto_pad == "VALID" or pads is None:
        return (0,) * r, (0,) * r
    else:
        pads = tuple(int(p) for p in pads)
        if len(pads) != 2 * r or any(p < 0 for p in pads):
            raise ctx.shape_error(f"pads {list(pads)} must be {2 * r} non-negative values")
        return pads[:r], pads[r:]
    total = [f - t for f, t in zip(full, target)]
    small = [max(t, 0) // 2 for t in total]
    begin = small if auto_pad == "SAME_UPPER" else [max(t, 0) - s for t, s in zip(total, small)]
    return tuple(begin), tuple(t - b for t, b in zip(total, begin))
