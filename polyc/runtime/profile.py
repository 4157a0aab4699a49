"""Where a compiled model's time goes: per-nest timers, read and tabulated.

Code compiled with ``profile=True`` adds the time of each top-level loop nest (a
*part*, see :mod:`polyc.codegen.profile`) to a counter; the manifest's ``"profile"``
says which statements and ONNX nodes each part runs, and their float operations and
bytes. :func:`measure` runs a model, reads the counters and returns a
:class:`Profile`: one row per set of parts that share ONNX nodes (an im2col and its
product are one Conv), sorted by time, with its share of the total, GFLOP/s and GB/s,
and, from :func:`onnxruntime_times`, onnxruntime's own time for the same ONNX nodes
where its profile names them.

The counters are per loaded model, not per thread: profile from one thread at a time.
"""

from __future__ import annotations

import ctypes
import json
import statistics
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from polyc.errors import PolycError

COUNTERS_FUNCTION = "polyc_profile_counters"  # as polyc.codegen.profile exports it
NODE_SUFFIXES = ("_kernel_time",)
ORT_RENAMES = ("_nchwc",)  # onnxruntime names a rewritten node after its output + this
ORT_PREFIXES = ("fused ",)  # and a node that absorbed its neighbours after its own name
FUSED_CHAIN = 4  # how far up a fused onnxruntime node's op is looked for


@dataclass(frozen=True)
class Row:
    """Parts of the program that share ONNX nodes, timed together."""

    parts: tuple[int, ...]
    nodes: tuple[str, ...]
    statements: tuple[str, ...]
    seconds: float  # per run
    flops: int
    bytes: int
    onnxruntime: float | None = None  # seconds per run of the same nodes, if matched

    @property
    def gflops(self) -> float | None:
        return self.flops / self.seconds / 1e9 if self.flops and self.seconds else None

    @property
    def gbytes(self) -> float | None:
        return self.bytes / self.seconds / 1e9 if self.bytes and self.seconds else None


