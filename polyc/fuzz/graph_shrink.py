"""Shrinking a failing graph case: smaller valid cases, best reductions first."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from polyc.fuzz import Config
from polyc.fuzz.graph_case import GraphCase, Leaf, Node, reference

# -- shrinking -----------------------------------------------------------------------------

SIMPLEST = Config(scheduler="pluto", fuse="smart", tile=False, threads=1)


def size(case: GraphCase) -> tuple[int, int, int, int]:
    """What :func:`smaller` reduces: ops, outputs, input and weight elements, and
    options away from :data:`SIMPLEST`."""
    elements = sum(math.prod(leaf.shape) for leaf in case.leaves)
    options = sum(getattr(case.config, f) != getattr(SIMPLEST, f)
                  for f in ("scheduler", "fuse", "tile", "threads"))
    return len(case.nodes), len(case.outputs), elements, options


def smaller(case: GraphCase) -> Iterator[GraphCase]:
    """Valid cases strictly smaller than ``case`` (by :func:`size`), best first: one
    output kept, a prefix of the ops, one op dropped (its readers rewired to one of its
    inputs), the options one step towards :data:`SIMPLEST`, dims set to 1 or halved.
    Each candidate builds, passes ``onnx.checker`` and runs in onnxruntime."""
    seen = set()
    try:
        values = reference(case)
    except Exception:  # not valid itself: no candidate replaces values by inputs
        values = {}
    for candidate in _candidates(case, values):
        candidate = _pruned(candidate)
        if candidate is None or candidate in seen or not size(candidate) < size(case):
            continue
        seen.add(candidate)
        if _valid(candidate):
            yield candidate


def _candidates(case: GraphCase, values: dict) -> Iterator[GraphCase]:
    """Reductions of ``case``, unpruned and unchecked (``values``: every value of
    ``case``, as :func:`reference` gives them)."""
    if len(case.outputs) > 1:
        for output in case.outputs:
            yield replace(case, outputs=(output,))
    for k in range(1, len(case.nodes)):
        yield _with_nodes(case, case.nodes[:k])
    for i in range(len(case.nodes)):
        yield from _dropped(case, i)
    for node in case.nodes:
        if node.output in values:
            yield _cut_at(case, node, values[node.output])
    for field in ("threads", "tile", "fuse", "scheduler"):
        if getattr(case.config, field) != getattr(SIMPLEST, field):
            yield replace(case, config=replace(case.config,
                                               **{field: getattr(SIMPLEST, field)}))
    yield from _shrunk_dims(case)


def _with_nodes(case: GraphCase, nodes) -> GraphCase:
    """``case`` cut to ``nodes``: its outputs among them and every unread one."""
    names = {n.output for n in nodes}
    read = {x for n in nodes for x in n.inputs if isinstance(x, str)}
    outputs = [o for o in case.outputs if o in names]
    outputs += [n.output for n in nodes if n.output not in read and n.output not in outputs]
    return replace(case, nodes=tuple(nodes), outputs=tuple(outputs))


def _dropped(case: GraphCase, i: int) -> Iterator[GraphCase]:
    """``case`` without node ``i``, its readers reading one of its inputs instead."""
    dropped = case.nodes[i]
    for source in dict.fromkeys(x for x in dropped.inputs if isinstance(x, str) and x):
        def rename(x, source=source):
            return source if x == dropped.output else x
        nodes = tuple(replace(n, inputs=tuple(map(rename, n.inputs)))
                      for n in case.nodes if n is not dropped)
        leaves = {leaf.name for leaf in case.leaves}
        outputs = tuple(dict.fromkeys(o for o in map(rename, case.outputs)
                                      if o not in leaves))
        yield replace(case, nodes=nodes, outputs=outputs)


def _cut_at(case: GraphCase, node: Node, value: np.ndarray) -> GraphCase:
    """``case`` with ``node``'s output a graph input of its shape and dtype (what
    computed it is dropped unless read elsewhere)."""
    leaf = Leaf(node.output, value.shape, value.dtype.name)
    nodes = tuple(n for n in case.nodes if n is not node)
    outputs = tuple(o for o in case.outputs if o != node.output)
    return replace(case, leaves=case.leaves + (leaf,), nodes=nodes, outputs=outputs)


def _shrunk_dims(case: GraphCase) -> Iterator[GraphCase]:
    """``case`` with one leaf dim set to 1 or halved, or with every leaf dim of one
    size (and that size in Reshape and Expand targets) halved."""
    for extent in sorted({d for leaf in case.leaves for d in leaf.shape if d > 1},
                        reverse=True):
        yield _resized(case, extent, extent // 2)
    for index, leaf in enumerate(case.leaves):
        for axis, d in enumerate(leaf.shape):
            for new in dict.fromkeys((1, d // 2)) if d > 1 else ():
                shape = leaf.shape[:axis] + (new,) + leaf.shape[axis + 1:]
                leaves = list(case.leaves)
                leaves[index] = replace(leaf, shape=shape)
                yield replace(case, leaves=tuple(leaves))


def _resized(case: GraphCase, old: int, new: int) -> GraphCase:
    """Every leaf dim and Reshape or Expand target dim ``old`` made ``new``."""
    def dims(values):
        return tuple(new if v == old else v for v in values)

    def target(node: Node) -> Node:
        if node.op not in ("Reshape", "Expand"):
            return node
        literal = node.inputs[1]
        return replace(node, inputs=(node.inputs[0],
                                     replace(literal, values=dims(literal.values))))

    leaves = tuple(replace(leaf, shape=dims(leaf.shape)) for leaf in case.leaves)
    return replace(case, leaves=leaves, nodes=tuple(map(target, case.nodes)))


def _pruned(case: GraphCase) -> GraphCase | None:
    """``case`` without nodes no output depends on and unread leaves; None without
    outputs."""
    if not case.outputs:
        return None
    needed = set(case.outputs)
    nodes = []
    for node in reversed(case.nodes):
        if node.output in needed:
            nodes.append(node)
            needed.update(x for x in node.inputs if isinstance(x, str))
    leaves = tuple(leaf for leaf in case.leaves if leaf.name in needed)
    return replace(case, leaves=leaves, nodes=tuple(reversed(nodes)))


def _valid(case: GraphCase) -> bool:
    """Whether ``case`` builds, passes the checker and runs in onnxruntime."""
    try:
        reference(case)
    except Exception:
        return False
    return True
