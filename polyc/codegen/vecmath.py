"""Vectorizable float32 math: exp, log, tanh, sigmoid and erf as plain LLVM IR.

LLVM lowers ``llvm.exp``/``llvm.log``/``llvm.tanh`` on float to scalar libm calls
(``expf``...), which stops the loop vectorizer. Each builder here emits only float and
integer arithmetic, bitcasts, ``fcmp``/``select`` and intrinsics that every vector unit
has (``llvm.fma``, ``llvm.rint``, ``llvm.fabs``, ``llvm.copysign``, ``llvm.minnum``,
``llvm.maxnum``), on ``float`` or on any ``<N x float>``: the result has the argument's
type. Nothing relies on fast-math flags (none are set; FMA is the explicit ``llvm.fma``,
a single instruction on FMA hosts), so the results are the same in bit-exact mode. On
AVX-512 hosts exp scales 16 lanes by 2^n with ``vscalefps`` itself (an x86 intrinsic),
with the same results as the portable ``llvm.ldexp`` form, and takes a table form on
them (read with ``vpermps``): polyc's 16-lane vector statements and the loops LLVM
vectorizes or leaves scalar may differ in the last bits there, each within the bound.

Error in ulp of the exact value at float32 precision (denormal results in units of
2^-149; 0.5 is correct rounding), against float64 numpy (``math.erf`` for erf): the
maximum over every float32 input (erf: every input in [0, 4); it is odd and exactly
+-1 beyond), measured with the JIT-compiled loops of ``tests/test_vecmath.py``, which
checks the bounds on 10^6 seeded points and special values:

========  ========  ====================================================================
function  max ulp   special values
========  ========  ====================================================================
exp       1.062     +inf from 88.72284 (where e^x rounds to +inf); denormal results from
                    -87.34 down to -103.972, then 0; exp(-inf) = 0
log       0.827     log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf; denormal inputs
tanh      1.364     tanh(+-0) = +-0, +-1 from |x| = 9.0109 on (as the exact value)
sigmoid   3.149     0 at -inf, denormal results down to -103.972; 1 from 16.64 on (the
                    exact value rounds to 1 from 17.33: 1 ulp below 1 until there)
erf       1.118     erf(+-0) = +-0, +-1 from |x| = 3.9192 on (as the exact value)
========  ========  ====================================================================

NaN in gives NaN out everywhere. exp and log are Cephes' ``expf``/``logf`` (Moshier)
with FMA, exp on 16 lanes with AVX-512 a table method (:func:`_exp_table_form`, whose
bounds are the ones above; Cephes' form: exp 1.011, tanh 1.331, sigmoid 2.402, erf
1.083); tanh is Cephes' ``tanhf`` odd polynomial below 0.625 and
``1 - 2 / (e^(2|x|) + 1)`` above; the erf polynomials are minimax fits made for this
module (see :func:`erf`).
"""

from __future__ import annotations

import functools
import math

from llvmlite import ir

from polyc.codegen import target

I32 = ir.IntType(32)

LN2_HI = 0.693359375  # 355/512: n * LN2_HI is exact and x - n * LN2_HI too (Sterbenz)
LN2_LO = -2.12194440e-4  # ln 2 - LN2_HI
LOG2E = 1.44269504088896341
EXP_HI = 88.8  # exp(x) overflows to +inf above 88.7228
EXP_LO = -104.0  # exp(x) rounds to 0 below -103.973
EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
            1.6666665459e-1, 5.0000001201e-1)  # (e^r - 1 - r) / r^2, |r| <= ln2/2
EXP_STEPS = 16  # exp's table form: x = n ln2/16 + r, a table of 2^(j/16), j = n mod 16
EXP_TABLE = tuple(2.0 ** (j / EXP_STEPS) for j in range(EXP_STEPS))  # rounded to float32
EXP_TABLE_POLY = (1 / 6, 0.5)  # (e^r - 1 - r) / r^2 ~ 1/2 + r/6, |r| <= ln2/32: r^4/24
# t + this rounds t to a multiple of 1/EXP_STEPS, held as n = t * EXP_STEPS in the low bits
ROUNDING_MAGIC = 1.5 * 2.0 ** 23 / EXP_STEPS
LOG_POLY = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
            1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
            3.3333331174e-1)  # (log(1+f) - f + f^2/2) / f^3, f in [sqrt(1/2)-1, sqrt(2)-1)
