"""A random loop program's case (:class:`ProgramCase`) and keeping it valid: every
access inside its array (:func:`normalized`), every case checked (:func:`valid`)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

from polyc.fuzz import Config
from polyc.fuzz.interpret import (
    Access,
    Loop,
    Op,
    Program,
    Read,
    Statement,
    run,
    trace,
    walk,
)


@dataclass(frozen=True)
class ProgramCase:
    """A program, its parameter values, the seed of its initial arrays, a Config."""

    program: Program
    values: tuple[tuple[str, int], ...]
    data_seed: int
    config: Config = Config()


# -- keeping programs valid ------------------------------------------------------------


def normalized(case: ProgramCase) -> ProgramCase:
    """Offsets shifted so every index is >= 0 on its statement's domain, extents fitted
    to the largest index (their parameter part kept), arrays no statement uses dropped."""
    program, values = case.program, dict(case.values)
    points = defaultdict(list)
    for statement, env in trace(program, values):
        points[statement.name].append(env)

    def shifted(statement: Statement) -> Statement:
        envs = points[statement.name]

        def fit(access: Access) -> Access:
            if not envs:
                return access
            return Access(access.array, tuple(
                a.shifted(max(0, -min(a.value(e) for e in envs))) for a in access.index))

        return Statement(statement.name, fit(statement.write), map_reads(statement.expr, fit))

    body = map_statements(program.body, shifted)
    program = replace(program, body=body)
    extents = _largest_indices(program, points)
    arrays = tuple((name, tuple(e.shifted(extents[name][d] - e.value(values))
                                for d, e in enumerate(shape)))
                   for name, shape in program.arrays if name in extents)
    return replace(case, program=replace(program, arrays=arrays))


def _largest_indices(program: Program, points) -> dict[str, list[int]]:
    """Each used array's extent per dim: its largest index + 1 (at least 1)."""
    extents: dict[str, list[int]] = {}
    for statement, _ in walk(program.body):
        for access in [statement.write, *reads_in(statement.expr)]:
            largest = extents.setdefault(access.array, [1] * len(access.index))
            for d, a in enumerate(access.index):
                for env in points[statement.name]:
                    largest[d] = max(largest[d], a.value(env) + 1)
    return extents


def valid(case: ProgramCase) -> bool:
    """The context holds, every statement runs at least once, every access is inside
    its array, every statement is inside a loop, and the default order (no schedules)
    has one statement per top-level loop nest and no downward loop."""
    program, values = case.program, dict(case.values)
    if any(c.value(values) < 0 for c in program.context) or any(v < 1 for v in values.values()):
        return False
    if any(isinstance(node, Statement) for node in program.body):
        return False
    if not program.scheduled and not all(_is_chain(loop) for loop in program.body):
        return False
    ran = {statement.name for statement, _ in trace(program, values)}
    if ran != {statement.name for statement, _ in walk(program.body)}:
        return False
    try:
        run(program, values, {})
    except IndexError:
        return False
    return True


def _is_chain(loop: Loop) -> bool:
    """One statement in a perfect nest of upward loops."""
    if loop.reverse or len(loop.body) != 1:
        return False
    inner = loop.body[0]
    return isinstance(inner, Statement) or _is_chain(inner)


def map_statements(body, change) -> tuple:
    """``body`` with each statement replaced by ``change(statement)`` (None drops it);
    loops left empty are dropped."""
    result = []
    for node in body:
        if isinstance(node, Statement):
            node = change(node)
        else:
            inner = map_statements(node.body, change)
            node = replace(node, body=inner) if inner else None
        if node is not None:
            result.append(node)
    return tuple(result)


def map_reads(expr, change):
    """``expr`` with each read's access replaced by ``change(access)``."""
    if isinstance(expr, Read):
        return Read(change(expr.access))
    if isinstance(expr, Op):
        return Op(expr.name, tuple(map_reads(a, change) for a in expr.args))
    return expr


def reads_in(expr) -> list[Access]:
    if isinstance(expr, Read):
        return [expr.access]
    if isinstance(expr, Op):
        return [a for arg in expr.args for a in reads_in(arg)]
    return []


