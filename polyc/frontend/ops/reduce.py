"""Reductions: core ``Reduce`` ops, with ``Map`` ops before or after for the norms and logs.

``axes`` is an attribute before opset 18 (ReduceSum: 13) and an optional constant int64
input from then on; negative axes count from the end. With no axes every axis is
reduced, unless ``noop_with_empty_axes`` reduces over no axis at all: each element is
then reduced alone (ReduceSumSquare gives x * x, ReduceL1 |x|, ReduceLogSum log(x), the
others x itself). Over an empty set (a zero-size axis) the result is the combiner's
identity, through the post-processing Map (ReduceLogSum: log(0) = -inf).

ReduceSum/Max/Min/Prod also take int64 and int32 (wrapping on overflow; max/min
start from the type's limits) and ReduceMax/Min bool (or / and). ArgMax and ArgMin
give int64 indices: a Reduce of the extreme value, then a Reduce of the first (or
last) position holding it, the loop iterator's value.
"""

from __future__ import annotations

from polyc.frontend.core import COMBINERS, FLOATS, Call, Const, Ix, Read, identity, identity_index
from polyc.frontend.ops.indexing import normalize_axis, size
from polyc.frontend.ops.registry import onnx_op


def _axes(ctx, data, axes, noop_with_empty_axes) -> tuple[int, ...]:
    """The sorted non-negative axes to reduce (empty: reduce over no axis)."""
    rank = len(data.shape)
    if axes is None or len(axes) == 0:
        return () if noop_with_empty_axes else tuple(range(rank))
    try:
        return tuple(sorted({normalize_axis(int(a), rank) for a in axes}))
    except ValueError as e:
        raise ctx.shape_error(str(e)) from None


def _axes_input(ctx, axes):
    """The values of the optional ``axes`` input (None when it is omitted)."""
    return None if axes is None else ctx.int_values(axes, "axes")


def kept(shape, axes) -> tuple[tuple[int, ...], tuple[Ix, ...]]:
    """Shape and loop-point index of a keepdims reduction of ``shape`` over ``axes``."""
    dims = tuple(1 if k in axes else d for k, d in enumerate(shape))
    index = tuple(Ix.constant(0) if k in axes else Ix.var(k) for k in range(len(shape)))
    return dims, index


def _square(expr):
    return Call("mul", (expr, expr))


def _result(shape, axes, keepdims):
    """The result shape of a reduction of ``shape`` over ``axes``, the result index at a
    loop point of ``shape``, and the index of a keepdims-shaped tensor read at a point
    of the result."""
    dims, index = kept(shape, axes)
    if keepdims:
        return dims, index, identity_index(len(dims))
    out_vars = iter(identity_index(len(shape) - len(axes)))
    back = tuple(Ix.constant(0) if k in axes else next(out_vars) for k in range(len(shape)))
    return (tuple(d for k, d in enumerate(dims) if k not in axes),
            tuple(ix for k, ix in enumerate(index) if k not in axes), back)


def reduce_over(ctx, data, axes, keepdims, combiner: str, label: str, *, pre=None, post=None):
    """``post(combiner over axes of pre(data))``: a Reduce over data's shape (a Map of
    ``post(pre(x))``, or a View, when there is no axis), then a Map applying ``post``.

    ``pre`` and ``post`` are callables on expressions (or None).
    """
    x = Read(data.name, identity_index(len(data.shape)))
    if not axes and pre is None and post is None:
        return ctx.view(data, data.shape, label="identity")
    pre = pre or (lambda e: e)
    if not axes:
        return ctx.map(data.shape, post(pre(x)) if post else pre(x), label=label)
    dims, index, _ = _result(data.shape, axes, keepdims)
    total = ctx.reduce(out_shape=dims, init=identity(combiner, data.dtype),
                       extents=data.shape, out_index=index, combiner=combiner, expr=pre(x),
                       label=label)
    if post is None:
        return total
    return ctx.map(dims, post(Read(total.name, identity_index(len(dims)))),
                   label=f"{label}_post")


def mean_over(ctx, data, axes, keepdims):
    """ReduceSum then a Map dividing by the number of reduced elements."""
    count = float(size([data.shape[a] for a in axes]))
    return reduce_over(ctx, data, axes, keepdims, "add", "mean_sum",
                   post=(lambda e: Call("div", (e, Const(count)))) if axes else None)


