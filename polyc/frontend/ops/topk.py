"""TopK: the k largest (or smallest) elements along an axis, and their indices.

Sorting has no affine loop nest, but ranking does: the rank of element ``i`` of a row
is the number of elements that come before it in the order asked for (ties: the lower
index first, as onnxruntime; NaN counts as larger than every number, and among NaNs
the lower index first, so the ranks of a row are a permutation). One
Reduce counts them over ``(row, i, j)``; then output ``kk`` of a row is the element
whose rank is ``kk``: a Reduce max over ``i`` of ``select(rank == kk, x_i, lowest)``,
and one of ``i`` itself. Cost: ``n^2`` comparisons per row of ``n`` (rows of at most
:data:`MAX_ROW` elements).
"""

from __future__ import annotations

from polyc.frontend.core import FLOATS, Call, Const, Ix, Read, identity, identity_index
from polyc.frontend.ops.indexing import normalize_axis
from polyc.frontend.ops.registry import onnx_op

MAX_ROW = 1 << 14  # n^2 = 2.7e8 comparisons per row


@onnx_op("TopK", 1)
def TopK_1(ctx, X, *, axis=-1, k=None):
    """TopK-1: ``k`` an attribute, the largest, sorted."""
    if k is None:
        raise ctx.shape_error("the attribute k is required")
    return _top(ctx, X, int(k), axis, largest=True)


@onnx_op("TopK", 10)
def TopK_10(ctx, X, K, *, axis=-1):
    """TopK-10: ``K`` a constant input, the largest, sorted."""
    return TopK(ctx, X, K, axis=axis)


@onnx_op("TopK", 11, 24)
def TopK(ctx, X, K, *, axis=-1, largest=1, sorted=1):  # noqa: A002 - ONNX's name
    """TopK: Values and Indices of the ``K`` (a constant) largest (``largest=0``:
    smallest) elements along ``axis``, in order (also with ``sorted=0``, which leaves
    the order to the implementation)."""
    values = ctx.int_values(K, "K")
    if len(values) != 1:
        raise ctx.shape_error(f"K must hold one value, got {list(values)}")
    return _top(ctx, X, int(values[0]), axis, largest=bool(largest))


def _top(ctx, X, k: int, axis: int, *, largest: bool):
    rank = len(X.shape)
    try:
        axis = normalize_axis(axis, rank)
    except ValueError as e:
        raise ctx.shape_error(str(e)) from None
    n = X.shape[axis]
    if not 0 <= k <= n:
        raise ctx.shape_error(f"k={k} is not within the axis's {n} elements")
    if n > MAX_ROW:
        raise ctx.unsupported(f"rows of {n} elements (at most {MAX_ROW}: TopK ranks every "
                              "pair of a row)")
    inner = rank  # the loop variable of the second element of a pair
    along = list(identity_index(rank))
    along[axis] = Ix.var(inner)
    x_i, x_j = Read(X.name, identity_index(rank)), Read(X.name, tuple(along))
    positions = ctx.positions(n).name
    i, j = Read(positions, (Ix.var(axis),)), Read(positions, (Ix.var(inner),))
    one, zero = Const(1, "int64"), Const(0, "int64")
    ahead = _before(x_j, x_i, j, i, largest, X.dtype in FLOATS)
    ranks = ctx.reduce(out_shape=X.shape, init=zero, extents=X.shape + (n,),
                       out_index=identity_index(rank), combiner="add",
                       expr=Call("select", (ahead, one, zero)), label="topk_rank")
    out_shape = X.shape[:axis] + (k,) + X.shape[axis + 1:]
    wanted = Read(ctx.positions(k).name, (Ix.var(axis),))
    chosen = Call("eq", (Read(ranks.name, tuple(along)), wanted))
    lowest = identity("max", X.dtype)
    values = ctx.reduce(out_shape=out_shape, init=lowest, extents=out_shape + (n,),
                        out_index=identity_index(rank), combiner="max",
                        expr=Call("select", (chosen, x_j, lowest)), label="topk_values")
    none = Const(-1, "int64")
    indices = ctx.reduce(out_shape=out_shape, init=none, extents=out_shape + (n,),
                         out_index=identity_index(rank), combiner="max",
                         expr=Call("select", (chosen, j, none)), label="topk_indices")
    return values, indices


def _before(a, b, a_index, b_index, largest: bool, floats: bool):
    """Whether element ``a`` comes before ``b`` (bool): larger (smaller), or equal at a
    lower index; for floats NaN is the largest value."""
    strictly = Call("gt" if largest else "lt", (a, b))
    tie = Call("and", (Call("eq", (a, b)), Call("lt", (a_index, b_index))))
    order = Call("or", (strictly, tie))
    if not floats:
        return order
    nan_a, nan_b = (Call("not", (Call("eq", (v, v)),)) for v in (a, b))
    both_nan = Call("and", (nan_a, nan_b))
    nan_first = Call("and", (nan_a, Call("not", (nan_b,)))) if largest else \
        Call("and", (nan_b, Call("not", (nan_a,))))
    return Call("or", (Call("or", (nan_first, Call("and", (both_nan, Call(
        "lt", (a_index, b_index)))))), order))
