"""Strongly connected components of a statement dependence graph, in program order."""

from __future__ import annotations


def topological_sccs(nodes: list[str], edges: list[tuple[str, str]]) -> list[list[str]]:
    """SCCs (Tarjan) ordered so every edge between two SCCs goes forward; ties keep the
    order of ``nodes`` (the original program order)."""
    successors = {n: [] for n in nodes}
    for src, dst in edges:
        if src != dst and dst not in successors[src]:
            successors[src].append(dst)
    sccs = _tarjan(nodes, successors)
    of = {n: k for k, scc in enumerate(sccs) for n in scc}
    preds = {k: {of[s] for s, d in edges if of[d] == k and of[s] != k} for k in range(len(sccs))}
    order, placed = [], set()
    position = {n: k for k, n in enumerate(nodes)}
    while len(order) < len(sccs):
        ready = [k for k in range(len(sccs)) if k not in placed and preds[k] <= placed]
        best = min(ready, key=lambda k: min(position[n] for n in sccs[k]))
        order.append(best)
        placed.add(best)
    return [sorted(sccs[k], key=position.get) for k in order]


def _tarjan(nodes, successors) -> list[list[str]]:
    index, low, stack, on_stack, result = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in successors[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            scc = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                scc.append(top)
                if top == node:
                    break
            result.append(scc)

    for node in nodes:
        if node not in index:
            visit(node)
    return result
