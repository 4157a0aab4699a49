"""The loop programs of :mod:`polyc.fuzz.programs` and a plain-Python reference for them.

A :class:`Program` is a tree: loops (an iterator between lower and upper bounds, run
upwards or downwards) whose bodies hold statements and further loops, in textual
order. Sharing an outer loop makes an imperfect nest. Each statement writes one array
element, computed from array reads, float constants and ``+ - * /``, ``neg``, ``abs``,
``max``, ``min``.

:func:`run` executes the tree as written, with no isl and no polyc: each loop's bounds
are evaluated from the values of the enclosing iterators and the parameters, and every
operation is done in Python floats and rounded to float32 (for ``+ - * /`` that is
IEEE float32 arithmetic: double precision has more than twice float32's bits).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np


class OutOfBounds(IndexError):
    """A program accesses an array outside its shape."""


_TERM = re.compile(r"\s*([+-])?\s*(?:(\d+)\s*\*?\s*)?([A-Za-z_]\w*)?\s*")


@dataclass(frozen=True)
class Affine:
    """``constant + sum(coefficient * name)`` over iterators and parameters; terms have
    non-zero coefficients, iterators (lower case) first, each group sorted by name."""

    terms: tuple[tuple[str, int], ...] = ()
    constant: int = 0

    @classmethod
    def of(cls, coefficients: Mapping[str, int], constant: int = 0) -> Affine:
        """From ``{name: coefficient}`` (zeros dropped)."""
        terms = sorted(((n, c) for n, c in coefficients.items() if c),
                       key=lambda term: (term[0][:1].isupper(), term[0]))
        return cls(tuple(terms), constant)

    @classmethod
    def parse(cls, text: str) -> Affine:
        """From text such as ``"2*i - j + N - 1"`` (integer coefficients, no brackets)."""
        coefficients: dict[str, int] = {}
        constant, position = 0, 0
        while position < len(text):
            match = _TERM.match(text, position)
            sign, number, name = match.groups()
            if match.end() == position or (number is None and name is None):
                raise ValueError(f"not affine text: {text!r}")
            value = (-1 if sign == "-" else 1) * int(number or 1)
            if name is None:
                constant += value
            else:
                coefficients[name] = coefficients.get(name, 0) + value
            position = match.end()
        return cls.of(coefficients, constant)

    def value(self, env: Mapping[str, int]) -> int:
        return self.constant + sum(c * env[n] for n, c in self.terms)

    def coefficient(self, name: str) -> int:
        return dict(self.terms).get(name, 0)

    def names(self) -> set[str]:
        return {n for n, _ in self.terms}

    def substitute(self, name: str, value: int) -> Affine:
        """``name`` replaced by ``value``."""
        rest = {n: c for n, c in self.terms if n != name}
        return Affine.of(rest, self.constant + self.coefficient(name) * value)

    def shifted(self, offset: int) -> Affine:
        return Affine(self.terms, self.constant + offset)

    def __str__(self) -> str:
        parts = []
        for name, c in self.terms:
            magnitude = name if abs(c) == 1 else f"{abs(c)}*{name}"
            parts.append(("- " if c < 0 else "+ ") + magnitude)
        if self.constant or not parts:
            parts.append(("- " if self.constant < 0 else "+ ") + str(abs(self.constant)))
        text = " ".join(parts)
        return text[2:] if text.startswith("+ ") else "-" + text[2:]

    def __repr__(self) -> str:
        return f"aff({str(self)!r})"


def aff(text: str) -> Affine:
    """:meth:`Affine.parse`, short (the repr of an Affine)."""
    return Affine.parse(text)


@dataclass(frozen=True)
class Bound:
    """``coefficient * iterator >= expr`` in a loop's lower bounds, ``<=`` in its upper."""

    coefficient: int
    expr: Affine


@dataclass(frozen=True)
class Access:
    """``array[index...]``."""

    array: str
    index: tuple[Affine, ...]

    def __str__(self) -> str:
        return f"{self.array}[{', '.join(map(str, self.index))}]"


@dataclass(frozen=True)
class Read:
    """An array element, read before the statement writes."""

    access: Access


@dataclass(frozen=True)
class Num:
    """A float constant (exact in float32)."""

    value: float


@dataclass(frozen=True)
class Op:
    """``name(*args)``: one of :data:`ARITY`."""

    name: str
    args: tuple


ARITY = {"add": 2, "sub": 2, "mul": 2, "div": 2, "max": 2, "min": 2, "neg": 1, "abs": 1}


@dataclass(frozen=True)
class Statement:
    """``write = expr``."""

    name: str
    write: Access
    expr: Read | Num | Op