SQRT_HALF_BITS = 0x3F3504F3  # bit pattern of float32 sqrt(1/2)
TANH_SMALL = 0.625
TANH_POLY = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
             -3.33332819422e-1)  # (tanh(x) - x) / x^3 in x^2, |x| < 0.625
ERF_SMALL = 1.0
ERF_SMALL_POLY = (7.853895e-05, -0.0008010205, 0.005188329, -0.026853813, 0.112835854,
                  -0.37612626, 0.12837917)  # erf(x) / x - 1 in x^2, |x| < 1
ERF_ONE = 3.95  # erf(x) rounds to 1 from 3.9192 on
ERF_CENTER = 2.5
ERF_LARGE_POLY = (1.0618444e-07, -4.2082394e-07, 9.588832e-07, -3.7786367e-06,
                  1.6149363e-05, -5.9460235e-05, 0.00021088649, -0.0007332078, 0.0024670777,
                  -0.008001675, 0.024937993, -0.07434734, 0.21080637)  # e^(x^2) erfc(x)
FLT_MIN = 2.0 ** -126


def fconst(typ: ir.Type, value: float) -> ir.Constant:
    """``value`` as a float32 constant of ``typ`` (a scalar or every lane of a vector)."""
    if isinstance(typ, ir.VectorType):
        return ir.Constant(typ, [value] * typ.count)
    return ir.Constant(typ, value)


def int_type(typ: ir.Type) -> ir.Type:
    """The i32 type with the shape of the float type ``typ`` (scalar or vector)."""
    return ir.VectorType(I32, typ.count) if isinstance(typ, ir.VectorType) else I32


def iconst(typ: ir.Type, value: int) -> ir.Constant:
    """``value`` as an i32 constant shaped like the float type ``typ``."""
    ityp = int_type(typ)
    return ir.Constant(ityp, [value] * ityp.count if isinstance(ityp, ir.VectorType) else value)


def intrinsic(module: ir.Module, name: str, typ: ir.Type, arity: int) -> ir.Function:
    """The declaration of the float intrinsic ``name`` (``llvm.fma``...) on ``typ``
    (float or double, a scalar or a vector)."""
    element = typ.element if isinstance(typ, ir.VectorType) else typ
    suffix = "f64" if isinstance(element, ir.DoubleType) else "f32"
    if isinstance(typ, ir.VectorType):
        suffix = f"v{typ.count}{suffix}"
    return module.declare_intrinsic(f"{name}.{suffix}", fnty=ir.FunctionType(typ, [typ] * arity))


def _call(b: ir.IRBuilder, name: str, *args) -> ir.Value:
    return b.call(intrinsic(b.module, name, args[0].type, len(args)), args)


def _fma(b: ir.IRBuilder, x, y, z) -> ir.Value:
    """x * y + z, rounded once."""
    return _call(b, "llvm.fma", x, y, z)


def _horner(b: ir.IRBuilder, x, coeffs) -> ir.Value:
    """The polynomial with ``coeffs`` (highest degree first) at ``x``, by FMA."""
    p = fconst(x.type, coeffs[0])
    for c in coeffs[1:]:
        p = _fma(b, p, x, fconst(x.type, c))
    return p


def _pow2(b: ir.IRBuilder, n, typ: ir.Type) -> ir.Value:
    """2^n as a float of ``typ`` for an i32 ``n`` in [-126, 127]: bits (n + 127) << 23."""
    bits = b.shl(b.add(n, iconst(typ, 127)), iconst(typ, 23))
    return b.bitcast(bits, typ)


@functools.cache
def scalef_available() -> bool:
    """Whether the host has AVX-512F, whose ``vscalefps`` computes y * 2^n in one
    instruction: LLVM lowers ``llvm.ldexp`` to it (and vectorizes it). Elsewhere
    ``llvm.ldexp`` is a libm call per element."""
    return _has_avx512f()


def _has_avx512f() -> bool:
    """Whether the host has AVX-512F (:func:`scalef_available` is the switch the tests
    turn off for exp's portable scaling; its table form does not follow it)."""
    _, features = target.host_cpu()
    return "+avx512f" in features.split(",")


