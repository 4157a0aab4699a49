"""A plain numpy interpreter of the core Graph: the reference for tests and for
debugging miscompiles. Correctness over speed: each op is evaluated over its whole
iteration box at once with numpy index arrays; every value in its dtype (float32
with IEEE semantics, no warnings for overflow, 0/0 or log(0); wrapping integers; the
integer division, modulo and casts of ``core.FUNCTIONS`` / ``core.CASTS``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from polyc.errors import InputError
from polyc.frontend import core
from polyc.frontend.core import (
    Call,
    Const,
    Graph,
    Ix,
    Lookup,
    Map,
    Read,
    Recurrence,
    Reduce,
    Step,
    View,
)

F32 = np.float32


def _sigmoid(x):
    x = np.asarray(x)
    return np.exp(-np.logaddexp(x.dtype.type(0), -x)).astype(x.dtype)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _int_div(x, d):
    """Truncated division; x / 0 = 0 (and MIN / -1 wraps to MIN)."""
    x, d = np.broadcast_arrays(np.asarray(x), np.asarray(d))
    safe = np.where(d == 0, 1, d)
    if x.dtype.kind == "u":
        return np.where(d == 0, 0, x // safe).astype(x.dtype)
    wide = np.int64  # |-128| of an int8 is no int8
    quotient = (np.abs(x.astype(wide)) // np.abs(safe.astype(wide))
                * np.where((x < 0) != (safe < 0), -1, 1))
    return np.where(d == 0, 0, quotient.astype(x.dtype))


def _int_fmod(x, d):
    """C's remainder (the sign of x); x % 0 = 0."""
    safe = np.where(np.asarray(d) == 0, 1, d)
    return np.where(np.asarray(d) == 0, 0, np.fmod(x, safe)).astype(np.asarray(x).dtype)


def _int_mod(x, d):
    """Python's remainder (the sign of d); x % 0 = 0."""
    safe = np.where(np.asarray(d) == 0, 1, d)
    return np.where(np.asarray(d) == 0, 0, np.mod(x, safe)).astype(np.asarray(x).dtype)


def _cast(dtype: str):
    """``core.CASTS``: float -> integer truncates, NaN and out-of-range give the
    minimum of the conversion it goes through, then wrap."""
    def convert(x):
        x = np.asarray(x)
        if dtype == "bool":
            return x != 0
        if dtype in core.NARROW_FLOATS and x.dtype.kind == "f":  # rounded, held as float32
            return x.astype(np.float32).astype(dtype).astype(np.float32)
        if x.dtype.kind == "f" and dtype in core.CAST_VIA:
            via = core.CAST_VIA[dtype]
            value = _truncated(x, via)
            if dtype in ("uint32", "uint64"):
                half = 2.0 ** (np.iinfo(via).bits - 1)
                high = _truncated(x - half, via) ^ np.array(-half).astype(via)
                value = np.where(x >= half, high, value)
            return value.astype(dtype)
        return x.astype(dtype)
    return convert


def _bitcast(dtype: str):
    """``core.BITCASTS``: the same bytes seen as ``dtype``."""
    return lambda x: np.asarray(x).view(dtype)


def _truncated(x, dtype: str):
    """Float ``x`` truncated to the signed ``dtype``; its minimum out of range and for NaN."""
    limit = 2.0 ** (np.iinfo(dtype).bits - 1)
    inside = (x >= -limit) & (x < limit)
    return np.where(inside, np.trunc(np.where(inside, x, 0)), -limit).astype(dtype)


def _shift(x, y, *, left: bool):
    """core shl/shr: y outside [0, width) gives 0, or -1 for shr of a negative x."""
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    width = x.dtype.itemsize * 8
    inside = (y >= 0) & (y < width)
    amount = np.where(inside, y, 0).astype(x.dtype)
    shifted = np.left_shift(x, amount) if left else np.right_shift(x, amount)
    outside = np.zeros_like(x) if left else np.where(x < 0, -1, 0).astype(x.dtype)
    return np.where(inside, shifted, outside).astype(x.dtype)


