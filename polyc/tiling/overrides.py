"""User overrides of tiling sizes: one value for every band, or one per statement.

``tile_size=32`` fixes every tiled loop; ``tile_size={"S1_matmul_update": 32,
"Relu_3": (16, 64)}`` fixes the bands of the named statements only (a statement name
as ``polyc inspect`` prints it, or the ONNX node it came from), as one size for every
loop of the band or one size per loop in the band's (reordered) loop order; other
bands keep the cache model. ``blocking=`` takes the same two forms. A band of several
named statements takes the smallest size; a statement named twice (by its own name
and by its node's), the first value given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from polyc.errors import PolycError
from polyc.scop.model import Scop

Lookup = Callable[[set[str]], Any]


def per_statement(option, scop: Scop, what: str, convert: Callable[[Any], Any]) -> Lookup:
    """``lookup(statement names) -> value or None`` for ``option`` (None, a value, or a
    mapping from statement or ONNX node names to values); ``convert`` checks a value."""
    if option is None:
        return lambda _: None
    if not isinstance(option, Mapping):
        value = convert(option)
        return lambda _: value
    values = {name: convert(value) for name, value in option.items()}
    known = {s.name: {s.name} for s in scop.statements}
    for s in scop.statements:
        if s.node:
            known.setdefault(s.node, set()).add(s.name)
    unknown = sorted(set(values) - set(known))
    if unknown:
        names = ", ".join(sorted(s.name for s in scop.statements))
        raise PolycError(f"{what} names {', '.join(map(repr, unknown))}: no such statement or "
                         f"ONNX node (an inlined op has no statement); statements: {names}")
    by_statement: dict[str, list] = {}
    for name, value in values.items():
        for statement in known[name]:
            by_statement.setdefault(statement, []).append(value)

    def lookup(statements: set[str]):
        found = [v for s in sorted(statements) for v in by_statement.get(s, ())]
        return min(found, key=_smallest) if found else None

    return lookup


def tile_sizes(value) -> int | tuple[int, ...]:
    """A tile size: a positive int, or a sequence of them (one per loop of the band)."""
    if isinstance(value, (list, tuple)) and value and all(_positive(v) for v in value):
        return tuple(value)
    if _positive(value):
        return value
    raise PolycError(f"tile_size must be a positive int, a sequence of them, or a mapping "
                     f"from statement names to those, got {value!r}")


def _positive(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _smallest(value) -> int:
    """Sizes order by their smallest member; other values (blockings) keep their order."""
    if isinstance(value, tuple):
        return min(value)
    return value if isinstance(value, int) else 0