def _ldexp(b: ir.IRBuilder, y, n) -> ir.Value:
    """y * 2^n for i32 ``n`` in [-252, 254], correctly rounded (one rounding: denormal
    results and +inf past FLT_MAX as the exact product rounds).

    With AVX-512 ``llvm.ldexp``: one ``vscalefps`` for the shifts, adds and two
    products of the portable form (a 1024x1024 Softmax, whose time is mostly exp, went
    from 1.21-1.24 to 1.07-1.11x onnxruntime's); otherwise y * 2^(n>>1) * 2^(n - n>>1):
    the first product is exact for y in [0.5, 2], the second rounds.
    """
    if scalef_available():
        suffix = (f"v{y.type.count}f32.v{y.type.count}i32" if isinstance(y.type, ir.VectorType)
                  else "f32.i32")
        fn = b.module.declare_intrinsic(f"llvm.ldexp.{suffix}",
                                        fnty=ir.FunctionType(y.type, [y.type, n.type]))
        return b.call(fn, [y, n])
    half = b.ashr(n, iconst(y.type, 1))
    rest = b.sub(n, half)
    return b.fmul(b.fmul(y, _pow2(b, half, y.type)), _pow2(b, rest, y.type))


def _is_nan(b: ir.IRBuilder, x) -> ir.Value:
    return b.fcmp_unordered("uno", x, x)


def exp(b: ir.IRBuilder, x) -> ir.Value:
    """e^x, max error 1.062 ulp; +inf above 88.7228, denormal results, NaN -> NaN.

    The argument is clamped to [-104, 88.8] first, then (Cephes' ``expf``) x = n ln2 + r
    with n = rint(x log2 e) and |r| <= ln2/2 (ln 2 split in two so the reduction is exact
    but for one rounding), e^r = 1 + r + r^2 P(r), times 2^n; on 16 lanes with AVX-512,
    the table form of :func:`_exp_table_form`.
    """
    return _exp_clamped(b, x, upper=True)


def _exp_clamped(b: ir.IRBuilder, x, *, upper: bool) -> ir.Value:
    """e^x clamped to [-104, 88.8] first (to [-104, x] without ``upper``: x <= 0).

    On 16 lanes with AVX-512 the clamps keep NaN (a select that keeps x unless it is
    ordered below the bound), so it flows through to the result, and ``vscalefps``
    takes the exponent as a float (no conversion to integer and back). Elsewhere NaN is
    clamped to a number, the exponent converted to an integer for ``llvm.ldexp``, and
    NaN put back at the end.
    """
    typ = x.type
    direct = _scale_vector(typ)
    if direct:
        clamped = _above(b, x, EXP_LO)
        if upper:
            clamped = b.select(b.fcmp_ordered(">", clamped, fconst(typ, EXP_HI)),
                               fconst(typ, EXP_HI), clamped)
    else:
        clamped = _call(b, "llvm.maxnum", x, fconst(typ, EXP_LO))
        if upper:
            clamped = _call(b, "llvm.minnum", clamped, fconst(typ, EXP_HI))
    if _table_form(typ):
        er, exponent = _exp_table_form(b, clamped)
        if not direct:  # (vscalefps floors the exponent itself)
            exponent = _call(b, "llvm.floor", exponent)
    else:
        nf = _call(b, "llvm.rint", b.fmul(clamped, fconst(typ, LOG2E)))
        r = _fma(b, nf, fconst(typ, -LN2_HI), clamped)
        r = _fma(b, nf, fconst(typ, -LN2_LO), r)
        p = _horner(b, r, EXP_POLY)
        er = b.fadd(_fma(b, p, b.fmul(r, r), r), fconst(typ, 1.0))
        exponent = nf
    if direct:
        return _scalef(b, er, exponent)
    return b.select(_is_nan(b, x), x, _ldexp(b, er, b.fptosi(exponent, int_type(typ))))


def _table_form(typ: ir.Type) -> bool:
    """Whether exp of ``typ`` takes the table form: 16 lanes on an AVX-512F host (the
    table is one register there). The loops LLVM vectorizes itself keep Cephes' form:
    when a 1024x1024 Softmax's exp and sum were such a loop, the table read as a gather
    made it 0.36 -> 0.65 ms, as a tree of selects 0.61 ms (that loop is now polyc's
    own, :mod:`polyc.codegen.folds`)."""
    return isinstance(typ, ir.VectorType) and typ.count == 16 and _has_avx512f()