def _dot4(*args) -> np.ndarray:
    """core's dot4: four bytes (int8 read as a + 128) times the signed bytes of a word."""
    *a, w = (np.asarray(x) for x in args)
    words = w.astype("<i4")[..., None].view(np.int8).astype(np.int32)
    offset = 128 if a[0].dtype == np.int8 else 0
    return sum((a[r].astype(np.int32) + offset) * words[..., r] for r in range(4)
               ).astype(np.int32)


def _integer(x) -> bool:
    return np.asarray(x).dtype.kind in "iu"


# The numpy meaning of every core function (see core.FUNCTIONS); numpy's results keep
# the operands' dtype (float32 operands give float32).
NUMPY_FUNCTIONS = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "tanh": np.tanh, "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, np.zeros((), np.asarray(x).dtype)),
    "erf": lambda x: _erf(np.asarray(x, np.float64)),
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "sign": np.sign,
    "add": np.add, "sub": np.subtract, "mul": np.multiply,
    "div": lambda x, d: _int_div(x, d) if _integer(x) else np.divide(x, d),
    "mod": lambda x, d: _int_mod(x, d) if _integer(x) else np.mod(x, d),
    "fmod": lambda x, d: _int_fmod(x, d) if _integer(x) else np.fmod(x, d),
    "pow": np.power, "max": np.maximum, "min": np.minimum,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "eq": np.equal,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor, "not": np.invert,
    "shl": lambda x, y: _shift(x, y, left=True), "shr": lambda x, y: _shift(x, y, left=False),
    "select": np.where, "dot4": _dot4,
    **{name: _cast(dtype) for name, dtype in core.CASTS.items()},
    **{name: _bitcast(dtype) for name, dtype in core.BITCASTS.items()},
}