def _log_sum_exp(ctx, data, axes, keepdims):
    """m = max over axes; c = m where finite, else 0; s = sum of exp(x - c) over axes;
    y = log(s) + c (y = x when there is no axis)."""
    if not axes:
        return ctx.view(data, data.shape, label="identity")
    x = Read(data.name, identity_index(len(data.shape)))
    kept_shape, kept_index = kept(data.shape, axes)
    m = ctx.reduce(out_shape=kept_shape, init=Const(COMBINERS["max"]), extents=data.shape,
                   out_index=kept_index, combiner="max", expr=x, label="logsumexp_max")
    m_read = Read(m.name, identity_index(len(kept_shape)))
    finite = Call("lt", (Call("abs", (m_read,)), Const(float("inf"))))
    shift = ctx.map(kept_shape, Call("select", (finite, m_read, Const(0.0))),
                    label="logsumexp_shift")
    exp = Call("exp", (Call("sub", (x, Read(shift.name, kept_index))),))
    dims, index, back = _result(data.shape, axes, keepdims)
    total = ctx.reduce(out_shape=dims, init=Const(0.0), extents=data.shape,
                       out_index=index, combiner="add", expr=exp, label="logsumexp_sum")
    log = Call("log", (Read(total.name, identity_index(len(dims))),))
    return ctx.map(dims, Call("add", (log, Read(shift.name, back))), label="logsumexp")


# (combiner, pre, post, label) of each reduction that is one Reduce plus elementwise Maps.
_KINDS = {
    "ReduceSum": ("add", None, None, "reduce_sum"),
    "ReduceMax": ("max", None, None, "reduce_max"),
    "ReduceMin": ("min", None, None, "reduce_min"),
    "ReduceProd": ("mul", None, None, "reduce_prod"),
    "ReduceL1": ("add", lambda e: Call("abs", (e,)), None, "reduce_l1"),
    "ReduceL2": ("add", _square, lambda e: Call("sqrt", (e,)), "reduce_l2"),
    "ReduceLogSum": ("add", None, lambda e: Call("log", (e,)), "reduce_log_sum"),
    "ReduceSumSquare": ("add", _square, None, "reduce_sum_square"),
}


def _kind(ctx, op: str, data, axes, keepdims):
    combiner, pre, post, label = _KINDS[op]
    return reduce_over(ctx, data, axes, keepdims, combiner, label, pre=pre, post=post)


def _attr_form(ctx, op, data, axes, keepdims):
    """A reduction before opset 18 (axes attribute, no noop_with_empty_axes)."""
    return _kind(ctx, op, data, _axes(ctx, data, axes, 0), keepdims)


def _input_form(ctx, op, data, axes, keepdims, noop_with_empty_axes):
    """A reduction from opset 18 on (ReduceSum: 13): axes input."""
    axes = _axes(ctx, data, _axes_input(ctx, axes), noop_with_empty_axes)
    return _kind(ctx, op, data, axes, keepdims)


@onnx_op("ReduceSum", 1, 11)
def ReduceSum_11(ctx, data, *, axes=None, keepdims=1):
    """ReduceSum-1/11 (axes attribute): Reduce add over axes, init 0."""
    return _attr_form(ctx, "ReduceSum", data, axes, keepdims)


@onnx_op("ReduceSum", 13)
def ReduceSum(ctx, data, axes=None, *, keepdims=1, noop_with_empty_axes=0):
    """ReduceSum (axes input): Reduce add over axes, init 0."""
    return _input_form(ctx, "ReduceSum", data, axes, keepdims, noop_with_empty_axes)


@onnx_op("ReduceMean", 1, 11, 13)
def ReduceMean_11(ctx, data, *, axes=None, keepdims=1):
    """ReduceMean-1..13 (axes attribute): Reduce add, then Map dividing by the count."""
    return mean_over(ctx, data, _axes(ctx, data, axes, 0), keepdims)


@onnx_op("ReduceMean", 18)
def ReduceMean(ctx, data, axes=None, *, keepdims=1, noop_with_empty_axes=0):
    """ReduceMean (axes input): Reduce add, then Map dividing by the count."""
    return mean_over(ctx, data, _axes(ctx, data, _axes_input(ctx, axes), noop_with_empty_axes),
                 keepdims)


