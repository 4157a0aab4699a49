"""Random affine loop programs, compiled by polyc and compared with a plain-Python
interpreter of their original order (:mod:`polyc.fuzz.interpret`).

A case is a :class:`~polyc.fuzz.interpret.Program` (a tree of loops and statements),
parameter values, a seed for the initial array values and a :class:`Config`. Programs
have 1-6 statements of depth 1-4 over parameters N and M, possibly sharing outer loops
(imperfect nests) and loops running downwards; bounds may be triangular (``j >= i``),
skewed (``j <= N - 1 - i``) or scaled (``2*j <= N + i``); accesses may be reversed
(``-i + N - 1``), scaled (``2*i + 1``), transposed or sums and differences of
iterators; statements may be reductions (``C[i] = C[i] + ...`` in a loop over k).
Every access stays inside its array: offsets are shifted up until each index is
non-negative on the statement's domain, and extents fit the largest index (both
computed by enumerating the domains at the case's parameter values).

The module has the five functions of the :mod:`polyc.fuzz` interface.
"""

from __future__ import annotations

import random
import zlib
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace

import numpy as np

from polyc.frontend.core import Const
from polyc.fuzz import Config, Mismatch
from polyc.fuzz.interpret import (
    Access,
    Affine,
    Bound,
    Loop,
    Num,
    Op,
    Program,
    Read,
    Statement,
    run,
    trace,
    walk,
)
from polyc.scop.nest import Expr, LoopNest, fn

ITERATORS = ("i", "j", "k", "l")
PARAMS = ("N", "M")
CONSTANTS = (0.5, 0.25, -1.0, 2.0, 1.5, 3.0, -0.75)
DIVISORS = (2.0, 3.0, -4.0, 7.0)
MAX_LOOPS = 10  # statement depths add up to at most this
INDEX_KINDS = ("plain", "plain", "plain", "offset", "reversed", "scaled", "sum", "difference",
               "param", "constant")


@dataclass(frozen=True)
class ProgramCase:
    """A program, its parameter values, the seed of its initial arrays, a Config."""

    program: Program
    values: tuple[tuple[str, int], ...]
    data_seed: int
    config: Config = Config()


# -- generating ------------------------------------------------------------------------


def generate(seed: int) -> ProgramCase:
    """A random valid program, a function of ``seed`` alone."""
    rng = random.Random(seed)
    depths = [rng.choice((1, 2, 2, 3, 3, 4)) for _ in range(rng.choice((1, 2, 3, 3, 4, 5, 6)))]
    while sum(depths) > MAX_LOOPS:  # dependence analysis grows fast with the dims
        depths[depths.index(max(depths))] -= 1
    small = max(depths) >= 3
    values = {"N": rng.randint(3, 5 if small else 7), "M": rng.randint(2, 4 if small else 6)}
    ranks = [rng.randint(1, 3) for _ in range(rng.randint(1, 4))]
    names = "ABCD"[:len(ranks)]
    scheduled = rng.random() < 0.75
    body = _draw_tree(rng, depths, ranks, values, scheduled)
    arrays = tuple((name, tuple(_draw_extent(rng) for _ in range(rank)))
                   for name, rank in zip(names, ranks))
    context = _draw_context(rng, values)
    program = Program(PARAMS, arrays, body, context, scheduled)
    case = ProgramCase(program, tuple(values.items()), rng.randrange(2**31), Config.draw(rng))
    return normalized(case)


class _Open:
    """A loop under construction."""

    def __init__(self, iterator: str, lower, upper, reverse: bool):
        self.iterator, self.lower, self.upper, self.reverse = iterator, lower, upper, reverse
        self.body: list = []

    def frozen(self) -> Loop:
        body = tuple(n.frozen() if isinstance(n, _Open) else n for n in self.body)
        return Loop(self.iterator, tuple(self.lower), tuple(self.upper), body, self.reverse)


def _draw_tree(rng, depths, ranks, values, scheduled) -> tuple[Loop, ...]:
    """Loops and statements appended in textual order: each statement shares 0 or more
    outer loops with the one before (always 0 in the default order)."""
    top: list[_Open] = []
    path: list[_Open] = []
    for number, depth in enumerate(depths):
        shared = 0
        if scheduled and path and rng.random() < 0.6:
            shared = rng.randint(1, min(depth, len(path)))
        path = path[:shared] + _new_loops(rng, path[:shared], depth, values, scheduled)
        parent = path[shared - 1].body if shared else top
        for level in range(shared, depth):
            parent.append(path[level])
            parent = path[level].body
        iterators = ITERATORS[:depth]
        path[depth - 1].body.append(_draw_statement(rng, f"S{number + 1}", iterators, ranks))
    return tuple(loop.frozen() for loop in top)


