"""3x3 stride-1 convolutions by Winograd's minimal filtering F(2x2, 3x3).

Each 2x2 block of output pixels is computed from the 4x4 block of input pixels around
it with 16 products per channel pair instead of 36 (Lavin and Gray, "Fast Algorithms
for Convolutional Neural Networks", 2016):

    Y_tile = At (sum_c (G g_mc Gt) . (Bt d_c B)) A

with ``.`` the elementwise product of 4x4 matrices, ``g_mc`` the 3x3 kernel of output
channel m and input channel c, ``d_c`` the input tile. Over an image the 16 elementwise
products summed over channels are 16 independent matrix products (tiles x C) @ (C x M),
which the contraction recipe runs at its usual speed. As core ops, over a channels-last
input ``X`` [N, H, W, C] (0 outside: the padding) with ``TH x TW`` tiles, P = TH*TW:

- ``R[n, th, a, w, c] = sum_i Bt[a, i] X[n, 2th + i - ph, w - pw, c]``  (rows of Bt d)
- ``V[4a + b, n, TW*th + tw, c] = sum_j Bt[b, j] R[n, th, a, 2tw + j, c]``  (Bt d B)
- ``Mp[e, n, p, m] = sum_c V[e, n, p, c] U[e, c, m]``, U = G g Gt packed at compile time
- ``Y[n, th, y, tw, x, m] = bias[m] + sum_{a, b} At[y, a] At[x, b] Mp[4a + b, n, p, m]``

and ``Y`` viewed as [N, OH, OW, M] is the channels-last output. The sums run in another
order than a direct convolution's (and G holds halves), so results differ from it by
rounding: a few units in the last place of the largest terms.
"""

from __future__ import annotations

import numpy as np

from polyc.frontend.core import Call, Const, Ix, Read

TILE = 2  # output pixels per tile side (F(2x2, 3x3))
TAPS = 4  # input pixels per tile side
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float32)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float32)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float32)
# Input and output channels, and tiles, from which a conv is worth it: the transforms
# cost about as much per tile and channel as a few output channels of the product, and
# each of the 16 products has a row per tile. A conv 3x3 C -> C with bias, channels-last
# input, 1 thread, time by Winograd over the direct conv's (each with a 3x3 conv 16 -> C
# before it): C=32 at 16x16 1.52; C=64 at 8x8 0.74, 16x16 0.80, 28x28 0.71, 56x56 0.85;
# C=128 at 8x8 / 14x14 / 28x28 0.61-0.62; C=256 at 8x8 0.64, 14x14 0.61; C=512 at 4x4
# 0.76. In a ResNet-18 of width 32 at 64x64, 32 channels at 16x16 took 0.079 ms a conv
# against 0.044 direct, 256 channels at 2x2 (one tile) 0.095 against 0.072.
MIN_CHANNELS = 64
MIN_TILES = 16


