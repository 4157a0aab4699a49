"""Resize-11/13/18/19 with constant ``scales`` or ``sizes``: nearest, linear and cubic.

Resizing is separable: each resized axis is resampled in turn (axes whose float32
scale is 1 cost nothing). Along one axis the filter of
:mod:`~polyc.frontend.ops.resize_filter` says, for output ``o = p*t + r``, which window
of input elements it reads and with which weights; one core op computes it over the
dims ``(t, r)`` in place of the axis:

    Y[.., t, r, ..] = sum_k W[r, k] * X[.., q*t + slope*r + offset + k, ..]   (edge reads)

a Map with the ``width`` terms written out (a Reduce over ``k`` for wide windows).
Weights the same for every phase are constants in the body; otherwise ``W`` is a
constant table, and a tap whose weight is 0 for some phase is ``select(W, W*X, -0.0)``
so that an infinity or NaN it does not read stays out of the sum. The ``(t, r)`` dims
are then seen as one axis of size ``p*T`` through a reshape View, cut to the output
size ``m`` by a Map when ``p*T > m``.

Output sizes and scales follow onnxruntime: ``m = floor(scale * n)`` in float32 with
``scales``; with ``sizes``, ``scale = m / n`` in float32, or for
``keep_aspect_ratio_policy`` not_larger / not_smaller (18+) the least / largest of those
over ``axes``, with ``m = round(scale * n)``.

Not supported (UnsupportedOpError): ``scales`` or ``sizes`` computed at run time,
``coordinate_transformation_mode=tf_crop_and_resize`` (roi and extrapolation),
``antialias=1``, and where ONNX and onnxruntime disagree: align_corners with a scale
that gives an axis a fractional length, and a float32 ``scale * n`` that rounds up to
an integer its double product is below.
"""

from __future__ import annotations

import math

import numpy as np

from polyc.frontend.core import Call, Const, Ix, Read, identity_index
from polyc.frontend.ops.registry import onnx_op
from polyc.frontend.ops.resize_filter import (
    COORDINATE_MODES,
    F32,
    NEAREST_MODES,
    Axis,
    PeriodicFilter,
    coordinates_exact,
    coordinates_f32,
    cubic_filter,
    linear_filter,
    nearest_filter,
    periodic,
)
from polyc.frontend.ops.slicing import _axes
from polyc.frontend.symbolic import Sym

MODES = ("nearest", "linear", "cubic")
POLICIES = ("stretch", "not_larger", "not_smaller")

# Windows up to this width are a Map with one term per tap; wider ones a Reduce.
MAX_UNROLLED_TAPS = 8


@onnx_op("Resize", 11, 13)
def Resize_11(ctx, X, roi=None, scales=None, sizes=None, *,
              coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.75,
              exclude_outside=0, extrapolation_value=0.0, mode="nearest",
              nearest_mode="round_prefer_floor"):
    """Resize-11/13: see the module docstring (one of scales and sizes, for every axis)."""
    return Resize(ctx, X, roi, scales, sizes,
                  coordinate_transformation_mode=coordinate_transformation_mode,
                  cubic_coeff_a=cubic_coeff_a, exclude_outside=exclude_outside,
                  extrapolation_value=extrapolation_value, mode=mode,
                  nearest_mode=nearest_mode)


@onnx_op("Resize", 18, 19)
def Resize(ctx, X, roi=None, scales=None, sizes=None, *, antialias=0, axes=None,
           coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.75,
           exclude_outside=0, extrapolation_value=0.0, keep_aspect_ratio_policy="stretch",
           mode="nearest", nearest_mode="round_prefer_floor"):
    """Resize-18/19 (``axes``, ``keep_aspect_ratio_policy``; half_pixel_symmetric is 19's):
    see the module docstring."""
    del roi, extrapolation_value  # used by tf_crop_and_resize only
    _check_modes(ctx, mode, coordinate_transformation_mode, nearest_mode, antialias,
                 keep_aspect_ratio_policy)
    rank = len(X.shape)
    axes = tuple(range(rank)) if axes is None else _axes(ctx, axes, rank)
    specs = _axis_specs(ctx, X.shape, axes, _scales(ctx, scales, sizes),
                        keep_aspect_ratio_policy)
    if all(spec.m == spec.n for spec in specs.values()):
        return X  # as onnxruntime: the same shape is a copy, whatever the scales
    resized = {a: spec for a, spec in specs.items() if spec.scale != 1}
    stored = ctx.channels_last(X)
    # a channels-last image resized in its pixels: resampled as stored, [N, H, W, C]
    spatial = stored is not None and rank == 4 and set(resized) <= {2, 3}
    current = stored if spatial else X
    for axis, spec in sorted(resized.items(), key=lambda item: item[1].m / item[1].n):
        _check_agreement(ctx, axis, spec, coordinate_transformation_mode)
        table = _table(spec, mode, coordinate_transformation_mode, nearest_mode,
                       cubic_coeff_a, bool(exclude_outside))
        current = _resample(ctx, current, axis - 1 if spatial else axis, spec, periodic(table))
    return ctx.as_channels_last(current, label="resize") if spatial else current


