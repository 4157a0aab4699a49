"""Fusion groups: which statements a scheduler may interleave.

Groups run one after the other in program order; inside a group the scheduler
decides the loop structure. Policies:

- ``none``  every core op (a Map, or a Reduce's init + update) is its own group;
- ``smart`` an elementwise Map joins the group of the op that produced its input
  when it runs over that op's output shape (bias, activation epilogues);
- ``max``   all statements form one group.
"""

from __future__ import annotations

from dataclasses import dataclass

from polyc.errors import PolycError
from polyc.scop.model import Scop, Statement

POLICIES = ("none", "smart", "max")
ALIASES = {"nofuse": "none", "smartfuse": "smart", "maxfuse": "max"}  # Pluto's names


@dataclass(frozen=True)
class FusionGroups:
    policy: str
    groups: tuple[tuple[str, ...], ...]  # statement names, program order

    def __str__(self) -> str:
        return "\n".join(f"G{k}: {', '.join(g)}" for k, g in enumerate(self.groups))


def fuse(scop: Scop, *, policy: str = "smart") -> FusionGroups:
    """Partition the statements of ``scop`` into consecutive fusion groups."""
    policy = canonical_policy(policy)
    by_op: dict[int, list[Statement]] = {}
    for statement in scop.statements:
        by_op.setdefault(statement.op_index, []).append(statement)
    ops = list(by_op.values())
    if policy == "max":
        runs = [[s for op in ops for s in op]] if ops else []
    elif policy == "none":
        runs = ops
    else:
        runs = _smart_runs(ops)
    return FusionGroups(policy, tuple(tuple(s.name for s in run) for run in runs))


def canonical_policy(policy: str) -> str:
    """``none``/``smart``/``max``, also accepting Pluto's ``nofuse``/``smartfuse``/``maxfuse``."""
    policy = ALIASES.get(policy, policy)
    if policy not in POLICIES:
        names = ", ".join(POLICIES + tuple(ALIASES))
        raise PolycError(f"unknown fusion policy {policy!r}; choose one of {names}")
    return policy


def _smart_runs(ops: list[list[Statement]]) -> list[list[Statement]]:
    runs: list[list[Statement]] = []
    for op in ops:
        if runs and _is_epilogue(op, runs[-1][-1]):
            runs[-1].extend(op)
        else:
            runs.append(list(op))
    return runs


def _is_epilogue(op: list[Statement], producer: Statement) -> bool:
    """An elementwise statement over the producer's output that reads that output."""
    if len(op) != 1:
        return False
    (statement,) = op
    written = statement.write.relation.range().reset_tuple_id()
    produced = producer.write.relation.range().reset_tuple_id()
    same_box = written.get_space() == produced.get_space() and written.is_equal(produced)
    reads_it = any(r.array == producer.write.array for r in statement.reads)
    return same_box and reads_it
