"""Scatters: ScatterElements (and the older Scatter), ScatterND, TensorScatter.

A scatter writes at indices known only at run time; core ops read at such indices
(:class:`core.Lookup`) but write where their loops are. So each output element looks
for the updates aimed at it: a Reduce over the output's box and the update positions
``p`` whose body keeps ``updates[p]`` where ``indices[p]`` names the element (negative
indices count from the end) and the combiner's identity elsewhere, started from
``data``. That is the scatter with ``reduction`` add, mul, max or min, exactly; its cost
is the output's size times the number of update positions that can reach an element
(ScatterElements: the extent of ``indices`` along ``axis``; ScatterND: all of them).

Without a reduction the last position aimed at an element wins (onnxruntime's order;
ONNX leaves duplicates undefined): a first Reduce finds it (max of the positions' flat
numbers), a second picks its update, a Map keeps ``data`` where none was aimed.

TensorScatter (a KV cache update) writes a block per batch entry at an offset along one
axis: each element reads ``update`` at its own position minus the offset (a Lookup),
where that falls inside the update.
"""

from __future__ import annotations

from math import prod

from polyc.frontend.core import Const, Ix, Lookup, Read, identity, identity_index
from polyc.frontend.ops.elementwise import call, fold
from polyc.frontend.ops.indexing import from_end, normalize_axis
from polyc.frontend.ops.registry import onnx_op

# loop instances one scatter may take (output elements x update positions)
MAX_INSTANCES = 2**31
COMBINERS = {"add": "add", "mul": "mul", "max": "max", "min": "min"}


@onnx_op("ScatterElements", 11, 13, 16, 18)
def ScatterElements(ctx, data, indices, updates, *, axis=0, reduction="none"):
    """ScatterElements: out = data, then out[p with p[axis] = indices[p]] = updates[p]
    (combined with ``reduction``) for every position p of ``indices``."""
    rank = len(data.shape)
    if len(indices.shape) != rank or tuple(indices.shape) != tuple(updates.shape):
        raise ctx.shape_error(f"indices {list(indices.shape)} and updates "
                              f"{list(updates.shape)} must have one shape of data's rank {rank}")
    try:
        axis = normalize_axis(axis, rank)
    except ValueError as e:
        raise ctx.shape_error(str(e)) from None
    if any(u > d for k, (u, d) in enumerate(zip(indices.shape, data.shape)) if k != axis):
        raise ctx.shape_error(f"indices {list(indices.shape)} exceed data "
                              f"{list(data.shape)} outside the axis {axis}")
    # loops: the output's dims (those of indices but along the axis), then j along it
    extents = tuple(data.shape[k] if k == axis else indices.shape[k] for k in range(rank))
    box = extents + (indices.shape[axis],)
    at = list(identity_index(rank))
    at[axis] = Ix.var(rank)
    position = Read(ctx.positions(data.shape[axis]).name, (Ix.var(axis),))
    target = from_end(Read(indices.name, tuple(at)), data.shape[axis])
    j = Read(ctx.positions(indices.shape[axis]).name, (Ix.var(rank),))
    return _scatter(ctx, data, box, call("eq", target, position),
                    Read(updates.name, tuple(at)), j, reduction, "scatter_elements")


@onnx_op("Scatter", 9)
def Scatter(ctx, data, indices, updates, *, axis=0):
    """Scatter (opset 9-10): ScatterElements without a reduction."""
    return ScatterElements(ctx, data, indices, updates, axis=axis)


@onnx_op("ScatterND", 11, 13, 16, 18)
def ScatterND(ctx, data, indices, updates, *, reduction="none"):
    """ScatterND: out = data, then out[indices[p]] (a prefix of out's index, of length
    ``indices.shape[-1]``) = updates[p] for every position p of ``indices[..., 0]``."""
    rank, q = len(data.shape), indices.shape[-1] if indices.shape else 0
    positions = tuple(indices.shape[:-1])
    if not indices.shape or not 1 <= q <= rank or \
            tuple(updates.shape) != positions + tuple(data.shape[q:]):
        raise ctx.shape_error(f"indices {list(indices.shape)} and updates "
                              f"{list(updates.shape)} do not fit data {list(data.shape)}")
    box = tuple(data.shape) + positions
    p = tuple(Ix.var(rank + k) for k in range(len(positions)))
    hits = [call("eq", from_end(Read(indices.name, p + (Ix.constant(k),)), data.shape[k]),
                 Read(ctx.positions(data.shape[k]).name, (Ix.var(k),))) for k in range(q)]
    update = Read(updates.name, p + tuple(Ix.var(k) for k in range(q, rank)))
    return _scatter(ctx, data, box, fold("and", hits), update,
                    _flat(ctx, positions, rank), reduction, "scatter_nd")


