"""Typed values: the LLVM types of each dtype, and core functions and casts per type.

A value of dtype ``float32`` is ``float``, ``float64`` is ``double``, the integers are
``i64`` to ``i8`` (signless: the unsigned types' functions compare and divide unsigned)
and ``bool`` is ``i1`` in registers but one byte (``i8``, 0 or 1: numpy's bool_) in
memory; ``float16`` is ``half`` and ``bfloat16`` its 16 bits (``i16``) in memory, both
``float`` in registers (rounded to nearest-even when stored or cast to them); the 4- and
2-bit integers are ``i4``/``i2`` in registers and a byte holding their bits in memory. Vector
statements use ``<16 x T>`` of the same element types. Float functions are
:data:`polyc.codegen.exprs.FLOAT_FUNCTIONS` (and ``FLOAT64_FUNCTIONS``); integers wrap
around (two's complement: ``add``/``sub``/``mul`` carry no ``nsw``, so overflow is
defined), and division never reaches LLVM's undefined cases: a zero divisor gives 0 and
``MIN / -1`` gives ``MIN`` (onnxruntime traps on both). Casts are ``core.CASTS``: float
-> integer gives what onnxruntime gives on x86-64 (``cvttss2si``) for NaN, infinities and
values out of range, without LLVM's poison for those inputs.
"""

from __future__ import annotations

from llvmlite import ir

from polyc.codegen.exprs import F32, F64, FLOAT64_FUNCTIONS, FLOAT_FUNCTIONS, I1, I64, fconst
from polyc.codegen.vecmath import intrinsic
from polyc.frontend.core import (
    BIT_WIDTHS,
    CAST_VIA,
    FLOATS,
    INTEGER,
    MINIFLOATS,
    SUB_BYTE,
    UNSIGNED,
)

I32 = ir.IntType(32)
I16 = ir.IntType(16)
I8 = ir.IntType(8)
F16 = ir.HalfType()

BITS = {dtype: BIT_WIDTHS[dtype] for dtype in INTEGER}
_INTS = {64: I64, 32: I32, 16: I16, 8: I8, 4: ir.IntType(4), 2: ir.IntType(2)}
REGISTER = {"float32": F32, "float64": F64, "float16": F32, "bfloat16": F32, "bool": I1,
            **{dtype: F32 for dtype in MINIFLOATS},
            **{dtype: _INTS[bits] for dtype, bits in BITS.items()}}
MEMORY = {**REGISTER, "float16": F16, "bfloat16": I16, "bool": I8,
          **{dtype: I8 for dtype in (*SUB_BYTE, *MINIFLOATS)}}
_BYTES = {F32: 4, F64: 8, F16: 2}


def alignment(element: ir.Type) -> int:
    """The alignment of one element of memory type ``element`` (its size)."""
    return _BYTES.get(element) or element.width // 8


def shaped(typ: ir.Type, like: ir.Type) -> ir.Type:
    """``typ`` (a scalar type) with the lanes of ``like`` (a scalar or vector type)."""
    return ir.VectorType(typ, like.count) if isinstance(like, ir.VectorType) else typ


def register_type(dtype: str, lanes: int | None = None) -> ir.Type:
    typ = REGISTER[dtype]
    return ir.VectorType(typ, lanes) if lanes else typ


def constant(typ: ir.Type, dtype: str, value) -> ir.Constant:
    """``value`` as a constant of ``dtype`` shaped like ``typ`` (scalar or vector);
    an unsigned value of 2**(bits-1) or more as the signed number of its bits (LLVM's
    integer constants are signless)."""
    if dtype in FLOATS:
        return fconst(typ, float(value))
    number = int(bool(value)) if dtype == "bool" else int(value)
    if dtype in UNSIGNED and number >= 2 ** (BITS[dtype] - 1):
        number -= 2 ** BITS[dtype]
    if isinstance(typ, ir.VectorType):
        return ir.Constant(typ, [number] * typ.count)
    return ir.Constant(typ, number)


def _int(x, value: int) -> ir.Constant:
    return constant(x.type, "int64", value)