@dataclass(frozen=True)
class Loop:
    """``for iterator`` from the largest lower bound to the smallest upper bound
    (downwards if ``reverse``), running ``body`` in order at each value."""

    iterator: str
    lower: tuple[Bound, ...]
    upper: tuple[Bound, ...]
    body: tuple[Loop | Statement, ...]
    reverse: bool = False

    def values(self, env: Mapping[str, int]) -> range:
        """The iterator's values, in execution order, given the outer iterators."""
        low = max(-(-b.expr.value(env) // b.coefficient) for b in self.lower)
        high = min(b.expr.value(env) // b.coefficient for b in self.upper)
        return range(high, low - 1, -1) if self.reverse else range(low, high + 1)

    def constraints(self) -> list[str]:
        """The bounds as isl constraints."""
        return ([f"{_scaled(b.coefficient, self.iterator)} >= {b.expr}" for b in self.lower]
                + [f"{_scaled(b.coefficient, self.iterator)} <= {b.expr}" for b in self.upper])


def _scaled(coefficient: int, name: str) -> str:
    return name if coefficient == 1 else f"{coefficient}*{name}"


@dataclass(frozen=True)
class Program:
    """Parameters, arrays (extents affine in the parameters), a context (each
    constraint ``>= 0``) and the top-level loops. ``scheduled``: the nest gives every
    statement its schedule (else the default order, one loop nest per statement)."""

    params: tuple[str, ...]
    arrays: tuple[tuple[str, tuple[Affine, ...]], ...]
    body: tuple[Loop, ...]
    context: tuple[Affine, ...] = ()
    scheduled: bool = True

    def shape(self, array: str, values: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(e.value(values) for e in dict(self.arrays)[array])


def walk(body, path: tuple[Loop, ...] = ()) -> Iterator[tuple[Statement, tuple[Loop, ...]]]:
    """Every statement in textual order with its enclosing loops, outermost first."""
    for node in body:
        if isinstance(node, Statement):
            yield node, path
        else:
            yield from walk(node.body, path + (node,))


def trace(program: Program, values: Mapping[str, int]) -> Iterator[tuple[Statement, dict]]:
    """Every statement instance in execution order, with its iterator values (and the
    parameters)."""
    def execute(body, env):
        for node in body:
            if isinstance(node, Statement):
                yield node, env
            else:
                for value in node.values(env):
                    yield from execute(node.body, {**env, node.iterator: value})

    return execute(program.body, dict(values))


def index(access: Access, env: Mapping[str, int], shape: tuple[int, ...]) -> tuple[int, ...]:
    """The element ``access`` names at ``env``; OutOfBounds outside ``shape``."""
    point = tuple(a.value(env) for a in access.index)
    if any(not 0 <= x < n for x, n in zip(point, shape)):
        raise OutOfBounds(f"{access} at {env} is {point}, outside the shape {shape}")
    return point


def _f32(value: float) -> float:
    return float(np.float32(value))


def _maximum(a: float, b: float) -> float:
    """numpy.maximum: NaN if either is."""
    return math.nan if math.isnan(a) or math.isnan(b) else max(a, b)


def _minimum(a: float, b: float) -> float:
    return math.nan if math.isnan(a) or math.isnan(b) else min(a, b)


def _divide(a: float, b: float) -> float:
    """IEEE division (+-inf or NaN by zero), where Python raises."""
    return float(np.float64(a) / np.float64(b))


_OPERATIONS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": _divide, "max": _maximum, "min": _minimum, "neg": lambda a: -a, "abs": abs,
}


def evaluate(expr, read) -> float:
    """The float32 value of ``expr``; ``read(access)`` gives an array element."""
    if isinstance(expr, Read):
        return read(expr.access)
    if isinstance(expr, Num):
        return _f32(expr.value)
    return _f32(_OPERATIONS[expr.name](*(evaluate(arg, read) for arg in expr.args)))


def run(program: Program, values: Mapping[str, int],
        arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every array's final value after running ``program`` from ``arrays`` (float32,
    copied; missing arrays start at zero)."""
    shapes = {name: program.shape(name, values) for name, _ in program.arrays}
    state = {name: np.array(arrays[name], dtype=np.float32) if name in arrays
             else np.zeros(shape, np.float32) for name, shape in shapes.items()}
    with np.errstate(all="ignore"):
        for statement, env in trace(program, values):
            def read(access, env=env):
                return float(state[access.array][index(access, env, shapes[access.array])])
            value = evaluate(statement.expr, read)
            write = statement.write
            state[write.array][index(write, env, shapes[write.array])] = value
    return state