def _check_modes(ctx, mode, coordinate_mode, nearest_mode, antialias, policy) -> None:
    if mode not in MODES:
        raise ctx.unsupported(f"mode={mode!r} (nearest, linear and cubic are supported)")
    if coordinate_mode == "tf_crop_and_resize":
        raise ctx.unsupported("coordinate_transformation_mode='tf_crop_and_resize' (crops "
                              "from roi with extrapolation) is not supported")
    if coordinate_mode not in COORDINATE_MODES:
        raise ctx.unsupported(f"coordinate_transformation_mode={coordinate_mode!r}")
    if mode == "nearest" and nearest_mode not in NEAREST_MODES:
        raise ctx.unsupported(f"nearest_mode={nearest_mode!r}")
    if antialias:
        raise ctx.unsupported("antialias=1 is not supported")
    if policy not in POLICIES:
        raise ctx.unsupported(f"keep_aspect_ratio_policy={policy!r}")


def _scales(ctx, scales, sizes) -> tuple[str, tuple]:
    """("scales", float32 values) or ("sizes", ints) from whichever input is given."""
    if scales is not None and math.prod(scales.shape) > 0:
        value = ctx.constant_value(scales)
        if value is None:
            raise ctx.unsupported(f"input 'scales' must be a constant, but '{scales.name}' "
                                  "is computed by the graph or a graph input")
        if sizes is not None and math.prod(sizes.shape) > 0:
            raise ctx.shape_error("only one of the inputs scales and sizes may be given")
        return "scales", tuple(F32(s) for s in value.reshape(-1))
    if sizes is None or math.prod(sizes.shape) == 0:
        raise ctx.shape_error("one of the inputs scales and sizes must be given")
    return "sizes", ctx.int_values(sizes, "sizes")


def _axis_specs(ctx, shape, axes, given, policy) -> dict[int, Axis]:
    """Axis -> (n, m, scale) for every axis in ``axes``."""
    kind, values = given
    if len(values) != len(axes):
        raise ctx.shape_error(f"{kind} {list(values)} must have one value per axis "
                              f"{list(axes)}")
    if kind == "scales":
        if any(not s > 0 for s in values):
            raise ctx.shape_error(f"scales {list(map(float, values))} must be positive")
        specs = {a: Axis(shape[a], shape[a] if s == 1 else int(s * F32(shape[a])), s)
                 for a, s in zip(axes, values)}  # scale 1 keeps a dim (a symbolic batch)
        for a, spec in specs.items():
            if spec.scale != 1 and int(float(spec.scale) * spec.n) != spec.m:  # ONNX: double
                raise ctx.unsupported(
                    f"scale {float(spec.scale):g} on axis {a} of size {spec.n}: onnxruntime "
                    f"makes {spec.m} elements (float32 product), ONNX "
                    f"{int(float(spec.scale) * spec.n)} (double)")
    else:
        if any(shape[a] == 0 for a in axes):
            raise ctx.unsupported(f"resizing an empty axis of {list(shape)}")
        ratios = {a: F32(m) / F32(shape[a]) for a, m in zip(axes, values)}
        if policy == "stretch":
            specs = {a: Axis(shape[a], m, ratios[a]) for a, m in zip(axes, values)}
        else:
            s = (min if policy == "not_larger" else max)(ratios.values())
            specs = {a: Axis(shape[a], int(np.round(s * F32(shape[a]))), s) for a in axes}
    for axis, spec in specs.items():
        if not isinstance(spec.m, Sym) and spec.m <= 0:  # a symbolic dim is kept
            raise ctx.unsupported(f"axis {axis} resized from {spec.n} to {spec.m} elements")
    return specs


def _check_agreement(ctx, axis: int, spec: Axis, coordinate_mode: str) -> None:
    """align_corners maps the ends of ``[0, n-1]`` onto those of the output length: ONNX
    takes that length as ``scale * n``, onnxruntime as the integer output size ``m``.
    Where they differ (a scale that does not give ``n`` an integer length), so do the
    results, and polyc does not pick one."""
    length = float(spec.scale) * spec.n
    if coordinate_mode == "align_corners" and abs(length - spec.m) > 1e-4 * spec.m:
        raise ctx.unsupported(
            f"coordinate_transformation_mode='align_corners' on axis {axis} resized from "
            f"{spec.n} to {spec.m} by the scale {float(spec.scale):g} (length {length:g}, "
            "not an integer: ONNX and onnxruntime define different results)")


