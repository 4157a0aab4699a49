"""onnxruntime's quantized contrib ops (domain ``com.microsoft``), which its quantizer
writes in the QOperator format next to QLinearConv and QLinearMatMul.

Each elementwise, pooling or concatenating op is its float op between a
DequantizeLinear of every input and a QuantizeLinear of the output (one fused loop
nest after inlining): ``y = quantize(f(dequantize(x)))``, scales and zero points one
value each. onnxruntime computes some of these in other ways (a table of the 256 inputs
for QLinearSigmoid and QLinearLeakyRelu; sums of the integers for
QLinearGlobalAveragePool; scale ratios for QLinearAdd), so a result can land one step
away where a value falls near a rounding boundary. QGemm is MatMulInteger's int32
product (byte dot products for constant weights), plus its int32 bias, requantized
(or, without ``y_scale``, scaled to float32).
"""

from __future__ import annotations

import numpy as np

from polyc.frontend.core import Call, Const, Ix, Read, identity_index
from polyc.frontend.ops.activation import LeakyRelu
from polyc.frontend.ops.elementwise import Add, Mul, Sigmoid
from polyc.frontend.ops.indexing import broadcast_index, first_element, value_at
from polyc.frontend.ops.layout import Transpose
from polyc.frontend.ops.norm_transformer import Softmax, Softmax_11
from polyc.frontend.ops.pool import AveragePool, GlobalAveragePool
from polyc.frontend.ops.quantize import (
    DequantizeLinear,
    QuantizeLinear,
    integer_product,
    requantized,
)
from polyc.frontend.ops.registry import contrib_op
from polyc.frontend.ops.slicing import Concat

NHWC_TO_NCHW, NCHW_TO_NHWC = (0, 3, 1, 2), (0, 2, 3, 1)


def _real(ctx, x, scale, zero):
    return DequantizeLinear(ctx, x, scale, zero)


def _quantized(ctx, y, scale, zero, like):
    """``y`` quantized to ``zero``'s type, or ``like``'s when there is no zero point."""
    return QuantizeLinear(ctx, y, scale, _zero_point(ctx, zero, like))


def _zero_point(ctx, zero, like):
    """``zero``, or a zero of ``like``'s type for an omitted zero point (the output
    then takes the input's type, as onnxruntime's)."""
    return ctx.constant(np.zeros((), like.dtype), label="zero_point") if zero is None \
        else zero


@contrib_op("QLinearAdd")
def QLinearAdd(ctx, A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale,
               C_zero_point=None):
    """QLinearAdd: ``C = quantize(dequantize(A) + dequantize(B))``, broadcasting."""
    total = Add(ctx, _real(ctx, A, A_scale, A_zero_point), _real(ctx, B, B_scale, B_zero_point))
    return _quantized(ctx, total, C_scale, C_zero_point, A)


@contrib_op("QLinearMul")
def QLinearMul(ctx, A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale,
               C_zero_point=None):
    """QLinearMul: ``C = quantize(dequantize(A) * dequantize(B))``, broadcasting."""
    product = Mul(ctx, _real(ctx, A, A_scale, A_zero_point),
                  _real(ctx, B, B_scale, B_zero_point))
    return _quantized(ctx, product, C_scale, C_zero_point, A)


@contrib_op("QLinearSigmoid")
def QLinearSigmoid(ctx, X, X_scale, X_zero_point, Y_scale, Y_zero_point=None):
    """QLinearSigmoid: ``quantize(sigmoid(dequantize(X)))``."""
    return _quantized(ctx, Sigmoid(ctx, _real(ctx, X, X_scale, X_zero_point)), Y_scale,
                      Y_zero_point, X)


@contrib_op("QLinearLeakyRelu")
def QLinearLeakyRelu(ctx, X, X_scale, X_zero_point, Y_scale, Y_zero_point=None, *,
                     alpha=0.01):
    """QLinearLeakyRelu: ``quantize(leaky_relu(dequantize(X), alpha))``."""
    y = LeakyRelu(ctx, _real(ctx, X, X_scale, X_zero_point), alpha=alpha)
    return _quantized(ctx, y, Y_scale, Y_zero_point, X)


@contrib_op("QLinearSoftmax")
def QLinearSoftmax(ctx, X, X_scale, x_zero_point, y_scale, y_zero_point=None, *, axis=-1,
                   opset=13):
    """QLinearSoftmax: Softmax of the dequantized X (the semantics of Softmax at
    ``opset``: before 13, of X flattened from ``axis``), quantized."""
    real = _real(ctx, X, X_scale, x_zero_point)
    y = Softmax(ctx, real, axis=axis) if opset >= 13 else Softmax_11(ctx, real, axis=axis)
    return _quantized(ctx, y, y_scale, y_zero_point, X)


