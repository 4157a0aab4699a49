"""Matrix products: each lowers to one core ``Reduce`` with combiner ``add``."""

from __future__ import annotations

from polyc.frontend.core import Call, Const, Ix, Read, identity_index
from polyc.frontend.ops.indexing import broadcast_index, broadcast_shapes
from polyc.frontend.ops.registry import onnx_op


@onnx_op("MatMul", 1, 9, 13)
def MatMul(ctx, A, B):
    """MatMul (numpy): Y[b.., m, n] = sum_k A[bcast(b..), m, k] * B[bcast(b..), k, n].

    A 1-D ``A`` is a row vector and a 1-D ``B`` a column vector whose unit dim is
    dropped from Y; batch dims broadcast. Loop variables: batch dims, m, n, then k.
    """
    return product(ctx, A, B, lambda a, b, m, n: Call("mul", (a, b)), Const(0.0), "matmul")


def product(ctx, A, B, term, init, label: str):
    """MatMul's Reduce with the summed ``term(a, b, m, n)`` of the reads of A and B and
    the indices of the row and column (``()`` for a 1-D operand), from ``init``."""
    if not A.shape or not B.shape:
        raise ctx.shape_error(f"operands {list(A.shape)} and {list(B.shape)} "
                              "must have rank >= 1")
    k_size = A.shape[-1]
    b_k_size = B.shape[-2] if len(B.shape) > 1 else B.shape[0]
    if k_size != b_k_size:
        raise ctx.shape_error(f"cannot multiply {list(A.shape)} by {list(B.shape)}: "
                              f"inner dims {k_size} and {b_k_size} differ")
    a_batch, b_batch = A.shape[:-2], B.shape[:-2]
    try:
        batch = broadcast_shapes(a_batch, b_batch)
    except ValueError as e:
        raise ctx.shape_error(f"batch dims: {e}") from None
    m_dims = A.shape[-2:-1] if len(A.shape) > 1 else ()
    n_dims = B.shape[-1:] if len(B.shape) > 1 else ()
    out_shape = batch + m_dims + n_dims
    m_var, n_var, k_var = len(batch), len(batch) + len(m_dims), len(out_shape)
    m_index = (Ix.var(m_var),) if m_dims else ()
    n_index = (Ix.var(n_var),) if n_dims else ()
    a = Read(A.name, broadcast_index(a_batch, batch) + m_index + (Ix.var(k_var),))
    b = Read(B.name, broadcast_index(b_batch, batch) + (Ix.var(k_var),) + n_index)
    return ctx.reduce(out_shape=out_shape, init=init, extents=out_shape + (k_size,),
                      out_index=identity_index(len(out_shape)), combiner="add",
                      expr=term(a, b, m_index, n_index), label=label)


@onnx_op("Gemm", 7, 9, 11, 13)
def Gemm(ctx, A, B, C=None, *, alpha=1.0, beta=1.0, transA=0, transB=0):
    """Gemm: Y[i,j] = beta*C[bcast(i,j)] + alpha * sum_k A'[i,k] B'[k,j].

    A' is A or A^T (``transA``), B' is B or B^T (``transB``); C (optional) broadcasts
    unidirectionally to Y. One Reduce over (i, j, k) whose init is beta*C (or 0); the
    multiply by alpha is left out when alpha == 1.
    """
    if len(A.shape) != 2 or len(B.shape) != 2:
        raise ctx.shape_error(f"A {list(A.shape)} and B {list(B.shape)} must be 2-D")
    m_size, k_size = A.shape[::-1] if transA else A.shape
    b_k_size, n_size = B.shape[::-1] if transB else B.shape
    if k_size != b_k_size:
        raise ctx.shape_error(f"cannot multiply A' ({m_size}x{k_size}) by B' "
                              f"({b_k_size}x{n_size}) (transA={transA}, transB={transB})")
    i, j, k = Ix.var(0), Ix.var(1), Ix.var(2)
    a = Read(A.name, (k, i) if transA else (i, k))
    b = Read(B.name, (j, k) if transB else (k, j))
    product = Call("mul", (a, b))
    expr = product if alpha == 1.0 else Call("mul", (Const(float(alpha)), product))
    out_shape = (m_size, n_size)
    return ctx.reduce(out_shape=out_shape, init=_gemm_init(ctx, C, beta, out_shape),
                      extents=(m_size, n_size, k_size), out_index=(i, j),
                      combiner="add", expr=expr, label="gemm")


@onnx_op("Gemm", 6)
def Gemm_6(ctx, A, B, C, *, alpha=1.0, beta=1.0, broadcast=0, transA=0, transB=0):
    """Gemm-6: as Gemm-7, except that C broadcasts to Y only with ``broadcast=1`` (else
    it has Y's shape)."""
    if not broadcast and len(A.shape) == len(B.shape) == 2:
        out_shape = (A.shape[1] if transA else A.shape[0], B.shape[0] if transB else B.shape[1])
        if C.shape != out_shape:
            raise ctx.shape_error(f"C {list(C.shape)} must have Y's shape {list(out_shape)} "
                                  "without broadcast=1")
    return Gemm(ctx, A, B, C, alpha=alpha, beta=beta, transA=transA, transB=transB)


def _gemm_init(ctx, C, beta: float, out_shape: tuple[int, int]):
    """beta * C[bcast(i, j)], C itself when beta == 1, or 0.0 without C."""
    if C is None:
        return Const(0.0)
    try:
        c = Read(C.name, broadcast_index(C.shape, out_shape))
    except ValueError:
        raise ctx.shape_error(f"C {list(C.shape)} does not broadcast "
                              f"to the output {list(out_shape)}") from None
    return c if beta == 1.0 else Call("mul", (Const(float(beta)), c))
