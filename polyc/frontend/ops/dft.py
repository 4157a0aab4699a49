"""DFT: discrete Fourier transforms along one axis, as one Reduce over a table.

The input's last dim holds a real value (1) or a complex one (real, imaginary: 2);
the output's holds the complex result. ``Y[k] = sum_n X[n] e^(-2 pi i k n / N)`` (with
``inverse``: ``+`` and a factor 1/N) is one Reduce over the output and ``n`` reading
constant tables of ``cos`` and ``sin`` (computed in float64 when compiling, the 1/N
folded in); ``N`` is ``dft_length`` (the signal cut or padded with zeros) or the axis's
extent; ``onesided`` keeps the first ``N/2 + 1`` frequencies of a real signal. An
inverse of a onesided spectrum (numpy's irfft) gives a real signal of ``2 (K - 1)``
values (or ``dft_length``), the missing half taken as the conjugate mirror. Cost: N
multiply-adds per output value (no FFT).
"""

from __future__ import annotations

import numpy as np

from polyc.frontend.core import Call, Const, Ix, Read
from polyc.frontend.ops.elementwise import call
from polyc.frontend.ops.indexing import normalize_axis
from polyc.frontend.ops.registry import onnx_op


@onnx_op("DFT", 17)
def DFT_17(ctx, input, dft_length=None, *, axis=1, inverse=0, onesided=0):
    """DFT-17: ``axis`` an attribute (default 1)."""
    return _dft(ctx, input, dft_length, axis, bool(inverse), bool(onesided))


@onnx_op("DFT", 20)
def DFT(ctx, input, dft_length=None, axis=None, *, inverse=0, onesided=0):
    """DFT-20: ``axis`` a constant input (default -2, the last signal dim)."""
    value = -2 if axis is None else ctx.int_values(axis, "axis")
    if not isinstance(value, int):
        if len(value) != 1:
            raise ctx.shape_error(f"axis must hold one value, got {list(value)}")
        value = value[0]
    return _dft(ctx, input, dft_length, value, bool(inverse), bool(onesided))


def _dft(ctx, x, dft_length, axis: int, inverse: bool, onesided: bool):
    rank = len(x.shape)
    try:
        axis = normalize_axis(axis, rank)
    except ValueError as e:
        raise ctx.shape_error(str(e)) from None
    if rank < 3 or x.shape[-1] not in (1, 2) or axis in (0, rank - 1):
        raise ctx.shape_error(f"input {list(x.shape)} must be [batch, signal.., 1 or 2] and "
                              f"axis {axis} a signal dim")
    size, complex_in = x.shape[axis], x.shape[-1] == 2
    length = None if dft_length is None else ctx.int_values(dft_length, "dft_length")[0]
    if inverse and onesided:
        if not complex_in:
            raise ctx.shape_error("an inverse onesided DFT takes a complex (half) spectrum")
        return _inverse_half(ctx, x, axis, length or 2 * (size - 1))
    n_total = length or size
    k_total = n_total // 2 + 1 if onesided else n_total
    if onesided and complex_in:
        raise ctx.unsupported("onesided=1 of a complex signal (ONNX defines it for real ones)")
    k, n = np.meshgrid(np.arange(k_total), np.arange(n_total), indexing="ij")
    angle = 2 * np.pi * (k * n % n_total) / n_total
    scale, sign = (1.0 / n_total, 1.0) if inverse else (1.0, -1.0)
    cos = ctx.constant((np.cos(angle) * scale).astype(np.float32), "dft_cos")
    sin = ctx.constant((sign * np.sin(angle) * scale).astype(np.float32), "dft_sin")
    out_shape = x.shape[:axis] + (k_total,) + x.shape[axis + 1:-1] + (2,)
    table = (Ix.var(axis), Ix.var(rank))  # (k, n)
    c, s = Read(cos.name, table), Read(sin.name, table)
    real, imag = _signal(x, axis, rank, n_total > size)
    if imag is None:  # (xr) (c + i s)
        re, im = call("mul", real, c), call("mul", real, s)
    else:  # (xr + i xi) (c + i s)
        re = call("sub", call("mul", real, c), call("mul", imag, s))
        im = call("add", call("mul", real, s), call("mul", imag, c))
    component = Read(ctx.positions(2).name, (Ix.var(rank - 1),))
    expr = Call("select", (call("eq", component, Const(0, "int64")), re, im))
    return ctx.reduce(out_shape=out_shape, init=Const(0.0), extents=out_shape + (n_total,),
                      out_index=tuple(Ix.var(d) for d in range(rank)), combiner="add",
                      expr=expr, label="dft")


def _signal(x, axis: int, rank: int, padded: bool):
    """The reads of the real and imaginary parts (None for a real signal) at position
    ``n`` (loop variable ``rank``) along ``axis``; past the signal's end 0."""
    index = [Ix.var(d) for d in range(rank - 1)]
    index[axis] = Ix.var(rank)
    bounds = ("fill", 0.0) if padded else ()
    parts = [Read(x.name, (*index, Ix.constant(p)), *bounds) for p in range(x.shape[-1])]
    return parts[0], (parts[1] if len(parts) == 2 else None)


def _inverse_half(ctx, x, axis: int, n_total: int):
    """The real signal of a onesided spectrum (numpy's irfft): ``y[n] = 1/N sum_k w_k
    Re(X[k] e^(2 pi i k n / N))``, ``w_k`` 2 but for k = 0 and, for an even N, N/2."""
    rank = len(x.shape)
    k_total = min(x.shape[axis], n_total // 2 + 1)
    n, k = np.meshgrid(np.arange(n_total), np.arange(k_total), indexing="ij")
    weight = np.where((k == 0) | ((n_total % 2 == 0) & (k == n_total // 2)), 1.0, 2.0)
    angle = 2 * np.pi * (k * n % n_total) / n_total
    cos = ctx.constant((weight * np.cos(angle) / n_total).astype(np.float32), "idft_cos")
    sin = ctx.constant((-weight * np.sin(angle) / n_total).astype(np.float32), "idft_sin")
    out_shape = x.shape[:axis] + (n_total,) + x.shape[axis + 1:-1] + (1,)
    table = (Ix.var(axis), Ix.var(rank))  # (n, k)
    real, imag = _signal(x, axis, rank, padded=False)
    expr = call("add", call("mul", real, Read(cos.name, table)),
                call("mul", imag, Read(sin.name, table)))
    return ctx.reduce(out_shape=out_shape, init=Const(0.0), extents=out_shape + (k_total,),
                      out_index=tuple(Ix.var(d) for d in range(rank)), combiner="add",
                      expr=expr, label="irfft")