def _new_loops(rng, outer: list[_Open], depth: int, values, scheduled) -> list[_Open]:
    """Loops for levels ``len(outer)`` to ``depth - 1`` under ``outer`` whose nest is
    not empty at ``values``: drawn bounds (5 tries), else boxes ``0 <= it <= N - 1``."""
    levels = range(len(outer), depth)
    for _ in range(5):
        loops = [_draw_loop(rng, level, scheduled) for level in levels]
        if _points(outer + loops, values):
            return loops
    return [_Open(ITERATORS[level], [Bound(1, Affine())], [Bound(1, Affine.of({"N": 1}, -1))],
                  False) for level in levels]


def _points(chain: list[_Open], values) -> int:
    """How many points the loops ``chain`` (each inside the one before) enumerate."""
    def count(level, env):
        if level == len(chain):
            return 1
        loop = chain[level]
        frozen = Loop(loop.iterator, tuple(loop.lower), tuple(loop.upper), (), False)
        return sum(count(level + 1, {**env, loop.iterator: v}) for v in frozen.values(env))

    return count(0, dict(values))


def _draw_loop(rng, level: int, may_reverse: bool) -> _Open:
    """Loop ``level``: a box ``c <= it <= P - 1 + d``, and maybe one triangular,
    skewed or scaled bound."""
    iterator = ITERATORS[level]
    param = rng.choice(PARAMS)
    lower = [Bound(1, Affine((), rng.choice((0, 0, 0, 1, -1))))]
    upper = [Bound(1, Affine.of({param: 1}, rng.choice((-1, -1, 0, -2))))]
    if rng.random() < 0.45:
        kind, bound = _draw_extra_bound(rng, ITERATORS[:level])
        (lower if kind == "lower" else upper).append(bound)
    return _Open(iterator, lower, upper, may_reverse and rng.random() < 0.15)


def _draw_extra_bound(rng, outer: tuple[str, ...]) -> tuple[str, Bound]:
    """("lower" | "upper", bound) over the outer iterators and the parameters."""
    param = rng.choice(PARAMS)
    if not outer:
        return rng.choice((("upper", Bound(2, Affine.of({param: 1}, 1))),
                           ("lower", Bound(1, Affine.of({param: 1}, -3)))))
    o = rng.choice(outer)
    choices = (
        ("lower", Bound(1, Affine.of({o: 1}))),                         # j >= i
        ("upper", Bound(1, Affine.of({o: 1}))),                         # j <= i
        ("lower", Bound(1, Affine.of({o: 1}, rng.choice((-1, 1))))),    # j >= i -+ 1
        ("upper", Bound(1, Affine.of({param: 1, o: -1}, -1))),         # i + j <= P - 1
        ("lower", Bound(2, Affine.of({o: 1}))),                         # 2j >= i
        ("upper", Bound(2, Affine.of({param: 1, o: 1}))),               # 2j <= P + i
        ("upper", Bound(1, Affine.of({o: 2}, 1))),                      # j <= 2i + 1
    )
    return rng.choice(choices)


def _draw_extent(rng) -> Affine:
    """An extent's parameter part (normalizing fits its constant)."""
    return Affine.of({rng.choice(PARAMS): 1}) if rng.random() < 0.6 else Affine()


def _draw_context(rng, values) -> tuple[Affine, ...]:
    """Constraints that hold at ``values``, each ``>= 0`` (empty: polyc's default)."""
    if rng.random() < 0.7:
        return ()
    candidates = [Affine.of({"N": 1}, -1), Affine.of({"M": 1}, -1), Affine.of({"N": 1}, -3),
                  Affine.of({"N": 1, "M": -1}), Affine.of({"M": 1, "N": -1}),
                  Affine.of({"N": -1}, 9)]
    holding = [c for c in candidates if c.value(values) >= 0]
    return tuple(c for c in holding[:2]) + tuple(c for c in holding[2:] if rng.random() < 0.5)


def _draw_statement(rng, name: str, iterators: tuple[str, ...], ranks) -> Statement:
    """``write = expr``; a reduction (the write misses an iterator and is read) or not."""
    array = rng.randrange(len(ranks))
    if len(iterators) > 1 and rng.random() < 0.35:
        kept = list(iterators)
        kept.remove(rng.choice(iterators))
        write = _draw_access(rng, array, ranks, tuple(kept), iterators)
        update = _draw_expr(rng, iterators, ranks, rng.randint(1, 2))
        expr = Op(rng.choice(("add", "add", "sub", "max")), (Read(write), update))
    else:
        write = _draw_access(rng, array, ranks, iterators, iterators)
        expr = _draw_expr(rng, iterators, ranks, rng.randint(1, 3))
    return Statement(name, write, expr)


