"""Shape computations over symbolic dims, evaluated while lowering.

Clean-up folds Shape -> Gather -> Concat -> Reshape chains into constants when shapes
are static. With a symbolic dim the Shape has no constant value, so lowering evaluates
these small integer vectors itself: a *shape value* is a numpy object array whose
entries are ints or :class:`~polyc.frontend.symbolic.Sym`. The ops of such chains
(:data:`OPS`) compute on them when every other input is a constant; a Reshape or
Expand target may then name the symbolic dim (``x.view(x.size(0), -1)`` in PyTorch).
Arithmetic on a Sym raises ``SymbolicDimError`` (the node is named by lowering).
"""

from __future__ import annotations

import numpy as np

from polyc.frontend.symbolic import Sym

OPS = ("Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Cast", "Reshape",
       "Identity", "Add", "Sub", "Mul", "Div")
_INTEGER_TYPES = (6, 7)  # TensorProto.INT32, INT64


def symbolic(value: np.ndarray) -> bool:
    """Whether a shape value holds a symbolic dim."""
    return any(isinstance(v, Sym) for v in value.reshape(-1))


def shape_of(shape, start: int = 0, end: int | None = None) -> np.ndarray:
    """Shape: the dims ``start:end`` as a 1-D shape value."""
    return _vector(list(shape)[slice(start, end)])


def evaluate(op_type: str, values: list[np.ndarray | None], attrs: dict) -> np.ndarray | None:
    """The shape value ``op_type`` computes from its inputs' values (constants as int
    arrays, shape values as object arrays; None for an absent optional input), or
    None when it is not a shape computation polyc evaluates."""
    data = values[0]
    if op_type in ("Identity", "Cast"):
        if op_type == "Cast" and attrs.get("to") not in _INTEGER_TYPES:
            return None
        return data
    if op_type == "Gather":
        taken = np.take(data, np.asarray(values[1], np.int64), axis=attrs.get("axis", 0))
        if not isinstance(taken, np.ndarray):  # one element (a scalar index)
            scalar = np.empty((), dtype=object)
            scalar[()] = taken
            return scalar
        return taken
    if op_type == "Unsqueeze":
        axes = _axes(values, attrs)
        rank = data.ndim + len(axes)
        for axis in sorted(a % rank for a in axes):
            data = np.expand_dims(data, axis)
        return data
    if op_type == "Squeeze":
        axes = _axes(values, attrs)
        return np.squeeze(data, axis=None if axes is None else tuple(a % data.ndim for a in axes))
    if op_type == "Concat":
        return np.concatenate([_object(v) for v in values if v is not None],
                              axis=attrs.get("axis", 0))
    if op_type == "Reshape":
        return data.reshape([int(d) for d in values[1]])
    if op_type == "Slice":
        return _slice(data, values)
    if op_type in ("Add", "Sub", "Mul", "Div"):
        return _arithmetic(op_type, _object(data), _object(values[1]))
    return None


def _vector(entries) -> np.ndarray:
    value = np.empty(len(entries), dtype=object)
    value[:] = entries
    return value


def _object(value: np.ndarray) -> np.ndarray:
    return value if value.dtype == object else value.astype(np.int64).astype(object)


def _axes(values, attrs) -> list[int] | None:
    if len(values) > 1 and values[1] is not None:
        return [int(a) for a in np.asarray(values[1]).reshape(-1)]
    axes = attrs.get("axes")
    return None if axes is None else [int(a) for a in axes]


def _slice(data: np.ndarray, values) -> np.ndarray:
    starts, ends = (np.asarray(v, np.int64).reshape(-1) for v in values[1:3])
    axes = range(len(starts)) if len(values) < 4 or values[3] is None else values[3]
    steps = [1] * len(starts) if len(values) < 5 or values[4] is None else values[4]
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        index[int(axis)] = slice(int(start), int(end), int(step))
    return data[tuple(index)]


def _arithmetic(op_type: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    x, y = np.broadcast_arrays(x, y)
    result = [_apply(op_type, a, b) for a, b in zip(x.reshape(-1), y.reshape(-1))]
    return _vector(result).reshape(x.shape)


def _apply(op_type: str, a, b):
    if op_type == "Add":
        return a + b
    if op_type == "Sub":
        return a - b
    if op_type == "Mul":
        return a * b
    if isinstance(a, Sym) and b == 1:
        return a
    quotient = abs(int(a)) // abs(int(b))  # int64 division truncates towards zero
    return quotient if (a < 0) == (b < 0) else -quotient
