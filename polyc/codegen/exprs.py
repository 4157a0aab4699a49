"""Expression tables: isl AST integer expressions and core float functions -> LLVM IR.

Index arithmetic is i64. ``fdiv_q`` is floor division (rounds towards -inf), not
``sdiv``; ``pdiv_q``/``pdiv_r`` have a non-negative dividend, so ``sdiv``/``srem`` do.
Float arithmetic carries the ``reassoc``, ``contract`` and ``arcp`` fast-math flags (FMA,
vectorised reductions, a division by a loop-invariant value as a multiplication by its
reciprocal), max/min ``nsz`` (either zero for max(-0, +0)), and nothing that changes
results on NaN or infinity. exp, log,
tanh and sigmoid are :mod:`polyc.codegen.vecmath`'s polynomial builders, not libm calls,
so loops using them vectorize. Comparisons give ``i1``; functions on other types are
in :mod:`polyc.codegen.scalars`.
"""

from __future__ import annotations

import hashlib

import islpy as isl
from llvmlite import ir

from polyc.codegen import vecmath
from polyc.codegen.vecmath import fconst, intrinsic
from polyc.frontend.core import INVERSE_HYPERBOLIC, TRIGONOMETRIC

I1 = ir.IntType(1)
I64 = ir.IntType(64)
F32 = ir.FloatType()
F64 = ir.DoubleType()
FAST = ("reassoc", "contract", "arcp")  # arcp: x / y may be x * (1 / y)

op = isl.ast_expr_op_type


NAME_LENGTH = 64  # LLVM cuts longer local names at 1024 characters, so two long
# array names with one prefix became one argument name ("redefinition of argument")


def value_name(name: str) -> str:
    """``name`` for an LLVM argument or local: as it is up to NAME_LENGTH characters,
    else its start and a hash of the whole (the names only help reading the IR)."""
    if len(name) <= NAME_LENGTH:
        return name
    return f"{name[:NAME_LENGTH - 9]}.{hashlib.sha1(name.encode()).hexdigest()[:8]}"


def _floor_div(b: ir.IRBuilder, x, y):
    """floor(x / y) for y > 0: sdiv on x, or on x - (y - 1) when x is negative."""
    adjusted = b.sub(x, b.sub(y, ir.Constant(I64, 1)))
    negative = b.icmp_signed("<", x, ir.Constant(I64, 0))
    return b.sdiv(b.select(negative, adjusted, x), y)


def _cmp(pred):
    return lambda b, x, y: b.icmp_signed(pred, x, y)


def _pick(pred):
    return lambda b, x, y: b.select(b.icmp_signed(pred, x, y), x, y)


INT_OPS = {
    op.add: lambda b, x, y: b.add(x, y),
    op.sub: lambda b, x, y: b.sub(x, y),
    op.mul: lambda b, x, y: b.mul(x, y),
    op.minus: lambda b, x: b.neg(x),
    op.div: lambda b, x, y: b.sdiv(x, y),     # exact division
    op.pdiv_q: lambda b, x, y: b.sdiv(x, y),  # dividend known non-negative
    op.pdiv_r: lambda b, x, y: b.srem(x, y),
    op.zdiv_r: lambda b, x, y: b.srem(x, y),  # only compared with zero
    op.fdiv_q: _floor_div,
    op.min: _pick("<"),
    op.max: _pick(">"),
    op.eq: _cmp("=="),
    op.le: _cmp("<="),
    op.lt: _cmp("<"),
    op.ge: _cmp(">="),
    op.gt: _cmp(">"),
    op.and_: lambda b, x, y: b.and_(x, y),
    op.and_then: lambda b, x, y: b.and_(x, y),  # no side effects: no need to short-cut
    op.or_: lambda b, x, y: b.or_(x, y),
    op.or_else: lambda b, x, y: b.or_(x, y),
    op.select: lambda b, c, x, y: b.select(c, x, y),
    op.cond: lambda b, c, x, y: b.select(c, x, y),
}


def int_expr(b: ir.IRBuilder, expr: isl.AstExpr, lookup) -> ir.Value:
    """Lower an isl AST expression; ``lookup(name)`` gives the value of an iterator."""
    kind = expr.get_type()
    if kind == isl.ast_expr_type.int:
        return ir.Constant(I64, expr.int_get_val().to_python())
    if kind == isl.ast_expr_type.id:
        return lookup(expr.id_get_id().get_name())
    if expr.op_get_type() not in INT_OPS:
        raise NotImplementedError(f"isl AST operator {expr.op_get_type()} in {expr.to_C_str()}")
    args = [int_expr(b, expr.op_get_arg(k), lookup) for k in range(expr.op_get_n_arg())]
    return apply_op(b, expr.op_get_type(), args)


def apply_op(b: ir.IRBuilder, kind, args: list[ir.Value]) -> ir.Value:
    """The isl AST operator ``kind`` on the lowered ``args`` (scalars, or vectors of
    the same shape; min and max are n-ary in isl's AST)."""
    emit = INT_OPS[kind]
    if kind in (op.min, op.max):
        result = args[0]
        for arg in args[1:]:
            result = emit(b, result, arg)
        return result
    return emit(b, *args)


def _flagged(instr):
    instr.flags.extend(FAST)
    return instr


def _call_intrinsic(name: str, fastmath: tuple[str, ...] = ()):
    def emit(b: ir.IRBuilder, *args):
        return b.call(intrinsic(b.module, name, args[0].type, len(args)), args,
                      fastmath=fastmath)
    return emit


