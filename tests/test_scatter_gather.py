"""ScatterElements, Scatter, ScatterND and TensorScatter (polyc/frontend/ops/scatter.py)
and GatherND against onnxruntime on seeded random inputs: every reduction, axes,
negative and repeated indices, indices smaller than data, batch dims, integer and bool
data; and the errors."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import polyc
from polyc.errors import UnsupportedOpError

from onnx_helpers import make_model, run_onnxruntime, run_polyc, run_reference

T = TensorProto
KINDS = {"float32": T.FLOAT, "int32": T.INT32, "bool": T.BOOL, "float64": T.DOUBLE}


def check(model, feeds, rtol=0.0):
    """Equal to onnxruntime's output (within ``rtol``, relative and absolute: sums and
    products at repeated indices may be taken in another order), by the compiled code
    and the reference interpreter."""
    want = run_onnxruntime(model, feeds)
    got = run_polyc(model, feeds)
    reference = run_reference(model, feeds)
    for name, expected in want.items():
        assert got[name].dtype == expected.dtype
        np.testing.assert_allclose(got[name], expected, rtol=rtol, atol=rtol, err_msg=name)
        np.testing.assert_allclose(reference[name], expected, rtol=rtol, atol=rtol,
                                   err_msg=name)


def scatter_model(op, data, indices, updates, opset, **attrs):
    kind = KINDS[data.dtype.name]
    index_kind = T.INT64 if indices.dtype == np.int64 else T.INT32
    return make_model([helper.make_node(op, ["data", "indices", "updates"], ["y"], **attrs)],
                      [("data", data.shape, kind), ("indices", indices.shape, index_kind),
                       ("updates", updates.shape, kind)],
                      [("y", data.shape, kind)], opset=opset)


def unique_indices(rng, count: int, size: int, shape) -> np.ndarray:
    """Indices into an axis of ``size`` along the first axis of ``shape`` (of extent
    ``count``), distinct within each column, some written negatively."""
    columns = int(np.prod(shape[1:]))
    picked = np.stack([rng.permutation(size)[:count] for _ in range(columns)], axis=1)
    picked = picked.reshape((count,) + tuple(shape[1:]))
    return np.where(rng.random(picked.shape) < 0.3, picked - size, picked)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements(reduction, axis):
    rng = np.random.default_rng(abs(axis) * 7 + len(reduction))
    data = rng.standard_normal((5, 6, 4)).astype(np.float32)
    shape = [3, 4, 2]
    ax = axis % 3
    shape[ax] = 3 if reduction == "none" else 7  # repeated indices with a reduction
    if reduction == "none":
        moved = np.moveaxis(unique_indices(rng, 3, data.shape[ax],
                                           [3] + [s for k, s in enumerate(shape) if k != ax]),
                            0, ax)
        indices = np.ascontiguousarray(moved).astype(np.int64)
    else:
        indices = rng.integers(-data.shape[ax], data.shape[ax], shape).astype(np.int64)
    updates = rng.standard_normal(indices.shape).astype(np.float32)
    check(scatter_model("ScatterElements", data, indices, updates, 18, axis=axis,
                        reduction=reduction), {"data": data, "indices": indices,
                                               "updates": updates},
          1e-6 if reduction in ("add", "mul") else 0.0)


@pytest.mark.parametrize("dtype", ["int32", "bool", "float64"])
def test_scatter_elements_of_other_types_and_the_old_scatter(dtype):
    rng = np.random.default_rng(3)
    data = (rng.integers(-50, 50, (4, 5)) if dtype != "float64"
            else rng.standard_normal((4, 5))).astype(dtype)
    indices = unique_indices(rng, 2, 5, [2, 4]).T.copy().astype(np.int32)  # along axis 1
    updates = (rng.integers(-50, 50, indices.shape) if dtype != "float64"
               else rng.standard_normal(indices.shape)).astype(dtype)
    feeds = {"data": data, "indices": indices, "updates": updates}
    check(scatter_model("ScatterElements", data, indices, updates, 16, axis=1), feeds)
    if dtype != "bool":
        check(scatter_model("Scatter", data, indices, updates, 10, axis=1), feeds)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_scatter_nd(reduction, depth):
    rng = np.random.default_rng(depth * 11 + len(reduction))
    data = rng.standard_normal((4, 5, 3)).astype(np.float32)
    count = 4
    if reduction == "none":  # distinct targets
        flat = rng.permutation(int(np.prod(data.shape[:depth])))[:count]
        indices = np.stack(np.unravel_index(flat, data.shape[:depth]), axis=-1)
    else:
        indices = np.stack([rng.integers(0, data.shape[k], (2, count)) for k in range(depth)],
                           axis=-1)
    indices = np.where(rng.random(indices.shape) < 0.3,
                       indices - np.array(data.shape[:depth]), indices).astype(np.int64)
    updates = rng.standard_normal(indices.shape[:-1] + data.shape[depth:]).astype(np.float32)
    check(scatter_model("ScatterND", data, indices, updates, 18, reduction=reduction),
          {"data": data, "indices": indices, "updates": updates},
          1e-6 if reduction in ("add", "mul") else 0.0)


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter_writes_a_block_per_batch_entry(mode):
    rng = np.random.default_rng(4)
    past = rng.standard_normal((3, 2, 8, 4)).astype(np.float32)
    update = rng.standard_normal((3, 2, 3, 4)).astype(np.float32)
    offsets = np.array([0, 5, 7 if mode == "circular" else 2], np.int64)
    model = make_model([helper.make_node("TensorScatter", ["past", "update", "at"], ["y"],
                                         mode=mode)],
                       [("past", past.shape), ("update", update.shape), ("at", (3,), T.INT64)],
                       [("y", past.shape)], opset=24)
    got = run_polyc(model, {"past": past, "update": update, "at": offsets})["y"]
    want = past.copy()  # the pseudocode of the ONNX spec
    for b in range(3):
        for s in range(3):
            t = offsets[b] + s
            want[b, :, t % 8 if mode == "circular" else t] = update[b, :, s]
    np.testing.assert_array_equal(got, want)


def test_unknown_reduction_is_refused():
    data, indices = np.zeros((3,), np.float32), np.zeros((1,), np.int64)
    model = scatter_model("ScatterElements", data, indices, data[:1], 18, reduction="mean")
    model.graph.node[0].attribute[0].s = b"mean"
    with pytest.raises(UnsupportedOpError, match="reduction 'mean'"):
        polyc.compile(model)


@pytest.mark.parametrize("depth,batch_dims", [(1, 0), (2, 0), (3, 0), (1, 1), (2, 1)])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_gather_nd(depth, batch_dims, dtype):
    rng = np.random.default_rng(depth * 5 + batch_dims)
    data = rng.integers(-100, 100, (3, 4, 5, 2)).astype(dtype)
    positions = (3, 2)[:1 + (batch_dims == 0)] if batch_dims else (2, 3)
    dims = data.shape[batch_dims:batch_dims + depth]
    indices = np.stack([rng.integers(-d, d, positions) for d in dims], axis=-1)
    model = make_model([helper.make_node("GatherND", ["data", "indices"], ["y"],
                                         batch_dims=batch_dims)],
                       [("data", data.shape, KINDS[dtype]), ("indices", indices.shape, T.INT64)],
                       [("y", None, KINDS[dtype])], opset=13)
    check(model, {"data": data, "indices": indices.astype(np.int64)})


@pytest.mark.parametrize("time_axis", [0, 1])
def test_reverse_sequence(time_axis):
    """Each batch entry's first sequence_lens[b] steps reversed (the lengths an input)."""
    rng = np.random.default_rng(time_axis)
    shape = (5, 4, 3) if time_axis == 0 else (4, 5, 3)
    x = rng.standard_normal(shape).astype(np.float32)
    lens = np.array([5, 1, 3, 0], np.int64)
    model = make_model([helper.make_node("ReverseSequence", ["x", "lens"], ["y"],
                                         time_axis=time_axis, batch_axis=1 - time_axis)],
                       [("x", shape), ("lens", (4,), T.INT64)], [("y", shape)], opset=10)
    check(model, {"x": x, "lens": lens})
