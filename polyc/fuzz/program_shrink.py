"""Shrinking a failing loop program: smaller valid cases, best reductions first."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields, replace

from polyc.fuzz import Config
from polyc.fuzz.interpret import (
    Access,
    Affine,
    Bound,
    Loop,
    Num,
    Op,
    Read,
    Statement,
    trace,
    walk,
)
from polyc.fuzz.program_case import (
    ProgramCase,
    map_reads,
    map_statements,
    normalized,
    reads_in,
    valid,
)


def smaller(case: ProgramCase) -> Iterator[ProgramCase]:
    """Valid candidates strictly smaller than ``case`` (by :func:`size`), best first."""
    seen = {case}
    limit = size(case)
    for candidate in _candidates(case):
        try:
            candidate = normalized(candidate)
        except IndexError:
            continue
        if candidate not in seen and size(candidate) < limit and valid(candidate):
            seen.add(candidate)
            yield candidate


def size(case: ProgramCase) -> int:
    """A weighted count: statements, loops, expression nodes, bounds and index terms,
    parameter values, options away from the defaults."""
    program = case.program
    statements = list(walk(program.body))
    loops = {id(loop): loop for _, path in statements for loop in path}.values()
    nodes = sum(_node_count(s.expr) for s, _ in statements)
    accesses = [a for s, _ in statements for a in [s.write, *reads_in(s.expr)]]
    terms = sum(2 * abs(c) + (ix.constant != 0) for a in accesses for ix in a.index
                for c in [0, *dict(ix.terms).values()])
    bounds = sum(len(loop.lower) + len(loop.upper) + loop.reverse for loop in loops)
    options = sum(getattr(case.config, f.name) != f.default for f in fields(Config))
    return (10**6 * len(statements) + 10**5 * len(loops) + 10**3 * nodes
            + 10 * (terms + bounds + len(program.context)) + sum(dict(case.values).values())
            + options)


def _node_count(expr) -> int:
    return 1 + sum(_node_count(a) for a in expr.args) if isinstance(expr, Op) else 1


def _candidates(case: ProgramCase) -> Iterator[ProgramCase]:
    program = case.program
    statements = [s for s, _ in walk(program.body)]
    if len(statements) > 1:
        for statement in statements:
            yield _with_body(case, map_statements(
                program.body, lambda s, drop=statement: None if s == drop else s))
    yield from _fixed_loops(case)
    for statement in statements:
        for simpler in _simpler_statements(statement):
            yield _with_body(case, map_statements(
                program.body, lambda s, old=statement, new=simpler: new if s == old else s))
    yield from _simpler_loops(case)
    values = dict(case.values)
    for name in values:
        yield replace(case, values=tuple({**values, name: values[name] - 1}.items()))
    for f in fields(Config):
        yield replace(case, config=replace(case.config, **{f.name: f.default}))
    if program.context:
        yield replace(case, program=replace(program, context=()))


def _with_body(case: ProgramCase, body) -> ProgramCase:
    return replace(case, program=replace(case.program, body=body))


def _fixed_loops(case: ProgramCase) -> Iterator[ProgramCase]:
    """Each loop removed, its iterator fixed at its smallest value (a loop directly
    around a statement only if an outer loop remains)."""
    envs = list(trace(case.program, dict(case.values)))

    def fix(body, depth):
        for position, node in enumerate(body):
            if isinstance(node, Statement):
                continue
            inner = {s.name for s, _ in walk(node.body)}
            holds_statement = any(isinstance(n, Statement) for n in node.body)
            if depth > 0 or not holds_statement:
                value = min(env[node.iterator] for s, env in envs if s.name in inner)
                spliced = _substituted(node.body, node.iterator, value)
                yield body[:position] + spliced + body[position + 1:]
            for inner_body in fix(node.body, depth + 1):
                yield body[:position] + (replace(node, body=inner_body),) + body[position + 1:]

    for body in fix(case.program.body, 0):
        yield _with_body(case, body)


def _substituted(body, name: str, value: int) -> tuple:
    """``body`` with iterator ``name`` replaced by ``value`` in bounds and accesses."""
    def access(a: Access) -> Access:
        return Access(a.array, tuple(ix.substitute(name, value) for ix in a.index))

    def bound(b: Bound) -> Bound:
        return Bound(b.coefficient, b.expr.substitute(name, value))

    result = []
    for node in body:
        if isinstance(node, Statement):
            result.append(Statement(node.name, access(node.write),
                                    map_reads(node.expr, access)))
        else:
            result.append(replace(node, lower=tuple(map(bound, node.lower)),
                                  upper=tuple(map(bound, node.upper)),
                                  body=_substituted(node.body, name, value)))
    return tuple(result)


def _simpler_statements(statement: Statement) -> Iterator[Statement]:
    """Subexpressions replaced by an operand or by 1.0, then simpler accesses."""
    for path, node in _subexpressions(statement.expr):
        if isinstance(node, Op):
            for arg in node.args:
                yield replace(statement, expr=_replaced(statement.expr, path, arg))
        if isinstance(node, Read) and path:
            yield replace(statement, expr=_replaced(statement.expr, path, Num(1.0)))
    accesses = [statement.write, *reads_in(statement.expr)]
    for access in dict.fromkeys(accesses):
        for simpler in _simpler_accesses(access):
            def swap(a, old=access, new=simpler):
                return new if a == old else a
            yield Statement(statement.name, swap(statement.write),
                            map_reads(statement.expr, swap))


def _subexpressions(expr, path=()) -> Iterator[tuple[tuple[int, ...], object]]:
    yield path, expr
    if isinstance(expr, Op):
        for k, arg in enumerate(expr.args):
            yield from _subexpressions(arg, path + (k,))


def _replaced(expr, path, new):
    if not path:
        return new
    args = list(expr.args)
    args[path[0]] = _replaced(args[path[0]], path[1:], new)
    return Op(expr.name, tuple(args))


def _simpler_accesses(access: Access) -> Iterator[Access]:
    """Each index with its coefficients made +-1, or without its constant."""
    for d, ix in enumerate(access.index):
        for simpler in (Affine(tuple((n, (c > 0) - (c < 0)) for n, c in ix.terms), ix.constant),
                        Affine(ix.terms, 0)):
            if simpler != ix:
                yield Access(access.array, access.index[:d] + (simpler,) + access.index[d + 1:])


def _simpler_loops(case: ProgramCase) -> Iterator[ProgramCase]:
    """Each loop with one extra bound dropped, or running upwards."""
    def simpler(loop: Loop) -> Iterator[Loop]:
        if loop.reverse:
            yield replace(loop, reverse=False)
        for side in ("lower", "upper"):
            bounds = getattr(loop, side)
            for k in range(1, len(bounds)) if len(bounds) > 1 else ():
                yield replace(loop, **{side: bounds[:k] + bounds[k + 1:]})
            if len(bounds) > 1:
                yield replace(loop, **{side: bounds[1:]})

    def variants(body):
        for position, node in enumerate(body):
            if isinstance(node, Loop):
                for new in [*simpler(node), *(replace(node, body=b) for b in variants(node.body))]:
                    yield body[:position] + (new,) + body[position + 1:]

    for body in variants(case.program.body):
        yield _with_body(case, body)