@dataclass(frozen=True)
class Profile:
    """``str(profile)`` is the table; ``rows`` are sorted by time, longest first."""

    rows: tuple[Row, ...]
    runs: int
    wall: float  # median seconds per call, measured from Python
    onnxruntime_wall: float | None = None
    onnxruntime_unmatched: Mapping[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        """Seconds per run inside the timed nests."""
        return sum(row.seconds for row in self.rows)

    def as_dict(self) -> dict:
        return {"runs": self.runs, "wall_s": self.wall, "nests_s": self.total,
                "onnxruntime_wall_s": self.onnxruntime_wall,
                "onnxruntime_unmatched_s": dict(self.onnxruntime_unmatched),
                "rows": [{"parts": list(r.parts), "nodes": list(r.nodes),
                          "statements": list(r.statements), "seconds": r.seconds,
                          "flops": r.flops, "bytes": r.bytes, "gflops": r.gflops,
                          "gbytes": r.gbytes, "onnxruntime_s": r.onnxruntime}
                         for r in self.rows]}

    def __str__(self) -> str:
        ort = self.onnxruntime_wall is not None
        head = f"{'#':>4} {'ms':>9} {'share':>6} {'GFLOP/s':>8} {'GB/s':>7}"
        head += f" {'ort ms':>9} {'/ort':>6}" if ort else ""
        # (a loop nest's rows are named by statements: it has no ONNX nodes)
        nest = all(set(row.nodes) <= set(row.statements) for row in self.rows)
        lines = [f"{head}  {'statements' if nest else 'ONNX nodes (statements)'}"]
        total = self.total or 1.0
        for k, row in enumerate(self.rows):
            line = (f"{k:>4} {row.seconds * 1e3:>9.4f} {row.seconds / total:>6.1%} "
                    f"{_number(row.gflops):>8} {_number(row.gbytes):>7}")
            if ort:
                theirs = row.onnxruntime
                line += (f" {_number(theirs and theirs * 1e3, 4):>9}"
                         f" {_number(theirs and row.seconds / theirs, 2):>6}")
            lines.append(f"{line}  {_names(row)}")
        lines.append(f"nests {self.total * 1e3:.3f} ms of {self.wall * 1e3:.3f} ms per call "
                     f"(median of {self.runs}; the rest is the call from Python)")
        if ort:
            matched = sum(r.onnxruntime or 0.0 for r in self.rows)
            other = sum(self.onnxruntime_unmatched.values())
            lines.append(f"onnxruntime {self.onnxruntime_wall * 1e3:.3f} ms per call: "
                         f"{matched * 1e3:.3f} ms in matched nodes, {other * 1e3:.3f} ms in "
                         f"others ({_unmatched(self.onnxruntime_unmatched)})")
        return "\n".join(lines)


def _number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _names(row: Row, limit: int = 3) -> str:
    nodes = list(row.nodes) or list(row.statements)
    text = ", ".join(nodes[:limit]) + (f" (+{len(nodes) - limit})" if len(nodes) > limit else "")
    return text + f" ({len(row.statements)} st.)"


def _unmatched(times: Mapping[str, float], limit: int = 3) -> str:
    top = sorted(times, key=times.get, reverse=True)[:limit]
    return ", ".join(top) + (" ..." if len(times) > limit else "") if top else "none"


def counters(runner) -> np.ndarray:
    """The live int64 nanosecond counters of a runner compiled with ``profile=True``."""
    parts = runner.manifest.get("profile")
    address = runner.symbol(COUNTERS_FUNCTION) if parts is not None else 0
    if not address:
        raise PolycError("this model was compiled without profile=True (polyc compile "
                         "--profile): it has no timers")
    pointer = ctypes.CFUNCTYPE(ctypes.c_void_p)(address)()
    buffer = (ctypes.c_int64 * max(len(parts), 1)).from_address(pointer)
    return np.ctypeslib.as_array(buffer)[:len(parts)]


def check_repeat(repeat) -> None:
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise PolycError(f"repeat must be at least 1, got {repeat!r}")


def measure(runner, inputs: Mapping[str, np.ndarray], repeat: int,
            onnxruntime: Mapping[str, object] | None = None) -> Profile:
    """Run ``runner`` once to warm up, then ``repeat`` times; each part's median time
    per run, summed per row. ``onnxruntime`` is :func:`onnxruntime_times`' result."""
    check_repeat(repeat)
    ns = counters(runner)
    runner.run(inputs)
    walls, runs = [], []
    for _ in range(repeat):
        ns[:] = 0
        start = time.perf_counter()
        runner.run(inputs)
        walls.append(time.perf_counter() - start)
        runs.append(ns.copy())
    seconds = np.median(np.array(runs, dtype=np.float64), axis=0) / 1e9
    node_times = dict(onnxruntime["nodes"]) if onnxruntime else {}
    rows = _rows(runner.manifest["profile"], seconds, node_times)
    claimed = {n for row in rows for n in row.nodes}
    unmatched = {n: t for n, t in node_times.items() if n not in claimed}
    return Profile(tuple(sorted(rows, key=lambda r: -r.seconds)), repeat,
                   statistics.median(walls),
                   onnxruntime["wall"] if onnxruntime else None, unmatched)


def _rows(parts: list[dict], seconds: np.ndarray, node_times: Mapping[str, float]
          ) -> list[Row]:
    """Parts joined where they share an ONNX node (connected components, program order).
    A row also names the nodes inlined into its parts that no other row computes
    (:func:`_inlined_once`), so that onnxruntime's time for them is matched."""
    owner: dict[str, int] = {}
    groups: list[list[int]] = []
    for k, part in enumerate(parts):
        joined = sorted({owner[n] for n in part["nodes"] if n in owner})
        if not joined:
            groups.append([k])
            target = len(groups) - 1
        else:
            target = joined[0]
            for other in reversed(joined[1:]):
                groups[target] += groups[other]
                groups[other] = []
            groups[target].append(k)
        for index in groups[target]:
            for n in parts[index]["nodes"]:
                owner[n] = target
    inlined = _inlined_once(parts, groups, owner)
    rows = []
    for members in filter(None, groups):
        members.sort()
        nodes = tuple(dict.fromkeys(n for k in members for n in (*inlined.get(k, ()),
                                                                  *parts[k]["nodes"])))
        matched = [node_times[n] for n in nodes if n in node_times]
        rows.append(Row(tuple(members), nodes,
                        tuple(s for k in members for s in parts[k]["statements"]),
                        float(sum(seconds[k] for k in members)),
                        sum(parts[k]["flops"] for k in members),
                        sum(parts[k]["bytes"] for k in members),
                        sum(matched) if matched else None))
    return rows


def _inlined_once(parts: list[dict], groups: list[list[int]], owner: Mapping[str, int]
                  ) -> dict[int, tuple[str, ...]]:
    """Per part, the nodes inlined into it (``"inlined"``; none in artifacts older than
    that key) that no row computes as its own and only its row inlines: a producer
    inlined into several rows (recomputed in each) is left to none of them."""
    row_of = {k: g for g, members in enumerate(groups) for k in members}
    rows_inlining: dict[str, set[int]] = {}
    for k, part in enumerate(parts):
        for n in part.get("inlined", ()):
            rows_inlining.setdefault(n, set()).add(row_of[k])
    return {k: tuple(n for n in part.get("inlined", ())
                     if n not in owner and len(rows_inlining[n]) == 1)
            for k, part in enumerate(parts)}


def onnxruntime_times(model, inputs: Mapping[str, np.ndarray], repeat: int,
                      threads: int | None = None) -> dict | None:
    """onnxruntime's own profile of ``model`` (a path, bytes or ModelProto) with its
    default optimisations: ``{"wall": median seconds per call, "nodes": {ONNX node
    name: median seconds per run}}``. onnxruntime names rewritten nodes after their
    output tensor (``<tensor>_nchwc``); those count for the ONNX node that writes the
    tensor, and nodes it adds (``ReorderOutput``) keep their own names. None when
    onnxruntime is not installed."""
    check_repeat(repeat)
    try:
        import onnx
        import onnxruntime as ort
    except ImportError:
        return None
    proto = model if isinstance(model, onnx.ModelProto) else (
        onnx.load_model_from_string(model) if isinstance(model, bytes) else onnx.load(str(model)))
    nodes_by_name = {node.name: node for node in proto.graph.node}
    producer = {out: node for node in proto.graph.node for out in node.output}
    with tempfile.TemporaryDirectory() as folder:
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(folder) / "ort")
        if threads is not None:
            options.intra_op_num_threads = threads
        session = ort.InferenceSession(proto.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        walls = []
        for _ in range(repeat + 1):
            start = time.perf_counter()
            session.run(None, dict(inputs))
            walls.append(time.perf_counter() - start)
        events = json.loads(Path(session.end_profiling()).read_text())
    samples: dict[str, list[float]] = {}
    for event in events:
        if event.get("cat") != "Node" or not event["name"].endswith(NODE_SUFFIXES):
            continue
        name = _onnx_node(event["name"].removesuffix("_kernel_time"),
                          event.get("args", {}).get("op_name"), nodes_by_name, producer)
        samples.setdefault(name, []).append(event["dur"] / 1e6)
    # each node runs once per call: drop the warm-up call's time, median of the rest
    nodes = {name: _per_run(times, repeat) for name, times in samples.items()}
    return {"wall": statistics.median(walls[1:]), "nodes": nodes}


def _per_run(times: list[float], repeat: int) -> float:
    """Seconds per call of a node seen ``len(times)`` times over ``repeat + 1`` calls."""
    calls = repeat + 1
    if len(times) % calls:
        return sum(times) / calls
    per_call = [sum(times[k * len(times) // calls:(k + 1) * len(times) // calls])
                for k in range(calls)]
    return statistics.median(per_call[1:])


def _onnx_node(name: str, op: str | None, nodes: Mapping, producer: Mapping) -> str:
    """The ONNX node an onnxruntime node stands for (its own name if none): the node of
    that name, else the node writing the tensor it is named after; a fused node (a
    Conv named after the Relu it absorbed) stands for the node of its op type up the
    chain of first inputs."""
    if name in nodes:
        return name
    stem = name
    for suffix in ORT_RENAMES:
        stem = stem.removesuffix(suffix)
    for prefix in ORT_PREFIXES:
        stem = stem.removeprefix(prefix)
    node = nodes.get(stem) or producer.get(stem)
    while node is None and "/" in stem:  # a fusion named under its node: "/l/MatMul/..Fusion"
        stem = stem.rsplit("/", 1)[0]
        node = nodes.get(stem)
    if node is None:
        return name
    found = node
    for _ in range(FUSED_CHAIN):
        if op is None or found.op_type == op or not found.input:
            break
        found = producer.get(found.input[0])
        if found is None:
            return node.name
    return found.name if op is None or found.op_type == op else node.name
