"""Typed values: the LLVM types of each dtype, and core functions and casts per type.

A value of dtype ``float32`` is ``float``, ``int64``/``int32`` are ``i64``/``i32`` and
``bool`` is ``i1`` in registers but one byte (``i8``, 0 or 1: numpy's bool_) in memory.
Vector statements use ``<16 x T>`` of the same element types. Float functions are
:data:`polyc.codegen.exprs.FLOAT_FUNCTIONS`; integers wrap around (two's complement:
``add``/``sub``/``mul`` carry no ``nsw``, so overflow is defined), and division never
reaches LLVM's undefined cases: a zero divisor gives 0 and ``MIN / -1`` gives ``MIN``
(onnxruntime traps on both). Casts are ``core.CASTS``: float -> integer gives the
integer minimum for NaN, infinities and values out of range, as onnxruntime does on
x86-64 (``cvttss2si``), without LLVM's poison for those inputs.
"""

from __future__ import annotations

from llvmlite import ir

from polyc.codegen.exprs import F32, FLOAT_FUNCTIONS, I1, I64, fconst

I32 = ir.IntType(32)
I8 = ir.IntType(8)

REGISTER = {"float32": F32, "int64": I64, "int32": I32, "bool": I1}
MEMORY = {"float32": F32, "int64": I64, "int32": I32, "bool": I8}
BITS = {"int64": 64, "int32": 32}


def alignment(element: ir.Type) -> int:
    """The alignment of one element of memory type ``element`` (its size)."""
    return 4 if element == F32 else element.width // 8


def shaped(typ: ir.Type, like: ir.Type) -> ir.Type:
    """``typ`` (a scalar type) with the lanes of ``like`` (a scalar or vector type)."""
    return ir.VectorType(typ, like.count) if isinstance(like, ir.VectorType) else typ


def register_type(dtype: str, lanes: int | None = None) -> ir.Type:
    typ = REGISTER[dtype]
    return ir.VectorType(typ, lanes) if lanes else typ


def constant(typ: ir.Type, dtype: str, value) -> ir.Constant:
    """``value`` as a constant of ``dtype`` shaped like ``typ`` (scalar or vector)."""
    if dtype == "float32":
        return fconst(typ, float(value))
    number = int(bool(value)) if dtype == "bool" else int(value)
    if isinstance(typ, ir.VectorType):
        return ir.Constant(typ, [number] * typ.count)
    return ir.Constant(typ, number)


def _int(x, value: int) -> ir.Constant:
    return constant(x.type, "int64", value)


def _select_cmp(pred: str):
    return lambda b, x, y: b.select(b.icmp_signed(pred, x, y), x, y)


def _safe_divisor(b: ir.IRBuilder, d):
    """``d`` with 0 and -1 replaced by 1 (sdiv/srem are undefined by 0, and MIN / -1)."""
    bad = b.or_(b.icmp_signed("==", d, _int(d, 0)), b.icmp_signed("==", d, _int(d, -1)))
    return b.select(bad, _int(d, 1), d)


def _int_div(b: ir.IRBuilder, x, d):
    """x / d truncated; x / 0 = 0, x / -1 = -x (wrapping)."""
    quotient = b.sdiv(x, _safe_divisor(b, d))
    quotient = b.select(b.icmp_signed("==", d, _int(d, -1)), b.neg(x), quotient)
    return b.select(b.icmp_signed("==", d, _int(d, 0)), _int(d, 0), quotient)


def _int_fmod(b: ir.IRBuilder, x, d):
    """C's x % d (the sign of x); x % 0 = 0."""
    remainder = b.srem(x, _safe_divisor(b, d))
    return b.select(b.icmp_signed("==", d, _int(d, 0)), _int(d, 0), remainder)


def _int_mod(b: ir.IRBuilder, x, d):
    """Python's x % d (the sign of d): C's remainder, plus d when the signs differ."""
    r = _int_fmod(b, x, d)
    differ = b.icmp_signed("!=", b.icmp_signed("<", r, _int(r, 0)),
                           b.icmp_signed("<", d, _int(d, 0)))
    adjust = b.and_(b.icmp_signed("!=", r, _int(r, 0)), differ)
    return b.select(adjust, b.add(r, d), r)


def _int_abs(b: ir.IRBuilder, x):
    return b.select(b.icmp_signed("<", x, _int(x, 0)), b.neg(x), x)


def _int_sign(b: ir.IRBuilder, x):
    negative = b.select(b.icmp_signed("<", x, _int(x, 0)), _int(x, -1), _int(x, 0))
    return b.select(b.icmp_signed(">", x, _int(x, 0)), _int(x, 1), negative)


def _icmp(pred: str):
    return lambda b, x, y: b.icmp_signed(pred, x, y)


