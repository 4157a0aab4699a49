"""GridSample: X sampled at the positions a grid gives (spatial transformers, optical
flow warps), as ONNX's reference and PyTorch's grid_sample compute it.

One Map over the output ``(n, c, o..)``. Per spatial dim ``d`` the grid's coordinate
(the grid lists them last dim first) is taken from [-1, 1] to pixels (``align_corners``:
-1 and 1 are the centres of the corner pixels, else their outer edges); ``nearest``
rounds it half to even; outside the image, ``border`` clamps it into ``[0, size-1]``
(not for cubic, whose taps alone are clamped: onnxruntime's and PyTorch's results) and
``reflection`` folds it back in. Then the taps around it (1 nearest, 2 per dim linear,
4 per dim cubic with Keys' a = -0.75) are read from X with its spatial dims seen as one
(a :class:`core.Lookup` at the tap's row-major number, computed at run time); a tap
outside the image reads 0 (``zeros``), its clamped neighbour (``border``) or the
reflected pixel (``reflection``); the taps' weights are products of per-dim weights.
Coordinates, tap indices and weights are small Maps of their own (see
:meth:`_Sampler.sample`), the output a Reduce over the taps.
"""

from __future__ import annotations

import math

from polyc.frontend.core import Const, Ix, Lookup, Read
from polyc.frontend.ops.elementwise import call
from polyc.frontend.ops.registry import onnx_op

MODES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic",
         "nearest": "nearest"}
PADDING = ("zeros", "border", "reflection")
CUBIC_A = -0.75


