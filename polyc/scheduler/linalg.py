"""Exact rational linear algebra on small integer matrices (rows of hyperplanes)."""

from __future__ import annotations

from fractions import Fraction


def rank(rows: list[list[int]]) -> int:
    return len(_echelon([[Fraction(v) for v in row] for row in rows])[0])


def orthogonal_complement(rows: list[list[int]], dim: int) -> list[list[Fraction]]:
    """A basis of the vectors orthogonal to every row (the null space of ``rows``)."""
    if not rows:
        return [[Fraction(int(i == j)) for j in range(dim)] for i in range(dim)]
    pivots, reduced = _echelon([[Fraction(v) for v in row] for row in rows])
    free = [c for c in range(dim) if c not in pivots]
    basis = []
    for f in free:
        vector = [Fraction(0)] * dim
        vector[f] = Fraction(1)
        for row, pivot in zip(reduced, pivots):
            vector[pivot] = -row[f]
        basis.append(vector)
    return basis


def _echelon(matrix: list[list[Fraction]]) -> tuple[list[int], list[list[Fraction]]]:
    """Reduced row echelon form: (pivot columns, non-zero rows)."""
    rows = [row[:] for row in matrix]
    pivots, result = [], []
    width = len(rows[0]) if rows else 0
    for col in range(width):
        pivot = next((r for r in rows if r[col] != 0), None)
        if pivot is None:
            continue
        rows.remove(pivot)
        if pivot[col] != 1:
            pivot = [v / pivot[col] for v in pivot]
        rows = [_eliminate(r, pivot, col) for r in rows]
        result = [_eliminate(r, pivot, col) for r in result]
        result.append(pivot)
        pivots.append(col)
    return pivots, result


def _eliminate(row: list[Fraction], pivot: list[Fraction], col: int) -> list[Fraction]:
    """``row`` minus the multiple of ``pivot`` (1 at ``col``) that zeroes its ``col``;
    the rows of schedules are mostly zeros and ones, so most need no arithmetic."""
    factor = row[col]
    if factor == 0:
        return row
    return [a - factor * b if b else a for a, b in zip(row, pivot)]


def left_solve(matrix: list[list[int]], vector: list[int]) -> list[Fraction] | None:
    """``s`` with ``s . matrix = vector`` for a square invertible ``matrix``, else None."""
    n = len(matrix)
    if n == 0 or any(len(row) != n for row in matrix) or len(vector) != n:
        return None
    augmented = [[Fraction(matrix[r][c]) for r in range(n)] + [Fraction(vector[c])]
                 for c in range(n)]  # the transpose, with the vector as last column
    pivots, reduced = _echelon(augmented)
    if pivots != list(range(n)):
        return None
    return [row[n] for row in reduced]