# The numpy ufunc of every Reduce combiner (see core.COMBINERS).
NUMPY_COMBINERS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def evaluate(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``graph`` on ``inputs`` (name -> array of the input's dtype); the outputs by
    name."""
    values: dict[str, np.ndarray] = dict(graph.constants)
    values.update({name: np.arange(graph.tensors[name].shape[0], dtype=np.int64)
                   for name in graph.positions})
    values.update(_checked_inputs(graph, inputs))
    values = {name: _computed(value) for name, value in values.items()}
    outputs = {t.name for t in graph.outputs}
    with np.errstate(all="ignore"):
        for op in graph.ops:
            # float16/bfloat16 temporaries hold float32s, as compiled code's (Array.storage)
            dtypes = {name: np.dtype("float32" if graph.tensors[name].dtype in
                                     core.NARROW_FLOATS and name not in outputs
                                     else graph.tensors[name].dtype)
                      for name in core.written(op)}
            if isinstance(op, Recurrence):
                values.update(_recurrence(op, values, dtypes, graph.tensors))
                continue
            values[op.out] = _run(op, values, graph.tensors[op.out].shape, dtypes[op.out])
    return {t.name: np.array(values[t.name], dtype=t.dtype) for t in graph.outputs}


def _computed(value: np.ndarray) -> np.ndarray:
    """float16 and bfloat16 data as the float32s compiled code computes with (numpy
    would round every operation to float16); other data as it is."""
    return value.astype(np.float32) if value.dtype.name in core.NARROW_FLOATS else value


def _checked_inputs(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    checked = {}
    for info in graph.inputs:
        if info.name not in inputs:
            raise InputError(f"missing input '{info.name}' ({info})")
        value = np.asarray(inputs[info.name])
        if value.dtype != np.dtype(info.dtype):
            raise InputError(f"input '{info.name}' has dtype {value.dtype}, expected "
                             f"{info.dtype}")
        if value.shape != info.shape:
            raise InputError(f"input '{info.name}' has shape {list(value.shape)}, "
                             f"expected {list(info.shape)}")
        checked[info.name] = value
    return checked


def _run(op: core.Op, values, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if isinstance(op, View):
        return _view(op, values[op.src], shape)
    if isinstance(op, Map):
        return _full(_expr(op.expr, values, _grid(op.shape)), op.shape, dtype)
    return _reduce(op, values, dtype)


def _recurrence(op: Recurrence, values, dtypes, tensors) -> dict[str, np.ndarray]:
    """The start steps over their boxes, then for each t the body steps over theirs
    with loop variable 0 fixed at t (elements never written stay 0); the outs and
    their views (numpy views of them, which see every write)."""
    outs = {name: np.zeros(shape, dtypes[name]) for name, shape in zip(op.outs, op.shapes)}
    for view in op.views:
        outs[view.out] = _view(view, outs[view.src], tensors[view.out].shape)
        assert np.shares_memory(outs[view.out], outs[view.src])
    values = {**values, **outs}
    for step in op.start:
        _step(step, values, outs[step.out], _grid(step.extents))
    for t in range(op.steps):
        for step in op.body:
            inner = _grid(step.extents[1:])
            grid = (np.array(t), *(np.expand_dims(g, 0) for g in inner))
            _step(step, values, outs[step.out], grid)
    return outs


def _step(step: Step, values, out: np.ndarray, grid) -> None:
    """One step at every point of ``grid`` (all reads before any write)."""
    box = np.broadcast_shapes(*(np.shape(g) for g in grid)) if grid else ()
    index = tuple(np.broadcast_to(_index(ix, grid), box) for ix in step.out_index)
    value = np.broadcast_to(np.asarray(_expr(step.expr, values, grid), out.dtype), box)
    if step.combiner is None:
        out[index] = value
    else:
        NUMPY_COMBINERS[step.combiner].at(out, index, value)


def _view(op: View, src: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if op.kind == "transpose":
        return np.transpose(src, op.perm)[tuple(slice(0, d) for d in shape)]
    return np.reshape(src, shape)


def _grid(shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Broadcastable index arrays, one per loop variable of the box ``shape``."""
    return np.indices(shape, sparse=True) if shape else ()


def _full(value, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return np.array(np.broadcast_to(np.asarray(value, dtype), shape), dtype=dtype)


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
    if isinstance(expr, Lookup):
        return _lookup(expr, values, grid)
    if isinstance(expr, Const):
        return _computed(np.asarray(expr.value, dtype=expr.dtype))
    if isinstance(expr, Call):
        args = [_expr(a, values, grid) for a in expr.args]
        return np.asarray(NUMPY_FUNCTIONS[expr.fn](*args))
    raise TypeError(f"not a core expression: {expr!r}")


def _lookup(expr: Lookup, values, grid) -> np.ndarray:
    """``tensor[index]`` with the index along ``axis`` read from ``at``: negative ones
    count from the end, then clamped into the axis (see core.Lookup)."""
    array = values[expr.tensor]
    n = array.shape[expr.axis]
    at = np.asarray(_expr(expr.at, values, grid)).astype(np.int64)
    index = [_index(ix, grid) for ix in expr.index]
    index[expr.axis] = np.clip(np.where(at < 0, at + n, at), 0, n - 1)
    return array[tuple(np.broadcast_arrays(*index))]


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
    if read.outside != "fill":
        return value
    return np.where(inside, value, np.asarray(read.fill).astype(array.dtype))


def _reduce(op: Reduce, values, dtype: np.dtype) -> np.ndarray:
    """init over out_shape, then every point of the box combined into out[out_index]."""
    out = _full(_expr(op.init, values, _grid(op.out_shape)), op.out_shape, dtype)
    if 0 in op.extents:
        return out  # the loop body never runs
    grid = _grid(op.extents)
    body = _full(_expr(op.expr, values, grid), op.extents, dtype)
    ufunc = NUMPY_COMBINERS[op.combiner]
    reduced = _reduced_variables(op)
    if reduced is not None:
        partial = ufunc.reduce(body, axis=reduced) if reduced else body
        return ufunc(out, partial.reshape(op.out_shape), dtype=dtype)
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
