"""Elementwise ops: each lowers to one core ``Map``.

Ops with several inputs broadcast multidirectionally (numpy rules): the output has the
broadcast shape, and each operand is read at ``broadcast_index`` (missing leading dims
dropped, a size-1 dim against a larger output dim read at 0). Variadic ops (Sum, Max,
...) fold their operands pairwise inside the one Map expression.

Tensors are float32, int64, int32 or bool; the core functions say which types each op
takes (an integer Add wraps around, an integer Div truncates towards zero), and an
op given other types is refused (``UnsupportedDtypeError``). Comparisons give bool,
Where selects on bool, And / Or / Xor / Not take bool.
Activations live in :mod:`polyc.frontend.ops.activation`.
"""

from __future__ import annotations

import functools

import numpy as np
from onnx import TensorProto

from polyc.frontend.core import (
    DTYPES,
    FLOATS,
    MINIFLOATS,
    Call,
    Const,
    Lookup,
    Read,
    identity_index,
    value_range,
)
from polyc.frontend.load import dtype_name
from polyc.frontend.ops.indexing import broadcast_index, broadcast_shapes, first_element, size
from polyc.frontend.ops.registry import onnx_op

INF = float("inf")
FLT_MAX = float(np.finfo(np.float32).max)


# -- expression and Map builders (shared with activation.py) -------------------------

def call(fn: str, *args) -> Call:
    """The core call ``fn(*args)``; plain numbers become :class:`Const`."""
    return Call(fn, tuple(a if isinstance(a, (Read, Const, Call, Lookup)) else Const(float(a))
                          for a in args))


def fold(fn: str, operands) -> Call | Read:
    """``fn(fn(o0, o1), o2) ..``: a binary core function folded over ``operands``."""
    return functools.reduce(lambda a, b: call(fn, a, b), operands)


def ne(a, b) -> Call:
    """True where ``a != b`` (NaN included)."""
    return call("not", call("eq", a, b))


def elementwise(ctx, label: str, build, *tensors):
    """One Map over the broadcast shape of ``tensors``: ``out[i] = build(*reads)``."""
    try:
        shape = broadcast_shapes(*(t.shape for t in tensors))
    except ValueError as e:
        raise ctx.shape_error(str(e)) from None
    reads = [Read(t.name, broadcast_index(t.shape, shape)) for t in tensors]
    return ctx.map(shape, build(*reads), label=label)


def constant(ctx, tensor):
    """The value of ``tensor`` when it is a constant, else None."""
    return ctx.constant_value(tensor)


def scalar_constant(ctx, tensor) -> float | None:
    """The value of a one-element constant ``tensor``, else None."""
    value = constant(ctx, tensor)
    if value is None or value.size != 1 or value.dtype.kind not in "fiu":
        return None
    return float(value.reshape(-1)[0])


def _binary(ctx, fn: str, A, B):
    return elementwise(ctx, fn, lambda a, b: call(fn, a, b), A, B)


def _unary(ctx, fn: str, X):
    return elementwise(ctx, fn, lambda x: call(fn, x), X)


# -- arithmetic ------------------------------------------------------------------------

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


# Pow with these constant exponents avoids the scalar libm call ``powf``; each gives
# powf's result (x^3 may differ from it in the last bit).
_POW_SPECIAL = {
    1.0: lambda x: x,
    2.0: lambda x: call("mul", x, x),
    3.0: lambda x: call("mul", call("mul", x, x), x),
    -1.0: lambda x: call("div", 1.0, x),
    # sqrt(-0) = -0 and sqrt(-inf) = NaN, but pow(-0, 0.5) = 0 and pow(-inf, 0.5) = inf
    0.5: lambda x: call("select", call("eq", x, -INF), INF, call("abs", call("sqrt", x))),
}


@onnx_op("Pow", 7, 12, 13, 15)
def Pow(ctx, X, Y):
    """Pow: Z[i] = pow(X[bcast(i)], Y[bcast(i)]) (core ``pow``, libm ``powf``; see
    :func:`power`)."""
    return elementwise(ctx, "pow", lambda x, y: power(ctx, x, y, X, Y), X, Y)


