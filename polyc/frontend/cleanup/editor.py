"""What the clean-up passes share: notes, name queries and :class:`GraphEditor`.

A pass that rewrites nodes walks the graph once, in order, through a ``GraphEditor``:
it emits each node (as is or rewritten), merges two value names into one when it
removes a node that passes its input through, and adds constants under fresh names.
``finish`` returns the new :class:`OnnxGraph`; the editor is the pass's working copy
and lives for one pass (the graph it was made from is not changed).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator

import numpy as np
import onnx

from polyc.frontend.load import OnnxGraph
from polyc.frontend.ops.registry import DEFAULT_DOMAINS

SUBGRAPHS = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


def counted(count: int, text: str) -> str:
    """``text`` with ``{n}`` the count and ``{s}`` an "s" unless the count is 1."""
    return text.format(n=count, s="" if count == 1 else "s")


def with_notes(graph: OnnxGraph, count: int, text: str, **changes) -> OnnxGraph:
    """``graph`` with ``changes`` and, when ``count`` is not 0, the note ``text``."""
    notes = graph.notes + (counted(count, text),) if count else graph.notes
    return dataclasses.replace(graph, notes=notes, **changes)


def is_op(node: onnx.NodeProto, *op_types: str) -> bool:
    """Whether ``node`` is one of ``op_types`` of the default ONNX domain."""
    return node.op_type in op_types and node.domain in DEFAULT_DOMAINS


def names_read(node: onnx.NodeProto) -> set[str]:
    """Every value name ``node`` reads, including those read inside its subgraphs."""
    names = {i for i in node.input if i}
    for attr in node.attribute:
        for sub in [attr.g, *attr.graphs] if attr.type in SUBGRAPHS else []:
            for inner in sub.node:
                names |= names_read(inner)
    return names


def reader_counts(graph: OnnxGraph) -> Counter:
    """Value name -> how many nodes read it, plus one if it is a graph output."""
    readers = Counter(graph.outputs)
    for node in graph.nodes:
        readers.update(names_read(node))
    return readers


def subgraph_reads(graph: OnnxGraph) -> set[str]:
    """Names read inside a node's subgraphs (If, Loop, Scan bodies): never renamed."""
    names = set()
    for node in graph.nodes:
        if any(a.type in SUBGRAPHS for a in node.attribute):
            names |= names_read(node) - set(node.input)
    return names


def copy_node(node: onnx.NodeProto, *, inputs=None, outputs=None, **attributes):
    """A copy of ``node`` with other inputs, outputs or attribute values."""
    new = onnx.NodeProto()
    new.CopyFrom(node)
    if inputs is not None:
        del new.input[:]
        new.input.extend(inputs)
    if outputs is not None:
        del new.output[:]
        new.output.extend(outputs)
    for name, value in attributes.items():
        for k in reversed(range(len(new.attribute))):
            if new.attribute[k].name == name:
                del new.attribute[k]
        new.attribute.append(onnx.helper.make_attribute(name, value))
    return new


class GraphEditor:
    """A pass's working copy of ``graph``: nodes emitted in order, names merged,
    constants added. Every name it is asked about is first resolved through the
    merges made so far."""

    def __init__(self, graph: OnnxGraph):
        self.graph = graph
        self.constants = dict(graph.constants)
        self.value_shapes = dict(graph.value_shapes)
        self.notes: list[str] = []
        self.readers = reader_counts(graph)  # as in ``graph``, before this pass
        self._pinned = subgraph_reads(graph)
        self._nodes: list[onnx.NodeProto] = []
        self._producer: dict[str, int] = {}  # value name -> index in _nodes
        self._alias: dict[str, str] = {}     # merged name -> the name it became
        self._taken = ({t.name for t in graph.inputs} | set(graph.outputs)
                       | set(graph.constants) | set(graph.value_shapes))
        for node in graph.nodes:
            self._taken |= names_read(node) | set(node.output)

    def walk(self) -> Iterator[onnx.NodeProto]:
        """The graph's nodes in order, each reading the names merged so far."""
        for node in self.graph.nodes:
            inputs = [self.resolve(i) for i in node.input]
            yield node if inputs == list(node.input) else copy_node(node, inputs=inputs)

    def emit(self, node: onnx.NodeProto) -> None:
        """Append ``node`` to the new node list."""
        for name in node.output:
            self._producer[name] = len(self._nodes)
        self._nodes.append(node)

    def replace_producer(self, name: str, node: onnx.NodeProto) -> None:
        """Put ``node`` in the place of the emitted node that computes ``name``."""
        index = self._producer[self.resolve(name)]
        for old in self._nodes[index].output:
            self._producer.pop(old, None)
        for new in node.output:
            self._producer[new] = index
        self._nodes[index] = node

    def resolve(self, name: str) -> str:
        while name in self._alias:
            name = self._alias[name]
        return name

    def producer(self, name: str) -> onnx.NodeProto | None:
        """The emitted node that computes ``name`` (None for inputs and constants)."""
        index = self._producer.get(self.resolve(name))
        return None if index is None else self._nodes[index]

    def constant(self, name: str) -> np.ndarray | None:
        return self.constants.get(self.resolve(name)) if name else None

    def rank(self, name: str) -> int | None:
        shape = self._shape(name)
        return None if shape is None else len(shape)

    def static_shape(self, name: str) -> tuple[int, ...] | None:
        """The shape of ``name`` if every dim is known."""
        shape = self._shape(name)
        return shape if shape is not None and None not in shape else None

    def _shape(self, name: str):
        name = self.resolve(name)
        if name in self.constants:
            return tuple(self.constants[name].shape)
        return self.value_shapes.get(name)

    def add_constant(self, base: str, value: np.ndarray) -> str:
        """Add ``value`` as a constant under a new name starting with ``base``."""
        name, k = base, 0
        while name in self._taken:
            k += 1
            name = f"{base}_{k}"
        self._taken.add(name)
        self.constants[name] = value
        self.value_shapes[name] = tuple(value.shape)
        return name

    def bypass(self, out: str, src: str) -> bool:
        """Merge value ``out`` (equal to ``src``) into ``src``, so that the node computing
        ``out`` from ``src`` can go; False when it must stay.

        A graph output keeps its name: ``src`` is renamed ``out`` instead, which needs
        ``src`` to be computed by a node and to be no graph output itself.
        """
        out, src = self.resolve(out), self.resolve(src)
        if not out:
            return True
        if out not in self.graph.outputs:
            if out in self._pinned:
                return False
            self._alias[out] = src
            return True
        if src in self.graph.outputs or src in self._pinned or src not in self._producer:
            return False
        self._alias[src] = out
        self._producer[out] = self._producer.pop(src)
        return True

    def finish(self) -> OnnxGraph:
        """The new graph: the emitted nodes with merged names, constants and notes."""
        nodes = []
        for node in self._nodes:
            inputs = [self.resolve(i) for i in node.input]
            outputs = [self.resolve(o) for o in node.output]
            same = inputs == list(node.input) and outputs == list(node.output)
            nodes.append(node if same else copy_node(node, inputs=inputs, outputs=outputs))
        return dataclasses.replace(self.graph, nodes=tuple(nodes), constants=self.constants,
                                   value_shapes=self.value_shapes,
                                   notes=self.graph.notes + tuple(self.notes))
