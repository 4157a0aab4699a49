"""Pooling: one Map over the whole window, or one pass per spatial dim (pooling is
separable).

A window of a few elements (:data:`UNROLLED_WINDOW` along each dim, at most
:data:`WINDOW_ELEMENTS` in all) is combined in the body of one Map over the output, in
row-major order. A larger max or sum over the window ``(k1, .., kr)`` is a max or sum
over ``k1`` of the max or sum over ``k2`` ..: each spatial dim ``d``, from the last to
the first, is pooled by a Map (a short window) or a Reduce with one reduction loop (the
kernel offset ``k``) ``T'[.., o, ..] = combine_k T[.., o*s + k*dil - begin, ..]``.
Reads that may leave the input are bounded reads whose fill is the padding value (-inf
for a max, 0 for a sum). A dim with kernel 1, stride 1 and no pads needs no pass.
Averages divide the sum by the window's element count per output position, a product
over the dims of 1-D counts (a constant where it does not vary). Global pools are
reductions over every spatial dim.
"""

from __future__ import annotations

import itertools
import math

from polyc.frontend.core import Call, Const, Ix, Read, identity, identity_index, value_range
from polyc.frontend.ops.reduce import mean_over, reduce_over
from polyc.frontend.ops.registry import onnx_op
from polyc.frontend.ops.window import Window, tap_read, window


# What MaxPool reads in the padding: onnxruntime's MaxPool gives the lowest float32 for
# a window wholly in the padding (polyc gave -inf: graph fuzzer seed 2795), and the max
# of the elements inside otherwise, -inf included; the lowest value of other dtypes.
def lowest(dtype: str) -> float | int:
    """The lowest finite value of ``dtype``."""
    return value_range(dtype)[0]
# Windows of at most this many elements along a dim are combined in one statement,
# and all the dims' windows in one when they have at most WINDOW_ELEMENTS elements:
# a 2x2 max pool of 64 channels-last channels at 224x224 took 1.05 ms as two passes
# (one per dim, through a 6.4 MB temporary), onnxruntime 0.58 ms.
UNROLLED_WINDOW = 16
WINDOW_ELEMENTS = 49


@onnx_op("MaxPool", 1, 8, 10, 11, 12, 22)
def MaxPool(ctx, X, *, auto_pad="NOTSET", ceil_mode=0, dilations=None, kernel_shape=None,
            pads=None, storage_order=0, strides=None):
    """MaxPool: Y[n, c, o..] = max_k X[n, c, o*s + k*d - begin ..] (the lowest float in
    the padding: :func:`lowest`), one Reduce max per spatial dim. The Indices output
    (since version 8): :func:`_argmax_indices`. ``ceil_mode`` and ``dilations`` exist
    since version 10."""
    win = _window(ctx, X, kernel_shape, strides=strides, dilations=dilations, pads=pads,
                  auto_pad=auto_pad, ceil_mode=ceil_mode)
    Y = _pool(ctx, X, win, "max", lowest(X.dtype), "max_pool")
    if ctx.n_outputs < 2:
        return Y
    return Y, _argmax_indices(ctx, X, Y, win, storage_order)