def power(ctx, x, y, X, Y):
    """``pow(x, y)``, ``x`` and ``y`` being reads of the base and exponent tensors ``X``
    and ``Y``; the result has X's dtype.

    A constant one-element exponent is inlined; 1, 2, 3, -1 and 0.5 become x, x*x,
    x*x*x, 1/x and sqrt (1, 2 and 3 on integers). Another exponent type is cast to a
    float base's type. An integer base is raised in float64 and the result truncated
    (onnxruntime's ``std::pow`` on an integer base).
    """
    exponent = scalar_constant(ctx, Y)
    integer = X.dtype not in FLOATS
    if exponent is not None and (not integer or exponent in (1.0, 2.0, 3.0)):
        return _POW_SPECIAL.get(exponent, lambda x: call("pow", x, exponent))(x)
    if integer:
        raised = call("pow", call("cast_float64", x), call("cast_float64", y))
        return call(f"cast_{X.dtype}", raised)
    return call("pow", x, y if Y.dtype == X.dtype else call(f"cast_{X.dtype}", y))


@onnx_op("Reciprocal", 6, 13)
def Reciprocal(ctx, X):
    """Reciprocal: Y[i] = 1 / X[i]."""
    return elementwise(ctx, "reciprocal", lambda x: call("div", 1.0, x), X)


@onnx_op("Sign", 9, 13)
def Sign(ctx, input):
    """Sign: Y[i] = sign(X[i]) (-1, 0 or 1; NaN stays NaN)."""
    return _unary(ctx, "sign", input)


@onnx_op("Floor", 6, 13)
def Floor(ctx, X):
    """Floor: Y[i] = floor(X[i])."""
    return _unary(ctx, "floor", X)


@onnx_op("Ceil", 6, 13)
def Ceil(ctx, X):
    """Ceil: Y[i] = ceil(X[i])."""
    return _unary(ctx, "ceil", X)


@onnx_op("Round", 11, 22)
def Round(ctx, X):
    """Round: Y[i] = round(X[i]), halves to even."""
    return _unary(ctx, "round", X)


def _trigonometric(op: str, fn: str, *versions: int) -> None:
    """Register ONNX ``op`` as the core function ``fn`` of each element."""
    def lower(ctx, input):
        return _unary(ctx, fn, input)
    lower.__name__ = op
    lower.__doc__ = f"{op}: Y[i] = {fn}(X[i]) (libm's {fn}f)."
    onnx_op(op, *versions)(lower)


for _op, _fn in (("Sin", "sin"), ("Cos", "cos"), ("Tan", "tan"), ("Asin", "asin"),
                 ("Acos", "acos"), ("Atan", "atan")):
    _trigonometric(_op, _fn, 7, 22)
for _op, _fn in (("Sinh", "sinh"), ("Cosh", "cosh"), ("Asinh", "asinh"), ("Acosh", "acosh"),
                 ("Atanh", "atanh")):
    _trigonometric(_op, _fn, 9, 22)


@onnx_op("Erf", 9, 13)
def Erf(ctx, input):
    """Erf: Y[i] = erf(X[i])."""
    return _unary(ctx, "erf", input)


@onnx_op("Relu", 6, 13, 14)
def Relu(ctx, X):
    """Relu: Y[i] = relu(X[i]) (NaN stays NaN)."""
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


def _bound(ctx, tensor, role: str):
    """A Clip bound: a Const when ``tensor`` is a constant, else a Read of its one element."""
    if size(tensor.shape) != 1:
        raise ctx.shape_error(f"'{role}' must be a scalar, got shape {list(tensor.shape)}")
    value = constant(ctx, tensor)
    if value is not None and value.dtype.name == tensor.dtype:
        return Const.of(value.reshape(-1)[0], tensor.dtype)
    return first_element(tensor)


