"""Ops the runtime runs on the compiled code's outputs: those whose output shape depends
on the values (NonMaxSuppression, Unique, Compress), when nothing in the model reads
their outputs.

The compiler turns each such node's inputs (but the model's inputs) into extra outputs
of the compiled code and
lists the node in the manifest's ``"host"`` (op, input and output names, attributes);
``"results"`` names what a call returns, in the model's output order. After the call,
:func:`finish` runs the host ops in order on those arrays (numpy) and returns the
results. Like :mod:`polyc.runtime.abi`, this needs only numpy.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from polyc.errors import InputError


def non_max_suppression(boxes, scores, max_output=None, iou_threshold=None,
                        score_threshold=None, *, center_point_box: int = 0) -> np.ndarray:
    """ONNX NonMaxSuppression as onnxruntime's CPU kernel computes it: per batch and class,
    the boxes in decreasing score (above ``score_threshold`` when given; equal scores:
    the lower index first), each kept unless its IoU with a kept box of the class exceeds
    ``iou_threshold``, at most ``max_output`` per class (0 or absent: none). float32
    arithmetic throughout, as the kernel's. ``[selected, 3]`` int64 rows
    ``(batch, class, box)``."""
    limit = 0 if max_output is None else max(int(np.asarray(max_output).reshape(-1)[0]), 0)
    iou = np.float32(0 if iou_threshold is None else np.asarray(iou_threshold).reshape(-1)[0])
    if not 0 <= iou <= 1:
        raise InputError(f"NonMaxSuppression: iou_threshold {iou} is not within [0, 1]")
    boxes, scores = np.asarray(boxes, np.float32), np.asarray(scores, np.float32)
    if boxes.ndim != 3 or scores.ndim != 3 or boxes.shape[2] != 4 or \
            boxes.shape[0] != scores.shape[0] or boxes.shape[1] != scores.shape[2]:
        raise InputError(f"NonMaxSuppression: boxes {list(boxes.shape)} and scores "
                         f"{list(scores.shape)} do not fit [B, N, 4] and [B, C, N]")
    rows: list[tuple[int, int, int]] = []
    if limit == 0:
        return np.zeros((0, 3), np.int64)
    for b in range(boxes.shape[0]):
        low, high = _corners(boxes[b], center_point_box)
        area = (high[:, 0] - low[:, 0]) * (high[:, 1] - low[:, 1])
        for c in range(scores.shape[1]):
            row = scores[b, c]
            order = np.argsort(-row, kind="stable")
            if score_threshold is not None:
                floor = np.float32(np.asarray(score_threshold).reshape(-1)[0])
                order = order[row[order] > floor]
            kept: list[int] = []
            for index in order:
                if kept and _suppressed(low, high, area, np.asarray(kept), index, iou):
                    continue
                if len(kept) >= limit:
                    break
                kept.append(int(index))
                rows.append((b, c, int(index)))
    return np.asarray(rows, np.int64).reshape(-1, 3)


def _corners(boxes: np.ndarray, center_point_box: int) -> tuple[np.ndarray, np.ndarray]:
    """Per box ``(x_min, y_min)`` and ``(x_max, y_max)``: of ``[y1, x1, y2, x2]`` corners in
    either order, or of ``[x_center, y_center, width, height]``."""
    if center_point_box:
        half = boxes[:, 2:] / np.float32(2)
        return boxes[:, :2] - half, boxes[:, :2] + half
    xs, ys = boxes[:, [1, 3]], boxes[:, [0, 2]]
    return (np.stack([xs.min(axis=1), ys.min(axis=1)], axis=1),
            np.stack([xs.max(axis=1), ys.max(axis=1)], axis=1))


def _suppressed(low, high, area, kept: np.ndarray, index: int, threshold) -> bool:
    """Whether box ``index`` overlaps one of ``kept`` by an IoU above ``threshold``."""
    inner_low = np.maximum(low[kept], low[index])
    inner_high = np.minimum(high[kept], high[index])
    sides = inner_high - inner_low
    meet = (sides[:, 0] > 0) & (sides[:, 1] > 0)
    inter = sides[:, 0] * sides[:, 1]
    union = area[kept] + area[index] - inter
    valid = meet & (inter > 0) & (area[kept] > 0) & (area[index] > 0) & (union > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = inter / union
    return bool(np.any(valid & (ratio > threshold)))


def unique(x, *, axis=None, sorted=1):  # noqa: A002 - ONNX's name
    """ONNX Unique: the distinct values (or slices along ``axis``) ascending, or in the
    order of their first occurrence (``sorted=0``); the index of each one's first
    occurrence, each element's index among them, and their counts (int64)."""
    x = np.asarray(x)
    values, first, inverse, counts = np.unique(
        x.reshape(-1) if axis is None else x, axis=axis, return_index=True,
        return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    if not sorted:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        values = values[order] if axis is None else np.take(values, order, axis=axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return values, *(a.astype(np.int64) for a in (first, inverse, counts))


def compress(x, condition, *, axis=None) -> np.ndarray:
    """ONNX Compress: the slices of ``x`` along ``axis`` (of ``x`` flattened when absent)
    whose ``condition`` is true; a shorter condition drops the slices past it."""
    return np.compress(np.asarray(condition).astype(bool).reshape(-1), np.asarray(x),
                       axis=axis)


FUNCTIONS = {"NonMaxSuppression": non_max_suppression, "Unique": unique, "Compress": compress}


def check_steps(manifest: Mapping, names: tuple[str, ...]) -> None:
    """ValueError unless the manifest's ``"host"`` and ``"results"`` fit the names of its
    inputs and outputs."""
    known = set(names)
    for step in manifest.get("host", []):
        if step.get("op") not in FUNCTIONS:
            raise ValueError(f"the manifest's host op {step.get('op')!r} is unknown")
        missing = [n for n in step.get("inputs", []) if n and n not in known]
        if missing:
            raise ValueError(f"host op {step['op']} reads {', '.join(missing)}, which "
                             "nothing computes")
        known.update(name for name in step.get("outputs", []) if name)
    absent = [n for n in manifest.get("results", []) if n not in known]
    if absent:
        raise ValueError(f"the manifest's results {', '.join(absent)} are computed nowhere")


def finish(manifest: Mapping, values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The results of a call: the host ops run on ``values`` (the call's inputs and the
    compiled code's outputs, by name)."""
    values = dict(values)
    for step in manifest["host"]:
        args = [values[name] if name else None for name in step["inputs"]]
        result = FUNCTIONS[step["op"]](*args, **step.get("attributes", {}))
        results = result if isinstance(result, tuple) else (result,)
        values.update((name, value) for name, value in zip(step["outputs"], results) if name)
    return {name: values[name] for name in manifest["results"]}