def _argmax_indices(ctx, X, Y, win: Window, storage_order: int):
    """MaxPool's Indices: per output element, the first element of its window (in
    row-major order, padding left out) that equals the max, as its flat index into X
    (int64; ``storage_order=1``: the spatial dims in column-major order, as
    onnxruntime numbers them). One Reduce min over the output and the window of
    ``select(x == max and inside, position in the plane, plane size)``."""
    rank, spatial = len(X.shape), X.shape[2:]
    if storage_order not in (0, 1) or storage_order and len(spatial) != 2:
        raise ctx.unsupported(f"storage_order={storage_order} (0, or 1 for 2-D pooling)")
    out = Y.shape
    plane = math.prod(spatial)
    key, inside = Const(0, "int64"), None
    for d in range(len(spatial)):
        o = Read(ctx.positions(out[2 + d]).name, (Ix.var(2 + d),))
        k = Read(ctx.positions(win.kernel[d]).name, (Ix.var(rank + d),))
        at = Call("add", (Call("add", (Call("mul", (o, Const(win.strides[d], "int64"))),
                                       Call("mul", (k, Const(win.dilations[d], "int64"))))),
                          Const(-win.begin[d], "int64")))
        within = Call("and", (Call("ge", (at, Const(0, "int64"))),
                              Call("lt", (at, Const(spatial[d], "int64")))))
        inside = within if inside is None else Call("and", (inside, within))
        key = Call("add", (Call("mul", (key, Const(spatial[d], "int64"))), at))
    index = identity_index(2) + win.index(2, rank)
    x = Read(X.name, index, "fill", lowest(X.dtype))
    hit = Call("and", (inside, Call("eq", (x, Read(Y.name, identity_index(rank))))))
    first = ctx.reduce(out_shape=out, init=Const(plane, "int64"),
                       extents=out + tuple(win.kernel), out_index=identity_index(rank),
                       combiner="min", expr=Call("select", (hit, key, Const(plane, "int64"))),
                       label="max_pool_index")
    found = Read(first.name, identity_index(rank))
    if storage_order:  # (h, w) -> w * H + h
        height, width = (Const(v, "int64") for v in spatial)
        found = Call("add", (Call("mul", (Call("mod", (found, width)), height)),
                             Call("div", (found, width))))
    n, c = (Read(ctx.positions(out[k]).name, (Ix.var(k),)) for k in range(2))
    planes = Call("add", (Call("mul", (n, Const(out[1], "int64"))), c))
    return ctx.map(out, Call("add", (Call("mul", (planes, Const(plane, "int64"))), found)),
                   label="max_pool_indices")


@onnx_op("AveragePool", 1, 7, 10, 11)
def AveragePool_11(ctx, X, *, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0,
                   kernel_shape=None, pads=None, strides=None):
    """AveragePool-1..11 (no dilations; ``count_include_pad`` since 7, ``ceil_mode``
    since 10): see :func:`AveragePool`."""
    return AveragePool(ctx, X, auto_pad=auto_pad, ceil_mode=ceil_mode,
                       count_include_pad=count_include_pad, kernel_shape=kernel_shape,
                       pads=pads, strides=strides)


@onnx_op("AveragePool", 19, 22)
def AveragePool(ctx, X, *, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0,
                dilations=None, kernel_shape=None, pads=None, strides=None):
    """AveragePool: Y[n, c, o..] = sum_k X[n, c, o*s + k*d - begin ..] / count(o..): one
    Reduce add per spatial dim, then a Map dividing by the count.

    The count is the number of window elements inside X (``count_include_pad=0``), or
    inside X and its pads (``1``; a ``ceil_mode`` window reaching past the end pads counts
    only what lies within them, as in onnxruntime).
    """
    if count_include_pad not in (0, 1):
        raise ctx.unsupported(f"count_include_pad={count_include_pad} (expected 0 or 1)")
    win = _window(ctx, X, kernel_shape, strides=strides, dilations=dilations, pads=pads,
                  auto_pad=auto_pad, ceil_mode=ceil_mode)
    total = _pool(ctx, X, win, "add", 0.0, "average_pool")
    divisor, counts = 1, []
    for d, size in enumerate(X.shape[2:]):
        lo, hi = (-win.begin[d], size + win.end[d]) if count_include_pad else (0, size)
        per_output = _window_counts(win, d, lo, hi)
        if len(set(per_output)) == 1:
            divisor *= per_output[0]
        else:
            counts.append(Read(_count_tensor(ctx, win, d, lo, hi, X.dtype).name,
                               (Ix.var(2 + d),)))
    denominator = Const(float(divisor))
    for count in counts:
        denominator = Call("mul", (denominator, count))
    value = Read(total.name, identity_index(len(total.shape)))
    return ctx.map(total.shape, Call("div", (value, denominator)), label="average_pool_div")


@onnx_op("LpPool", 2, 11)
def LpPool_11(ctx, X, *, auto_pad="NOTSET", kernel_shape=None, p=2, pads=None, strides=None):
    """LpPool-2/11 (no ceil_mode, no dilations): see :func:`LpPool`."""
    return LpPool(ctx, X, auto_pad=auto_pad, kernel_shape=kernel_shape, p=p, pads=pads,
                  strides=strides)