@onnx_op("Clip", 11, 12, 13)
def Clip(ctx, input, min=None, max=None):
    """Clip: y = x < min ? min : x, then y > max ? max : y, one Map.

    Absent bounds are the limits of the type (float32: +-FLT_MAX, so +-inf become
    +-FLT_MAX), as ONNX says. As onnxruntime: NaN inputs stay NaN, a NaN bound clips
    nothing, and with ``min > max`` every non-NaN element is ``max``.
    """
    lowest, highest = value_range(input.dtype) if input.dtype != "bool" else (0, 1)
    low = Const.of(lowest, input.dtype) if min is None else _bound(ctx, min, "min")
    high = Const.of(highest, input.dtype) if max is None else _bound(ctx, max, "max")
    return _clip(ctx, input, low, high)


@onnx_op("Clip", 6)
def Clip_6(ctx, input, *, min=-FLT_MAX, max=FLT_MAX):
    """Clip-6 (``min`` and ``max`` attributes): as Clip-11 with constant bounds."""
    return _clip(ctx, input, Const(float(min)), Const(float(max)))


def _clip(ctx, input, low, high):
    x = Read(input.name, identity_index(len(input.shape)))
    y = call("select", call("lt", x, low), low, x)
    return ctx.map(input.shape, call("select", call("gt", y, high), high, y), label="clip")


# -- variadic --------------------------------------------------------------------------

def _folded(ctx, fn: str, inputs):
    """One Map ``fn(fn(x0, x1), x2) ..`` over the broadcast shape; a single input as is."""
    if len(inputs) == 1:
        return inputs[0]
    return elementwise(ctx, fn, lambda *xs: fold(fn, xs), *inputs)


@onnx_op("Max", 8, 12, 13)
def Max(ctx, *data_0):
    """Max: max = max(max(x0, x1), x2) .. over the broadcast shape (NaN-propagating)."""
    return _folded(ctx, "max", data_0)


@onnx_op("Min", 8, 12, 13)
def Min(ctx, *data_0):
    """Min: min = min(min(x0, x1), x2) .. over the broadcast shape (NaN-propagating)."""
    return _folded(ctx, "min", data_0)


@onnx_op("Sum", 8, 13)
def Sum(ctx, *data_0):
    """Sum: sum = (x0 + x1) + x2 .. over the broadcast shape."""
    return _folded(ctx, "add", data_0)


@onnx_op("Mod", 10, 13, 28)
def Mod(ctx, A, B, *, fmod=0):
    """Mod: C[i] = A mod B, broadcast. ``fmod=0`` takes the sign of the divisor
    (Python's %), ``fmod=1`` of the dividend (C's %); integer x mod 0 is 0. Floats:
    ``fmod=0`` only since version 28 (numpy.mod, its special cases those of the spec)."""
    if not fmod and A.dtype in FLOATS and ctx.opset < 28:
        raise ctx.unsupported(f"fmod=0 on {A.dtype} (ONNX requires fmod=1 for floats "
                              "before opset 28)")
    return _binary(ctx, "fmod" if fmod else "mod", A, B)


@onnx_op("Mean", 8, 13)
def Mean(ctx, *data_0):
    """Mean: mean = ((x0 + x1) + x2 ..) / n over the broadcast shape."""
    if len(data_0) == 1:
        return data_0[0]
    n = len(data_0)
    return elementwise(ctx, "mean", lambda *xs: call("div", fold("add", xs), n), *data_0)


# -- inference-time identities -----------------------------------------------------------

def _dropout(ctx, data):
    """The output (``data`` itself) and the mask (all true: a bool Map, dropped by
    lowering unless something reads it)."""
    return data, ctx.map(data.shape, Const(True, "bool"), label="dropout_mask")


@onnx_op("Dropout", 6)
def Dropout_6(ctx, data, *, is_test=0, ratio=0.5):
    """Dropout-6 (inference): output = data, mask = true, when ``is_test`` is set (else
    the node asks for training-mode random dropout: refused)."""
    if not is_test:
        raise ctx.unsupported("is_test=0 (training-mode random dropout) is not supported; "
                              "inference needs is_test=1")
    return _dropout(ctx, data)


@onnx_op("Dropout", 7, 10)
def Dropout_10(ctx, data, *, ratio=0.5):
    """Dropout-7/10 (inference): output = data, mask = true; ``ratio`` is ignored."""
    return _dropout(ctx, data)


