"""A plain numpy interpreter of the core Graph: the reference for tests and for
debugging miscompiles. Correctness over speed: each op is evaluated over its whole
iteration box at once with numpy index arrays; float32 throughout, IEEE semantics
(no warnings for overflow, 0/0 or log(0)).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from polyc.errors import InputError
from polyc.frontend import core
from polyc.frontend.core import Call, Const, Graph, Ix, Map, Read, Reduce, View

F32 = np.float32


def _sigmoid(x):
    return np.exp(-np.logaddexp(F32(0), -x)).astype(F32)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _truth(compare):
    return lambda x, y: compare(x, y).astype(F32)


# The numpy meaning of every core function (see core.FUNCTIONS).
NUMPY_FUNCTIONS = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "tanh": np.tanh, "sigmoid": _sigmoid, "relu": lambda x: np.maximum(x, F32(0)),
    "erf": lambda x: _erf(np.asarray(x, np.float64)),
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "sign": np.sign,
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "pow": np.power, "max": np.maximum, "min": np.minimum,
    "lt": _truth(np.less), "le": _truth(np.less_equal), "gt": _truth(np.greater),
    "ge": _truth(np.greater_equal), "eq": _truth(np.equal),
    "select": lambda c, x, y: np.where(np.asarray(c) != 0, x, y),
}

# The numpy ufunc of every Reduce combiner (see core.COMBINERS).
NUMPY_COMBINERS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def evaluate(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``graph`` on ``inputs`` (name -> float32 array); the outputs by name."""
    values: dict[str, np.ndarray] = {n: np.asarray(v, F32) for n, v in graph.constants.items()}
    values.update(_checked_inputs(graph, inputs))
    with np.errstate(all="ignore"):
        for op in graph.ops:
            values[op.out] = _run(op, values, graph.tensors[op.out].shape)
    return {t.name: np.array(values[t.name], dtype=F32) for t in graph.outputs}


def _checked_inputs(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    checked = {}
    for info in graph.inputs:
        if info.name not in inputs:
            raise InputError(f"missing input '{info.name}' ({info})")
        value = np.asarray(inputs[info.name])
        if value.dtype != F32:
            raise InputError(f"input '{info.name}' has dtype {value.dtype}, expected float32")
        if value.shape != info.shape:
            raise InputError(f"input '{info.name}' has shape {list(value.shape)}, "
                             f"expected {list(info.shape)}")
        checked[info.name] = value
    return checked


def _run(op: core.Op, values, shape: tuple[int, ...]) -> np.ndarray:
    if isinstance(op, View):
        return _view(op, values[op.src], shape)
    if isinstance(op, Map):
        return _full(_expr(op.expr, values, _grid(op.shape)), op.shape)
    return _reduce(op, values)


def _view(op: View, src: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if op.kind == "transpose":
        return np.transpose(src, op.perm)
    return np.reshape(src, shape)


def _grid(shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Broadcastable index arrays, one per loop variable of the box ``shape``."""
    return np.indices(shape, sparse=True) if shape else ()


def _full(value, shape: tuple[int, ...]) -> np.ndarray:
    return np.array(np.broadcast_to(np.asarray(value, F32), shape), dtype=F32)


def _index(ix: Ix, grid) -> np.ndarray | int:
    result = ix.const
    for var, coef in ix.terms:
        result = result + coef * grid[var]
    return result


def _expr(expr: core.Expr, values, grid):
    """The value of ``expr`` at every point of ``grid`` (broadcastable to its box)."""
    if isinstance(expr, Read):
        array = values[expr.tensor]
        index = tuple(_index(ix, grid) for ix in expr.index)
        return _read_outside(expr, array, index) if expr.bounded else array[index]
    if isinstance(expr, Const):
        return F32(expr.value)
    if isinstance(expr, Call):
        args = [_expr(a, values, grid) for a in expr.args]
        return np.asarray(NUMPY_FUNCTIONS[expr.fn](*args), dtype=F32)
    raise TypeError(f"not a core expression: {expr!r}")


def _read_outside(read: Read, array: np.ndarray, index) -> np.ndarray:
    """``array[index]`` where indices may leave the array, as ``read.outside`` says."""
    inside, moved = True, []
    for ix, size in zip(index, array.shape):
        ix = np.asarray(ix)
        if read.outside == "reflect":
            period = max(2 * (size - 1), 1)
            folded = np.abs(ix) % period
            ix = np.where(folded >= size, period - folded, folded)
        inside = inside & (ix >= 0) & (ix < size)
        moved.append(np.clip(ix, 0, size - 1))
    value = array[tuple(moved)]
    return np.where(inside, value, F32(read.fill)) if read.outside == "fill" else value


def _reduce(op: Reduce, values) -> np.ndarray:
    """init over out_shape, then every point of the box combined into out[out_index]."""
    out = _full(_expr(op.init, values, _grid(op.out_shape)), op.out_shape)
    if 0 in op.extents:
        return out  # the loop body never runs
    grid = _grid(op.extents)
    body = _full(_expr(op.expr, values, grid), op.extents)
    ufunc = NUMPY_COMBINERS[op.combiner]
    reduced = _reduced_variables(op)
    if reduced is not None:
        partial = ufunc.reduce(body, axis=reduced) if reduced else body
        return ufunc(out, partial.reshape(op.out_shape), dtype=F32)
    index = tuple(np.broadcast_to(_index(ix, grid), op.extents) for ix in op.out_index)
    ufunc.at(out, index, body)
    return out


def _reduced_variables(op: Reduce) -> tuple[int, ...] | None:
    """The reduced loop variables when ``out_index`` just keeps the others in increasing
    order and pins size-1 dims to 0; None for any other index."""
    kept = []
    for ix, size in zip(op.out_index, op.out_shape):
        if not ix.terms and ix.const == 0 and size == 1:
            continue
        if ix.const != 0 or len(ix.terms) != 1 or ix.terms[0][1] != 1:
            return None
        if op.extents[ix.terms[0][0]] != size:
            return None
        kept.append(ix.terms[0][0])
    if kept != sorted(set(kept)):
        return None
    return tuple(v for v in range(len(op.extents)) if v not in kept)