def _draw_access(rng, array: int, ranks, preferred, iterators) -> Access:
    """``array[...]``: each index built around the ``preferred`` iterators in a random
    order (so transposed), cycling when the array has more dims."""
    order = list(preferred)
    rng.shuffle(order)
    index = tuple(_draw_index(rng, order[d % len(order)], iterators)
                  for d in range(ranks[array]))
    return Access("ABCD"[array], index)


def _draw_index(rng, iterator: str, iterators) -> Affine:
    """An index around ``iterator`` (the constant is shifted into the array later)."""
    kind = rng.choice(INDEX_KINDS)
    other = rng.choice([it for it in iterators if it != iterator] or [iterator])
    offset = rng.randint(-2, 2)
    param = rng.choice(PARAMS)
    terms = {
        "plain": {iterator: 1}, "offset": {iterator: 1}, "reversed": {iterator: -1, param: 1},
        "scaled": {iterator: rng.choice((2, 3, -2))}, "sum": {iterator: 1, other: 1},
        "difference": {iterator: 1, other: -1}, "param": {iterator: 1, param: 1},
        "constant": {},
    }[kind]
    return Affine.of(terms, 0 if kind == "plain" else offset - (kind == "reversed"))


def _draw_expr(rng, iterators, ranks, reads: int):
    """An expression with ``reads`` array reads (at least one per binary operation)."""
    if reads == 1:
        leaf = Read(_draw_access(rng, rng.randrange(len(ranks)), ranks, iterators, iterators))
        roll = rng.random()
        if roll < 0.25:
            return Op("mul", (leaf, Num(rng.choice(CONSTANTS))))
        if roll < 0.35:
            return Op("div", (leaf, Num(rng.choice(DIVISORS))))
        if roll < 0.45:
            return Op(rng.choice(("neg", "abs")), (leaf,))
        if roll < 0.55:
            return Op(rng.choice(("add", "sub", "max", "min")), (leaf, Num(rng.choice(CONSTANTS))))
        return leaf
    left = rng.randint(1, reads - 1)
    name = rng.choice(("add", "add", "sub", "mul", "mul", "max", "min"))
    return Op(name, (_draw_expr(rng, iterators, ranks, left),
                     _draw_expr(rng, iterators, ranks, reads - left)))


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

        return Statement(statement.name, fit(statement.write), _map_reads(statement.expr, fit))

    body = _map_statements(program.body, shifted)
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
        for access in [statement.write, *_reads(statement.expr)]:
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


def _map_statements(body, change) -> tuple:
    """``body`` with each statement replaced by ``change(statement)`` (None drops it);
    loops left empty are dropped."""
    result = []
    for node in body:
        if isinstance(node, Statement):
            node = change(node)
        else:
            inner = _map_statements(node.body, change)
            node = replace(node, body=inner) if inner else None
        if node is not None:
            result.append(node)
    return tuple(result)


def _map_reads(expr, change):
    """``expr`` with each read's access replaced by ``change(access)``."""
    if isinstance(expr, Read):
        return Read(change(expr.access))
    if isinstance(expr, Op):
        return Op(expr.name, tuple(_map_reads(a, change) for a in expr.args))
    return expr


def _reads(expr) -> list[Access]:
    if isinstance(expr, Read):
        return [expr.access]
    if isinstance(expr, Op):
        return [a for arg in expr.args for a in _reads(arg)]
    return []


# -- building and checking -------------------------------------------------------------


def _placed(body, loops=(), positions=()) -> Iterator[tuple[Statement, tuple, tuple]]:
    """Every statement with its enclosing loops and its position in each body."""
    for position, node in enumerate(body):
        if isinstance(node, Statement):
            yield node, loops, positions + (position,)
        else:
            yield from _placed(node.body, loops + (node,), positions + (position,))


def domain_text(loops) -> str:
    """isl text of the points the ``loops`` enumerate."""
    iterators = ", ".join(loop.iterator for loop in loops)
    return f"{{ [{iterators}] : {' and '.join(c for loop in loops for c in loop.constraints())} }}"


def schedule_text(loops, positions) -> str:
    """The original order as a map to ``[b0, i, b1, j, ..., bd]``: ``b`` the position
    in each body, each iterator negated where its loop runs downwards."""
    times = [str(positions[0])]
    for loop, position in zip(loops, positions[1:]):
        times += [f"-{loop.iterator}" if loop.reverse else loop.iterator, str(position)]
    iterators = ", ".join(loop.iterator for loop in loops)
    return f"{{ [{iterators}] -> [{', '.join(times)}] }}"