@onnx_op("Dropout", 12, 13, 22)
def Dropout(ctx, data, ratio=None, training_mode=None, *, seed=None):
    """Dropout (inference): output = data, mask = true; ``ratio`` and ``seed`` are
    ignored. ``training_mode`` must be absent or a constant false."""
    if training_mode is not None:
        mode = constant(ctx, training_mode)
        if mode is None:
            raise ctx.unsupported("training_mode must be absent or a constant false, but "
                                  f"'{training_mode.name}' is computed or a graph input")
        if mode.any():
            raise ctx.unsupported("training_mode=true (random dropout) is not supported")
    return _dropout(ctx, data)


# -- comparisons and logic: bool results ------------------------------------------------

@onnx_op("Equal", 7, 11, 13, 19)
def Equal(ctx, A, B):
    """Equal: C[i] = A[bcast(i)] == B[bcast(i)] (bool; NaN is unequal to all)."""
    return _binary(ctx, "eq", A, B)


@onnx_op("Less", 7, 9, 13)
def Less(ctx, A, B):
    """Less: C[i] = A[bcast(i)] < B[bcast(i)] (bool; false with NaN)."""
    return _binary(ctx, "lt", A, B)


@onnx_op("LessOrEqual", 12, 16)
def LessOrEqual(ctx, A, B):
    """LessOrEqual: C[i] = A[bcast(i)] <= B[bcast(i)] (bool; false with NaN)."""
    return _binary(ctx, "le", A, B)


@onnx_op("Greater", 7, 9, 13)
def Greater(ctx, A, B):
    """Greater: C[i] = A[bcast(i)] > B[bcast(i)] (bool; false with NaN)."""
    return _binary(ctx, "gt", A, B)


@onnx_op("GreaterOrEqual", 12, 16)
def GreaterOrEqual(ctx, A, B):
    """GreaterOrEqual: C[i] = A[bcast(i)] >= B[bcast(i)] (bool; false with NaN)."""
    return _binary(ctx, "ge", A, B)


@onnx_op("Not", 1)
@onnx_op("BitwiseNot", 18)
def Not(ctx, X):
    """Not / BitwiseNot: Y[i] = not X[i] (bool), ~X[i] (integers)."""
    return _unary(ctx, "not", X)


@onnx_op("And", 7)
@onnx_op("BitwiseAnd", 18)
def And(ctx, A, B):
    """And / BitwiseAnd: C[i] = A[bcast(i)] and B[bcast(i)] (bool), & (integers)."""
    return _binary(ctx, "and", A, B)


@onnx_op("Or", 7)
@onnx_op("BitwiseOr", 18)
def Or(ctx, A, B):
    """Or / BitwiseOr: C[i] = A[bcast(i)] or B[bcast(i)] (bool), | (integers)."""
    return _binary(ctx, "or", A, B)


@onnx_op("Xor", 7)
@onnx_op("BitwiseXor", 18)
def Xor(ctx, A, B):
    """Xor / BitwiseXor: C[i] = A[bcast(i)] xor B[bcast(i)] (bool), ^ (integers)."""
    return _binary(ctx, "xor", A, B)


@onnx_op("BitShift", 11, 28)
def BitShift(ctx, X, Y, *, direction=None):
    """BitShift: Z[i] = X << Y or X >> Y (``direction`` LEFT or RIGHT), broadcast;
    arithmetic right shifts on signed types (version 28), and a shift by a negative
    amount or by the width or more gives 0 (-1 for a right shift of a negative X)."""
    fn = {"LEFT": "shl", "RIGHT": "shr"}.get(direction)
    if fn is None:
        raise ctx.unsupported(f"direction must be 'LEFT' or 'RIGHT', got {direction!r}")
    return _binary(ctx, fn, X, Y)


@onnx_op("Where", 9, 16)
def Where(ctx, condition, X, Y):
    """Where: out[i] = select(cond[bcast(i)], X[bcast(i)], Y[bcast(i)]), 3-way broadcast;
    ``condition`` is bool."""
    return elementwise(ctx, "where", lambda c, x, y: call("select", c, x, y),
                       condition, X, Y)


