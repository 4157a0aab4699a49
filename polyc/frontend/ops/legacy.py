"""Versions of opset 6 (binary ops) and 6-7 (variadic ops, PRelu) that do not broadcast
as numpy does; each is one core ``Map`` over the output shape.

Binary ops before opset 7 broadcast only when their attribute ``broadcast`` is 1, and
only ``B`` to the shape of ``A``: ``B``'s dims line up with ``A``'s starting at ``axis``
(by default, with ``A``'s last dims), a size-1 dim (or a one-element ``B``) read at
index 0. Without ``broadcast``, ``A`` and ``B`` have one shape. The output has ``A``'s
shape, and the Map reads ``B`` at that index::

    A (2, 3, 4, 5), B (3, 4), axis=1:  C[i0, i1, i2, i3] = A[i0, i1, i2, i3] + B[i1, i2]

The variadic Sum, Max, Min and Mean before opset 8 take inputs of one shape; PRelu-6
shares a one-element slope, or applies a slope per channel (dim 1 of X).
"""

from __future__ import annotations

from polyc.frontend.core import Ix, Read, identity_index
from polyc.frontend.ops.activation import negative_branch
from polyc.frontend.ops.elementwise import Max, Mean, Min, Sum, call, elementwise, power
from polyc.frontend.ops.indexing import size
from polyc.frontend.ops.registry import onnx_op


def _b_index(ctx, a_shape, b_shape, broadcast: int, axis) -> tuple[Ix, ...]:
    """The index of ``B`` read at a loop point of ``A``'s shape (see the module docstring)."""
    a_rank, b_rank = len(a_shape), len(b_shape)
    if not broadcast:
        if b_shape != a_shape:
            raise ctx.shape_error(f"A {list(a_shape)} and B {list(b_shape)} differ in shape, "
                                  "which needs broadcast=1")
        return identity_index(a_rank)
    if size(b_shape) == 1:
        return (Ix.constant(0),) * b_rank
    start = a_rank - b_rank if axis is None else axis + a_rank if axis < 0 else axis
    if start < 0 or start + b_rank > a_rank:
        raise ctx.shape_error(f"B {list(b_shape)} does not fit into A {list(a_shape)} "
                              f"from axis {start}")
    index = []
    for k, dim in enumerate(b_shape):
        if dim == a_shape[start + k]:
            index.append(Ix.var(start + k))
        elif dim == 1:
            index.append(Ix.constant(0))
        else:
            raise ctx.shape_error(f"B {list(b_shape)} does not broadcast to A "
                                  f"{list(a_shape)} from axis {start}")
    return tuple(index)


def _legacy(ctx, label: str, build, A, B, broadcast: int, axis):
    """The Map ``C[i] = build(A[i], B[b_index(i)])`` over ``A``'s shape."""
    a = Read(A.name, identity_index(len(A.shape)))
    b = Read(B.name, _b_index(ctx, A.shape, B.shape, broadcast, axis))
    return ctx.map(A.shape, build(a, b), label=label)


def _binary(fn: str):
    return lambda a, b: call(fn, a, b)


@onnx_op("Add", 6)
def Add_6(ctx, A, B, *, axis=None, broadcast=0):
    """Add-6: C[i] = A[i] + B[b_index(i)]."""
    return _legacy(ctx, "add", _binary("add"), A, B, broadcast, axis)


@onnx_op("Sub", 6)
def Sub_6(ctx, A, B, *, axis=None, broadcast=0):
    """Sub-6: C[i] = A[i] - B[b_index(i)]."""
    return _legacy(ctx, "sub", _binary("sub"), A, B, broadcast, axis)


@onnx_op("Mul", 6)
def Mul_6(ctx, A, B, *, axis=None, broadcast=0):
    """Mul-6: C[i] = A[i] * B[b_index(i)]."""
    return _legacy(ctx, "mul", _binary("mul"), A, B, broadcast, axis)


@onnx_op("Div", 6)
def Div_6(ctx, A, B, *, axis=None, broadcast=0):
    """Div-6: C[i] = A[i] / B[b_index(i)]."""
    return _legacy(ctx, "div", _binary("div"), A, B, broadcast, axis)