def context_text(program: Program) -> str | None:
    if not program.context:
        return None
    return f"{{ : {' and '.join(f'{c} >= 0' for c in program.context)} }}"


def build(program: Program) -> LoopNest:
    """The LoopNest of ``program``."""
    nest = LoopNest("fuzz", params=program.params, context=context_text(program))
    arrays = {name: nest.array(name, tuple(str(e) for e in shape))
              for name, shape in program.arrays}
    for statement, loops, positions in _placed(program.body):
        schedule = schedule_text(loops, positions) if program.scheduled else None
        nest.statement(statement.name, domain_text(loops),
                       write=_reference(arrays, statement.write),
                       expr=_nest_expr(arrays, statement.expr), schedule=schedule)
    return nest


def _reference(arrays, access: Access) -> Expr:
    return arrays[access.array][tuple(str(a) for a in access.index)]


def _nest_expr(arrays, expr) -> Expr:
    """The nest expression of ``expr`` (constants as nodes: Python would fold two of
    them in double precision)."""
    if isinstance(expr, Read):
        return _reference(arrays, expr.access)
    if isinstance(expr, Num):
        return Expr(Const(float(expr.value)))
    args = [_nest_expr(arrays, a) for a in expr.args]
    operators = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b,
                 "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
                 "neg": lambda a: -a, "abs": abs, "max": fn.max, "min": fn.min}
    return operators[expr.name](*args)


def initial_arrays(case: ProgramCase) -> dict[str, np.ndarray]:
    """Every array's initial value: standard normal float32, seeded per array."""
    values = dict(case.values)
    arrays = {}
    for name, _ in case.program.arrays:
        rng = np.random.default_rng([case.data_seed, zlib.crc32(name.encode())])
        arrays[name] = rng.standard_normal(case.program.shape(name, values)).astype(np.float32)
    return arrays


def check(case: ProgramCase) -> None:
    """Compile (``fast_math=False``, legality checked) and run the case; Mismatch unless
    every array equals the interpreter's bit for bit (NaNs equal)."""
    values = dict(case.values)
    compiled = build(case.program).compile(params=values, fast_math=False,
                                           **case.config.options())
    inputs = initial_arrays(case)
    compare(run(case.program, values, inputs), compiled.run(inputs))


def compare(expected: Mapping[str, np.ndarray], actual: Mapping[str, np.ndarray]) -> None:
    """Mismatch naming the first array and element that differ."""
    for name, want in expected.items():
        if name not in actual:
            raise Mismatch(f"polyc returned no array {name}")
        got = np.asarray(actual[name])
        if got.shape != want.shape:
            raise Mismatch(f"{name}: polyc's shape {got.shape}, expected {want.shape}")
        differ = ~((got == want) | (np.isnan(got) & np.isnan(want)))
        if differ.any():
            where = tuple(int(x) for x in np.argwhere(differ)[0])
            raise Mismatch(f"{name}{list(where)}: polyc {got[where]!r}, reference "
                           f"{want[where]!r} ({int(differ.sum())} of {differ.size} differ)")


# -- shrinking -------------------------------------------------------------------------


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
    accesses = [a for s, _ in statements for a in [s.write, *_reads(s.expr)]]
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
            yield _with_body(case, _map_statements(
                program.body, lambda s, drop=statement: None if s == drop else s))
    yield from _fixed_loops(case)
    for statement in statements:
        for simpler in _simpler_statements(statement):
            yield _with_body(case, _map_statements(
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
                                    _map_reads(node.expr, access)))
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
    accesses = [statement.write, *_reads(statement.expr)]
    for access in dict.fromkeys(accesses):
        for simpler in _simpler_accesses(access):
            def swap(a, old=access, new=simpler):
                return new if a == old else a
            yield Statement(statement.name, swap(statement.write),
                            _map_reads(statement.expr, swap))


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


# -- reporting -------------------------------------------------------------------------