@onnx_op("ReduceMax", 1, 11, 12, 13)
def ReduceMax_11(ctx, data, *, axes=None, keepdims=1):
    """ReduceMax-1..13 (axes attribute): Reduce max over axes, init -inf."""
    return _attr_form(ctx, "ReduceMax", data, axes, keepdims)


@onnx_op("ReduceMax", 18, 20)
def ReduceMax(ctx, data, axes=None, *, keepdims=1, noop_with_empty_axes=0):
    """ReduceMax (axes input): Reduce max over axes, init -inf."""
    return _input_form(ctx, "ReduceMax", data, axes, keepdims, noop_with_empty_axes)


@onnx_op("ReduceMin", 1, 11, 12, 13)
def ReduceMin_11(ctx, data, *, axes=None, keepdims=1):
    """ReduceMin-1..13 (axes attribute): Reduce min over axes, init +inf."""
    return _attr_form(ctx, "ReduceMin", data, axes, keepdims)


@onnx_op("ReduceMin", 18, 20)
def ReduceMin(ctx, data, axes=None, *, keepdims=1, noop_with_empty_axes=0):
    """ReduceMin (axes input): Reduce min over axes, init +inf."""
    return _input_form(ctx, "ReduceMin", data, axes, keepdims, noop_with_empty_axes)


@onnx_op("ReduceProd", 1, 11, 13)
def ReduceProd_11(ctx, data, *, axes=None, keepdims=1):
    """ReduceProd-1..13 (axes attribute): Reduce mul over axes, init 1."""
    return _attr_form(ctx, "ReduceProd", data, axes, keepdims)


@onnx_op("ReduceProd", 18)
def ReduceProd(ctx, data, axes=None, *, keepdims=1, noop_with_empty_axes=0):
    """ReduceProd (axes input): Reduce mul over axes, init 1."""
    return _input_form(ctx, "ReduceProd", data, axes, keepdims, noop_with_empty_axes)


@onnx_op("ReduceL1", 1, 11, 13)
def ReduceL1_11(ctx, data, *, axes=None, keepdims=1):
    """ReduceL1-1..13 (axes attribute): Reduce add of |x| over axes."""
    return _attr_form(ctx, "ReduceL1", data, axes, keepdims)


@onnx_op("ReduceL1", 18)
def ReduceL1(ctx, data, axes=None, *, keepdims=1, noop_with_empty_axes=0):
    """ReduceL1 (axes input): Reduce add of |x| over axes."""
    return _input_form(ctx, "ReduceL1", data, axes, keepdims, noop_with_empty_axes)


@onnx_op("ReduceL2", 1, 11, 13)
def ReduceL2_11(ctx, data, *, axes=None, keepdims=1):
    """ReduceL2-1..13 (axes attribute): Reduce add of x * x, then Map sqrt."""
    return _attr_form(ctx, "ReduceL2", data, axes, keepdims)


@onnx_op("ReduceL2", 18)
def ReduceL2(ctx, data, axes=None, *, keepdims=1, noop_with_empty_axes=0):
    """ReduceL2 (axes input): Reduce add of x * x, then Map sqrt."""
    return _input_form(ctx, "ReduceL2", data, axes, keepdims, noop_with_empty_axes)


@onnx_op("ReduceSumSquare", 1, 11, 13)
def ReduceSumSquare_11(ctx, data, *, axes=None, keepdims=1):
    """ReduceSumSquare-1..13 (axes attribute): Reduce add of x * x."""
    return _attr_form(ctx, "ReduceSumSquare", data, axes, keepdims)


@onnx_op("ReduceSumSquare", 18)
def ReduceSumSquare(ctx, data, axes=None, *, keepdims=1, noop_with_empty_axes=0):
    """ReduceSumSquare (axes input): Reduce add of x * x."""
    return _input_form(ctx, "ReduceSumSquare", data, axes, keepdims, noop_with_empty_axes)


@onnx_op("ReduceLogSum", 1, 11, 13)
def ReduceLogSum_11(ctx, data, *, axes=None, keepdims=1):
    """ReduceLogSum-1..13 (axes attribute): Reduce add, then Map log."""
    return _attr_form(ctx, "ReduceLogSum", data, axes, keepdims)


