"""core's ``dot4``: four unsigned bytes times the four signed bytes of a word, summed
into an int32, as AVX-512 VNNI's ``vpdpbusd`` does per 32-bit lane (16 lanes a zmm: 64
multiply-adds in one instruction).

The four bytes ``a0..a3`` are consecutive bytes of one row (an int8 contraction's
activations); their values are assembled into a little-endian word, which LLVM turns
into one 32-bit load, then broadcast. An int8 ``a`` is read as ``a + 128`` (its sign
bit flipped), the unsigned operand the instruction takes; the frontend corrects for
the offset. Without VNNI on the host, or at a width the instruction does not have,
the same sum is written out byte by byte.
"""

from __future__ import annotations

import functools

from llvmlite import ir

from polyc.codegen.target import host_cpu
from polyc.codegen.vector import splat

I8 = ir.IntType(8)
I32 = ir.IntType(32)
# lanes of int32 -> the vpdpbusd intrinsic of that width (AVX512VNNI; 8 lanes: +VL)
INTRINSICS = {16: "llvm.x86.avx512.vpdpbusd.512", 8: "llvm.x86.avx512.vpdpbusd.256"}


@functools.cache
def host_has_vnni() -> bool:
    """The host CPU has AVX-512 VNNI (and VL, for the 256-bit form)."""
    features = host_cpu()[1].split(",")
    return "+avx512vnni" in features and "+avx512vl" in features


def dot4(b: ir.IRBuilder, acc, quads: list, word, signed: bool):
    """``acc + sum_r u(quads[r]) * s(byte r of word)``; ``quads`` are the four bytes (i8,
    scalars or vectors with one value in every lane), ``word`` and ``acc`` i32 values of
    one shape; ``signed``: the bytes are int8 (read as a + 128)."""
    lanes = word.type.count if isinstance(word.type, ir.VectorType) else None
    scalars = [b.extract_element(q, ir.Constant(I32, 0)) if lanes else q for q in quads]
    packed = b.zext(scalars[0], I32)
    for r, q in enumerate(scalars[1:], 1):
        packed = b.or_(packed, b.shl(b.zext(q, I32), ir.Constant(I32, 8 * r)))
    if signed:
        packed = b.xor(packed, ir.Constant(I32, 0x80808080 - (1 << 32)))
    if lanes is None:
        return _bytewise(b, acc, packed, word)
    packed = splat(b, packed, lanes)
    if lanes in INTRINSICS and host_has_vnni():
        typ = word.type
        fn = b.module.declare_intrinsic(INTRINSICS[lanes], fnty=ir.FunctionType(typ, [typ] * 3))
        return b.call(fn, [acc, packed, word])
    return _bytewise(b, acc, packed, word)


def _bytewise(b: ir.IRBuilder, acc, packed, word):
    """The sum of the four byte products, each widened to i32 (unsigned x signed)."""
    typ = word.type
    for r in range(4):
        shift = _like(typ, 8 * r)
        unsigned = b.and_(b.lshr(packed, shift), _like(typ, 0xFF))
        narrow = ir.VectorType(I8, typ.count) if isinstance(typ, ir.VectorType) else I8
        weight = b.sext(b.trunc(b.lshr(word, shift), narrow), typ)
        acc = b.add(acc, b.mul(unsigned, weight))
    return acc


def _like(typ: ir.Type, value: int) -> ir.Constant:
    if isinstance(typ, ir.VectorType):
        return ir.Constant(typ, [value] * typ.count)
    return ir.Constant(typ, value)

