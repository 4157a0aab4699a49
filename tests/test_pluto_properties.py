"""Property: on random affine programs, Pluto's schedule is legal and computes exactly
what the original loop order computes.

Programs have 1-4 statements of depth 1-3 over parameters N (and M), rectangular or
triangular domains, and 1-3 reads plus one write per statement, each index an
iterator (or the sum of two) with a constant offset in [-2, 2]. Arrays are padded
so every access stays inside them. Statements run in textual order, or (imperfect
nests) all inside one shared outer loop. Compiled without fast-math, a legal schedule
must reproduce the original's floats bit for bit. Derandomized: CI runs the same
60 examples every time; ``POLYC_PROPERTY_EXAMPLES=500`` runs more.
"""

import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from polyc.scop.nest import LoopNest

EXAMPLES = int(os.environ.get("POLYC_PROPERTY_EXAMPLES", "60"))
ITERATORS = ("i", "j", "k")


@st.composite
def index(draw, iterators):
    """One array subscript: an iterator, or a sum of two, plus a small offset; the +2
    keeps offsets down to -2 inside the padded array."""
    terms = draw(st.lists(st.sampled_from(iterators), min_size=1, max_size=2))
    offset = draw(st.integers(-2, 2))
    return " + ".join(terms) + f" + {offset + 2}"


@st.composite
def access(draw, ranks, iterators):
    """(array number, subscripts)."""
    array = draw(st.integers(0, len(ranks) - 1))
    return array, tuple(draw(index(iterators)) for _ in range(ranks[array]))


@st.composite
def programs(draw):
    n_arrays = draw(st.integers(1, 3))
    ranks = [draw(st.integers(1, 3)) for _ in range(n_arrays)]
    shared_outer = draw(st.booleans())
    statements = []
    for _ in range(draw(st.integers(1, 4))):
        depth = draw(st.integers(1, 3))
        iterators = ITERATORS[:depth]
        bounds = [f"0 <= {it} < {draw(st.sampled_from(['N', 'M']))}" for it in iterators]
        if depth > 1 and draw(st.booleans()):
            bounds.append(f"{iterators[1]} <= {iterators[0]}")  # triangular
        write = draw(access(ranks, iterators))
        reads = [draw(access(ranks, iterators)) for _ in range(draw(st.integers(1, 3)))]
        scale = draw(st.sampled_from([0.5, 0.25, -1.0]))
        statements.append((iterators, " and ".join(bounds), write, reads, scale))
    return ranks, shared_outer, statements


def build(program) -> LoopNest:
    ranks, shared_outer, statements = program
    nest = LoopNest("random", params=["N", "M"])
    arrays = [nest.array(f"A{k}", ("2 * N + 2 * M + 5",) * rank) for k, rank in enumerate(ranks)]
    for k, (iterators, bounds, (w, windex), reads, scale) in enumerate(statements):
        refs = [arrays[r][idx] for r, idx in reads]
        expr = sum(refs[1:], refs[0]) * scale + 0.125
        schedule = None
        if shared_outer:  # the first iterator is a loop around all statements
            rest = ", ".join(["0"] + list(iterators[1:]) + ["0"] * (3 - len(iterators)))
            schedule = f"{{ [{', '.join(iterators)}] -> [{iterators[0]}, {k}, {rest}] }}"
        nest.statement(f"S{k + 1}", f"{{ [{', '.join(iterators)}] : {bounds} }}",
                       write=arrays[w][windex], expr=expr, schedule=schedule)
    return nest


@settings(derandomize=True, max_examples=EXAMPLES, deadline=None)
@given(program=programs(), policy=st.sampled_from(["none", "smart", "max"]),
       sizes=st.sampled_from([(3, 2), (4, 4), (5, 3)]))
def test_pluto_schedule_is_legal_and_exact(program, policy, sizes):
    nest = build(program)
    params = {"N": sizes[0], "M": sizes[1]}
    rng = np.random.default_rng(0)
    extent = 2 * sum(sizes) + 5
    arrays = {name: rng.standard_normal((extent,) * len(a.shape)).astype(np.float32)
              for name, a in nest.arrays.items()}
    original = nest.compile(params=params, scheduler="original", fast_math=False).run(arrays)
    pluto = nest.compile(params=params, scheduler="pluto", fuse=policy, fast_math=False)
    result = pluto.run(arrays)  # check=True: the legality checker ran on the schedule
    assert set(result) == set(original)
    for name in original:
        np.testing.assert_array_equal(result[name], original[name], err_msg=name)