def features(case: ProgramCase) -> set[str]:
    """What the program exercises: coefficient, reversal, reduction, triangular, skewed,
    depth4, statements6, imperfect, downward, context, default-order."""
    program = case.program
    placed = list(walk(program.body))
    found = set()
    loops = {id(loop): loop for _, path in placed for loop in path}.values()
    for statement, path in placed:
        iterators = {loop.iterator for loop in path}
        accesses = [statement.write, *_reads(statement.expr)]
        for ix in (ix for a in accesses for ix in a.index):
            coefficients = [c for n, c in ix.terms if n in iterators]
            found |= {"coefficient"} if any(abs(c) > 1 for c in coefficients) else set()
            found |= {"reversal"} if any(c < 0 for c in coefficients) else set()
            found |= {"skewed"} if len(coefficients) > 1 else set()
        written = set().union(*(ix.names() for ix in statement.write.index))
        if statement.write in _reads(statement.expr) and iterators - written:
            found.add("reduction")
        found |= {"depth4"} if len(path) == 4 else set()
    for loop in loops:
        for bound in loop.lower + loop.upper:
            outer = bound.expr.names() - set(program.params)
            found |= {"triangular"} if outer else set()
            found |= {"skewed"} if outer and (bound.coefficient > 1 or any(
                abs(c) > 1 or c < 0 for n, c in bound.expr.terms if n in outer)) else set()
            found |= {"coefficient"} if bound.coefficient > 1 else set()
        found |= {"imperfect"} if len(loop.body) > 1 else set()
        found |= {"downward"} if loop.reverse else set()
    found |= {"statements6"} if len(placed) >= 6 else set()
    found |= {"context"} if program.context else set()
    found |= set() if program.scheduled else {"default-order"}
    return found


def describe(case: ProgramCase) -> str:
    placed = list(walk(case.program.body))
    depths = ",".join(str(len(path)) for _, path in placed)
    values = " ".join(f"{n}={v}" for n, v in case.values)
    return (f"{len(placed)} statement(s) of depth {depths}, {values}, "
            f"{'+'.join(sorted(features(case))) or 'plain'}, {case.config}")


def reproducer(case: ProgramCase) -> str:
    """A Python script: the LoopNest written out, compiled with the case's options, run
    and compared with the interpreter (which reads the case's description below)."""
    program = case.program
    context = context_text(program)
    lines = [f'"""polyc fuzz case: {describe(case)}."""',
             "import numpy as np", "",
             "from polyc.frontend.core import Const",
             "from polyc.fuzz import Config",
             "from polyc.fuzz.interpret import Access, Bound, Loop, Num, Op, Program, Read, "
             "Statement, aff, run",
             "from polyc.fuzz.programs import ProgramCase, compare, initial_arrays",
             "from polyc.scop.nest import Expr, LoopNest, fn", "",
             f"nest = LoopNest('fuzz', params={list(program.params)!r}"
             + (f", context={context!r})" if context else ")")]
    for name, shape in program.arrays:
        lines.append(f"{name} = nest.array({name!r}, {tuple(str(e) for e in shape)!r})")
    for statement, loops, positions in _placed(program.body):
        schedule = (f",\n               schedule={schedule_text(loops, positions)!r}"
                    if program.scheduled else "")
        lines.append(f"nest.statement({statement.name!r}, {domain_text(loops)!r},\n"
                     f"               write={_access_source(statement.write)},\n"
                     f"               expr={_expr_source(statement.expr, True)}{schedule})")
    lines += [f"params = {dict(case.values)!r}",
              f"compiled = nest.compile(params=params, fast_math=False, "
              f"**{case.config.options()!r})", "",
              "# the same program as a description, for the reference interpreter",
              f"case = {case!r}",
              "inputs = initial_arrays(case)",
              "compare(run(case.program, params, inputs), compiled.run(inputs))",
              "print('polyc and the reference agree')", ""]
    return "\n".join(lines)


def _access_source(access: Access) -> str:
    return f"{access.array}[{', '.join(repr(str(ix)) for ix in access.index)}]"


def _expr_source(expr, top: bool = False, beside_read: bool = False) -> str:
    """Python source of the nest expression; a constant is an ``Expr(Const(..))`` node
    unless an operand beside it reads an array (Python would fold two floats in double
    precision)."""
    if isinstance(expr, Read):
        return _access_source(expr.access)
    if isinstance(expr, Num):
        return repr(float(expr.value)) if beside_read else f"Expr(Const({float(expr.value)!r}))"
    reads = any(_reads(a) for a in expr.args)
    args = [_expr_source(a, beside_read=reads) for a in expr.args]
    if expr.name in ("max", "min"):
        return f"fn.{expr.name}({args[0]}, {args[1]})"
    if expr.name == "abs":
        return f"abs({args[0]})"
    if expr.name == "neg":
        return f"-{args[0]}"
    symbol = {"add": "+", "sub": "-", "mul": "*", "div": "/"}[expr.name]
    text = f"{args[0]} {symbol} {args[1]}"
    return text if top else f"({text})"
