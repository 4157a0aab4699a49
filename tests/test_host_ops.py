"""Ops the runtime runs after the compiled code (polyc/runtime/host.py,
polyc/frontend/cleanup/host_ops.py): NonMaxSuppression against onnxruntime, in the JIT
and in an artifact, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import polyc
from polyc.errors import UnsupportedOpError
from polyc.runtime import host
from polyc.runtime.artifact import load_artifact

from onnx_helpers import make_model, run_onnxruntime

node = helper.make_node


def _boxes(rng, batches: int, count: int, center: bool) -> np.ndarray:
    """Boxes around random centres: ``[x_c, y_c, w, h]``, or ``[y1, x1, y2, x2]`` with the
    corners of every other box swapped (either diagonal pair is allowed)."""
    centres = rng.uniform(0, 10, (batches, count, 2))
    sizes = rng.uniform(0.5, 3, (batches, count, 2))
    if center:
        return np.concatenate([centres, sizes], axis=2).astype(np.float32)
    low, high = centres - sizes / 2, centres + sizes / 2
    corners = np.concatenate([low[..., ::-1], high[..., ::-1]], axis=2)
    corners[:, ::2] = corners[:, ::2][..., [2, 3, 0, 1]]
    return np.ascontiguousarray(corners, dtype=np.float32)


def _nms_model(inputs, initializers, *, sigmoid: bool, center: int, extra_output: bool):
    """Sigmoid of the logits (or the scores as given) -> NonMaxSuppression -> ``sel``;
    with ``extra_output`` a second output computed from the boxes."""
    scores = "sig" if sigmoid else "s"
    nodes = ([node("Sigmoid", ["s"], ["sig"])] if sigmoid else []) + [
        node("NonMaxSuppression", ["b", scores, *inputs], ["sel"], center_point_box=center)]
    outputs = [("sel", None, TensorProto.INT64)]
    if extra_output:
        nodes.append(node("Relu", ["b"], ["r"]))
        outputs.insert(0, ("r", None))
    return nodes, outputs


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("case", ["thresholds", "no_score_threshold", "limit_zero", "defaults",
                                  "many"])
def test_non_max_suppression_matches_onnxruntime(center, case):
    """Selected (batch, class, box) rows in onnxruntime's order, for both box formats,
    with and without a score threshold, max_output_boxes_per_class 0 / absent (no rows) /
    above the candidates; the scores computed by the compiled code (Sigmoid), the boxes
    a model input, and another output kept in its place."""
    rng = np.random.default_rng(center * 10 + len(case))
    batches, classes, count = 2, 3, 60
    b = _boxes(rng, batches, count, bool(center))
    s = rng.standard_normal((batches, classes, count)).astype(np.float32)
    inits = {"thresholds": [("m", np.array([4], np.int64)), ("iou", np.array([0.25], np.float32)),
                            ("st", np.array([0.3], np.float32))],
             "no_score_threshold": [("m", np.array([6], np.int64)),
                                    ("iou", np.array([0.5], np.float32))],
             "limit_zero": [("m", np.array([0], np.int64))],
             "defaults": [],
             "many": [("m", np.array([1000], np.int64)), ("iou", np.array([0.1], np.float32))],
             }[case]
    nodes, outputs = _nms_model([name for name, _ in inits], inits, sigmoid=True,
                                center=center, extra_output=case == "thresholds")
    model = make_model(nodes, [("b", b.shape), ("s", s.shape)], outputs,
                       initializers=inits, opset=11)
    compiled = polyc.compile(model)
    got = compiled.run({"b": b, "s": s})
    want = run_onnxruntime(model, {"b": b, "s": s})
    assert list(got) == [name for name, *_ in outputs]
    for name in got:
        assert got[name].dtype == want[name].dtype
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    if case == "many":
        assert len(got["sel"]) > 10


def test_non_max_suppression_in_an_artifact(tmp_path):
    """An artifact carries the host op in its manifest: loaded with numpy and ctypes, it
    returns the same rows; the boxes computed by the compiled code."""
    rng = np.random.default_rng(3)
    b = _boxes(rng, 1, 40, False)
    s = rng.uniform(0, 1, (1, 2, 40)).astype(np.float32)
    inits = [("m", np.array([5], np.int64)), ("iou", np.array([0.3], np.float32)),
             ("st", np.array([0.2], np.float32))]
    model = make_model([node("Relu", ["x"], ["b"]),
                        node("NonMaxSuppression", ["b", "s", "m", "iou", "st"], ["sel"])],
                       [("x", b.shape), ("s", s.shape)], [("sel", None, TensorProto.INT64)],
                       initializers=inits, opset=11)
    compiled = polyc.compile(model)
    assert [step["op"] for step in compiled.manifest["host"]] == ["NonMaxSuppression"]
    assert any("runs NonMaxSuppression" in note for note in compiled.compilation.graph.notes)
    path = tmp_path / "nms.so"
    compiled.save(path)
    got = load_artifact(path).run({"x": b, "s": s})
    want = run_onnxruntime(model, {"x": b, "s": s})
    np.testing.assert_array_equal(got["sel"], want["sel"])
    assert list(got) == ["sel"]


def test_non_max_suppression_read_by_another_node_is_refused():
    """Its output's length is known only at run time: another node reading it is refused,
    naming the node and why."""
    model = make_model([node("NonMaxSuppression", ["b", "s"], ["sel"], name="nms"),
                        node("Cast", ["sel"], ["y"], to=TensorProto.FLOAT)],
                       [("b", (1, 5, 4)), ("s", (1, 1, 5))], [("y", None)], opset=11)
    with pytest.raises(UnsupportedOpError, match="nms.*read by other nodes.*graph output"):
        polyc.compile(model)


def test_a_bad_iou_threshold_is_an_input_error():
    """onnxruntime refuses an IoU threshold outside [0, 1]; so does the runtime."""
    with pytest.raises(polyc.PolycError, match="iou_threshold"):
        host.non_max_suppression(np.zeros((1, 2, 4), np.float32), np.zeros((1, 1, 2), np.float32),
                                 np.array([1]), np.array([1.5], np.float32))


def test_a_manifest_naming_an_unknown_host_op_is_refused():
    manifest = {"host": [{"op": "StringSplit", "inputs": ["x"], "outputs": ["y"]}],
                "results": ["y"]}
    with pytest.raises(ValueError, match="host op .StringSplit. is unknown"):
        host.check_steps(manifest, ("x",))
    manifest = {"host": [], "results": ["z"]}
    with pytest.raises(ValueError, match="results z are computed nowhere"):
        host.check_steps(manifest, ("x",))


@pytest.mark.parametrize("attributes", [{}, {"sorted": 0}, {"axis": 1}, {"axis": -1, "sorted": 0}])
def test_unique_matches_onnxruntime(attributes):
    """Unique's four outputs (values, first indices, inverse indices, counts), sorted or
    in order of appearance, of the whole tensor or of slices along an axis; its input
    computed by the compiled code."""
    rng = np.random.default_rng(len(attributes))
    x = rng.integers(-3, 4, (4, 6)).astype(np.float32)
    x[:, 3] = x[:, 1]  # equal slices along axis 1
    outputs = ["y", "first", "inverse", "counts"]
    model = make_model([node("Relu", ["x"], ["r"]),
                        node("Unique", ["r"], outputs, **attributes)],
                       [("x", x.shape)],
                       [("y", None)] + [(name, None, TensorProto.INT64) for name in outputs[1:]],
                       opset=11)
    got = polyc.compile(model).run({"x": x})
    want = run_onnxruntime(model, {"x": x})
    assert list(got) == outputs
    for name in outputs:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize("axis, length", [(None, 5), (0, 3), (1, 4), (-1, 2)])
def test_compress_matches_onnxruntime(axis, length):
    """Compress along an axis or of the flattened tensor, the condition computed by the
    compiled code and shorter than the axis (the slices past it dropped)."""
    rng = np.random.default_rng(length)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    c = rng.standard_normal(length).astype(np.float32)
    attributes = {} if axis is None else {"axis": axis}
    model = make_model([node("Greater", ["c", "zero"], ["keep"]),
                        node("Compress", ["x", "keep"], ["y"], **attributes)],
                       [("x", x.shape), ("c", c.shape)], [("y", None)],
                       initializers=[("zero", np.zeros((), np.float32))], opset=11)
    got = polyc.compile(model).run({"x": x, "c": c})
    np.testing.assert_array_equal(got["y"], run_onnxruntime(model, {"x": x, "c": c})["y"])


def test_a_model_of_host_ops_alone_compiles_a_copy():
    """Every input of the host op a model input: the compiled code copies one, so that
    there is code to run."""
    x = np.array([3, 1, 3, 2, 1], np.int64)
    model = make_model([node("Unique", ["x"], ["y"])], [("x", x.shape, TensorProto.INT64)],
                       [("y", None, TensorProto.INT64)], opset=11)
    compiled = polyc.compile(model)
    assert compiled.manifest["host"][0]["inputs"] == ["x_for_Unique"]
    np.testing.assert_array_equal(compiled.run({"x": x})["y"], [1, 2, 3])
