"""3x3 stride-1 convolutions by Winograd's minimal filtering F(m x m, 3x3), m = 2 or 4.

Each m x m block of output pixels is computed from the t x t block of input pixels
around it (t = m + 2) with t^2 products per channel pair instead of 9 m^2 (Lavin and
Gray, "Fast Algorithms for Convolutional Neural Networks", 2016): 16 instead of 36 for
F(2x2), 36 instead of 144 for F(4x4):

    Y_tile = At (sum_c (G g_mc Gt) . (Bt d_c B)) A

with ``.`` the elementwise product of t x t matrices, ``g_mc`` the 3x3 kernel of output
channel m and input channel c, ``d_c`` the input tile; :func:`toom_cook` derives Bt, G
and At from interpolation points. Over an image the t^2 elementwise products summed
over channels are t^2 independent matrix products (tiles x C) @ (C x M), which the
contraction recipe runs at its usual speed. As core ops, over a channels-last input
``X`` [N, H, W, C] (0 outside: the padding; an NCHW input is copied so first) with
``TH x TW`` tiles, P = TH*TW:

- ``R[n, th, a, w, c] = sum_i Bt[a, i] X[n, m*th + i - ph, w - pw, c]``  (rows of Bt d)
- ``V[t*a + b, n, TW*th + tw, c] = sum_j Bt[b, j] R[n, th, a, m*tw + j, c]``  (Bt d B)
- ``Mp[e, n, p, m] = sum_c V[e, n, p, c] U[e, c, m]``, U = G g Gt packed at compile time
- ``Y[n, th, y, tw, x, m] = bias[m] + sum_{a, b} At[y, a] At[x, b] Mp[t*a + b, n, p, m]``

and ``Y`` viewed as [N, OH, OW, M] is the channels-last output. The transforms are Maps
whose bodies sum their terms (as Reduces they were taken for contractions of 4 steps,
their inputs packed at run time), vectorized along the channels. The sums run in another
order than a direct convolution's through other intermediate values, so results
differ from it by rounding: F(2x2) by less than a direct conv differs from
onnxruntime, F(4x4) by a few times more (see :data:`CHOICES`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from polyc.frontend.core import Call, Const, Ix, Read
from polyc.frontend.ops.elementwise import fold
from polyc.options import DEFAULT_WINOGRAD, WINOGRAD_CHOICES


@dataclass(frozen=True)
class Transform:
    """F(m x m, 3x3): ``bt`` (t x t), ``g`` (t x 3), ``at`` (m x t), t = m + 2."""

    bt: np.ndarray
    g: np.ndarray
    at: np.ndarray

    @property
    def tile(self) -> int:
        return self.at.shape[0]

    @property
    def taps(self) -> int:
        return self.bt.shape[0]


def toom_cook(points, tile: int) -> Transform:
    """F(tile x tile, 3x3) from the interpolation points ``points`` (``tile + 1`` of
    them) and the point at infinity: ``at`` evaluates a polynomial of degree ``tile - 1``
    at each point (``[1, p, p^2, ..]``; at infinity its leading coefficient), ``g`` the
    kernel's polynomial divided by the product of the point's differences to the other
    points, and ``bt`` is the transform that makes ``at ((g k) . (bt d))`` the valid
    1-D correlation of ``d`` with ``k`` for every ``d``, ``k``: solved exactly in
    rationals, and checked."""
    taps = tile + 2
    pts = [Fraction(p) for p in points]
    at = [[p ** j for p in pts] + [Fraction(j == tile - 1)] for j in range(tile)]
    g = [[p ** j / math.prod(p - q for q in pts if q != p) for j in range(3)] for p in pts]
    g.append([Fraction(0), Fraction(0), Fraction(1)])
    # for each input position i: sum_k at[y][k] g[k][r] bt[k][i] = (i == y + r)
    rows = [[at[y][k] * g[k][r] for k in range(taps)] for y in range(tile) for r in range(3)]
    columns = [_solve(rows, [Fraction(i == y + r) for y in range(tile) for r in range(3)])
               for i in range(taps)]
    bt = [[columns[i][k] for i in range(taps)] for k in range(taps)]
    return Transform(*(np.array(m, np.float64) for m in (bt, g, at)))


def _solve(rows: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction]:
    """The solution of the consistent, full-column-rank system ``rows x = rhs`` (Gaussian
    elimination in rationals)."""
    n = len(rows[0])
    table = [list(row) + [b] for row, b in zip(rows, rhs)]
    pivot_rows = []
    for col in range(n):
        pivot = next(r for r in range(len(table)) if r not in pivot_rows and table[r][col] != 0)
        pivot_rows.append(pivot)
        table[pivot] = [x / table[pivot][col] for x in table[pivot]]
        for r in range(len(table)):
            if r != pivot and table[r][col] != 0:
                factor = table[r][col]
                table[r] = [x - factor * y for x, y in zip(table[r], table[pivot])]
    if any(table[r][-1] != 0 for r in range(len(table)) if r not in pivot_rows):
        raise ValueError("inconsistent Winograd system")
    return [table[pivot_rows[col]][-1] for col in range(n)]


# Points 0, 1, -1 (F(2x2)), and 2, -1/2 more for F(4x4): with 2 and -2 (Lavin and Gray's)
# float32 sums over 256 channels of random data were 4.2e-6 of the largest output off,
# with 2 and -1/2 2.2e-6, with 1/2 and -1/2 4.6e-6 (F(2x2): 3.7e-7).
F2 = toom_cook((0, 1, -1), 2)
F4 = toom_cook((0, 1, -1, 2, Fraction(-1, 2)), 4)

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
# Output rows or columns that are not whole tiles (7x7, 13x13) are computed as whole
# ones and cropped, when that computes at most this many times the output pixels
# (7x7 as 8x8: 1.31).
MAX_WASTE = 1.35
# The choices (compile option ``winograd``) and the transforms each tries, the first
# that fits. F(4x4, 3x3) is opt-in: over 64-256 channels its results were 2-3.5e-6 of
# the largest output off onnxruntime's (a direct conv's 1.1-1.8e-6, F(2x2)'s 0.5-0.6e-6),
# up to 5e-5 absolute, beyond the rtol 1e-4 / atol 1e-5 polyc is tested to.
CHOICES, DEFAULT = WINOGRAD_CHOICES, DEFAULT_WINOGRAD  # (polyc.options: the option)


def transform(ctx, X, W, B, win, groups: int) -> Transform | None:
    """The transform the conv of ``X`` by ``W`` (and ``B``) over ``win`` runs by, or None:
    a 2-D 3x3 kernel, stride and dilation 1, one group, constant weights and bias, enough
    channels (:data:`MIN_CHANNELS`) and at least :data:`MIN_TILES` output tiles, partial ones
    computing at most :data:`MAX_WASTE` times the output pixels."""
    if groups != 1 or win.rank != 2 or tuple(W.shape[2:]) != (3, 3):
        return None
    if set(win.strides) != {1} or set(win.dilations) != {1}:
        return None
    if ctx.constant_value(W) is None:
        return None
    if B is not None and ctx.constant_value(B) is None:
        return None
    m_size, c_size = W.shape[:2]
    if not all(isinstance(d, int) for d in (*win.out, m_size, c_size)):
        return None
    if min(m_size, c_size) < MIN_CHANNELS or m_size % 16:
        return None
    for f in transforms(ctx.winograd):
        th_size, tw_size = (-(-o // f.tile) for o in win.out)
        computed = th_size * tw_size * f.tile * f.tile
        if th_size * tw_size >= MIN_TILES and computed <= MAX_WASTE * win.out[0] * win.out[1]:
            return f
    return None


def transforms(choice: str) -> tuple[Transform, ...]:
    """The transforms the compile option ``choice`` tries, in order."""
    return {"2x2": (F2,), "4x4": (F4, F2), "off": ()}[choice]


def filters(f: Transform, weights: np.ndarray) -> np.ndarray:
    """``U[t*a + b, c, m] = (G g_mc Gt)[a, b]`` of weights [M, C, 3, 3]."""
    u = np.einsum("ai,mcij,bj->abcm", f.g, weights.astype(np.float64), f.g)
    return np.ascontiguousarray(u.reshape(f.taps * f.taps, *u.shape[2:]), dtype=np.float32)


def lower(ctx, X, W, B, win, f: Transform):
    """The conv as the four steps of the module docstring; its NCHW view. An NCHW input
    (a graph input) is copied channels-last first: 64 channels at 56x56 take 0.08 ms
    so, against 1.4 ms for the conv."""
    stored = ctx.stored_channels_last(X, label="winograd_nhwc")
    n_size, _, _, c_size = stored.shape
    m_size = W.shape[0]
    m, t = f.tile, f.taps
    th_size, tw_size = (-(-o // m) for o in win.out)
    span = tw_size * m + t - m  # input columns the tiles read
    ph, pw = win.begin
    bt = ctx.constant(f.bt.astype(np.float32), "winograd_bt")
    v, k = Ix.var, Ix.constant
    # R[n, th, a, w, c] = sum_i Bt[a, i] X[n, m*th + i - ph, w - pw, c]
    rows = ctx.map((n_size, th_size, t, span, c_size), fold("add", (
        Call("mul", (Read(bt.name, (v(2), k(i))),
                     Read(stored.name, (v(0), Ix(((1, m),), i - ph), Ix(((3, 1),), -pw), v(4)),
                          "fill", 0.0)))
        for i in range(t))), label="winograd_rows")
    # V[t*a + b, n, TW*th + tw, c] = sum_j Bt[b, j] R[n, th, a, m*tw + j, c], as a Map
    # over (a, b, n, th, tw, c) into V viewed [t, t, N, TH, TW, C]
    tiles = ctx.map((t, t, n_size, th_size, tw_size, c_size), fold("add", (
        Call("mul", (Read(bt.name, (v(1), k(j))),
                     Read(rows.name, (v(2), v(3), v(0), Ix(((4, m),), j), v(5)))))
        for j in range(t))), label="winograd_input")
    tiles = ctx.view(tiles, (t * t, n_size, th_size * tw_size, c_size), label="winograd_tiles")
    # Mp[e, n, p, m] = sum_c V[e, n, p, c] U[e, c, m]
    u = ctx.constant(filters(f, ctx.constant_value(W)), "winograd_filters")
    pixels = th_size * tw_size
    products = ctx.reduce(out_shape=(t * t, n_size, pixels, m_size), init=Const(0.0),
                          extents=(t * t, n_size, pixels, m_size, c_size),
                          out_index=(v(0), v(1), v(2), v(3)), combiner="add",
                          expr=Call("mul", (Read(tiles.name, (v(0), v(1), v(2), v(4))),
                                            Read(u.name, (v(0), v(4), v(3))))),
                          label="winograd_product")
    # Y[n, th, y, tw, x, m] = bias[m] + sum_{a, b} At[y, a] At[x, b] Mp[t*a + b, n, p, m]
    at2 = ctx.constant(np.einsum("ya,xb->yxab", f.at, f.at).astype(np.float32), "winograd_at")
    terms = [Call("mul", (Read(at2.name, (v(2), v(4), k(a), k(b))),
                          Read(products.name, (k(t * a + b), v(0), Ix(((1, tw_size), (3, 1))),
                                               v(5)))))
             for a in range(t) for b in range(t)]
    if B is not None:
        terms.insert(0, Read(B.name, (v(5),)))
    out = ctx.map((n_size, th_size, m, tw_size, m, m_size), fold("add", terms),
                  label="winograd_output")
    full = (n_size, th_size * m, tw_size * m, m_size)
    pixels_last = ctx.view(out, full, label="winograd")
    if full[1:3] != tuple(win.out):  # partial tiles at the end: their pixels dropped
        pixels_last = ctx.map((n_size, *win.out, m_size),
                              Read(pixels_last.name, tuple(v(d) for d in range(4))),
                              label="winograd_crop")
    return ctx.as_channels_last(pixels_last, label="conv")
