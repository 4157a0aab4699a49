"""Ops that move parts of tensors: Slice, Split, Concat, Pad, Gather and GatherElements.
Each is a core ``Map`` whose reads are affine in the output's loop variables;
reads that leave their tensor (``Read.outside``) give Pad its borders and Concat the
places of its parts. Gather with indices computed at run time and GatherElements read
through a :class:`~polyc.frontend.core.Lookup` (an index taken from a tensor element).
"""

from __future__ import annotations

import math

import numpy as np

from polyc.frontend.core import FLOATS, INTEGER, Call, Const, Ix, Lookup, Read, identity_index
from polyc.frontend.ops.indexing import from_end, normalize_axis
from polyc.frontend.ops.registry import onnx_op

# Gather indices that are no affine function of their position are split into runs of
# evenly spaced indices, one Map each, then concatenated: at most this many runs.
MAX_GATHER_RUNS = 32


def _axis(ctx, axis: int, rank: int) -> int:
    try:
        return normalize_axis(int(axis), rank)
    except ValueError as e:
        raise ctx.shape_error(str(e)) from None


def _axes(ctx, axes, rank: int) -> tuple[int, ...]:
    """``axes`` made non-negative, in their order; no axis twice."""
    normal = tuple(_axis(ctx, a, rank) for a in axes)
    if len(set(normal)) != len(normal):
        raise ctx.shape_error(f"axes {list(axes)} repeat an axis")
    return normal


def _along(rank: int, axis: int, offset: int, step: int = 1) -> tuple[Ix, ...]:
    """The identity index with ``step * i_axis + offset`` on ``axis``."""
    index = list(identity_index(rank))
    index[axis] = Ix(((axis, step),), offset) if step else Ix.constant(offset)
    return tuple(index)


# -- Slice --------------------------------------------------------------------------

@onnx_op("Slice", 10, 11, 13)
def Slice(ctx, data, starts, ends, axes=None, steps=None):
    """Slice-10..13 (inputs): Map out[i] = data[.., start_a + step_a * i_a, ..] over the
    sliced shape.

    ``starts``, ``ends``, ``axes`` and ``steps`` must be constants; starts and ends are
    clamped as numpy (and ONNX) do, for positive and negative steps.
    """
    starts, ends = ctx.int_values(starts, "starts"), ctx.int_values(ends, "ends")
    return _slice(ctx, data, starts, ends,
                  None if axes is None else ctx.int_values(axes, "axes"),
                  None if steps is None else ctx.int_values(steps, "steps"))


@onnx_op("Slice", 1)
def Slice_1(ctx, data, *, starts, ends, axes=None):
    """Slice-1 (``starts``, ``ends`` and ``axes`` attributes, step 1): as Slice-10."""
    return _slice(ctx, data, tuple(starts), tuple(ends), axes, None)


def _slice(ctx, data, starts, ends, axes, steps):
    """The Map reading the slice of ``data`` (a View when it is all of data)."""
    rank = len(data.shape)
    axes = range(len(starts)) if axes is None else axes
    steps = (1,) * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.shape_error(f"starts {list(starts)}, ends {list(ends)}, axes "
                              f"{list(axes)} and steps {list(steps)} differ in length")
    dims, index = list(data.shape), list(identity_index(rank))
    for axis, start, end, step in zip(_axes(ctx, axes, rank), starts, ends, steps):
        if step == 0:
            raise ctx.shape_error(f"step 0 on axis {axis}")
        first, stop, step = slice(start, end, step).indices(dims[axis])
        dims[axis] = len(range(first, stop, step))
        index[axis] = Ix(((axis, step),), first)
    if tuple(dims) == data.shape and tuple(index) == identity_index(rank):
        return ctx.view(data, data.shape, label="identity")
    return ctx.map(dims, Read(data.name, tuple(index)), label="slice")


# -- Split --------------------------------------------------------------------------

