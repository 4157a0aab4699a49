"""Exact linear algebra of the scheduler and of tiling's intra-tile order, checked on
seeded random integer matrices (mostly zeros and ones, as schedule rows are)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from polyc.scheduler.linalg import left_solve, orthogonal_complement, rank


def _matrices(count: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n, m = rng.integers(1, 6, size=2)
        values = rng.choice([0, 0, 0, 1, 1, -1, 2, 3], size=(n, m))
        yield [[int(v) for v in row] for row in values]


@pytest.mark.parametrize("seed", range(3))
def test_rank_matches_numpy(seed):
    for rows in _matrices(200, seed):
        assert rank(rows) == np.linalg.matrix_rank(np.array(rows, dtype=float))


@pytest.mark.parametrize("seed", range(3))
def test_left_solve_is_exact_or_none_for_singular(seed):
    rng = np.random.default_rng(100 + seed)
    solved = 0
    for rows in _matrices(300, seed):
        n = len(rows)
        square = [row[:n] + [0] * (n - len(row)) for row in rows]
        vector = [int(v) for v in rng.integers(-4, 5, size=n)]
        s = left_solve(square, vector)
        if np.linalg.matrix_rank(np.array(square, dtype=float)) < n:
            assert s is None
            continue
        solved += 1
        assert all(isinstance(v, Fraction) for v in s)
        assert [sum(s[r] * square[r][c] for r in range(n)) for c in range(n)] == vector
    assert solved > 50


def test_left_solve_of_a_permutation_reads_the_vector():
    rows = [[0, 0, 1], [1, 0, 0], [0, -1, 0]]
    assert left_solve(rows, [5, 7, 9]) == [9, 5, -7]


@pytest.mark.parametrize("seed", range(3))
def test_orthogonal_complement_is_orthogonal_and_completes_the_rank(seed):
    for rows in _matrices(200, seed):
        dim = len(rows[0])
        basis = orthogonal_complement(rows, dim)
        for vector in basis:
            assert all(sum(a * b for a, b in zip(row, vector)) == 0 for row in rows)
        assert rank(rows) + len(basis) == dim
        assert rank(basis) == len(basis)  # independent