def _table(axis: Axis, mode, coordinate_mode, nearest_mode, a, exclude_outside):
    if mode == "nearest":
        return nearest_filter(coordinates_f32(axis, coordinate_mode), nearest_mode)
    x = coordinates_exact(axis, coordinate_mode)
    if mode == "linear":
        return linear_filter(x)
    return cubic_filter(x, axis.n, float(a), exclude_outside)


# -- emitting one axis ------------------------------------------------------------------

def _resample(ctx, X, axis: int, spec: Axis, f: PeriodicFilter):
    """X resampled along ``axis`` by ``f``: the op over ``(t, r)``, seen as one axis."""
    p, T = f.period, -(-spec.m // f.period)
    shape = X.shape[:axis] + ((T, p) if p > 1 else (T,)) + X.shape[axis + 1:]
    taps = [k for k in range(f.width) if np.any(f.table[:, k] != 0)]
    unrolled = len(taps) <= MAX_UNROLLED_TAPS
    reads = _WindowReads(ctx, X, axis, f, T, table=not unrolled)
    if unrolled:
        terms = [reads.term(Ix.constant(k), f.table[:, k]) for k in taps]
        value = terms[0]
        for term in terms[1:]:
            value = Call("add", (value, term))
        out = ctx.map(shape, value, label="resize")
    else:
        k = Ix.var(len(shape))
        out = ctx.reduce(out_shape=shape, init=Const(-0.0), extents=shape + (f.width,),
                         out_index=identity_index(len(shape)), combiner="add",
                         expr=reads.term(k, f.table), label="resize")
    if p > 1:
        out = ctx.view(out, X.shape[:axis] + (T * p,) + X.shape[axis + 1:], label="resize")
    if T * p == spec.m:
        return out
    cut = X.shape[:axis] + (spec.m,) + X.shape[axis + 1:]
    return ctx.map(cut, Read(out.name, identity_index(len(cut))), label="resize_cut")


class _WindowReads:
    """The reads of ``X[.., q*t + slope*r + offset + k, ..]`` and of the weights
    ``W[r, k]`` over the loop variables of the resampling op (``t`` at ``axis``, ``r``
    after it when the period is > 1, then X's later dims; ``k`` a constant or a variable).

    Weights are constants in the body when every phase has the same ones and ``k`` is a
    constant; otherwise reads of the constant table ``W``."""

    def __init__(self, ctx, X, axis: int, f: PeriodicFilter, T: int, *, table: bool):
        self.X, self.axis, self.f = X, axis, f
        self.phased = f.period > 1
        table = table or bool(np.any(f.table != f.table[0]))
        weights = np.asarray(f.table, dtype=np.float32)
        self.W = ctx.constant(weights, label="resize_weights") if table else None
        self.outside = "error" if _reads_in_range(f, T, X.shape[axis]) else "edge"

    def term(self, k: Ix, weights: np.ndarray):
        """``weight * X[..]`` for tap ``k``; ``weights`` are its weights in every phase
        (the whole table for a variable ``k``)."""
        x = Read(self.X.name, self._x_index(k), self.outside)
        if self.W is None:
            weight = float(weights[0])
            return x if weight == 1 else Call("mul", (Const(weight), x))
        phase = Ix.var(self.axis + 1) if self.phased else Ix.constant(0)
        w = Read(self.W.name, (phase, k))
        product = Call("mul", (w, x))
        if np.all(weights != 0):
            return product
        used = Call("not", (Call("eq", (w, Const(0.0))),))  # a weight of 0 reads nothing
        return Call("select", (used, product, Const(-0.0)))

    def _x_index(self, k: Ix) -> tuple[Ix, ...]:
        f, axis, shift = self.f, self.axis, int(self.phased)
        index = [Ix.var(j if j < axis else j + shift) for j in range(len(self.X.shape))]
        terms = [(axis, f.step)] + ([(axis + 1, f.slope)] if self.phased else []) + list(k.terms)
        index[axis] = Ix(tuple((v, c) for v, c in terms if c), f.offset + k.const)
        return tuple(index)


def _reads_in_range(f: PeriodicFilter, T: int, n: int) -> bool:
    """Whether every index ``q*t + slope*r + offset + k`` of the op lies in ``[0, n)``."""
    spans = (f.step * (T - 1), f.slope * (f.period - 1))
    low = f.offset + sum(min(0, s) for s in spans)
    high = f.offset + sum(max(0, s) for s in spans) + f.width - 1
    return low >= 0 and high < n