def _split(ctx, input, axis: int, sizes):
    """One Map per part: part_k[i] = input[.., i_axis + offset_k, ..]."""
    rank = len(input.shape)
    axis = _axis(ctx, axis, rank)
    if any(n < 0 for n in sizes) or sum(sizes) != input.shape[axis]:
        raise ctx.shape_error(f"split {list(sizes)} does not divide axis {axis} of size "
                              f"{input.shape[axis]}")
    parts, offset = [], 0
    for n in sizes:
        dims = input.shape[:axis] + (n,) + input.shape[axis + 1:]
        parts.append(ctx.map(dims, Read(input.name, _along(rank, axis, offset)),
                             label="split"))
        offset += n
    return tuple(parts)


def _equal_parts(ctx, input, axis: int) -> list[int]:
    """Split-2..13 without sizes: as many equal parts as the node has outputs."""
    total = input.shape[_axis(ctx, axis, len(input.shape))]
    if total % ctx.n_outputs:
        raise ctx.shape_error(f"axis {axis} of size {total} does not split into "
                              f"{ctx.n_outputs} equal parts")
    return [total // ctx.n_outputs] * ctx.n_outputs


@onnx_op("Split", 2, 11)
def Split_11(ctx, input, *, axis=0, split=None):
    """Split-2/11 (``split`` attribute, or equal parts): one Map per output reading its part."""
    return _split(ctx, input, axis, _equal_parts(ctx, input, axis) if split is None else split)


@onnx_op("Split", 13)
def Split_13(ctx, input, split=None, *, axis=0):
    """Split-13 (``split`` input, a constant, or equal parts): one Map per output reading
    its part."""
    sizes = _equal_parts(ctx, input, axis) if split is None else ctx.int_values(split, "split")
    return _split(ctx, input, axis, sizes)


@onnx_op("Split", 18)
def Split(ctx, input, split=None, *, axis=0, num_outputs=None):
    """Split-18: ``split`` input or ``num_outputs`` parts of ceil(size / num_outputs)
    (the last one smaller); one Map per output reading its part."""
    if (split is None) == (num_outputs is None):
        raise ctx.shape_error("exactly one of the input 'split' and the attribute "
                              "'num_outputs' must be given")
    if split is not None:
        return _split(ctx, input, axis, ctx.int_values(split, "split"))
    if num_outputs < 1:
        raise ctx.shape_error(f"num_outputs={num_outputs} must be positive")
    total = input.shape[_axis(ctx, axis, len(input.shape))]
    chunk = -(-total // num_outputs)
    return _split(ctx, input, axis,
                  [chunk] * (num_outputs - 1) + [total - chunk * (num_outputs - 1)])


# -- Concat -------------------------------------------------------------------------

# How concat combines its parts, per dtype: (function, the fill that leaves x as it is).
_JOIN = {**{dtype: ("add", -0.0) for dtype in FLOATS},
         **{dtype: ("add", 0) for dtype in INTEGER}, "bool": ("or", False)}


# A Concat of more parts than this concatenates groups of this many first (and so on):
# every element of a Map reads every part, and 300 parts made one body 300 deep.
CONCAT_PARTS = 8


def concat(ctx, parts, axis: int, label: str):
    """Map out[i] = sum over the parts of part[.., i_axis - offset, ..] read with fill
    -0.0, offset being where the part starts along ``axis``: every point lies in one
    part, and x + (-0.0) == x for every float x (also -0.0, infinities and NaN).
    Integers are summed with fill 0, bools or-ed with fill false. More than
    CONCAT_PARTS parts are concatenated in groups first, a tree of Maps."""
    if len(parts) > CONCAT_PARTS:
        return concat(ctx, [concat(ctx, parts[k:k + CONCAT_PARTS], axis, label)
                            for k in range(0, len(parts), CONCAT_PARTS)], axis, label)
    rank = len(parts[0].shape)
    dims = list(parts[0].shape)
    dims[axis] = sum(p.shape[axis] for p in parts)
    placed, offset = [], 0
    for part in parts:
        if part.shape[axis]:
            placed.append((part, offset))
        offset += part.shape[axis]
    if len(placed) == 1:
        return ctx.map(dims, Read(placed[0][0].name, identity_index(rank)), label=label)
    join, fill = _JOIN[parts[0].dtype]
    reads = [Read(part.name, _along(rank, axis, -start), "fill", fill)
             for part, start in placed]
    expr = reads[0] if reads else Const.of(0, parts[0].dtype)
    for read in reads[1:]:
        expr = Call(join, (expr, read))
    return ctx.map(dims, expr, label=label)


@onnx_op("Concat", 4, 11, 13)
def Concat(ctx, *inputs, axis):
    """Concat: one Map summing the inputs read along ``axis`` at their offsets, each read
    with fill -0.0 outside its part (see :func:`concat`)."""
    if not inputs or any(t is None for t in inputs):
        raise ctx.shape_error("Concat needs at least one input, none omitted")
    rank = len(inputs[0].shape)
    axis = _axis(ctx, axis, rank)
    for t in inputs:
        others = [d for k, d in enumerate(t.shape) if k != axis]
        if len(t.shape) != rank or others != [d for k, d in enumerate(inputs[0].shape)
                                              if k != axis]:
            raise ctx.shape_error(f"cannot concatenate {list(inputs[0].shape)} and "
                                  f"{list(t.shape)} along axis {axis}")
    return concat(ctx, inputs, axis, "concat")


# -- Pad ----------------------------------------------------------------------------

_PAD_MODES = {"constant": "fill", "edge": "edge", "reflect": "reflect"}


def _pad_widths(ctx, data, pads, axes):
    """(before, after) per dim of data from the constant ``pads`` over ``axes``."""
    rank = len(data.shape)
    axes = tuple(range(rank)) if axes is None else _axes(ctx, axes, rank)
    if len(pads) != 2 * len(axes):
        raise ctx.shape_error(f"pads {list(pads)} must have 2 * {len(axes)} values")
    before, after = [0] * rank, [0] * rank
    for k, axis in enumerate(axes):
        before[axis], after[axis] = pads[k], pads[k + len(axes)]
    return before, after


def _pad(ctx, data, pads, constant_value, axes, mode: str):
    """Map out[i] = data[i - before] read with ``outside`` = fill / edge / reflect.

    ``pads`` and ``axes`` (or None) are ints; ``constant_value`` is None (0), a float or a
    scalar tensor.
    """
    if mode not in _PAD_MODES:
        raise ctx.unsupported(f"mode={mode!r} (constant, reflect and edge are supported)")
    before, after = _pad_widths(ctx, data, pads, axes)
    dims = [d + b + a for d, b, a in zip(data.shape, before, after)]
    if any(isinstance(d, int) and d < 0 for d in dims):  # a symbolic dim is never padded
        raise ctx.shape_error(f"pads {before + after} crop more than {list(data.shape)}")
    rank = len(dims)
    index = tuple(Ix(((k, 1),), -b) for k, b in enumerate(before))
    padded = [k for k in range(rank) if before[k] > 0 or after[k] > 0]
    if not padded:
        return ctx.map(dims, Read(data.name, index), label="pad")
    if mode != "constant":
        _check_border(ctx, data.shape, before, after, padded, mode)
        return ctx.map(dims, Read(data.name, index, _PAD_MODES[mode]), label="pad")
    if constant_value is None or isinstance(constant_value, float):
        fill = 0.0 if constant_value is None else constant_value
        return ctx.map(dims, Read(data.name, index, "fill", fill), label="pad")
    return ctx.map(dims, _fill_with(ctx, data, index, padded, constant_value), label="pad")


def _check_border(ctx, shape, before, after, padded, mode: str) -> None:
    for k in padded:
        if shape[k] == 0:
            raise ctx.shape_error(f"cannot pad the empty axis {k} in {mode} mode")
        if mode == "reflect" and max(before[k], after[k]) > shape[k] - 1:
            raise ctx.unsupported(f"reflect pads {before[k]}, {after[k]} on axis {k} of "
                                  f"size {shape[k]} (at most {shape[k] - 1} supported)")


def _fill_with(ctx, data, index, padded, constant_value):
    """select(inside, data[index], constant_value): ``inside`` is the conjunction over
    the padded axes k of trues_k[index_k] read with fill false (trues_k: 1-D bool,
    data's size on k)."""
    if constant_value.shape not in ((), (1,)):
        raise ctx.shape_error(f"constant_value {list(constant_value.shape)} is not a scalar")
    value = Read(constant_value.name, (Ix.constant(0),) * len(constant_value.shape))
    if 0 in data.shape:
        return value
    ones, inside = {}, None
    for k in padded:
        n = data.shape[k]
        if n not in ones:
            ones[n] = ctx.map((n,), Const(True, "bool"), label="pad_inside")
        read = Read(ones[n].name, (index[k],), "fill", False)
        inside = read if inside is None else Call("and", (inside, read))
    return Call("select", (inside, Read(data.name, index, "fill", 0.0), value))


@onnx_op("Pad", 2)
def Pad_2(ctx, data, *, pads, mode="constant", value=0.0):
    """Pad-2 (``pads`` and ``value`` attributes): as Pad-11, the fill being ``value``."""
    return _pad(ctx, data, tuple(pads), float(value), None, mode)


@onnx_op("Pad", 11, 13)
def Pad_11(ctx, data, pads, constant_value=None, *, mode="constant"):
    """Pad-11/13: Map out[i] = data[i - pads_begin] read with fill (constant_value, 0 by
    default), edge or reflect outside data; negative pads crop. ``pads`` must be a
    constant; a given ``constant_value`` is read at run time where a read leaves data."""
    return _pad(ctx, data, ctx.int_values(pads, "pads"), constant_value, None, mode)


@onnx_op("Pad", 18, 19, 21, 23, 24, 25)
def Pad(ctx, data, pads, constant_value=None, axes=None, *, mode="constant"):
    """Pad-18 on (pads over the optional ``axes``): as Pad-11; ``wrap`` (opset 19) is not
    supported."""
    return _pad(ctx, data, ctx.int_values(pads, "pads"), constant_value,
                None if axes is None else ctx.int_values(axes, "axes"), mode)


# -- Gather -------------------------------------------------------------------------

def _affine(array: np.ndarray) -> tuple[int, tuple[int, ...]] | None:
    """(c, a) with array[k] == c + sum a_j k_j at every position k, or None."""
    if array.size == 0:
        return 0, (0,) * array.ndim
    start = int(array.flat[0])
    coefs = []
    for j, n in enumerate(array.shape):
        step = [0] * array.ndim
        step[j] = 1 if n > 1 else 0
        coefs.append(int(array[tuple(step)]) - start)
    grid = np.indices(array.shape)
    expected = start + sum(a * g for a, g in zip(coefs, grid))
    return (start, tuple(coefs)) if np.array_equal(array, expected) else None


def _runs(flat) -> list[tuple[int, int, int]]:
    """``flat`` split into maximal runs of evenly spaced values: (first, step, length)."""
    runs, k = [], 0
    while k < len(flat):
        step = flat[k + 1] - flat[k] if k + 1 < len(flat) else 0
        end = k + 1
        while end < len(flat) and flat[end] - flat[end - 1] == step:
            end += 1
        runs.append((int(flat[k]), int(step), end - k))
        k = end
    return runs


@onnx_op("Gather", 1, 11, 13)
def Gather(ctx, data, indices, *, axis=0):
    """Gather: out[a.., k.., b..] = data[a.., idx[k..], b..].

    With constant ``indices`` affine in their position (a scalar, a range with a
    step, ...): one Map reading data at that affine index; other constant indices are
    cut into runs of evenly spaced values, a Map each, concatenated along ``axis`` (see
    :func:`concat`) and seen in the output shape through a reshape View (at most
    MAX_GATHER_RUNS runs; more are read at run time as computed indices are).
    Indices computed at run time: one Map reading data through a Lookup (negative
    indices count from the end; out-of-range ones are clamped, see ``core.Lookup``).
    """
    rank = len(data.shape)
    axis = _axis(ctx, axis, rank)
    if ctx.constant_value(indices) is None:
        return _gather_at_run_time(ctx, data, indices, axis)
    n = data.shape[axis]
    values = np.asarray(ctx.int_values(indices, "indices"), np.int64)
    if np.any((values < -n) | (values >= n)):
        raise ctx.shape_error(f"indices {values.tolist()} leave axis {axis} of size {n}")
    idx = np.where(values < 0, values + n, values).reshape(indices.shape)
    outer, inner = data.shape[:axis], data.shape[axis + 1:]
    out_shape = outer + idx.shape + inner
    affine = _affine(idx)
    if affine is not None:
        start, coefs = affine
        terms = tuple((axis + j, a) for j, a in enumerate(coefs) if a)
        index = (identity_index(axis) + (Ix(terms, start),)
                 + tuple(Ix.var(axis + idx.ndim + k) for k in range(len(inner))))
        return ctx.map(out_shape, Read(data.name, index), label="gather")
    runs = _runs(idx.reshape(-1).tolist())
    if len(runs) > MAX_GATHER_RUNS:
        return _gather_at_run_time(ctx, data, indices, axis)
    parts = [ctx.map(outer + (length,) + inner, Read(data.name, _along(rank, axis, first, step)),
                     label="gather")
             for first, step, length in runs]
    flat = concat(ctx, parts, axis, "gather_concat")
    return ctx.view(flat, out_shape, label="gather_shape")


def _check_lookup_axis(ctx, data, indices, axis: int) -> None:
    """Some index must be read from a non-empty axis."""
    if data.shape[axis] == 0 and 0 not in indices.shape:
        raise ctx.shape_error(f"cannot gather along the empty axis {axis} of "
                              f"{list(data.shape)}")


def _gather_at_run_time(ctx, data, indices, axis: int):
    """out[a.., k.., b..] = data[a.., <indices[k..]>, b..]: one Map of a Lookup."""
    rank_k = len(indices.shape)
    _check_lookup_axis(ctx, data, indices, axis)
    data = ctx.stored(data)
    at = Read(indices.name, tuple(Ix.var(axis + j) for j in range(rank_k)))
    inner = len(data.shape) - axis - 1
    index = (identity_index(axis) + (Ix.constant(0),)
             + tuple(Ix.var(axis + rank_k + k) for k in range(inner)))
    out_shape = data.shape[:axis] + indices.shape + data.shape[axis + 1:]
    return ctx.map(out_shape, Lookup(data.name, index, axis, at), label="gather")


@onnx_op("GatherElements", 11, 13)
def GatherElements(ctx, data, indices, *, axis=0):
    """GatherElements: out[i] = data[i with i_axis replaced by indices[i]], over the
    shape of ``indices``: one Map of a Lookup (negative indices count from the end,
    out-of-range ones are clamped, see ``core.Lookup``)."""
    rank = len(data.shape)
    axis = _axis(ctx, axis, rank)
    if len(indices.shape) != rank or any(
            k != axis and i > d for k, (i, d) in enumerate(zip(indices.shape, data.shape))):
        raise ctx.shape_error(f"indices {list(indices.shape)} do not fit data "
                              f"{list(data.shape)} off axis {axis}")
    _check_lookup_axis(ctx, data, indices, axis)
    data = ctx.stored(data)
    at = Read(indices.name, identity_index(rank))
    return ctx.map(indices.shape, Lookup(data.name, identity_index(rank), axis, at),
                   label="gather_elements")


@onnx_op("GatherND", 11, 12, 13)
def GatherND(ctx, data, indices, *, batch_dims=0):
    """GatherND: out[p.., r..] = data[p[:b].., indices[p..], r..] where the last dim of
    ``indices`` (length q) holds an index into data's dims b..b+q-1 (b = ``batch_dims``,
    the leading dims data and indices share). One Map of a Lookup along those q dims
    seen as one (a reshape, copied: a Lookup reads storage), at the row-major number of
    the indices, each negative one counted from the end of its dim first."""
    b, rank = batch_dims, len(data.shape)
    q = indices.shape[-1] if indices.shape else 0
    if not indices.shape or q < 1 or b + q > rank or \
            tuple(indices.shape[:b]) != tuple(data.shape[:b]):
        raise ctx.shape_error(f"indices {list(indices.shape)} (batch_dims {b}) do not fit "
                              f"data {list(data.shape)}")
    positions = indices.shape[:-1]
    inner = data.shape[b + q:]
    flat = None
    for k in range(q):
        read = Read(indices.name, tuple(Ix.var(j) for j in range(len(positions)))
                    + (Ix.constant(k),))
        value = from_end(read, data.shape[b + k])
        size = Const(data.shape[b + k], "int64")
        flat = value if flat is None else Call("add", (Call("mul", (flat, size)), value))
    merged = data.shape[:b] + (math.prod(data.shape[b:b + q]),) + inner
    source = data if q == 1 else ctx.view(data, merged, label="gather_nd_rows")
    source = ctx.stored(source)
    _check_lookup_axis(ctx, source, indices, b)
    index = (identity_index(b) + (Ix.constant(0),)
             + tuple(Ix.var(len(positions) + k) for k in range(len(inner))))
    return ctx.map(positions + inner, Lookup(source.name, index, b, flat), label="gather_nd")


@onnx_op("ReverseSequence", 10, 28)
def ReverseSequence(ctx, input, sequence_lens, *, batch_axis=1, time_axis=0):
    """ReverseSequence: along ``time_axis``, the first ``sequence_lens[b]`` elements of
    batch entry b reversed, the rest as they are: one Map of a Lookup at
    ``len - 1 - t`` where ``t < len``, else ``t`` (the lengths may be computed at run
    time; one past the axis reads its end, see ``core.Lookup``)."""
    rank = len(input.shape)
    time, batch = _axis(ctx, time_axis, rank), _axis(ctx, batch_axis, rank)
    if {time, batch} != {0, 1} or tuple(sequence_lens.shape) != (input.shape[batch],):
        raise ctx.shape_error(f"time_axis {time_axis} and batch_axis {batch_axis} must be 0 "
                              f"and 1, and sequence_lens {list(sequence_lens.shape)} one "
                              "length per batch entry")
    t = Read(ctx.positions(input.shape[time]).name, (Ix.var(time),))
    length = Call("cast_int64", (Read(sequence_lens.name, (Ix.var(batch),)),))
    mirrored = Call("sub", (Call("sub", (length, Const(1, "int64"))), t))
    at = Call("select", (Call("lt", (t, length)), mirrored, t))
    source = ctx.stored(input)
    return ctx.map(input.shape, Lookup(source.name, identity_index(rank), time, at),
                   label="reverse_sequence")


@onnx_op("CenterCropPad", 18)
def CenterCropPad(ctx, input_data, shape, *, axes=None):
    """CenterCropPad: each of ``axes`` (all by default) cropped or zero-padded to the
    constant ``shape``, centred (an odd difference leaves the extra element at the
    end): a Pad with negative widths where it crops."""
    rank = len(input_data.shape)
    axes = tuple(range(rank)) if axes is None else _axes(ctx, axes, rank)
    target = ctx.int_values(shape, "shape")
    if len(target) != len(axes):
        raise ctx.shape_error(f"shape {list(target)} has {len(target)} values for "
                              f"{len(axes)} axes")
    before = []
    for axis, size in zip(axes, target):
        change = size - input_data.shape[axis]  # > 0 pads, < 0 crops
        before.append(change // 2 if change >= 0 else -(-change // 2))
    after = [size - input_data.shape[axis] - b for axis, size, b in zip(axes, target, before)]
    return _pad(ctx, input_data, tuple(before + after), None, axes, "constant")
