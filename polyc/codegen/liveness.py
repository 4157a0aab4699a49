"""Temporaries share scratch by liveness: an interval colouring over the program's parts.

The parts are the top-level nests of the isl AST (:func:`polyc.codegen.ast.parts`), each
a function of its own called in order. A temporary lives from the first part that
accesses it to the last (:func:`lifetimes`); two temporaries whose lives do not overlap
may share bytes. Within one part every array is a ``noalias`` parameter, so the arrays
one part uses must never overlap: hence lifetimes in whole parts.

:func:`assign_offsets` places the largest temporary first, each at the lowest aligned
offset that overlaps no placed temporary alive at the same time (greedy by size), and
then the same in order of first use; the smaller peak wins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Lifetime:
    """A temporary's size in bytes and the parts ``first..last`` (inclusive) it lives in."""

    nbytes: int
    first: int
    last: int

    def overlaps(self, other: Lifetime) -> bool:
        return self.first <= other.last and other.first <= self.last


def lifetimes(part_arrays: Sequence[Sequence[str]], names: Sequence[str]
              ) -> dict[str, tuple[int, int]]:
    """``{array: (first part, last part)}`` of the arrays ``names`` that some part
    accesses (``part_arrays``: the memories each part accesses, in order)."""
    wanted, spans = set(names), {}
    for k, arrays in enumerate(part_arrays):
        for name in arrays:
            if name in wanted:
                spans[name] = (spans.get(name, (k, k))[0], k)
    return spans


def assign_offsets(lives: Mapping[str, Lifetime], align: int) -> dict[str, int]:
    """``{name: byte offset}``, multiples of ``align``, such that two temporaries whose
    lifetimes overlap never share a byte; the better of two greedy orders."""
    by_size = sorted(lives, key=lambda n: (-lives[n].nbytes, lives[n].first, n))
    by_start = sorted(lives, key=lambda n: (lives[n].first, -lives[n].nbytes, n))
    plans = [_first_fit(order, lives, align) for order in (by_size, by_start)]
    return min(plans, key=lambda offsets: peak(offsets, lives))


def peak(offsets: Mapping[str, int], lives: Mapping[str, Lifetime]) -> int:
    """The bytes of scratch the placement ``offsets`` needs."""
    return max((offsets[n] + lives[n].nbytes for n in offsets), default=0)


def _first_fit(order: Sequence[str], lives: Mapping[str, Lifetime], align: int
               ) -> dict[str, int]:
    offsets: dict[str, int] = {}
    for name in order:
        life = lives[name]
        taken = sorted((offsets[n], offsets[n] + lives[n].nbytes) for n in offsets
                       if lives[n].overlaps(life) and lives[n].nbytes)
        offsets[name] = _lowest_gap(taken, life.nbytes, align)
    return offsets


def _lowest_gap(taken: Sequence[tuple[int, int]], nbytes: int, align: int) -> int:
    """The lowest multiple of ``align`` where ``nbytes`` fit between the sorted byte
    ranges ``taken``."""
    offset = 0
    for start, end in taken:
        if offset + nbytes <= start:
            break
        offset = max(offset, -(-end // align) * align)
    return offset