def _select_cmp(pred: str, unsigned: bool = False):
    """max/min: the operand the comparison ``pred`` picks."""
    compare = _icmp(pred, unsigned)
    return lambda b, x, y: b.select(compare(b, x, y), x, y)


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


def _icmp(pred: str, unsigned: bool = False):
    if unsigned:
        return lambda b, x, y: b.icmp_unsigned(pred, x, y)
    return lambda b, x, y: b.icmp_signed(pred, x, y)


def _select(b: ir.IRBuilder, c, x, y):
    return b.select(c, x, y)


def _shift(direction: str, signed: bool):
    """x shifted by y bits; y outside [0, width): 0, or -1 for shr of a negative signed
    x (LLVM's shifts are poison there: never selected)."""
    def emit(b: ir.IRBuilder, x, y):
        width = x.type.element.width if isinstance(x.type, ir.VectorType) else x.type.width
        inside = b.icmp_unsigned("<", y, _int(y, width))
        amount = b.select(inside, y, _int(y, 0))
        if direction == "shl":
            return b.select(inside, b.shl(x, amount), _int(x, 0))
        if not signed:
            return b.select(inside, b.lshr(x, amount), _int(x, 0))
        return b.select(inside, b.ashr(x, amount), b.ashr(x, _int(x, width - 1)))
    return emit


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
    "and": lambda b, x, y: b.and_(x, y),
    "or": lambda b, x, y: b.or_(x, y),
    "xor": lambda b, x, y: b.xor(x, y),
    "not": lambda b, x: b.not_(x),
    "shl": _shift("shl", True),
    "shr": _shift("shr", True),
}


def _uint_divide(instr: str):
    """Unsigned x / d or x % d (the same as the remainder's modulo); by 0 gives 0."""
    def emit(b: ir.IRBuilder, x, d):
        zero = b.icmp_unsigned("==", d, _int(d, 0))
        result = getattr(b, instr)(x, b.select(zero, _int(d, 1), d))
        return b.select(zero, _int(d, 0), result)
    return emit


