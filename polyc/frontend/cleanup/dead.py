"""Dead code: nodes no graph output depends on, constants no node reads."""

from __future__ import annotations

from polyc.frontend.cleanup.editor import names_read, with_notes
from polyc.frontend.load import OnnxGraph


def remove_dead_nodes(graph: OnnxGraph) -> OnnxGraph:
    """Only the nodes a graph output depends on, in their original order."""
    live = set(graph.outputs)
    kept = []
    for node in reversed(graph.nodes):
        if not any(o in live for o in node.output):
            continue
        kept.append(node)
        live.update(names_read(node))
    kept.reverse()
    removed = len(graph.nodes) - len(kept)
    return with_notes(graph, removed, "removed {n} dead node{s}", nodes=tuple(kept))


def drop_unused_constants(graph: OnnxGraph) -> OnnxGraph:
    """Constants that no node reads and that are no graph output are dropped."""
    used = set(graph.outputs)
    for node in graph.nodes:
        used |= names_read(node)
    constants = {k: v for k, v in graph.constants.items() if k in used}
    dropped = len(graph.constants) - len(constants)
    return with_notes(graph, dropped, "dropped {n} unused constant{s}", constants=constants)