@contrib_op("QLinearGlobalAveragePool")
def QLinearGlobalAveragePool(ctx, X, x_scale, x_zero_point, y_scale, y_zero_point=None, *,
                             channels_last=0):
    """QLinearGlobalAveragePool: the mean over the spatial dims of the dequantized X
    (``channels_last``: X is [N, H, W, C] and so is Y), quantized."""
    real = _real(ctx, X, x_scale, x_zero_point)
    if channels_last:
        real = Transpose(ctx, real, perm=NHWC_TO_NCHW)
    y = GlobalAveragePool(ctx, real)
    if channels_last:
        y = Transpose(ctx, y, perm=NCHW_TO_NHWC)
    return _quantized(ctx, y, y_scale, y_zero_point, X)


@contrib_op("QLinearAveragePool")
def QLinearAveragePool(ctx, X, x_scale, x_zero_point, y_scale, y_zero_point=None, *,
                       auto_pad="NOTSET", ceil_mode=0, channels_last=0, count_include_pad=0,
                       kernel_shape=None, pads=None, strides=None):
    """QLinearAveragePool: AveragePool of the dequantized X, quantized (``channels_last``
    as QLinearGlobalAveragePool)."""
    real = _real(ctx, X, x_scale, x_zero_point)
    if channels_last:
        real = Transpose(ctx, real, perm=NHWC_TO_NCHW)
    y = AveragePool(ctx, real, auto_pad=auto_pad, ceil_mode=ceil_mode,
                    count_include_pad=count_include_pad, kernel_shape=kernel_shape,
                    pads=pads, strides=strides)
    if channels_last:
        y = Transpose(ctx, y, perm=NCHW_TO_NHWC)
    return _quantized(ctx, y, y_scale, y_zero_point, X)


@contrib_op("QLinearConcat")
def QLinearConcat(ctx, Y_scale, Y_zero_point, *inputs, axis):
    """QLinearConcat: the inputs, given as (X, X_scale, X_zero_point) triplets,
    dequantized, concatenated along ``axis`` and quantized."""
    if not inputs or len(inputs) % 3:
        raise ctx.shape_error(f"{len(inputs)} inputs after Y_scale and Y_zero_point: "
                              "(tensor, scale, zero point) triplets expected")
    parts = [_real(ctx, *inputs[k:k + 3]) for k in range(0, len(inputs), 3)]
    return _quantized(ctx, Concat(ctx, *parts, axis=axis), Y_scale, Y_zero_point, inputs[0])


@contrib_op("QGemm")
def QGemm(ctx, A, a_scale, a_zero_point, B, b_scale, b_zero_point, C=None, y_scale=None,
          y_zero_point=None, *, alpha=1.0, transA=0, transB=0):
    """QGemm: ``alpha * sum_k (A' - a_zero_point) (B' - b_zero_point) + C`` (C an int32
    bias at a_scale * b_scale), requantized with ``y_scale``, or without it as float32
    times ``a_scale * b_scale``; b_scale and b_zero_point one value or one per column."""
    if len(A.shape) != 2 or len(B.shape) != 2:
        raise ctx.shape_error(f"A {list(A.shape)} and B {list(B.shape)} must be 2-D")
    if transA:
        A = Transpose(ctx, A, perm=(1, 0))
    if transB:
        value = ctx.constant_value(B)
        B = ctx.constant(np.ascontiguousarray(value.T), label="qgemm_weights") \
            if value is not None else Transpose(ctx, B, perm=(1, 0))
    acc = integer_product(ctx, A, B, a_zero_point, b_zero_point)
    if C is not None:
        try:
            bias = Read(C.name, broadcast_index(tuple(C.shape), acc.shape))
        except ValueError as e:
            raise ctx.shape_error(f"C: {e}") from None
        acc = ctx.map(acc.shape, Call("add", (Read(acc.name, identity_index(2)),
                                              Call("cast_int32", (bias,)))), label="qgemm_bias")
    factor = Call("mul", (Call("cast_float32", (first_element(a_scale),)),
                          Call("cast_float32", (value_at(b_scale, (Ix.var(1),)),))))
    if alpha != 1.0:
        factor = Call("mul", (factor, Const(float(alpha), "float32")))
    if y_scale is None:
        return ctx.map(acc.shape, Call("mul", (Call("cast_float32", (
            Read(acc.name, identity_index(2)),)), factor)), label="qgemm_float")
    factor = Call("div", (factor, Call("cast_float32", (first_element(y_scale),))))
    return requantized(ctx, acc, factor, _zero_point(ctx, y_zero_point, A))