def _exp_table_form(b: ir.IRBuilder, x) -> tuple[ir.Value, ir.Value]:
    """(T[n mod 16] e^r, n/16) for 16 lanes of a clamped x, e^x = that * 2^floor(n/16).

    x = n ln2/16 + r with n = rint(16 x log2 e), |r| <= ln2/32 (ln2/16 split in two
    as ln 2 is in Cephes' form), T[j] = 2^(j/16) rounded to float32, read with one
    ``vpermps`` (which takes the index's low 4 bits) from a register, and e^r = 1 + r +
    r^2 (1/2 + r/6). One FMA, x log2 e + 1.5 * 2^19, rounds x log2 e to a multiple of
    1/16, n/16 (the sum's ulp), and leaves n in the low bits of the sum; n/16 is then
    the exponent ``vscalefps`` floors. That is 4 fewer of the FMA unit's instructions
    per vector than Cephes' form: exp over 188,160 floats 38 -> 33 us, x * sigmoid(x)
    57 -> 50 us (Zen 4) with one fewer (n rounded as 16 x log2 e + 1.5 * 2^23, its
    exponent a product by 1/16); the error bounds rise a little (exp 1.011 -> 1.062
    ulp, sigmoid 2.402 -> 3.149; max over all floats 1.0615 and 3.1489 either way).
    """
    typ = x.type
    magic = fconst(typ, ROUNDING_MAGIC)
    rounded = _fma(b, x, fconst(typ, LOG2E), magic)
    steps = b.fsub(rounded, magic)  # n / 16
    r = _fma(b, steps, fconst(typ, -LN2_HI), x)
    r = _fma(b, steps, fconst(typ, -LN2_LO), r)
    index = b.bitcast(rounded, int_type(typ))
    permute = b.module.declare_intrinsic("llvm.x86.avx512.permvar.sf.512",
                                         fnty=ir.FunctionType(typ, [typ, index.type]))
    table = b.call(permute, [ir.Constant(typ, list(EXP_TABLE)), index])
    p = _fma(b, _horner(b, r, EXP_TABLE_POLY), b.fmul(r, r), r)
    return _fma(b, table, p, table), steps


def _scale_vector(typ: ir.Type) -> bool:
    """Whether ``typ`` is a 16-lane float vector on an AVX-512 host: its exponent
    scaling is one ``vscalefps`` of a float exponent (``llvm.ldexp`` takes an integer
    one: two conversions)."""
    return isinstance(typ, ir.VectorType) and typ.count == 16 and scalef_available()


def _scalef(b: ir.IRBuilder, y, n) -> ir.Value:
    """y * 2^n for 16 lanes, ``n`` an integral float (``vscalefps``, all lanes, the
    current rounding mode)."""
    typ, mask = y.type, ir.IntType(16)
    fn = b.module.declare_intrinsic("llvm.x86.avx512.mask.scalef.ps.512",
                                    fnty=ir.FunctionType(typ, [typ, typ, typ, mask, I32]))
    return b.call(fn, [y, n, y, ir.Constant(mask, -1), ir.Constant(I32, 4)])


def _above(b: ir.IRBuilder, x, low: float) -> ir.Value:
    """max(x, low), NaN kept: one ``vmaxps`` (``llvm.maxnum`` returns ``low`` for NaN)."""
    bound = fconst(x.type, low)
    return b.select(b.fcmp_ordered("<", x, bound), bound, x)


