"""Small core graphs built directly (no ONNX), for testing the polyhedral stages."""

import numpy as np

from polyc.frontend.core import Call, Const, Graph, Ix, Map, Read, Reduce, TensorInfo, View

i0, i1, i2 = Ix.var(0), Ix.var(1), Ix.var(2)


def matmul_relu(m=4, k=5, n=3, seed=0) -> Graph:
    """y = relu(a @ w) with w a constant."""
    w = np.random.default_rng(seed).standard_normal((k, n)).astype(np.float32)
    tensors = {t.name: t for t in [TensorInfo("a", (m, k)), TensorInfo("w", (k, n)),
                                   TensorInfo("mm", (m, n)), TensorInfo("y", (m, n))]}
    ops = (
        Reduce("mm", (m, n), Const(0.0), (m, n, k), (i0, i1), "add",
               Call("mul", (Read("a", (i0, i2)), Read("w", (i2, i1)))), label="matmul"),
        Map("y", (m, n), Call("relu", (Read("mm", (i0, i1)),)), label="relu"),
    )
    return Graph("matmul_relu", (tensors["a"],), (tensors["y"],), tensors, {"w": w}, ops, 17)


def reshape_transpose(shape=(2, 3, 4)) -> Graph:
    """y = transpose(reshape(x, (6, 4))) + 1, i.e. two views then one statement."""
    a, b, c = shape
    tensors = {t.name: t for t in [TensorInfo("x", shape), TensorInfo("r", (a * b, c)),
                                   TensorInfo("t", (c, a * b)), TensorInfo("y", (c, a * b))]}
    ops = (
        View("r", "x", "reshape"),
        View("t", "r", "transpose", (1, 0)),
        Map("y", (c, a * b), Call("add", (Read("t", (i0, i1)), Const(1.0))), label="add"),
    )
    return Graph("views", (tensors["x"],), (tensors["y"],), tensors, {}, ops, 17)