UINT_FUNCTIONS = {
    **INT_FUNCTIONS,
    "div": _uint_divide("udiv"),
    "mod": _uint_divide("urem"),
    "fmod": _uint_divide("urem"),
    "abs": lambda b, x: x,
    "relu": lambda b, x: x,
    "sign": lambda b, x: b.zext(b.icmp_unsigned("!=", x, _int(x, 0)), x.type),
    "max": _select_cmp(">", unsigned=True),
    "min": _select_cmp("<", unsigned=True),
    **{fn: _icmp(pred, unsigned=True)
       for fn, pred in (("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="))},
    "shr": _shift("shr", False),
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

FUNCTIONS = {"float32": FLOAT_FUNCTIONS, "float16": FLOAT_FUNCTIONS, "bfloat16": FLOAT_FUNCTIONS,
             **{dtype: FLOAT_FUNCTIONS for dtype in MINIFLOATS},
             "float64": FLOAT64_FUNCTIONS, "bool": BOOL_FUNCTIONS,
             **{dtype: UINT_FUNCTIONS if dtype in UNSIGNED else INT_FUNCTIONS
                for dtype in BITS}}


def call(b: ir.IRBuilder, fn: str, args: list, dtypes: tuple[str, ...]) -> ir.Value:
    """``fn(args)`` on operands of ``dtypes`` (typed by ``core.result_dtype``; float16
    operands are float32 values, and so is the result)."""
    if fn.startswith("cast_"):
        return cast(b, args[0], dtypes[0], fn[len("cast_"):])
    if fn.startswith("bitcast_"):
        return _bitcast(b, args[0], dtypes[0], fn[len("bitcast_"):])
    operand = dtypes[-1] if fn == "select" else dtypes[0]
    return FUNCTIONS[operand][fn](b, *args)


def _bitcast(b: ir.IRBuilder, x, source: str, target: str) -> ir.Value:
    """The bits of ``x`` read as ``target`` (one width, no narrow float: core.BITCASTS);
    a byte read as bool is ``byte != 0``."""
    to = shaped(REGISTER[target], x.type)
    if source == "bool":
        return b.zext(x, to)
    if target == "bool":
        return b.icmp_unsigned("!=", x, ir.Constant(x.type, None))
    return x if x.type == to else b.bitcast(x, to)


def round_half(b: ir.IRBuilder, x) -> ir.Value:
    """The float32 ``x`` rounded to the nearest float16 (ties to even), as a float32.
    (A double goes through float32 first, as onnxruntime's cast does: LLVM's direct
    double -> half is a libcall the JIT does not resolve.)"""
    return b.fpext(b.fptrunc(x, shaped(F16, x.type)), x.type)


def cast(b: ir.IRBuilder, x, source: str, target: str) -> ir.Value:
    """``x`` of dtype ``source`` converted to ``target`` (``core.CASTS``)."""
    to = shaped(REGISTER[target], x.type)
    if target in ("float16", "bfloat16", *MINIFLOATS) and source in FLOATS:  # rounded now,
        single = cast(b, x, source, "float32")  # float32 in registers
        if target in MINIFLOATS:
            return _from_minifloat(b, _to_minifloat(b, single, target), target)
        return round_half(b, single) if target == "float16" else \
            _from_bfloat16(b, _to_bfloat16(b, single))
    if source == target:
        return x
    if x.type == to and source in FLOATS and target in FLOATS:
        return x  # float16 -> float32: the register already holds it
    if target == "bool":
        if source in FLOATS:
            return b.fcmp_unordered("!=", x, fconst(x.type, 0.0))  # NaN is true
        return b.icmp_signed("!=", x, constant(x.type, source, 0))
    if source in FLOATS and target in FLOATS:
        return b.fpext(x, to) if target == "float64" else b.fptrunc(x, to)
    if source in FLOATS:
        return _float_to_int(b, x, target)
    if target in FLOATS:
        return b.uitofp(x, to) if source == "bool" or source in UNSIGNED else b.sitofp(x, to)
    if source == "bool":
        return b.zext(x, to)
    if BITS[source] > BITS[target]:
        return b.trunc(x, to)
    if BITS[source] == BITS[target]:
        return x
    return b.zext(x, to) if source in UNSIGNED else b.sext(x, to)


def _float_to_int(b: ir.IRBuilder, x, target: str) -> ir.Value:
    """The float ``x`` as ``target`` (see core.CASTS), with fptosi only inside its range
    (its poison outside is never selected)."""
    via = CAST_VIA[target]
    value = _fptosi(b, x, via)
    if target in ("uint32", "uint64"):  # from 2**(bits-1) on: x - 2**(bits-1), top bit set
        half = 2.0 ** (BITS[target] - 1)
        high = b.xor(_fptosi(b, b.fsub(x, fconst(x.type, half)), via),
                     constant(value.type, via, -(2 ** (BITS[target] - 1))))
        value = b.select(b.fcmp_ordered(">=", x, fconst(x.type, half)), high, value)
    return cast(b, value, via, target)


def _fptosi(b: ir.IRBuilder, x, target: str) -> ir.Value:
    """fptosi to int32 or int64 inside the target's range; its minimum outside it and
    for NaN."""
    to = shaped(REGISTER[target], x.type)
    limit = 2.0 ** (BITS[target] - 1)
    inside = b.and_(b.fcmp_ordered(">=", x, fconst(x.type, -limit)),
                    b.fcmp_ordered("<", x, fconst(x.type, limit)))
    return b.select(inside, b.fptosi(x, to), constant(to, target, -(2 ** (BITS[target] - 1))))


def _to_bfloat16(b: ir.IRBuilder, x) -> ir.Value:
    """The float32 ``x`` rounded to bfloat16 (nearest, ties to even) as its 16 bits; a
    NaN stays a NaN (quiet, its sign kept)."""
    words = shaped(I32, x.type)
    bits = b.bitcast(x, words)
    high = b.lshr(bits, constant(words, "int32", 16))
    odd = b.and_(high, constant(words, "int32", 1))
    rounded = b.lshr(b.add(b.add(bits, constant(words, "int32", 0x7FFF)), odd),
                     constant(words, "int32", 16))
    quiet = b.or_(high, constant(words, "int32", 0x40))
    nan = b.fcmp_unordered("uno", x, x)
    return b.trunc(b.select(nan, quiet, rounded), shaped(I16, x.type))


def _from_bfloat16(b: ir.IRBuilder, bits) -> ir.Value:
    """The float32 of bfloat16's 16 ``bits``."""
    words = shaped(I32, bits.type)
    return b.bitcast(b.shl(b.zext(bits, words), constant(words, "int32", 16)),
                     shaped(F32, bits.type))


def _i32(like, value: int) -> ir.Constant:
    return constant(shaped(I32, like.type), "int32", value)


def _to_minifloat(b: ir.IRBuilder, x, dtype: str) -> ir.Value:
    """The float32 ``x`` as the byte of the 8- or 4-bit float ``dtype``
    (``core.MINIFLOATS``) nearest to it, ties to even (ml_dtypes' conversion): past the
    largest value NaN ("fn", "fnuz"), infinity ("ieee") or the largest value ("sat");
    NaN stays NaN ("sat": the zero of the other sign); "fnuz" has no negative zero."""
    exponent_bits, mantissa, bias, kind = MINIFLOATS[dtype]
    words = shaped(I32, x.type)
    bits = b.bitcast(x, words)
    top = (1 << (exponent_bits + mantissa)) - 1  # every bit of the magnitude
    sign = b.shl(b.lshr(bits, _i32(bits, 31)), _i32(bits, exponent_bits + mantissa))
    magnitude = b.and_(bits, _i32(bits, 0x7FFFFFFF))
    shift = 23 - mantissa
    odd = b.and_(b.lshr(magnitude, _i32(bits, shift)), _i32(bits, 1))
    rounded = b.lshr(b.add(b.add(magnitude, _i32(bits, (1 << (shift - 1)) - 1)), odd),
                     _i32(bits, shift))
    normal = b.sub(rounded, _i32(bits, (127 - bias) << mantissa))
    scaled = b.fmul(b.bitcast(magnitude, x.type), fconst(x.type, 2.0 ** (bias - 1 + mantissa)))
    nearest = b.call(intrinsic(b.module, "llvm.roundeven", scaled.type, 1), [scaled])
    tiny = b.fptosi(nearest, words)  # a subnormal's code
    small = b.icmp_unsigned("<", magnitude, _i32(bits, (128 - bias) << 23))
    code = b.select(small, tiny, normal)
    largest = {"fn": top - 1, "fnuz": top, "ieee": top - (1 << mantissa), "sat": top}[kind]
    over = b.icmp_signed(">", code, _i32(bits, largest))
    nan = b.icmp_unsigned(">", magnitude, _i32(bits, 0x7F800000))
    signed = b.or_(code, sign)
    if kind == "fnuz":  # one NaN (the sign bit alone), and zero has no sign
        signed = b.select(b.icmp_unsigned("==", code, _i32(bits, 0)), code, signed)
        result = b.select(b.or_(over, nan), _i32(bits, top + 1), signed)
    elif kind == "fn":
        result = b.select(b.or_(over, nan), b.or_(_i32(bits, top), sign), signed)
    elif kind == "sat":  # NaN: zero of the other sign (ml_dtypes)
        result = b.select(nan, b.xor(_i32(bits, top + 1), sign),
                          b.select(over, b.or_(_i32(bits, largest), sign), signed))
    else:
        infinity = b.or_(_i32(bits, largest + 1), sign)
        quiet = b.or_(_i32(bits, top - 1), sign)
        result = b.select(nan, quiet, b.select(over, infinity, signed))
    return b.trunc(result, shaped(I8, x.type))


def _from_minifloat(b: ir.IRBuilder, byte, dtype: str) -> ir.Value:
    """The float32 of the byte of an 8- or 4-bit float ``dtype`` (a 4-bit one in its
    low bits)."""
    exponent_bits, mantissa, bias, kind = MINIFLOATS[dtype]
    words = shaped(I32, byte.type)
    floats = shaped(F32, byte.type)
    top = (1 << (exponent_bits + mantissa)) - 1
    value = b.and_(b.zext(byte, words), _i32(byte, 2 * top + 1))
    sign = b.lshr(value, _i32(value, exponent_bits + mantissa))
    magnitude = b.and_(value, _i32(value, top))
    exponent = b.lshr(magnitude, _i32(value, mantissa))
    fraction = b.and_(magnitude, _i32(value, (1 << mantissa) - 1))
    normal = b.or_(b.shl(b.add(exponent, _i32(value, 127 - bias)), _i32(value, 23)),
                   b.shl(fraction, _i32(value, 23 - mantissa)))
    tiny = b.fmul(b.uitofp(fraction, floats), fconst(floats, 2.0 ** (1 - bias - mantissa)))
    result = b.select(b.icmp_unsigned("==", exponent, _i32(value, 0)), tiny,
                      b.bitcast(normal, floats))
    nan = fconst(floats, float("nan"))
    if kind == "fn":
        result = b.select(b.icmp_unsigned("==", magnitude, _i32(value, top)), nan, result)
    elif kind == "ieee":
        infinity = top - (1 << mantissa) + 1
        result = b.select(b.icmp_unsigned("==", magnitude, _i32(value, infinity)),
                          fconst(floats, float("inf")), result)
        result = b.select(b.icmp_unsigned(">", magnitude, _i32(value, infinity)), nan, result)
    negative = b.fneg(result)
    result = b.select(b.icmp_unsigned("==", sign, _i32(value, 1)), negative, result)
    if kind == "fnuz":
        result = b.select(b.icmp_unsigned("==", value, _i32(value, top + 1)), nan, result)
    return result


def from_memory(b: ir.IRBuilder, value, dtype: str) -> ir.Value:
    """A loaded value in its register type (a bool byte becomes ``byte != 0``, a half
    or a bfloat16 a float32)."""
    if dtype == "float16" and shaped(F16, value.type) == value.type:
        return b.fpext(value, shaped(F32, value.type))
    if dtype == "bfloat16" and shaped(I16, value.type) == value.type:
        return _from_bfloat16(b, value)
    if dtype in SUB_BYTE and shaped(I8, value.type) == value.type:  # its low bits
        return b.trunc(value, shaped(REGISTER[dtype], value.type))
    if dtype in MINIFLOATS and shaped(I8, value.type) == value.type:
        return _from_minifloat(b, value, dtype)
    if dtype != "bool":
        return value
    return b.icmp_unsigned("!=", value, ir.Constant(value.type, None))


def to_memory(b: ir.IRBuilder, value, dtype: str, element: ir.Type) -> ir.Value:
    """A value in the memory type ``element`` of its array (a bool becomes the byte 0 or
    1, a float16 rounded to nearest-even when its array holds halves)."""
    if dtype == "float16" and element == F16:
        return b.fptrunc(value, shaped(F16, value.type))
    if dtype == "bfloat16" and element == I16:
        return _to_bfloat16(b, value)
    if dtype in SUB_BYTE and element == I8:  # the low bits, the others 0 (ml_dtypes)
        return b.zext(value, shaped(I8, value.type))
    if dtype in MINIFLOATS and element == I8:
        return _to_minifloat(b, value, dtype)
    return b.zext(value, shaped(I8, value.type)) if dtype == "bool" else value


def index_within(b: ir.IRBuilder, value, extent: int | ir.Value) -> ir.Value:
    """An integer index (i64 or i32) as i64, negative ones counted from ``extent`` (ONNX),
    then clamped into ``[0, extent)`` so the element read is always inside the dim;
    ``extent`` is an int or an i64 value (a symbolic dim)."""
    if value.type != I64:
        value = b.sext(value, I64)  # Gather's indices are int32 or int64
    zero = ir.Constant(I64, 0)
    if isinstance(extent, int):
        size, last = ir.Constant(I64, extent), ir.Constant(I64, extent - 1)
    else:
        size, last = extent, b.sub(extent, ir.Constant(I64, 1))
    wrapped = b.select(b.icmp_signed("<", value, zero), b.add(value, size), value)
    low = b.select(b.icmp_signed("<", wrapped, zero), zero, wrapped)
    return b.select(b.icmp_signed(">", low, last), last, low)