def log(b: ir.IRBuilder, x) -> ir.Value:
    """ln x, max error 0.827 ulp; log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf.

    x = 2^e m with m in [sqrt(1/2), sqrt(2)) split off by integer operations on the bits
    (denormals are scaled by 2^23 first); ln x = e ln2 + f - f^2/2 + f^3 P(f), f = m - 1.
    """
    typ = x.type
    denormal = b.fcmp_ordered("<", x, fconst(typ, FLT_MIN))
    scaled = b.select(denormal, b.fmul(x, fconst(typ, 2.0 ** 23)), x)
    bits = b.bitcast(scaled, int_type(typ))
    e = b.ashr(b.sub(bits, iconst(typ, SQRT_HALF_BITS)), iconst(typ, 23))
    m = b.bitcast(b.sub(bits, b.shl(e, iconst(typ, 23))), typ)
    e = b.sub(e, b.select(denormal, iconst(typ, 23), iconst(typ, 0)))
    ef = b.sitofp(e, typ)
    f = b.fsub(m, fconst(typ, 1.0))
    z = b.fmul(f, f)
    y = b.fmul(b.fmul(_horner(b, f, LOG_POLY), f), z)
    y = _fma(b, ef, fconst(typ, LN2_LO), y)
    y = _fma(b, z, fconst(typ, -0.5), y)
    result = _fma(b, ef, fconst(typ, LN2_HI), b.fadd(f, y))
    result = b.select(b.fcmp_ordered("==", x, fconst(typ, math.inf)), x, result)
    result = b.select(b.fcmp_ordered("==", x, fconst(typ, 0.0)), fconst(typ, -math.inf), result)
    return b.select(b.fcmp_unordered("<", x, fconst(typ, 0.0)), fconst(typ, math.nan), result)


def tanh(b: ir.IRBuilder, x) -> ir.Value:
    """tanh x, max error 1.364 ulp; +-1 from |x| >= 9.01 (and at +-inf), NaN -> NaN.

    On a = |x|, then with the sign of x (so tanh(-0) = -0): a < 0.625: a + a^3 P(a^2);
    otherwise 1 - 2 / (e^(2a) + 1), which saturates by itself once e^(2a) is large.
    """
    typ = x.type
    one = fconst(typ, 1.0)
    ax = _call(b, "llvm.fabs", x)
    z = b.fmul(ax, ax)
    small = _fma(b, b.fmul(_horner(b, z, TANH_POLY), z), ax, ax)
    e = exp(b, b.fadd(ax, ax))
    large = b.fsub(one, b.fdiv(fconst(typ, 2.0), b.fadd(e, one)))
    result = b.select(b.fcmp_ordered("<", ax, fconst(typ, TANH_SMALL)), small, large)
    return _call(b, "llvm.copysign", result, x)


def sigmoid(b: ir.IRBuilder, x) -> ir.Value:
    """1 / (1 + e^-x), max error 3.149 ulp; 0 at -inf, 1 at +inf, NaN -> NaN.

    With e = e^-|x|: 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, so that large
    negative x give e^x (down to the denormals) rather than 1 / +inf.
    """
    typ = x.type
    one = fconst(typ, 1.0)
    e = _exp_clamped(b, b.fneg(_call(b, "llvm.fabs", x)), upper=False)
    numerator = b.select(b.fcmp_ordered("<", x, fconst(typ, 0.0)), e, one)
    return b.fdiv(numerator, b.fadd(one, e))


def erf(b: ir.IRBuilder, x) -> ir.Value:
    """erf x, max error 1.118 ulp; +-1 from |x| >= 3.92 (and at +-inf), NaN -> NaN.

    On a = |x|, then with the sign of x: a < 1: a + a P(a^2); otherwise
    1 - e^(-z^2) Q(z - 2.5) with z = min(a, 3.95) and Q ~ e^(z^2) erfc(z). P (degree 6,
    relative error 1.2e-9) and Q (degree 12, 4.4e-9) are minimax fits in relative error
    (iteratively reweighted least squares against float64 ``math.erf``/``math.erfc``),
    rounded to float32.
    """
    typ = x.type
    ax = _call(b, "llvm.fabs", x)
    small = _fma(b, ax, _horner(b, b.fmul(ax, ax), ERF_SMALL_POLY), ax)
    limit = fconst(typ, ERF_ONE)
    z = b.select(b.fcmp_ordered(">", ax, limit), limit, ax)  # keeps NaN
    q = _horner(b, b.fsub(z, fconst(typ, ERF_CENTER)), ERF_LARGE_POLY)
    large = b.fsub(fconst(typ, 1.0), b.fmul(exp(b, b.fneg(b.fmul(z, z))), q))
    result = b.select(b.fcmp_ordered("<", ax, fconst(typ, ERF_SMALL)), small, large)
    return _call(b, "llvm.copysign", result, x)
