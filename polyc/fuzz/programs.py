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

import zlib
from collections.abc import Iterator, Mapping

import numpy as np

from polyc.frontend.core import Const
from polyc.fuzz import Mismatch
from polyc.fuzz.interpret import (
    Access,
    Num,
    Program,
    Read,
    Statement,
    run,
    walk,
)
from polyc.fuzz.program_case import ProgramCase, normalized, reads_in, valid
from polyc.fuzz.program_draw import generate
from polyc.fuzz.program_shrink import size, smaller
from polyc.scop.nest import Expr, LoopNest, fn

__all__ = ["ProgramCase", "build", "check", "compare", "context_text", "describe",
           "domain_text", "features", "generate", "initial_arrays", "normalized",
           "reproducer", "schedule_text", "size", "smaller", "valid"]

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
        accesses = [statement.write, *reads_in(statement.expr)]
        for ix in (ix for a in accesses for ix in a.index):
            coefficients = [c for n, c in ix.terms if n in iterators]
            found |= {"coefficient"} if any(abs(c) > 1 for c in coefficients) else set()
            found |= {"reversal"} if any(c < 0 for c in coefficients) else set()
            found |= {"skewed"} if len(coefficients) > 1 else set()
        written = set().union(*(ix.names() for ix in statement.write.index))
        if statement.write in reads_in(statement.expr) and iterators - written:
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
    reads = any(reads_in(a) for a in expr.args)
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