@onnx_op("IsNaN", 9, 13, 20)
def IsNaN(ctx, X):
    """IsNaN: Y[i] = X[i] != X[i] (bool)."""
    return elementwise(ctx, "isnan", lambda x: ne(x, x), X)


@onnx_op("IsInf", 10, 20)
def IsInf(ctx, X, *, detect_negative=1, detect_positive=1):
    """IsInf: Y[i] = |X[i]| == inf (X[i] == inf, X[i] == -inf, or false when only positive,
    only negative or neither infinity is detected); bool."""
    if detect_negative and detect_positive:
        return elementwise(ctx, "isinf", lambda x: call("eq", call("abs", x), INF), X)
    if detect_negative or detect_positive:
        inf = INF if detect_positive else -INF
        return elementwise(ctx, "isinf", lambda x: call("eq", x, inf), X)
    return ctx.map(X.shape, Const(False, "bool"), label="isinf")


# -- casts among the dtypes of core.DTYPES ------------------------------------------------

def cast(ctx, input, dtype: str, saturate=1):
    """``input`` converted to ``dtype`` (itself when it has that type already: a float16
    temporary holding float32s stays so, as onnxruntime drops such a Cast), see
    :data:`polyc.frontend.core.CASTS`; to a float8 type clamped to its range first
    unless ``saturate`` is 0 (:func:`minifloat_cast`)."""
    if input.dtype == dtype:
        return input
    if dtype in MINIFLOATS:
        single = (lambda x: x) if input.dtype == "float32" else \
            (lambda x: call("cast_float32", x))
        return elementwise(ctx, f"cast_{dtype}",
                           lambda x: minifloat_cast(single(x), dtype, saturate), input)
    return elementwise(ctx, f"cast_{dtype}", lambda x: call(f"cast_{dtype}", x), input)


def minifloat_cast(value, target: str, saturate) -> Call:
    """The float ``value`` cast to the 8- or 4-bit float ``target``; with ``saturate``, clamped
    to its largest value first (infinities too; NaN stays NaN), as ONNX's Cast and
    QuantizeLinear do by default; else past it NaN (infinity for e5m2)."""
    if saturate:
        low, high = (Const(v) for v in value_range(target))
        value = Call("min", (Call("max", (value, low)), high))
    return Call(f"cast_{target}", (value,))


def _target(ctx, input, to: int) -> str:
    """The dtype of the ONNX element type ``to``; UnsupportedDtypeError for others."""
    dtype = dtype_name(to) if to in TensorProto.DataType.values() else str(to)
    if dtype not in DTYPES:
        raise ctx.dtype_error(f"casts '{input.name}' to dtype {dtype}; polyc computes with "
                              f"{', '.join(DTYPES)}")
    return dtype


@onnx_op("Cast", 6, 9, 13, 19, 21, 23, 24, 25, 28)
def Cast(ctx, input, *, to=None, saturate=1, round_mode="up"):
    """Cast among the floats, integers and bool of ``core.DTYPES``: one Map of
    ``cast_<to>`` (see ``core.CASTS``: float -> integer truncates, NaN and out-of-range
    values give what onnxruntime gives on x86; any -> bool is ``x != 0``). Other targets
    (float8, int4, string) are unsupported. ``saturate`` and ``round_mode``
    concern float8 targets only."""
    if to is None:
        raise ctx.unsupported("Cast needs the 'to' attribute")
    return cast(ctx, input, _target(ctx, input, to), saturate)


@onnx_op("BitCast", 26)
def BitCast(ctx, input, *, to=None):
    """BitCast: each element's bits read as the dtype ``to`` of the same width (one
    Map; the narrow floats, float32 in registers, are refused)."""
    if to is None:
        raise ctx.unsupported("BitCast needs the 'to' attribute")
    dtype = _target(ctx, input, to)
    return elementwise(ctx, f"bitcast_{dtype}", lambda x: call(f"bitcast_{dtype}", x), input)


@onnx_op("CastLike", 15, 19, 21, 23, 24, 25)
def CastLike(ctx, input, target_type, *, saturate=1, round_mode="up"):
    """CastLike: Cast to the dtype of ``target_type`` (see Cast)."""
    return cast(ctx, input, target_type.dtype, saturate)