@onnx_op("TensorScatter", 24)
def TensorScatter(ctx, past_cache, update, write_indices=None, *, axis=-2, mode="linear"):
    """TensorScatter: present = past_cache with ``update`` written from offset
    ``write_indices[b]`` (0 without it) along ``axis`` in batch entry b (modulo the
    axis's extent with ``mode="circular"``)."""
    rank = len(past_cache.shape)
    try:
        axis = normalize_axis(axis, rank)
    except ValueError as e:
        raise ctx.shape_error(str(e)) from None
    if axis == 0 or len(update.shape) != rank or any(
            u != d for k, (u, d) in enumerate(zip(update.shape, past_cache.shape)) if k != axis):
        raise ctx.shape_error(f"update {list(update.shape)} must have past_cache's shape "
                              f"{list(past_cache.shape)} but along axis {axis} (not 0)")
    if mode not in ("linear", "circular"):
        raise ctx.unsupported(f"mode '{mode}' is not linear or circular")
    size, length = past_cache.shape[axis], update.shape[axis]
    t = Read(ctx.positions(size).name, (Ix.var(axis),))
    offset = Const(0, "int64") if write_indices is None else \
        call("cast_int64", Read(write_indices.name, (Ix.var(0),)))
    s = call("sub", t, offset)
    if mode == "circular":
        s = call("mod", s, Const(size, "int64"))
    inside = call("and", call("ge", s, Const(0, "int64")), call("lt", s, Const(length, "int64")))
    written = Lookup(update.name, identity_index(rank), axis, s)
    return ctx.map(past_cache.shape, call("select", inside, written,
                                          Read(past_cache.name, identity_index(rank))),
                   label="tensor_scatter")


def _flat(ctx, extents: tuple[int, ...], first: int):
    """The row-major number of the position held by loop variables ``first``,.. over
    ``extents`` (an int64 expression; 0 for no extents)."""
    flat = Const(0, "int64")
    for k, extent in enumerate(extents):
        value = Read(ctx.positions(extent).name, (Ix.var(first + k),))
        flat = call("add", call("mul", flat, Const(extent, "int64")), value)
    return flat


def _scatter(ctx, data, box, aimed, update, number, reduction: str, label: str):
    """out over data's shape: ``data`` combined (``reduction``) with ``update`` where the
    bool ``aimed`` holds, over the loops ``box`` (the output's dims, then the update
    positions, numbered by the int64 ``number``)."""
    if reduction not in ("none", *COMBINERS):
        raise ctx.unsupported(f"reduction '{reduction}' is not none, add, mul, max or min")
    if prod(box) > MAX_INSTANCES:
        raise ctx.unsupported(f"{prod(box):,} loop instances (output elements x update "
                              f"positions) exceed {MAX_INSTANCES:,}")
    rank = len(data.shape)
    out_index = identity_index(rank)
    keep = Read(data.name, out_index)
    if reduction != "none":
        start = identity(COMBINERS[reduction], data.dtype)
        return ctx.reduce(out_shape=data.shape, init=keep, extents=box, out_index=out_index,
                          combiner=COMBINERS[reduction],
                          expr=call("select", aimed, update, start), label=label)
    none = Const(-1, "int64")
    last = ctx.reduce(out_shape=data.shape, init=none, extents=box, out_index=out_index,
                      combiner="max", expr=call("select", aimed, number, none),
                      label=f"{label}_last")
    chosen = Read(last.name, out_index)
    start = identity("max", data.dtype)
    picked = ctx.reduce(out_shape=data.shape, init=start, extents=box, out_index=out_index,
                        combiner="max",
                        expr=call("select", call("eq", number, chosen), update, start),
                        label=f"{label}_pick")
    return ctx.map(data.shape, call("select", call("ge", chosen, Const(0, "int64")),
                                    Read(picked.name, out_index), keep), label=label)