@onnx_op("ReduceLogSum", 18, 28)
def ReduceLogSum(ctx, data, axes=None, *, keepdims=1, noop_with_empty_axes=0):
    """ReduceLogSum (axes input): Reduce add, then Map log."""
    return _input_form(ctx, "ReduceLogSum", data, axes, keepdims, noop_with_empty_axes)


@onnx_op("ReduceLogSumExp", 1, 11, 13)
def ReduceLogSumExp_11(ctx, data, *, axes=None, keepdims=1):
    """ReduceLogSumExp-1..13 (axes attribute): Reduce max m, Map c = m if finite else 0,
    Reduce add of exp(x - c), Map log(sum) + c."""
    return _log_sum_exp(ctx, data, _axes(ctx, data, axes, 0), keepdims)


@onnx_op("ReduceLogSumExp", 18, 28)
def ReduceLogSumExp(ctx, data, axes=None, *, keepdims=1, noop_with_empty_axes=0):
    """ReduceLogSumExp (axes input): Reduce max m, Map c = m if finite else 0, Reduce add
    of exp(x - c), Map log(sum) + c."""
    axes = _axes(ctx, data, _axes_input(ctx, axes), noop_with_empty_axes)
    return _log_sum_exp(ctx, data, axes, keepdims)


def _arg_extreme(ctx, data, axis, keepdims, select_last_index, combiner: str):
    """ArgMax (``combiner`` max) or ArgMin (min) over ``axis``, as onnxruntime scans a
    row: the first element, then each later one that is strictly better (with
    ``select_last_index``: at least as good).

    m = combiner over axis of x, NaN left out (read as the identity); then the min (or
    max, for the last index) over axis of ``select(x == m, position, sentinel)``; a row
    whose first element is NaN gives 0. A position is the loop iterator's value
    (``ctx.positions``), not read from a table.
    """
    rank = len(data.shape)
    try:
        axis = normalize_axis(int(axis), rank)
    except ValueError as e:
        raise ctx.shape_error(str(e)) from None
    n = data.shape[axis]
    if n == 0:
        raise ctx.shape_error(f"axis {axis} is empty: no element to pick")
    x = Read(data.name, identity_index(rank))
    value = x
    if data.dtype in FLOATS:
        value = Call("select", (Call("eq", (x, x)), x, identity(combiner, data.dtype)))
    kept_shape, kept_index = kept(data.shape, (axis,))
    best = ctx.reduce(out_shape=kept_shape, init=identity(combiner, data.dtype),
                      extents=data.shape, out_index=kept_index, combiner=combiner,
                      expr=value, label=f"arg{combiner}_value")
    positions = ctx.positions(n)
    position = Read(positions.name, (Ix.var(axis),))
    pick = "max" if select_last_index else "min"
    sentinel = Const(-1 if select_last_index else n, "int64")
    is_best = Call("eq", (x, Read(best.name, kept_index)))
    dims, index, back = _result(data.shape, (axis,), keepdims)
    found = ctx.reduce(out_shape=dims, init=sentinel, extents=data.shape, out_index=index,
                       combiner=pick, expr=Call("select", (is_best, position, sentinel)),
                       label=f"arg{combiner}")
    if data.dtype not in FLOATS:
        return found
    head = Read(data.name, back)  # the row's first element
    nan_first = Call("not", (Call("eq", (head, head)),))
    found_here = Read(found.name, identity_index(len(dims)))
    return ctx.map(dims, Call("select", (nan_first, Const(0, "int64"), found_here)),
                   label=f"arg{combiner}_nan")


@onnx_op("ArgMax", 1, 11, 12, 13)
def ArgMax(ctx, data, *, axis=0, keepdims=1, select_last_index=0):
    """ArgMax: the int64 position of the maximum along ``axis`` (see :func:`_arg_extreme`)."""
    return _arg_extreme(ctx, data, axis, keepdims, select_last_index, "max")


@onnx_op("ArgMin", 1, 11, 12, 13)
def ArgMin(ctx, data, *, axis=0, keepdims=1, select_last_index=0):
    """ArgMin: the int64 position of the minimum along ``axis`` (see :func:`_arg_extreme`)."""
    return _arg_extreme(ctx, data, axis, keepdims, select_last_index, "min")
