"""Drawing a random loop program (:func:`generate`), see :mod:`polyc.fuzz.programs`."""

from __future__ import annotations

import random

from polyc.fuzz import Config
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
)
from polyc.fuzz.program_case import ProgramCase, normalized

ITERATORS = ("i", "j", "k", "l")
PARAMS = ("N", "M")
CONSTANTS = (0.5, 0.25, -1.0, 2.0, 1.5, 3.0, -0.75)
DIVISORS = (2.0, 3.0, -4.0, 7.0)
MAX_LOOPS = 10  # statement depths add up to at most this
INDEX_KINDS = ("plain", "plain", "plain", "offset", "reversed", "scaled", "sum", "difference",
               "param", "constant")


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