@onnx_op("LpPool", 18, 22)
def LpPool(ctx, X, *, auto_pad="NOTSET", ceil_mode=0, dilations=None, kernel_shape=None, p=2,
           pads=None, strides=None):
    """LpPool: Y[n, c, o..] = (sum_k |X[n, c, o*s + k*d - begin ..]|^p)^(1/p) (0 in the
    padding): one Reduce add per spatial dim (the first reading ``|x|^p``), then a Map
    taking the root."""
    win = _window(ctx, X, kernel_shape, strides=strides, dilations=dilations, pads=pads,
                  auto_pad=auto_pad, ceil_mode=ceil_mode)
    power, root = _lp(ctx, p)
    total = _pool(ctx, X, win, "add", 0.0, "lp_pool", first=power)
    return ctx.map(total.shape, root(Read(total.name, identity_index(len(total.shape)))),
                   label="lp_pool_root")


@onnx_op("GlobalAveragePool", 1, 22)
def GlobalAveragePool(ctx, X):
    """GlobalAveragePool: ReduceMean over every spatial dim, kept as size 1."""
    return mean_over(ctx, X, _spatial_axes(ctx, X), 1)


@onnx_op("GlobalMaxPool", 1, 22)
def GlobalMaxPool(ctx, X):
    """GlobalMaxPool: Reduce max over every spatial dim, kept as size 1."""
    return reduce_over(ctx, X, _spatial_axes(ctx, X), 1, "max", "global_max_pool")


@onnx_op("GlobalLpPool", 2, 22)
def GlobalLpPool(ctx, X, *, p=2):
    """GlobalLpPool: (sum over every spatial dim of |x|^p)^(1/p): a Map |x|^p, a Reduce
    add over the spatial dims (kept as size 1), a Map taking the root."""
    power, root = _lp(ctx, p)
    powered = ctx.map(X.shape, power(Read(X.name, identity_index(len(X.shape)))),
                      label="lp_pool_power")
    total = reduce_over(ctx, powered, _spatial_axes(ctx, X), 1, "add", "global_lp_pool")
    return ctx.map(total.shape, root(Read(total.name, identity_index(len(total.shape)))),
                   label="lp_pool_root")


def _spatial_axes(ctx, X) -> tuple[int, ...]:
    if len(X.shape) < 3:
        raise ctx.shape_error(f"X {list(X.shape)} must be (batch, channels, spatial..) with "
                              "at least one spatial dim")
    return tuple(range(2, len(X.shape)))


def _window(ctx, X, kernel_shape, **attributes) -> Window:
    """The pooling window over X's spatial dims; ``kernel_shape`` is required."""
    r = len(_spatial_axes(ctx, X))
    if kernel_shape is None:
        raise ctx.shape_error("the attribute kernel_shape is required")
    kernel = tuple(int(k) for k in kernel_shape)
    if len(kernel) != r or any(k < 1 for k in kernel):
        raise ctx.shape_error(f"kernel_shape {list(kernel)} must be {r} positive values")
    return window(ctx, X.shape[2:], kernel, **attributes)


def _lp(ctx, p):
    """The maps ``x -> |x|^p`` and ``s -> s^(1/p)`` (abs/identity for p=1, square/sqrt
    for p=2)."""
    if not isinstance(p, int) or p < 1:
        raise ctx.unsupported(f"p={p} (expected a positive integer)")
    if p == 1:
        return (lambda x: Call("abs", (x,))), (lambda s: s)
    if p == 2:
        return (lambda x: Call("mul", (x, x))), (lambda s: Call("sqrt", (s,)))
    return ((lambda x: Call("pow", (Call("abs", (x,)), Const(float(p))))),
            (lambda s: Call("pow", (s, Const(1.0 / p)))))


