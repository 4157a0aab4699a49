"""QuantizeLinear and DequantizeLinear, each one Map; MatMulInteger and QLinearMatMul.

``DequantizeLinear``: ``y = (x - zero_point) * scale`` in the scale's float type (or
``output_dtype``). ``QuantizeLinear``: ``y = clamp(round(x / scale) + zero_point)`` in the
zero point's integer type (or ``output_dtype``, default uint8), rounding half to even
and saturating to the type's range. The scale and zero point are one value (per
tensor), a 1-D tensor along ``axis`` (per axis), or, with ``block_size``, a tensor
holding one value per block of ``block_size`` elements along ``axis``: such a constant
is repeated along the axis when compiling (the index of a block, ``i // block_size``,
is no affine index); a blocked scale computed at run time is refused. Integer types of
2, 4, 8 and 16 bits, and the float8 types (x / scale + zero_point rounded to the float8,
saturated unless ``saturate=0``).

MatMulInteger is MatMul's Reduce over the int32 differences with the zero points;
QLinearMatMul requantizes that sum with the one float32 factor a_scale * b_scale /
y_scale, as QuantizeLinear does.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from polyc.frontend.core import (
    FLOATS,
    INTEGER,
    MINIFLOATS,
    Call,
    Const,
    Ix,
    Read,
    identity_index,
    value_range,
)
from polyc.frontend.load import dtype_name
from polyc.frontend.ops.byte_product import byte_product
from polyc.frontend.ops.elementwise import minifloat_cast
from polyc.frontend.ops.indexing import first_element, normalize_axis, value_at
from polyc.frontend.ops.linalg import product
from polyc.frontend.ops.registry import onnx_op


@onnx_op("DequantizeLinear", 10, 13, 19, 21, 23, 24, 25, 28)
def DequantizeLinear(ctx, x, x_scale, x_zero_point=None, *, axis=1, block_size=0,
                     output_dtype=0):
    """DequantizeLinear: (x - zero_point) * scale, computed in float32 (see the module
    docstring)."""
    target = dtype_name(output_dtype) if output_dtype else x_scale.dtype
    scale = _parameter(ctx, x_scale, x, axis, block_size, "x_scale")
    value = Call("cast_float32", (Read(x.name, identity_index(len(x.shape))),))
    if x_zero_point is not None:
        zero = _parameter(ctx, x_zero_point, x, axis, block_size, "x_zero_point")
        value = Call("sub", (value, Call("cast_float32", (zero,))))
    product = Call("mul", (value, Call("cast_float32", (scale,))))
    return ctx.map(x.shape, Call(f"cast_{_float(ctx, target)}", (product,)),
                   label="dequantize")


@onnx_op("QuantizeLinear", 10, 13, 19, 21, 23, 24, 25, 28)
def QuantizeLinear(ctx, x, y_scale, y_zero_point=None, *, axis=1, block_size=0,
                   output_dtype=0, saturate=1, precision=0):
    """QuantizeLinear: clamp(round(x / scale) + zero_point) (see the module docstring);
    the division in float32 (``precision`` other than float32's is refused)."""
    if precision not in (0, TensorProto.FLOAT):
        raise ctx.unsupported(f"precision={precision}: polyc divides in float32")
    target = dtype_name(output_dtype) if output_dtype else \
        y_zero_point.dtype if y_zero_point is not None else "uint8"
    if target not in MINIFLOATS and (target not in INTEGER or value_range(target)[1] >= 2**16):
        raise ctx.dtype_error(f"quantizes to {target}; polyc quantizes to 2-, 4-, 8- and "
                              "16-bit integers and the float8 types")
    scale = Call("cast_float32", (_parameter(ctx, y_scale, x, axis, block_size, "y_scale"),))
    single = Call("cast_float32", (Read(x.name, identity_index(len(x.shape))),))
    value = Call("div", (single, scale))
    if target not in MINIFLOATS:
        value = Call("round", (value,))
    if y_zero_point is not None:
        zero = _parameter(ctx, y_zero_point, x, axis, block_size, "y_zero_point")
        value = Call("add", (value, Call("cast_float32", (zero,))))
    if target in MINIFLOATS:  # rounded to the float8 (nearest, ties to even), not an integer
        return ctx.map(x.shape, minifloat_cast(value, target, saturate), label="quantize")
    return ctx.map(x.shape, _saturated(value, target), label="quantize")


def _saturated(value, target: str) -> Call:
    """The float32 ``value`` clamped to the integer ``target``'s range, as ``target``."""
    low, high = (Const(float(v)) for v in value_range(target))
    return Call(f"cast_{target}", (Call("min", (Call("max", (value, low)), high)),))


def _float(ctx, dtype: str) -> str:
    if dtype not in FLOATS:
        raise ctx.dtype_error(f"dequantizes to {dtype}; polyc dequantizes to float types")
    return dtype


def _parameter(ctx, tensor, x, axis: int, block_size: int, role: str):
    """The read of a scale or zero point at each element of ``x``: per tensor (one
    value), per axis (1-D along ``axis``) or per block (repeated along ``axis`` when
    constant)."""
    rank = len(x.shape)
    if int(np.prod(tensor.shape)) == 1:
        return first_element(tensor)
    try:
        axis = normalize_axis(axis, rank)
    except ValueError as e:
        raise ctx.shape_error(str(e)) from None
    if not block_size:
        if tensor.shape != (x.shape[axis],):
            raise ctx.shape_error(f"{role} has shape {list(tensor.shape)}, expected "
                                  f"[{x.shape[axis]}] (one value per index of axis {axis})")
        return Read(tensor.name, (Ix.var(axis),))
    value = ctx.constant_value(tensor)
    blocks = -(-x.shape[axis] // block_size)
    expected = x.shape[:axis] + (blocks,) + x.shape[axis + 1:]
    if tuple(tensor.shape) != expected:
        raise ctx.shape_error(f"{role} has shape {list(tensor.shape)}, expected "
                              f"{list(expected)} (one value per block of {block_size})")
    if value is None:
        raise ctx.unsupported(f"a blocked {role} must be a constant (its block index "
                              f"i // {block_size} is not affine)")
    repeated = np.repeat(value, block_size, axis=axis).take(range(x.shape[axis]), axis=axis)
    full = ctx.constant(repeated, label=f"{role}_blocks")
    return Read(full.name, identity_index(len(x.shape)))


@onnx_op("MatMulInteger", 10)
def MatMulInteger(ctx, A, B, a_zero_point=None, b_zero_point=None):
    """MatMulInteger: Y = sum_k (A - a_zero_point) * (B - b_zero_point) in int32; a zero
    point is one value or one per row of A (per column of B)."""
    return integer_product(ctx, A, B, a_zero_point, b_zero_point)


@onnx_op("QLinearMatMul", 10, 21)
def QLinearMatMul(ctx, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
                  y_zero_point):
    """QLinearMatMul: the int32 product of MatMulInteger, requantized:
    ``clamp(round(acc * a_scale * b_scale / y_scale) + y_zero_point)`` in the output zero
    point's type (the scales in float32: one each, b_scale also one per column of b)."""
    columns = b.shape[-1] if len(b.shape) > 1 else None
    for scale in (a_scale, b_scale, y_scale):
        if int(np.prod(scale.shape)) != 1 and not (
                scale is b_scale and tuple(scale.shape) == (columns,)):
            raise ctx.unsupported(f"scale '{scale.name}' of shape {list(scale.shape)}: "
                                  "polyc takes per-tensor scales (b_scale: or one per "
                                  "column)")
    acc = integer_product(ctx, a, b, a_zero_point, b_zero_point)
    column = (Ix.var(len(acc.shape) - 1),)
    scales = [Call("cast_float32", (value_at(s, column),)) for s in (a_scale, b_scale, y_scale)]
    return requantized(ctx, acc, Call("div", (Call("mul", tuple(scales[:2])), scales[2])),
                       y_zero_point)


def requantized(ctx, acc, factor, y_zero_point):
    """``clamp(round(acc * factor) + y_zero_point)`` in the zero point's type: an int32
    sum brought to the output's scale (``factor`` a float32 expression over acc's loop
    variables), rounding half to even."""
    single = Call("cast_float32", (Read(acc.name, identity_index(len(acc.shape))),))
    value = Call("round", (Call("mul", (single, factor)),))
    value = Call("add", (value, Call("cast_float32", (first_element(y_zero_point),))))
    return ctx.map(acc.shape, _saturated(value, y_zero_point.dtype), label="requantize")


def shifted(read, zero_point, index: tuple) -> Call:
    """``read - zero_point`` in int32; the zero point one value, or read at ``index``
    (its shape checked by the caller)."""
    value = Call("cast_int32", (read,))
    if zero_point is None:
        return value
    return Call("sub", (value, Call("cast_int32", (value_at(zero_point, index),))))


def integer_product(ctx, A, B, a_zero_point, b_zero_point):
    """The int32 ``sum_k (A - a_zero_point) * (B - b_zero_point)`` of MatMulInteger."""
    for zero_point, operand, side in ((a_zero_point, A, -2), (b_zero_point, B, -1)):
        if zero_point is not None and int(np.prod(zero_point.shape)) != 1 and (
                len(operand.shape) < 2 or zero_point.shape != (operand.shape[side],)):
            raise ctx.unsupported(f"zero point '{zero_point.name}' of shape "
                                  f"{list(zero_point.shape)}: polyc takes one value or one "
                                  "per row of A (column of B)")
    words = byte_product(ctx, A, B, a_zero_point, b_zero_point)
    if words is not None:
        return words
    return product(ctx, A, B, lambda a, b, m, n: Call("mul", (shifted(a, a_zero_point, m),
                                                             shifted(b, b_zero_point, n))),
                   Const(0, "int32"), "matmul_integer")