# max/min keep NaN but may give either zero for max(-0, +0): ``nsz`` lets x86 use one
# vmaxps and a NaN test instead of a 6-instruction sequence (relu epilogues, softmax's
# row max took a third of its time). Dropped with the other flags without fast-math.
SIGNED_ZEROS = ("nsz",)


def _relu(b: ir.IRBuilder, x):
    """max(x, 0) with NaN kept (numpy.maximum, onnxruntime)."""
    return _call_intrinsic("llvm.maximum", SIGNED_ZEROS)(b, x, fconst(x.type, 0.0))


def _compare(pred: str):
    """A comparison as ``i1``; ordered, so any NaN operand gives false (as numpy)."""
    return lambda b, x, y: b.fcmp_ordered(pred, x, y)


def _sign(b: ir.IRBuilder, x):
    """-1, 0 or 1 (0 and NaN are returned as they are)."""
    negative = b.select(b.fcmp_ordered("<", x, fconst(x.type, 0.0)), fconst(x.type, -1.0), x)
    return b.select(b.fcmp_ordered(">", x, fconst(x.type, 0.0)), fconst(x.type, 1.0),
                    negative)


def _float_mod(b: ir.IRBuilder, x, y):
    """numpy.mod (Python's %): C's fmod plus y where the signs differ; a zero result
    takes y's sign (x mod inf: x, or inf where the signs differ; x mod 0: NaN)."""
    r = b.frem(x, y)
    zero = fconst(x.type, 0.0)
    differ = b.icmp_unsigned("!=", b.fcmp_ordered("<", r, zero), b.fcmp_ordered("<", y, zero))
    adjust = b.and_(b.fcmp_ordered("!=", r, zero), differ)
    r = b.select(adjust, b.fadd(r, y), r)
    signed_zero = _call_intrinsic("llvm.copysign")(b, zero, y)
    return b.select(b.fcmp_ordered("==", r, zero), signed_zero, r)


def _libm(name: str):
    """A call of libm's function ``name`` (no LLVM intrinsic for it; on float32 its
    ``f`` variant), lane by lane on a vector."""
    def emit(b: ir.IRBuilder, x):
        scalar = x.type.element if isinstance(x.type, ir.VectorType) else x.type
        symbol = name if scalar == F64 else f"{name}f"
        fn = b.module.globals.get(symbol) or ir.Function(
            b.module, ir.FunctionType(scalar, [scalar]), symbol)
        if not isinstance(x.type, ir.VectorType):
            return b.call(fn, [x])
        result = ir.Constant(x.type, None)
        for lane in range(x.type.count):
            at = ir.Constant(ir.IntType(32), lane)
            result = b.insert_element(result, b.call(fn, [b.extract_element(x, at)]), at)
        return result
    return emit


FLOAT_FUNCTIONS = {
    "add": lambda b, x, y: _flagged(b.fadd(x, y)),
    "sub": lambda b, x, y: _flagged(b.fsub(x, y)),
    "mul": lambda b, x, y: _flagged(b.fmul(x, y)),
    "div": lambda b, x, y: _flagged(b.fdiv(x, y)),
    "neg": lambda b, x: b.fneg(x),
    "abs": _call_intrinsic("llvm.fabs"),
    "exp": vecmath.exp,
    "log": vecmath.log,
    "sqrt": _call_intrinsic("llvm.sqrt"),
    "tanh": vecmath.tanh,
    "max": _call_intrinsic("llvm.maximum", SIGNED_ZEROS),  # NaN-propagating (numpy.maximum)
    "min": _call_intrinsic("llvm.minimum", SIGNED_ZEROS),
    "sigmoid": vecmath.sigmoid,
    "relu": _relu,
    "erf": vecmath.erf,
    "floor": _call_intrinsic("llvm.floor"),
    "ceil": _call_intrinsic("llvm.ceil"),
    "round": _call_intrinsic("llvm.roundeven"),
    "sign": _sign,
    "pow": _call_intrinsic("llvm.pow"),  # powf from libm
    "fmod": lambda b, x, y: b.frem(x, y),  # C fmod
    "mod": _float_mod,  # numpy.mod
    "lt": _compare("<"), "le": _compare("<="), "gt": _compare(">"), "ge": _compare(">="),
    "eq": _compare("=="),
    "select": lambda b, c, x, y: b.select(c, x, y),
    # libm's sinf, cosf, ... (LLVM calls them lane by lane in vector code)
    **{fn: _call_intrinsic(f"llvm.{fn}") for fn in TRIGONOMETRIC},
    **{fn: _libm(fn) for fn in INVERSE_HYPERBOLIC},  # asinhf, ...
}


def _sigmoid64(b: ir.IRBuilder, x):
    """1 / (1 + exp(-x)) in double (libm's exp)."""
    one = fconst(x.type, 1.0)
    return b.fdiv(one, b.fadd(one, _call_intrinsic("llvm.exp")(b, b.fneg(x))))


# float64: the float32 table with libm's double functions where float32 has polyc's
# polynomials (their error bounds are float32's)
FLOAT64_FUNCTIONS = {
    **FLOAT_FUNCTIONS,
    "exp": _call_intrinsic("llvm.exp"),
    "log": _call_intrinsic("llvm.log"),
    "tanh": _libm("tanh"),
    "sigmoid": _sigmoid64,
    "erf": _libm("erf"),
}
