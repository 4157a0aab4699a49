"""An 8-bit integer MatMul with constant weights as byte dot products (core ``dot4``).

``Y[.., i, j] = sum_k (A[.., i, k] - za) * (B[k, j] - zb)`` in int32, for uint8 or int8
A and B, with B a 2-D constant and K a multiple of 4. The CPU's byte dot product
(AVX-512 VNNI ``vpdpbusd``) multiplies 4 unsigned bytes by 4 signed ones and adds the
sum to an int32 lane, so the operands are brought to that form:

- ``a' = A + sa`` with ``sa = 128`` for int8 A (``dot4`` reads an int8 that way) and 0
  for uint8;
- ``b' = B - sb`` with ``sb = 128`` for uint8 B and 0 for int8, done at compile time,
  its 4 bytes ``b'[4k .. 4k+3, j]`` packed in the int32 word ``W[k, j]``.

Then with ``alpha = za + sa`` (one value or one per row) and ``beta = zb - sb`` (one or
one per column)::

    Y = sum_k a' b'  -  alpha * colsum(b')[j]  -  beta * rowsum(a')[i]  +  K alpha beta

The first term is one Reduce over ``(.., i, j, K/4)`` of ``dot4`` (a contraction the
register-tile recipe takes, B's words packed like float weights); ``colsum(b')`` is a
constant; ``rowsum(a')`` (only when ``beta`` may be nonzero: int8 weights quantized with
a zero point, or uint8 weights) is a Reduce over A. int32 arithmetic wraps, so the
terms give the exact sum whenever it fits in int32, as the plain loops do.
"""

from __future__ import annotations

import numpy as np

from polyc.frontend.core import Call, Const, Ix, Read, identity_index
from polyc.frontend.ops.indexing import value_at

BYTES = ("uint8", "int8")
OFFSET = 128  # int8 <-> uint8: the sign bit flipped


def byte_product(ctx, A, B, a_zero_point, b_zero_point):
    """The tensor of the int32 product, or None when it does not take this form."""
    weights = ctx.constant_value(B)
    k_size = A.shape[-1] if A.shape else None
    if (A.dtype not in BYTES or B.dtype not in BYTES or weights is None
            or len(B.shape) != 2 or len(A.shape) < 2 or not isinstance(k_size, int)
            or k_size % 4 or not k_size or B.shape[0] != k_size):
        return None
    shifted = signed_weights(weights, B.dtype)
    W = ctx.constant(words(shifted), label="byte_words")
    out_shape = tuple(A.shape[:-1]) + (B.shape[1],)
    rank = len(out_shape)
    i, j, k = Ix.var(rank - 2), Ix.var(rank - 1), Ix.var(rank, 4)
    batch = identity_index(rank - 2)
    quad = tuple(Read(A.name, batch + (i, Ix(k.terms, r))) for r in range(4))
    raw = ctx.reduce(out_shape=out_shape, init=Const(0, "int32"),
                     extents=out_shape + (k_size // 4,), out_index=identity_index(rank),
                     combiner="add", expr=Call("dot4", quad + (Read(W.name, (Ix.var(rank), j)),)),
                     label="byte_product")
    alpha = shift(ctx, a_zero_point, OFFSET if A.dtype == "int8" else 0, i)
    beta = shift(ctx, b_zero_point, -OFFSET if B.dtype == "uint8" else 0, j)
    value = corrected(
        ctx, Read(raw.name, identity_index(rank)), alpha,
        lambda: Read(ctx.constant(shifted.sum(axis=0).astype(np.int32), "weight_sums").name,
                     (j,)), beta,
        lambda: Read(_row_sums(ctx, A, OFFSET if A.dtype == "int8" else 0).name,
                     identity_index(rank - 1)), k_size)
    if value == Read(raw.name, identity_index(rank)):
        return raw
    return ctx.map(out_shape, value, label="zero_points")


def corrected(ctx, raw, alpha, weight_sums, beta, input_sums, taps: int):
    """``raw - alpha * weight_sums - beta * input_sums + taps * alpha * beta``: the sum of
    the shifted products from the raw byte products (module docstring); a term whose
    factor is the constant 0 is left out, and ``weight_sums`` / ``input_sums`` (functions
    giving the reads of those sums) are called only for a term that stays."""
    zero = Const(0, "int32")
    value = raw
    if alpha != zero:
        value = Call("sub", (value, Call("mul", (alpha, weight_sums()))))
    if beta != zero:
        value = Call("sub", (value, Call("mul", (beta, input_sums()))))
        if alpha != zero:
            value = Call("add", (value, Call("mul", (Const(taps, "int32"),
                                                     Call("mul", (alpha, beta))))))
    return value


def signed_weights(weights: np.ndarray, dtype: str) -> np.ndarray:
    """Constant 8-bit weights as the signed bytes ``dot4`` takes: uint8 ones minus 128
    (int32 values in [-128, 127])."""
    return weights.astype(np.int32) - (OFFSET if dtype == "uint8" else 0)


def words(shifted: np.ndarray) -> np.ndarray:
    """int32 words of signed bytes: word ``[q, ..]`` holds ``shifted[4q + r, ..]`` as its
    byte ``r`` (little-endian); the first dim a multiple of 4."""
    quads = shifted.astype(np.int8).reshape(shifted.shape[0] // 4, 4, *shifted.shape[1:])
    return np.ascontiguousarray(np.moveaxis(quads, 1, -1)).view("<i4")[..., 0].astype(np.int32)


def shift(ctx, zero_point, offset: int, index: Ix):
    """``zero_point + offset`` in int32: a Const when it is known at compile time (a
    constant of one value), else an expression (one value, or one per ``index``)."""
    if zero_point is None:
        return Const(offset, "int32")
    value = ctx.constant_value(zero_point)
    if value is not None and value.size == 1:
        return Const(int(value.reshape(-1)[0]) + offset, "int32")
    zero = Call("cast_int32", (value_at(zero_point, (index,)),))
    return zero if not offset else Call("add", (zero, Const(offset, "int32")))


def _row_sums(ctx, A, offset: int):
    """``sum_k A[.., i, k] + K * offset`` over A's last dim, in int32."""
    rank = len(A.shape)
    init = Const(A.shape[-1] * offset, "int32")
    return ctx.reduce(out_shape=A.shape[:-1], init=init, extents=A.shape,
                      out_index=identity_index(rank - 1), combiner="add",
                      expr=Call("cast_int32", (Read(A.name, identity_index(rank)),)),
                      label="row_sums")