def _select(b: ir.IRBuilder, c, x, y):
    return b.select(c, x, y)


INT_FUNCTIONS = {
    "add": lambda b, x, y: b.add(x, y),
    "sub": lambda b, x, y: b.sub(x, y),
    "mul": lambda b, x, y: b.mul(x, y),
    "div": _int_div,
    "mod": _int_mod,
    "fmod": _int_fmod,
    "neg": lambda b, x: b.neg(x),
    "abs": _int_abs,
    "relu": lambda b, x: b.select(b.icmp_signed("<", x, _int(x, 0)), _int(x, 0), x),
    "sign": _int_sign,
    "max": _select_cmp(">"),
    "min": _select_cmp("<"),
    "lt": _icmp("<"), "le": _icmp("<="), "gt": _icmp(">"), "ge": _icmp(">="),
    "eq": _icmp("=="),
    "select": _select,
}

BOOL_FUNCTIONS = {
    "and": lambda b, x, y: b.and_(x, y),
    "or": lambda b, x, y: b.or_(x, y),
    "xor": lambda b, x, y: b.xor(x, y),
    "not": lambda b, x: b.not_(x),
    "eq": lambda b, x, y: b.icmp_unsigned("==", x, y),
    "max": lambda b, x, y: b.or_(x, y),
    "min": lambda b, x, y: b.and_(x, y),
    "select": _select,
}

FUNCTIONS = {"float32": FLOAT_FUNCTIONS, "int64": INT_FUNCTIONS, "int32": INT_FUNCTIONS,
             "bool": BOOL_FUNCTIONS}


def call(b: ir.IRBuilder, fn: str, args: list, dtypes: tuple[str, ...]) -> ir.Value:
    """``fn(args)`` on operands of ``dtypes`` (typed by ``core.result_dtype``)."""
    if fn.startswith("cast_"):
        return cast(b, args[0], dtypes[0], fn[len("cast_"):])
    operand = dtypes[-1] if fn == "select" else dtypes[0]
    return FUNCTIONS[operand][fn](b, *args)


def cast(b: ir.IRBuilder, x, source: str, target: str) -> ir.Value:
    """``x`` of dtype ``source`` converted to ``target`` (see the module docstring)."""
    to = shaped(REGISTER[target], x.type)
    if source == target:
        return x
    if target == "bool":
        if source == "float32":
            return b.fcmp_unordered("!=", x, fconst(x.type, 0.0))  # NaN is true
        return b.icmp_signed("!=", x, constant(x.type, source, 0))
    if source == "float32":
        return _float_to_int(b, x, target, to)
    if target == "float32":
        return b.uitofp(x, to) if source == "bool" else b.sitofp(x, to)
    if source == "bool":
        return b.zext(x, to)
    return b.trunc(x, to) if BITS[source] > BITS[target] else b.sext(x, to)


def _float_to_int(b: ir.IRBuilder, x, target: str, to: ir.Type) -> ir.Value:
    """fptosi inside the target's range; the integer minimum outside it and for NaN
    (fptosi's poison there is never selected)."""
    limit = 2.0 ** (BITS[target] - 1)
    inside = b.and_(b.fcmp_ordered(">=", x, fconst(x.type, -limit)),
                    b.fcmp_ordered("<", x, fconst(x.type, limit)))
    return b.select(inside, b.fptosi(x, to), constant(to, target, -(2 ** (BITS[target] - 1))))


def from_memory(b: ir.IRBuilder, value, dtype: str) -> ir.Value:
    """A loaded value in its register type (a bool byte becomes ``byte != 0``)."""
    if dtype != "bool":
        return value
    return b.icmp_unsigned("!=", value, ir.Constant(value.type, None))


def to_memory(b: ir.IRBuilder, value, dtype: str) -> ir.Value:
    """A value in its memory type (a bool becomes the byte 0 or 1)."""
    return b.zext(value, shaped(I8, value.type)) if dtype == "bool" else value


def index_within(b: ir.IRBuilder, value, extent: int | ir.Value) -> ir.Value:
    """An integer index (i64 or i32) as i64, negative ones counted from ``extent`` (ONNX),
    then clamped into ``[0, extent)`` so the element read is always inside the dim;
    ``extent`` is an int or an i64 value (a symbolic dim)."""
    if value.type != I64:
        value = b.sext(value, I64)
    zero = ir.Constant(I64, 0)
    if isinstance(extent, int):
        size, last = ir.Constant(I64, extent), ir.Constant(I64, extent - 1)
    else:
        size, last = extent, b.sub(extent, ir.Constant(I64, 1))
    wrapped = b.select(b.icmp_signed("<", value, zero), b.add(value, size), value)
    low = b.select(b.icmp_signed("<", wrapped, zero), zero, wrapped)
    return b.select(b.icmp_signed(">", low, last), last, low)