def applies(ctx, X, W, B, win, groups: int) -> bool:
    """Whether the conv of ``X`` by ``W`` (and ``B``) over ``win`` runs by Winograd: a
    2-D 3x3 kernel, stride and dilation 1, one group, constant weights and bias, a
    channels-last input, and whole tiles of output rows and columns."""
    if groups != 1 or win.rank != 2 or tuple(W.shape[2:]) != (3, 3):
        return False
    if set(win.strides) != {1} or set(win.dilations) != {1}:
        return False
    if ctx.channels_last(X) is None or ctx.constant_value(W) is None:
        return False
    if B is not None and ctx.constant_value(B) is None:
        return False
    m_size, c_size = W.shape[:2]
    if not all(isinstance(d, int) for d in (*win.out, m_size, c_size)):
        return False
    tiles = (win.out[0] // TILE) * (win.out[1] // TILE)
    return (min(m_size, c_size) >= MIN_CHANNELS and m_size % 16 == 0 and tiles >= MIN_TILES
            and all(o % TILE == 0 for o in win.out))


def filters(weights: np.ndarray) -> np.ndarray:
    """``U[4a + b, c, m] = (G g_mc Gt)[a, b]`` of weights [M, C, 3, 3]."""
    u = np.einsum("ai,mcij,bj->abcm", G.astype(np.float64), weights.astype(np.float64),
                  G.astype(np.float64))
    return np.ascontiguousarray(u.reshape(TAPS * TAPS, *u.shape[2:]), dtype=np.float32)


def lower(ctx, X, W, B, win):
    """The conv as the four steps of the module docstring; its NCHW view."""
    stored = ctx.channels_last(X)
    n_size, _, _, c_size = stored.shape
    m_size = W.shape[0]
    th_size, tw_size = win.out[0] // TILE, win.out[1] // TILE
    span = tw_size * TILE + TAPS - TILE  # input columns the tiles read
    ph, pw = win.begin
    bt = ctx.constant(BT, "winograd_bt")
    v = Ix.var
    # R[n, th, a, w, c] = sum_i Bt[a, i] X[n, 2th + i - ph, w - pw, c]
    x = Read(stored.name, (v(0), Ix(((1, TILE), (5, 1)), -ph), Ix(((3, 1),), -pw), v(4)),
             "fill", 0.0)
    rows = ctx.reduce(out_shape=(n_size, th_size, TAPS, span, c_size), init=Const(0.0),
                      extents=(n_size, th_size, TAPS, span, c_size, TAPS),
                      out_index=tuple(v(k) for k in range(5)), combiner="add",
                      expr=Call("mul", (Read(bt.name, (v(2), v(5))), x)),
                      label="winograd_rows")
    # V[4a + b, n, TW*th + tw, c] = sum_j Bt[b, j] R[n, th, a, 2tw + j, c]
    r = Read(rows.name, (v(2), v(3), v(0), Ix(((4, TILE), (6, 1))), v(5)))
    tiles = ctx.reduce(out_shape=(TAPS * TAPS, n_size, th_size * tw_size, c_size),
                       init=Const(0.0),
                       extents=(TAPS, TAPS, n_size, th_size, tw_size, c_size, TAPS),
                       out_index=(Ix(((0, TAPS), (1, 1))), v(2), Ix(((3, tw_size), (4, 1))),
                                  v(5)),
                       combiner="add", expr=Call("mul", (Read(bt.name, (v(1), v(6))), r)),
                       label="winograd_input")
    # Mp[e, n, p, m] = sum_c V[e, n, p, c] U[e, c, m]
    u = ctx.constant(filters(ctx.constant_value(W)), "winograd_filters")
    pixels = th_size * tw_size
    products = ctx.reduce(out_shape=(TAPS * TAPS, n_size, pixels, m_size), init=Const(0.0),
                          extents=(TAPS * TAPS, n_size, pixels, m_size, c_size),
                          out_index=(v(0), v(1), v(2), v(3)), combiner="add",
                          expr=Call("mul", (Read(tiles.name, (v(0), v(1), v(2), v(4))),
                                            Read(u.name, (v(0), v(4), v(3))))),
                          label="winograd_product")
    # Y[n, th, y, tw, x, m] = bias[m] + sum_{a, b} At[y, a] At[x, b] Mp[4a + b, n, p, m]
    at2 = ctx.constant(np.einsum("ya,xb->yxab", AT, AT).astype(np.float32), "winograd_at")
    init = Const(0.0) if B is None else Read(B.name, (v(5),))
    mp = Read(products.name, (Ix(((6, TAPS), (7, 1))), v(0), Ix(((1, tw_size), (3, 1))), v(5)))
    out = ctx.reduce(out_shape=(n_size, th_size, TILE, tw_size, TILE, m_size), init=init,
                     extents=(n_size, th_size, TILE, tw_size, TILE, m_size, TAPS, TAPS),
                     out_index=tuple(v(k) for k in range(6)), combiner="add",
                     expr=Call("mul", (Read(at2.name, (v(2), v(4), v(6), v(7))), mp)),
                     label="winograd_output")
    pixels_last = ctx.view(out, (n_size, win.out[0], win.out[1], m_size), label="winograd")
    return ctx.as_channels_last(pixels_last, label="conv")
