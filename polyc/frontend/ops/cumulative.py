"""Running sums and products along an axis: CumSum and CumProd.

``out[.., i, ..] = combine over k of x[.., k, ..]`` for the k before i (``exclusive``:
strictly before; ``reverse``: after instead). One Reduce over the box of the output and
a k axis, whose body keeps x[k] where k is in i's range and the combiner's identity
elsewhere (positions give i and k): exact dependences and no new core op, at a cost
quadratic in the axis length (n^2 combines for n elements along it).
"""

from __future__ import annotations

from polyc.frontend.core import Call, Ix, Read, identity, identity_index
from polyc.frontend.ops.indexing import normalize_axis
from polyc.frontend.ops.registry import onnx_op

# which k enter out[i]: (exclusive, reverse) -> comparison of k with i
_RANGE = {(0, 0): "le", (1, 0): "lt", (0, 1): "ge", (1, 1): "gt"}


@onnx_op("CumSum", 11, 14)
def CumSum(ctx, x, axis, *, exclusive=0, reverse=0):
    """CumSum: running sums along the constant ``axis`` (see the module docstring)."""
    return _running(ctx, x, axis, "add", exclusive, reverse, "cumsum")


@onnx_op("CumProd", 26)
def CumProd(ctx, x, axis, *, exclusive=0, reverse=0):
    """CumProd: running products along the constant ``axis``."""
    return _running(ctx, x, axis, "mul", exclusive, reverse, "cumprod")


def _running(ctx, x, axis_tensor, combiner: str, exclusive: int, reverse: int, label: str):
    values = ctx.int_values(axis_tensor, "axis")
    if len(values) != 1:
        raise ctx.shape_error(f"axis must hold one value, got {list(values)}")
    rank = len(x.shape)
    try:
        axis = normalize_axis(int(values[0]), rank)
    except ValueError as e:
        raise ctx.shape_error(str(e)) from None
    positions = ctx.positions(x.shape[axis])
    i = Read(positions.name, (Ix.var(axis),))
    k = Read(positions.name, (Ix.var(rank),))
    index = list(identity_index(rank))
    index[axis] = Ix.var(rank)
    start = identity(combiner, x.dtype)
    inside = Call(_RANGE[(int(bool(exclusive)), int(bool(reverse)))], (k, i))
    return ctx.reduce(out_shape=x.shape, init=start, extents=x.shape + (x.shape[axis],),
                      out_index=identity_index(rank), combiner=combiner,
                      expr=Call("select", (inside, Read(x.name, tuple(index)), start)),
                      label=label)
