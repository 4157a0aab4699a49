"""Reductions and Softmax: core ``Reduce`` ops (plus ``Map`` for mean and softmax).

``axes`` is an attribute before ReduceSum-13 / ReduceMean-18 / ReduceMax-18 and an
optional constant int64 input from then on; negative axes count from the end. With
no axes every axis is reduced, unless ``noop_with_empty_axes`` makes the op an identity.
"""

from __future__ import annotations

from polyc.frontend.core import COMBINERS, Call, Const, Ix, Read, identity_index
from polyc.frontend.ops.indexing import normalize_axis, size
from polyc.frontend.ops.registry import onnx_op


def _axes(ctx, data, axes, noop_with_empty_axes) -> tuple[int, ...] | None:
    """The sorted non-negative axes to reduce, or None when the op is an identity."""
    rank = len(data.shape)
    if axes is None or len(axes) == 0:
        return None if noop_with_empty_axes else tuple(range(rank))
    try:
        return tuple(sorted({normalize_axis(int(a), rank) for a in axes}))
    except ValueError as e:
        raise ctx.shape_error(str(e)) from None


def _axes_input(ctx, axes):
    """The values of the optional ``axes`` input (None when it is omitted)."""
    return None if axes is None else ctx.int_values(axes, "axes")


def _kept(shape, axes) -> tuple[tuple[int, ...], tuple[Ix, ...]]:
    """Shape and loop-point index of a keepdims reduction of ``shape`` over ``axes``."""
    dims = tuple(1 if k in axes else d for k, d in enumerate(shape))
    index = tuple(Ix.constant(0) if k in axes else Ix.var(k) for k in range(len(shape)))
    return dims, index


def _reduce(ctx, data, axes, keepdims, combiner: str, label: str):
    """out[kept dims] = combiner over ``axes`` of data: one Reduce over data's shape."""
    if axes is None:
        return ctx.view(data, data.shape, label="identity")
    dims, index = _kept(data.shape, axes)
    if not keepdims:
        dims = tuple(d for k, d in enumerate(dims) if k not in axes)
        index = tuple(ix for k, ix in enumerate(index) if k not in axes)
    return ctx.reduce(out_shape=dims, init=Const(COMBINERS[combiner]), extents=data.shape,
                      out_index=index, combiner=combiner,
                      expr=Read(data.name, identity_index(len(data.shape))), label=label)


def _mean(ctx, data, axes, keepdims):
    """ReduceSum then a Map dividing by the number of reduced elements."""
    total = _reduce(ctx, data, axes, keepdims, "add", "mean_sum")
    if axes is None:
        return total
    count = size([data.shape[a] for a in axes])
    expr = Call("div", (Read(total.name, identity_index(len(total.shape))), Const(float(count))))
    return ctx.map(total.shape, expr, label="mean_div")


@onnx_op("ReduceSum", 11)
def ReduceSum_11(ctx, data, *, axes=None, keepdims=1):
    """ReduceSum-11 (axes attribute): Reduce add over axes, init 0."""
    return _reduce(ctx, data, _axes(ctx, data, axes, 0), keepdims, "add", "reduce_sum")


@onnx_op("ReduceSum", 13)
def ReduceSum(ctx, data, axes=None, *, keepdims=1, noop_with_empty_axes=0):
    """ReduceSum (axes input): Reduce add over axes, init 0."""
    axes = _axes(ctx, data, _axes_input(ctx, axes), noop_with_empty_axes)
    return _reduce(ctx, data, axes, keepdims, "add", "reduce_sum")


@onnx_op("ReduceMean", 11, 13)
def ReduceMean_11(ctx, data, *, axes=None, keepdims=1):
    """ReduceMean-11/13 (axes attribute): Reduce add, then Map dividing by the count."""
    return _mean(ctx, data, _axes(ctx, data, axes, 0), keepdims)


@onnx_op("ReduceMean", 18)
def ReduceMean(ctx, data, axes=None, *, keepdims=1, noop_with_empty_axes=0):
    """ReduceMean (axes input): Reduce add, then Map dividing by the count."""
    return _mean(ctx, data, _axes(ctx, data, _axes_input(ctx, axes), noop_with_empty_axes),
                 keepdims)


@onnx_op("ReduceMax", 11, 12, 13)
def ReduceMax_11(ctx, data, *, axes=None, keepdims=1):
    """ReduceMax-11..13 (axes attribute): Reduce max over axes, init -inf."""
    return _reduce(ctx, data, _axes(ctx, data, axes, 0), keepdims, "max", "reduce_max")


@onnx_op("ReduceMax", 18, 20)
def ReduceMax(ctx, data, axes=None, *, keepdims=1, noop_with_empty_axes=0):
    """ReduceMax (axes input): Reduce max over axes, init -inf."""
    axes = _axes(ctx, data, _axes_input(ctx, axes), noop_with_empty_axes)
    return _reduce(ctx, data, axes, keepdims, "max", "reduce_max")


def _softmax(ctx, x, axes: tuple[int, ...]):
    """m = max over axes; e = exp(x - m); s = sum of e over axes; y = e / s."""
    shape = x.shape
    ident = identity_index(len(shape))
    kept_shape, kept = _kept(shape, axes)
    m = ctx.reduce(out_shape=kept_shape, init=Const(COMBINERS["max"]), extents=shape,
                   out_index=kept, combiner="max", expr=Read(x.name, ident),
                   label="softmax_max")
    shifted = Call("sub", (Read(x.name, ident), Read(m.name, kept)))
    e = ctx.map(shape, Call("exp", (shifted,)), label="softmax_exp")
    s = ctx.reduce(out_shape=kept_shape, init=Const(0.0), extents=shape, out_index=kept,
                   combiner="add", expr=Read(e.name, ident), label="softmax_sum")
    return ctx.map(shape, Call("div", (Read(e.name, ident), Read(s.name, kept))),
                   label="softmax_div")


@onnx_op("Softmax", 11)
def Softmax_11(ctx, input, *, axis=1):
    """Softmax-11: input coerced to 2-D at ``axis``; softmax over all dims from ``axis``.

    Lowers to Reduce max, Map exp(x - max), Reduce add, Map div.
    """
    rank = len(input.shape)
    if not -rank <= axis <= rank:
        raise ctx.shape_error(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    return _softmax(ctx, input, tuple(range(axis, rank)))


@onnx_op("Softmax", 13)
def Softmax(ctx, input, *, axis=-1):
    """Softmax-13: softmax over the single ``axis``.

    Lowers to Reduce max, Map exp(x - max), Reduce add, Map div.
    """
    try:
        axis = normalize_axis(axis, len(input.shape))
    except ValueError as e:
        raise ctx.shape_error(str(e)) from None
    return _softmax(ctx, input, (axis,))

