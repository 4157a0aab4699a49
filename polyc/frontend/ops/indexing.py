"""Index helpers shared by the op lowerings: broadcasting, axis normalisation, the read
of a one-element tensor."""

from __future__ import annotations

from polyc.frontend.core import Call, Const, Ix, Read


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The numpy (multidirectional) broadcast of ``shapes``; ValueError if incompatible."""
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    out = []
    for dims in zip(*padded):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            raise ValueError(f"shapes {' and '.join(map(str, map(list, shapes)))} "
                             "do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_index(in_shape: tuple[int, ...], out_shape: tuple[int, ...],
                    first_var: int = 0) -> tuple[Ix, ...]:
    """The index of an ``in_shape`` operand read at loop point ``(i0, ..)`` of ``out_shape``.

    The operand is aligned to the right of ``out_shape`` (its missing leading dims are
    dropped); a size-1 dim against a larger output dim reads index 0. Loop variable
    ``first_var + k`` runs over ``out_shape[k]``.
    """
    offset = len(out_shape) - len(in_shape)
    if offset < 0:
        raise ValueError(f"cannot broadcast {list(in_shape)} to {list(out_shape)}")
    index = []
    for k, size in enumerate(in_shape):
        out_size = out_shape[offset + k]
        if size == out_size:
            index.append(Ix.var(first_var + offset + k))
        elif size == 1:
            index.append(Ix.constant(0))
        else:
            raise ValueError(f"cannot broadcast {list(in_shape)} to {list(out_shape)}")
    return tuple(index)


def normalize_axis(axis: int, rank: int) -> int:
    """``axis`` in ``[-rank, rank)`` made non-negative; ValueError when out of range."""
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def size(shape: tuple[int, ...]) -> int:
    """The number of elements of ``shape``."""
    count = 1
    for d in shape:
        count *= d
    return count


def first_element(tensor) -> Read:
    """The read of ``tensor``'s first element at every point (its one value, for a
    one-element tensor such as a scale or a bound)."""
    return Read(tensor.name, tuple(Ix.constant(0) for _ in tensor.shape))


def value_at(tensor, index: tuple[Ix, ...]) -> Read:
    """``tensor``'s one value at every point when it has one element (a per-tensor scale
    or zero point), else its element at ``index`` (one per channel, row or column)."""
    if size(tensor.shape) == 1:
        return first_element(tensor)
    return Read(tensor.name, index)


def from_end(index, size: int) -> Call:
    """An integer index read as int64, ``size`` added when it is negative (ONNX's
    indices counted from the end of a dim)."""
    value = Call("cast_int64", (index,))
    return Call("select", (Call("lt", (value, Const(0, "int64"))),
                           Call("add", (value, Const(size, "int64"))), value))