@onnx_op("GridSample", 16)
def GridSample_16(ctx, X, grid, *, align_corners=0, mode="bilinear", padding_mode="zeros"):
    """GridSample-16: 2-D only; modes bilinear, nearest and bicubic."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ctx.unsupported(f"mode '{mode}' is not bilinear, nearest or bicubic")
    if len(X.shape) != 4:
        raise ctx.shape_error(f"X {list(X.shape)} must be 4-D (N, C, H, W) before opset 20")
    return GridSample(ctx, X, grid, align_corners=align_corners, mode=mode,
                      padding_mode=padding_mode)


@onnx_op("GridSample", 20, 22)
def GridSample(ctx, X, grid, *, align_corners=0, mode="linear", padding_mode="zeros"):
    """GridSample: Y[n, c, o..] = X[n, c] interpolated at grid[n, o..] (module docstring)."""
    if mode not in MODES:
        raise ctx.unsupported(f"mode '{mode}' is not linear, nearest or cubic")
    if padding_mode not in PADDING:
        raise ctx.unsupported(f"padding_mode '{padding_mode}' is not one of "
                              f"{', '.join(PADDING)}")
    rank = len(X.shape) - 2
    out_spatial = tuple(grid.shape[1:-1])
    if rank < 1 or len(grid.shape) != rank + 2 or grid.shape[0] != X.shape[0] or \
            grid.shape[-1] != rank:
        raise ctx.shape_error(f"grid {list(grid.shape)} must be [N, out.., {rank}] for X "
                              f"{list(X.shape)}")
    sampler = _Sampler(ctx, X, MODES[mode], padding_mode, bool(align_corners))
    return sampler.sample(grid, out_spatial)


class _Sampler:
    def __init__(self, ctx, X, mode: str, padding: str, align_corners: bool):
        self.ctx, self.mode, self.padding, self.align = ctx, mode, padding, align_corners
        self.cast = f"cast_{X.dtype}"
        self.n, self.c = X.shape[:2]
        self.spatial = tuple(X.shape[2:])
        flat = tuple(X.shape[:2]) + (math.prod(self.spatial),)
        self.source = ctx.stored(ctx.view(X, flat, label="grid_sample_pixels")) \
            if len(self.spatial) > 1 else ctx.stored(X)

    def bounds(self, d: int) -> tuple[float, float]:
        """The coordinates of the image's edges along dim ``d``."""
        size = self.spatial[d]
        return (0.0, size - 1.0) if self.align else (-0.5, size - 0.5)

    def coordinate(self, d: int, g):
        """The pixel coordinate along dim ``d`` of the grid value ``g``, rounded for
        nearest, clamped or reflected into the image when outside (padding mode)."""
        size = self.spatial[d]
        x = call("mul", call("add", g, 1.0), (size - 1) / 2) if self.align else \
            call("div", call("sub", call("mul", call("add", g, 1.0), float(size)), 1.0), 2.0)
        if self.mode == "nearest":
            x = call("round", x)
        if self.padding == "border" and self.mode != "cubic":
            x = call("min", call("max", x, 0.0), size - 1.0)
        elif self.padding == "reflection":
            x = self._reflect(x, *self.bounds(d))
        return x

    def _reflect(self, x, low: float, high: float):
        """``x`` folded back into ``[low, high]`` at the nearer edge, again and again."""
        span = high - low
        if span <= 0:
            return call("select", call("eq", x, x), Const(low), x)
        below, above = call("sub", low, x), call("sub", x, high)

        def fold(distance, near: float, far: float, toward: float):
            turns = call("floor", call("div", distance, span))
            rest = call("sub", distance, call("mul", turns, span))
            even = call("eq", call("fmod", turns, 2.0), 0.0)
            return call("select", even, call("add", near, call("mul", toward, rest)),
                        call("sub", far, call("mul", toward, rest)))

        inside = call("select", call("gt", above, 0.0), fold(above, high, low, -1.0), x)
        return call("select", call("gt", below, 0.0), fold(below, low, high, 1.0), inside)

    def sample(self, grid, out_spatial: tuple[int, ...]):
        """Per dim a Map of the coordinates, one of the taps' pixel indices (-1: a
        zero tap) and one of their weights, over (n, o..) and the tap offset; then the
        output: a Reduce over (n, c, o..) and every tap's offsets of weight times the
        tap's value (nearest: one tap, a Map). Intermediates keep the expressions small:
        written out, each tap repeated the coordinate's arithmetic."""
        ctx, rank = self.ctx, len(self.spatial)
        positions = (grid.shape[0],) + out_spatial  # (n, o..)
        taps = {"nearest": 1, "linear": 2, "cubic": 4}[self.mode]
        first = -1 if self.mode == "cubic" else 0
        at = tuple(Ix.var(k) for k in range(1 + rank))
        offset = Read(ctx.positions(taps).name, (Ix.var(1 + rank),))
        indices, weights = [], []
        for d in range(rank):
            g = Read(grid.name, at + (Ix.constant(rank - 1 - d),))
            x = ctx.map(positions, self.coordinate(d, g), label="grid_sample_x")
            x = Read(x.name, at)
            start = call("cast_int64", call("floor", x) if self.mode != "nearest" else x)
            index = self._padded(d, call("add", start, call("add", offset,
                                                            Const(first, "int64"))))
            indices.append(ctx.map(positions + (taps,), index, label="grid_sample_tap"))
            if self.mode != "nearest":
                t = call("sub", x, call("floor", x))
                weights.append(ctx.map(positions + (taps,), self._weight(t, offset),
                                       label="grid_sample_weight"))
        out_shape = (self.n, self.c) + out_spatial
        # output loops: n, c, o.., then one tap offset per dim
        where = (Ix.var(0),) + tuple(Ix.var(2 + k) for k in range(rank))
        tap_index = [Read(i.name, where + (Ix.var(2 + rank + d) if taps > 1 else Ix.constant(0),))
                     for d, i in enumerate(indices)]
        value = self._tap(tap_index)
        if self.mode == "nearest":
            return ctx.map(out_shape, value, label="grid_sample")
        for d, w in enumerate(weights):
            value = call("mul", Read(w.name, where + (Ix.var(2 + rank + d),)), value)
        return ctx.reduce(out_shape=out_shape, init=Const(0.0),
                          extents=out_shape + (taps,) * rank,
                          out_index=tuple(Ix.var(k) for k in range(2 + rank)),
                          combiner="add", expr=value, label="grid_sample")

    def _weight(self, t, k):
        """The weight of tap offset ``k`` (an int64 read) at fractional part ``t``."""
        if self.mode == "linear":
            return call("select", call("eq", k, Const(0, "int64")), call("sub", 1.0, t), t)
        a = CUBIC_A
        u = [call("add", t, 1.0), t, call("sub", 1.0, t), call("sub", 2.0, t)]
        far = [call("sub", call("mul", call("add", call("mul", call("sub", call("mul", a, v),
                                                                       5 * a), v), 8 * a), v),
                    4 * a) for v in (u[0], u[3])]
        near = [call("add", call("mul", call("mul", call("sub", call("mul", a + 2, v), a + 3),
                                                 v), v), 1.0) for v in (u[1], u[2])]
        weight = far[1]
        for j, w in reversed(list(enumerate([far[0], near[0], near[1]]))):
            weight = call("select", call("eq", k, Const(j, "int64")), w, weight)
        return weight

    def _padded(self, d: int, i):
        """The integer pixel index ``i`` along dim ``d`` under the padding mode (zeros:
        -1 outside the image)."""
        size = self.spatial[d]
        if self.padding == "border":
            return call("min", call("max", i, Const(0, "int64")), Const(size - 1, "int64"))
        if self.padding == "reflection":
            return call("cast_int64", self._reflect(call(self.cast, i), *self.bounds(d)))
        inside = call("and", call("ge", i, Const(0, "int64")),
                      call("lt", i, Const(size, "int64")))
        return call("select", inside, i, Const(-1, "int64"))

    def _tap(self, index: list):
        """X at the pixel whose per-dim indices are the int64 reads ``index`` (0 where
        one is -1, a zero tap)."""
        flat, inside = None, None
        for d, i in enumerate(index):
            flat = i if flat is None else \
                call("add", call("mul", flat, Const(self.spatial[d], "int64")), i)
            if self.padding == "zeros":
                valid = call("ge", i, Const(0, "int64"))
                inside = valid if inside is None else call("and", inside, valid)
        value = Lookup(self.source.name, (Ix.var(0), Ix.var(1), Ix.constant(0)), 2, flat)
        return value if inside is None else call("select", inside, value, Const(0.0))