def _pool(ctx, X, win: Window, combiner: str, fill: float, label: str, first=None):
    """X pooled by ``combiner`` over ``win``: one Map over the whole window when every
    dim's window is short (:data:`UNROLLED_WINDOW` elements along a dim, at most
    :data:`WINDOW_ELEMENTS` in all), else one pass per spatial dim that needs one (the
    last dim first), a Map or a Reduce; ``first`` maps the elements of X as they are
    first read."""
    dims = [d for d in range(win.rank) if not _trivial(win, d, X.shape[2 + d])]
    if dims and all(win.kernel[d] <= UNROLLED_WINDOW for d in dims) and \
            math.prod(win.kernel[d] for d in dims) <= WINDOW_ELEMENTS:
        return _pool_map(ctx, X, win, dims, combiner, fill, label, first or (lambda read: read))
    current = X
    for d in reversed(dims):
        axis = 2 + d
        shape = current.shape[:axis] + (win.out[d],) + current.shape[axis + 1:]
        mapped = first if first is not None and current is X else (lambda read: read)
        if win.kernel[d] <= UNROLLED_WINDOW:
            current = _pool_map(ctx, current, win, [d], combiner, fill, label, mapped)
            continue
        index = list(identity_index(len(shape)))
        index[axis] = Ix(((axis, win.strides[d]), (len(shape), win.dilations[d])),
                         -win.begin[d])
        bounded = not win.fits(d, current.shape[axis])
        read = Read(current.name, tuple(index), "fill" if bounded else "error", fill)
        current = ctx.reduce(out_shape=shape, init=identity(combiner, current.dtype),
                             extents=shape + (win.kernel[d],),
                             out_index=identity_index(len(shape)), combiner=combiner,
                             expr=mapped(read), label=label)
    if first is not None and current is X:
        current = ctx.map(X.shape, first(Read(X.name, identity_index(len(X.shape)))),
                          label=label)
    return current


def _trivial(win: Window, d: int, size: int) -> bool:
    """Whether spatial dim ``d`` (of extent ``size``) needs no pooling pass."""
    return (win.kernel[d] == 1 and win.strides[d] == 1 and win.out[d] == size
            and win.fits(d, size))


def _pool_map(ctx, src, win: Window, dims: list[int], combiner: str, fill: float,
              label: str, mapped):
    """``src`` pooled along the spatial dims ``dims`` by one Map: ``combine(..
    combine(init, mapped(first element)) .., mapped(last element))`` over the window's
    elements in row-major order (a dim's alone: the Reduce's order, the same results bit
    for bit); only the elements whose reads may leave ``src`` are bounded reads
    (``fill`` outside)."""
    shape = list(src.shape)
    for d in dims:
        shape[2 + d] = win.out[d]
    total = identity(combiner, src.dtype)
    for offsets in itertools.product(*(range(win.kernel[d]) for d in dims)):
        read = tap_read(src, win, dict(zip(dims, offsets)), fill)
        total = Call(combiner, (total, mapped(read)))
    return ctx.map(tuple(shape), total, label=label)


def _window_counts(win: Window, d: int, lo: int, hi: int) -> list[int]:
    """Per output position of dim ``d``, how many window elements lie in ``[lo, hi)``."""
    s, dil, b = win.strides[d], win.dilations[d], win.begin[d]
    return [sum(lo <= o * s + k * dil - b < hi for k in range(win.kernel[d]))
            for o in range(win.out[d])]


def _count_tensor(ctx, win: Window, d: int, lo: int, hi: int, dtype: str):
    """``_window_counts`` (in the float ``dtype``) computed at run time: a Map of ones
    over ``[lo, hi)`` and a Reduce ``count[o] = sum_k ones[o*s + k*dil - begin - lo]``
    (0 outside)."""
    ones = ctx.map((hi - lo,), Const(1.0, dtype), label="pool_ones")
    index = Ix(((0, win.strides[d]), (1, win.dilations[d])), -win.begin[d] - lo)
    return ctx.reduce(out_shape=(win.out[d],), init=Const(0.0),
                      extents=(win.out[d], win.kernel[d]), out_index=(Ix.var(0),),
                      combiner="add", expr=Read(ones.name, (index,), "fill", 0.0),
                      label="pool_count")
