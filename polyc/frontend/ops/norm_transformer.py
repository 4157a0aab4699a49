"""Row-wise normalisations of transformer models: Softmax, LogSoftmax, Hardmax,
LayerNormalization, RMSNormalization and LpNormalization, each a few core ``Reduce``
ops over the normalised axes and ``Map`` ops reading their (keepdims-shaped) results
back at every element of the row.

Before opset 13, Softmax, LogSoftmax and Hardmax coerce the input to 2-D at ``axis``:
they normalise over all the dims from ``axis`` on, as one flattened row.
"""

from __future__ import annotations

import math

from polyc.frontend.core import COMBINERS, Call, Const, Ix, Read, identity_index
from polyc.frontend.ops.indexing import broadcast_index, normalize_axis, size
from polyc.frontend.ops.reduce import kept
from polyc.frontend.ops.registry import onnx_op


def _axis(ctx, axis: int, rank: int) -> int:
    try:
        return normalize_axis(axis, rank)
    except ValueError as e:
        raise ctx.shape_error(str(e)) from None


def _coerced_axis(ctx, axis: int, rank: int) -> int:
    """``axis`` of a 2-D coercion: in ``[-rank, rank]``, made non-negative."""
    if not -rank <= axis <= rank:
        raise ctx.shape_error(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _row_reduce(ctx, expr, shape, axes, combiner: str, label: str):
    """The keepdims-shaped Reduce ``combiner`` over ``axes`` of ``expr`` (over ``shape``)."""
    kept_shape, kept_index = kept(shape, axes)
    return ctx.reduce(out_shape=kept_shape, init=Const(COMBINERS[combiner]), extents=shape,
                      out_index=kept_index, combiner=combiner, expr=expr, label=label)


def _shifted(ctx, x, axes, label: str):
    """``x - max over axes of x`` (an expression) and the index reading a row result."""
    ident = identity_index(len(x.shape))
    _, kept_index = kept(x.shape, axes)
    m = _row_reduce(ctx, Read(x.name, ident), x.shape, axes, "max", f"{label}_max")
    return Call("sub", (Read(x.name, ident), Read(m.name, kept_index))), kept_index


def _softmax(ctx, x, axes: tuple[int, ...]):
    """m = max over axes; e = exp(x - m); s = sum of e over axes; y = e / s."""
    ident = identity_index(len(x.shape))
    shifted, kept_index = _shifted(ctx, x, axes, "softmax")
    e = ctx.map(x.shape, Call("exp", (shifted,)), label="softmax_exp")
    s = _row_reduce(ctx, Read(e.name, ident), x.shape, axes, "add", "softmax_sum")
    return ctx.map(x.shape, Call("div", (Read(e.name, ident), Read(s.name, kept_index))),
                   label="softmax_div")


def _log_softmax(ctx, x, axes: tuple[int, ...]):
    """m = max over axes; s = sum of exp(x - m) over axes; y = (x - m) - log(s)."""
    shifted, kept_index = _shifted(ctx, x, axes, "logsoftmax")
    s = _row_reduce(ctx, Call("exp", (shifted,)), x.shape, axes, "add", "logsoftmax_sum")
    log_s = Call("log", (Read(s.name, kept_index),))
    return ctx.map(x.shape, Call("sub", (shifted, log_s)), label="logsoftmax")


@onnx_op("Softmax", 1, 11)
def Softmax_11(ctx, input, *, axis=1):
    """Softmax-1/11: softmax over all dims from ``axis`` (the 2-D coercion).

    Lowers to Reduce max, Map exp(x - max), Reduce add, Map div.
    """
    rank = len(input.shape)
    return _softmax(ctx, input, tuple(range(_coerced_axis(ctx, axis, rank), rank)))


@onnx_op("Softmax", 13)
def Softmax(ctx, input, *, axis=-1):
    """Softmax-13: softmax over the single ``axis``.

    Lowers to Reduce max, Map exp(x - max), Reduce add, Map div.
    """
    return _softmax(ctx, input, (_axis(ctx, axis, len(input.shape)),))


@onnx_op("LogSoftmax", 1, 11)
def LogSoftmax_11(ctx, input, *, axis=1):
    """LogSoftmax-1/11: log-softmax over all dims from ``axis`` (the 2-D coercion).

    Lowers to Reduce max, Reduce add of exp(x - max), Map (x - max) - log(sum).
    """
    rank = len(input.shape)
    return _log_softmax(ctx, input, tuple(range(_coerced_axis(ctx, axis, rank), rank)))


@onnx_op("LogSoftmax", 13)
def LogSoftmax(ctx, input, *, axis=-1):
    """LogSoftmax-13: log-softmax over the single ``axis``.

    Lowers to Reduce max, Reduce add of exp(x - max), Map (x - max) - log(sum).
    """
    return _log_softmax(ctx, input, (_axis(ctx, axis, len(input.shape)),))


def iota(ctx, n: int):
    """A 1-D tensor of at least ``n`` elements whose element ``i`` is ``float(i)``.

    Small: ones[n] = 1, then iota[i] = sum over t < n of ones[i - 1 - t] read with fill 0
    (the count of t <= i - 1), a Reduce over n * n points. Larger: iota[q*b + r] =
    b * iota_q[q] + iota_b[r] over a (q, b) grid seen as 1-D, with b about sqrt(n).
    """
    if n <= 64:
        ones = ctx.map((n,), Const(1.0), label="iota_ones")
        below = Read(ones.name, (Ix(((0, 1), (1, -1)), -1),), "fill", 0.0)
        return ctx.reduce(out_shape=(n,), init=Const(0.0), extents=(n, n),
                          out_index=(Ix.var(0),), combiner="add", expr=below, label="iota")
    b = math.isqrt(n - 1) + 1
    q = -(-n // b)
    high, low = iota(ctx, q), iota(ctx, b)
    expr = Call("add", (Call("mul", (Const(float(b)), Read(high.name, (Ix.var(0),)))),
                        Read(low.name, (Ix.var(1),))))
    grid = ctx.map((q, b), expr, label="iota_grid")
    return ctx.view(grid, (q * b,), label="iota")


def _hardmax(ctx, x, axis: int):
    """m = max over axis; first = min over axis of (position if x == m else inf), the
    first position of the maximum; y = 1.0 where position == first, else 0.0.

    A row holding NaN has no element equal to its maximum: it gives all zeros.
    """
    rank = len(x.shape)
    ident = identity_index(rank)
    _, kept_index = kept(x.shape, (axis,))
    m = _row_reduce(ctx, Read(x.name, ident), x.shape, (axis,), "max", "hardmax_max")
    position = Read(iota(ctx, x.shape[axis]).name, (Ix.var(axis),))
    is_max = Call("eq", (Read(x.name, ident), Read(m.name, kept_index)))
    candidate = Call("select", (is_max, position, Const(float("inf"))))
    first = _row_reduce(ctx, candidate, x.shape, (axis,), "min", "hardmax_first")
    is_first = Call("eq", (position, Read(first.name, kept_index)))
    return ctx.map(x.shape, Call(f"cast_{x.dtype}", (is_first,)), label="hardmax")


@onnx_op("Hardmax", 1, 11)
def Hardmax_11(ctx, input, *, axis=1):
    """Hardmax-1/11: 1.0 at the first maximum of each row of the 2-D coercion at ``axis``.

    The input is seen as (outer, inner) through a reshape View, lowered as Hardmax-13
    over axis 1 (Reduce max, Reduce min of the positions of the maximum, Map), and seen
    back in the input's shape.
    """
    rank = len(input.shape)
    axis = _coerced_axis(ctx, axis, rank)
    rows = (size(input.shape[:axis]), size(input.shape[axis:]))
    flat = ctx.view(input, rows, label="hardmax_rows")
    return ctx.view(_hardmax(ctx, flat, 1), input.shape, label="hardmax_shape")


@onnx_op("Hardmax", 13)
def Hardmax(ctx, input, *, axis=-1):
    """Hardmax-13: 1.0 at the first maximum along ``axis``, else 0.0.

    Reduce max, Reduce min over the positions holding the maximum (positions from an
    iota tensor), then a Map comparing each position with that first one.
    """
    return _hardmax(ctx, input, _axis(ctx, axis, len(input.shape)))


def _rows_from(ctx, X, axis: int, stash_type: int):
    """The normalised axes (``axis`` on), X's identity index, the keepdims shape and
    index of a row result, and the row length as a Const; float32 only."""
    if stash_type != 1:
        raise ctx.unsupported(f"stash_type={stash_type}: polyc computes in float32 only "
                              "(stash_type=1)")
    rank = len(X.shape)
    axes = tuple(range(_axis(ctx, axis, rank), rank))
    kept_shape, kept_index = kept(X.shape, axes)
    count = Const(float(size([X.shape[a] for a in axes])))
    return axes, identity_index(rank), kept_shape, kept_index, count


def _inverse_root_mean(ctx, squares, count: Const, epsilon: float, kept_shape, label: str):
    """Per row, 1 / sqrt(squares / count + epsilon) (``squares``: keepdims-shaped)."""
    ident = identity_index(len(kept_shape))
    mean_eps = Call("add", (Call("div", (Read(squares.name, ident), count)),
                            Const(float(epsilon))))
    return ctx.map(kept_shape, Call("div", (Const(1.0), Call("sqrt", (mean_eps,)))),
                   label=label)


@onnx_op("LayerNormalization", 17)
def LayerNormalization(ctx, X, Scale, B=None, *, axis=-1, epsilon=1e-5, stash_type=1):
    """LayerNormalization-17 over the dims from ``axis`` on (n elements per row):

    mean = (Reduce add of x) / n; var = (Reduce add of (x - mean)^2) / n;
    inv = 1 / sqrt(var + epsilon); Y = (x - mean) * inv * Scale + B, where Scale and B
    broadcast to X. The outputs Mean and InvStdDev are ``mean`` and ``inv`` (keepdims
    shape). Computed in float32: ``stash_type`` must be 1.
    """
    axes, ident, kept_shape, kept_index, count = _rows_from(ctx, X, axis, stash_type)
    x = Read(X.name, ident)
    total = _row_reduce(ctx, x, X.shape, axes, "add", "layernorm_sum")
    mean = ctx.map(kept_shape, Call("div", (Read(total.name, ident), count)),
                   label="layernorm_mean")
    d = Call("sub", (x, Read(mean.name, kept_index)))
    squares = _row_reduce(ctx, Call("mul", (d, d)), X.shape, axes, "add", "layernorm_var")
    inv = _inverse_root_mean(ctx, squares, count, epsilon, kept_shape, "layernorm_inv")
    y = Call("mul", (Call("mul", (d, Read(inv.name, kept_index))),
                     _broadcast_read(ctx, Scale, X.shape, "Scale")))
    if B is not None:
        y = Call("add", (y, _broadcast_read(ctx, B, X.shape, "B")))
    return ctx.map(X.shape, y, label="layernorm"), mean, inv


@onnx_op("RMSNormalization", 23)
def RMSNormalization(ctx, X, scale, *, axis=-1, epsilon=1e-5, stash_type=1):
    """RMSNormalization-23 over the dims from ``axis`` on (n elements per row):
    inv = 1 / sqrt((Reduce add of x^2) / n + epsilon); Y = x * inv * scale, where scale
    broadcasts to X. Computed in float32: ``stash_type`` must be 1."""
    axes, ident, kept_shape, kept_index, count = _rows_from(ctx, X, axis, stash_type)
    x = Read(X.name, ident)
    squares = _row_reduce(ctx, Call("mul", (x, x)), X.shape, axes, "add", "rmsnorm_squares")
    inv = _inverse_root_mean(ctx, squares, count, epsilon, kept_shape, "rmsnorm_inv")
    y = Call("mul", (Call("mul", (x, Read(inv.name, kept_index))),
                     _broadcast_read(ctx, scale, X.shape, "scale")))
    return ctx.map(X.shape, y, label="rmsnorm")


@onnx_op("LpNormalization", 1, 22)
def LpNormalization(ctx, input, *, axis=-1, p=2):
    """LpNormalization: x divided by the L1 (``p=1``: Reduce add of |x|) or L2 (``p=2``:
    sqrt of Reduce add of x^2) norm along ``axis``; a zero norm gives 0, not NaN."""
    if p not in (1, 2):
        raise ctx.unsupported(f"p={p} (only 1 and 2)")
    rank = len(input.shape)
    axes = (_axis(ctx, axis, rank),)
    ident = identity_index(rank)
    kept_shape, kept_index = kept(input.shape, axes)
    x = Read(input.name, ident)
    term = Call("abs", (x,)) if p == 1 else Call("mul", (x, x))
    total = _row_reduce(ctx, term, input.shape, axes, "add", "lpnorm_sum")
    norm = Read(total.name, ident) if p == 1 else Call("sqrt", (Read(total.name, ident),))
    norm = ctx.map(kept_shape, norm, label="lpnorm_norm")
    n = Read(norm.name, kept_index)
    return ctx.map(input.shape, Call("select", (Call("eq", (n, Const(0.0))), Const(0.0),
                                                Call("div", (x, n)))), label="lpnorm")


def _broadcast_read(ctx, tensor, shape, role: str) -> Read:
    try:
        return Read(tensor.name, broadcast_index(tensor.shape, shape))
    except ValueError:
        raise ctx.shape_error(f"{role} {list(tensor.shape)} does not broadcast "
                              f"to X {list(shape)}") from None
