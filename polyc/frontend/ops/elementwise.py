"""Elementwise ops: each lowers to one core ``Map``.

Binary ops broadcast multidirectionally (numpy rules): the output has the broadcast
shape, and each operand is read at ``broadcast_index`` (missing leading dims dropped,
a size-1 dim against a larger output dim read at 0).
"""

from __future__ import annotations

from polyc.frontend.core import Call, Read, identity_index
from polyc.frontend.ops.indexing import broadcast_index, broadcast_shapes
from polyc.frontend.ops.registry import onnx_op


def _binary(ctx, fn: str, A, B):
    try:
        shape = broadcast_shapes(A.shape, B.shape)
    except ValueError as e:
        raise ctx.shape_error(str(e)) from None
    a = Read(A.name, broadcast_index(A.shape, shape))
    b = Read(B.name, broadcast_index(B.shape, shape))
    return ctx.map(shape, Call(fn, (a, b)), label=fn)


def _unary(ctx, fn: str, X, label: str | None = None):
    x = Read(X.name, identity_index(len(X.shape)))
    return ctx.map(X.shape, Call(fn, (x,)), label=label or fn)


@onnx_op("Add", 7, 13, 14)
def Add(ctx, A, B):
    """Add: C[i] = A[bcast(i)] + B[bcast(i)]."""
    return _binary(ctx, "add", A, B)


@onnx_op("Sub", 7, 13, 14)
def Sub(ctx, A, B):
    """Sub: C[i] = A[bcast(i)] - B[bcast(i)]."""
    return _binary(ctx, "sub", A, B)


@onnx_op("Mul", 7, 13, 14)
def Mul(ctx, A, B):
    """Mul: C[i] = A[bcast(i)] * B[bcast(i)]."""
    return _binary(ctx, "mul", A, B)


@onnx_op("Div", 7, 13, 14)
def Div(ctx, A, B):
    """Div: C[i] = A[bcast(i)] / B[bcast(i)]."""
    return _binary(ctx, "div", A, B)


@onnx_op("Relu", 6, 13, 14)
def Relu(ctx, X):
    """Relu: Y[i] = relu(X[i])."""
    return _unary(ctx, "relu", X)


@onnx_op("Sigmoid", 6, 13)
def Sigmoid(ctx, X):
    """Sigmoid: Y[i] = sigmoid(X[i])."""
    return _unary(ctx, "sigmoid", X)


@onnx_op("Tanh", 6, 13)
def Tanh(ctx, X):
    """Tanh: Y[i] = tanh(X[i])."""
    return _unary(ctx, "tanh", X)


@onnx_op("Exp", 6, 13)
def Exp(ctx, X):
    """Exp: Y[i] = exp(X[i])."""
    return _unary(ctx, "exp", X)


@onnx_op("Log", 6, 13)
def Log(ctx, X):
    """Log: Y[i] = log(X[i])."""
    return _unary(ctx, "log", X)


@onnx_op("Sqrt", 6, 13)
def Sqrt(ctx, X):
    """Sqrt: Y[i] = sqrt(X[i])."""
    return _unary(ctx, "sqrt", X)


@onnx_op("Neg", 6, 13)
def Neg(ctx, X):
    """Neg: Y[i] = -X[i]."""
    return _unary(ctx, "neg", X)


@onnx_op("Abs", 6, 13)
def Abs(ctx, X):
    """Abs: Y[i] = |X[i]|."""
    return _unary(ctx, "abs", X)