@onnx_op("Pow", 1)
def Pow_1(ctx, X, Y, *, axis=None, broadcast=0):
    """Pow-1: Z[i] = pow(X[i], Y[b_index(i)]), constant exponents inlined as in Pow."""
    return _legacy(ctx, "pow", lambda x, y: power(ctx, x, y, X, Y), X, Y, broadcast, axis)


@onnx_op("And", 1)
def And_1(ctx, A, B, *, axis=None, broadcast=0):
    """And-1: C[i] = A[i] and B[b_index(i)] (bool)."""
    return _legacy(ctx, "and", _binary("and"), A, B, broadcast, axis)


@onnx_op("Or", 1)
def Or_1(ctx, A, B, *, axis=None, broadcast=0):
    """Or-1: C[i] = A[i] or B[b_index(i)] (bool)."""
    return _legacy(ctx, "or", _binary("or"), A, B, broadcast, axis)


@onnx_op("Xor", 1)
def Xor_1(ctx, A, B, *, axis=None, broadcast=0):
    """Xor-1: C[i] = A[i] xor B[b_index(i)] (bool)."""
    return _legacy(ctx, "xor", _binary("xor"), A, B, broadcast, axis)


@onnx_op("Equal", 1)
def Equal_1(ctx, A, B, *, axis=None, broadcast=0):
    """Equal-1: C[i] = A[i] == B[b_index(i)] (bool)."""
    return _legacy(ctx, "eq", _binary("eq"), A, B, broadcast, axis)


@onnx_op("Less", 1)
def Less_1(ctx, A, B, *, axis=None, broadcast=0):
    """Less-1: C[i] = A[i] < B[b_index(i)] (bool; false with NaN)."""
    return _legacy(ctx, "lt", _binary("lt"), A, B, broadcast, axis)


@onnx_op("Greater", 1)
def Greater_1(ctx, A, B, *, axis=None, broadcast=0):
    """Greater-1: C[i] = A[i] > B[b_index(i)] (bool; false with NaN)."""
    return _legacy(ctx, "gt", _binary("gt"), A, B, broadcast, axis)


# -- variadic ops of one shape, PRelu per channel --------------------------------------

def _one_shape(ctx, inputs):
    shapes = {t.shape for t in inputs}
    if len(shapes) > 1:
        raise ctx.shape_error(f"inputs of shapes {', '.join(str(list(s)) for s in shapes)}: "
                              "this version needs one shape (no broadcasting)")
    return inputs


@onnx_op("Sum", 6)
def Sum_6(ctx, *data_0):
    """Sum-6: (x0 + x1) + x2 .., inputs of one shape."""
    return Sum(ctx, *_one_shape(ctx, data_0))


@onnx_op("Max", 6)
def Max_6(ctx, *data_0):
    """Max-6: max(max(x0, x1), x2) .., inputs of one shape."""
    return Max(ctx, *_one_shape(ctx, data_0))


@onnx_op("Min", 6)
def Min_6(ctx, *data_0):
    """Min-6: min(min(x0, x1), x2) .., inputs of one shape."""
    return Min(ctx, *_one_shape(ctx, data_0))


@onnx_op("Mean", 6)
def Mean_6(ctx, *data_0):
    """Mean-6: ((x0 + x1) + x2 ..) / n, inputs of one shape."""
    return Mean(ctx, *_one_shape(ctx, data_0))


@onnx_op("PRelu", 6)
def PRelu_6(ctx, X, slope):
    """PRelu-6: Y[i] = x < 0 ? s * x : x, ``s`` the one element of ``slope``, or
    slope[i1] for a slope of X's channel count (dim 1), or slope[i] for one of X's shape."""
    rank = len(X.shape)
    if size(slope.shape) == 1:
        index = (Ix.constant(0),) * len(slope.shape)
    elif rank >= 2 and slope.shape == (X.shape[1],):
        index = (Ix.var(1),)
    elif slope.shape == X.shape:
        index = identity_index(rank)
    else:
        raise ctx.shape_error(f"slope {list(slope.shape)} must have one element, one per "
                              f"channel or X's shape {list(X.shape)}")
    s = Read(slope.name, index)
    return elementwise(ctx, "prelu", lambda x: negative_branch(x, call("mul", s, x)), X)
