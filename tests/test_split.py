"""Index-set splitting (polyc.scop.split): which statements split, the pieces'
domains and order, and the compiled results against numpy (exact: integers and
min/+ only) with the legality checker on, split or not."""

import islpy as isl
import numpy as np

from polyc.codegen.c_text import c_text
from polyc.scop.dependences import compute_dependences
from polyc.scop.nest import LoopNest, fn
from polyc.scop.split import split_index_sets


def floyd_warshall(dtype="int32") -> LoopNest:
    nest = LoopNest("floyd_warshall", ["n"])
    path = nest.array("path", ("n", "n"), dtype)
    nest.statement("S0", "{ [k, i, j] : 0 <= k, i, j < n }", write=path["i", "j"],
                   expr=fn.min(path["i", "j"], path["i", "k"] + path["k", "j"]))
    return nest


def floyd_warshall_reference(path: np.ndarray) -> np.ndarray:
    path = path.copy()
    n = path.shape[0]
    for k in range(n):
        for i in range(n):
            for j in range(n):
                path[i, j] = min(path[i, j], path[i, k] + path[k, j])
    return path


def _split(nest: LoopNest):
    return split_index_sets(compute_dependences(nest.scop()))


def test_floyd_warshall_splits_at_the_iteration_that_writes_what_its_loop_reads():
    scop = _split(floyd_warshall())
    assert [s.name for s in scop.statements] == ["S0_0", "S0_1", "S0_2"]
    assert {s.whole for s in scop.statements} == {"S0"}
    want = {"S0_0": "[n] -> { S0_0[k, i, j] : 0 <= k, i, j < n and j < k }",
            "S0_1": "[n] -> { S0_1[k, i, j] : 0 <= k, i < n and j = k }",
            "S0_2": "[n] -> { S0_2[k, i, j] : 0 <= k, i, j < n and j > k }"}
    for statement in scop.statements:
        assert statement.domain.is_equal(isl.Set.read_from_str(scop.ctx, want[statement.name]))
    # the pieces keep the statement's place in the original order: j < k, j = k, j > k
    times = scop.order.get_map()
    before = isl.UnionMap.read_from_str(
        scop.ctx, "[n] -> { S0_0[k, i, j] -> S0_1[k, i, k]; S0_1[k, i, k] -> S0_2[k, i, j] }")
    assert before.apply_domain(times).apply_range(times).is_subset(
        times.lex_lt_union_map(times).apply_domain(times).apply_range(times))
    # no loop over j of a piece carries a dependence from the piece to itself
    own = scop.dependences.all
    for name in ("S0_0", "S0_2"):
        same = isl.UnionMap.read_from_str(
            scop.ctx, f"[n] -> {{ {name}[k, i, j] -> {name}[k, i, j2] : j2 != j }}")
        assert own.intersect(same).is_empty()


def test_statements_whose_loops_carry_nothing_or_a_whole_recurrence_are_left_whole():
    nest = LoopNest("scan", ["n"])
    a = nest.array("a", ("n",), "float64")
    b = nest.array("b", ("n", "n"), "float64")
    nest.statement("S0", "{ [i] : 1 <= i < n }", write=a["i"], expr=a["i - 1"] + 1.0)
    nest.statement("S1", "{ [i, j] : 0 <= i, j < n }", write=b["i", "j"], expr=b["i", "j"] * 2.0)
    scop = compute_dependences(nest.scop())
    assert split_index_sets(scop) is scop


def test_a_reduction_over_two_elements_is_left_whole():
    nest = LoopNest("pairs", ["n"])
    x = nest.array("x", ("n", 2), "float64")
    s = nest.array("s", ("n",), "float64")
    nest.statement("S0", "{ [i, k] : 0 <= i < n and 0 <= k < 2 }", write=s["i"],
                   expr=s["i"] + x["i", "k"])
    scop = compute_dependences(nest.scop())
    assert split_index_sets(scop) is scop


def test_split_floyd_warshall_computes_what_numpy_does_with_every_scheduler():
    rng = np.random.default_rng(7)
    n = 37
    path = rng.integers(0, 100, size=(n, n)).astype(np.int32)
    want = floyd_warshall_reference(path)
    for options in ({"scheduler": "pluto"}, {"scheduler": "original", "tile": False},
                    {"scheduler": "isl"}, {"autoselect": "model"}, {"split": False}):
        compiled = floyd_warshall().compile(params={"n": n}, threads=1, **options)
        pieces = {s.name for s in compiled.compilation.scop.statements}
        assert ("S0" in pieces) == (options.get("split") is False), options
        np.testing.assert_array_equal(compiled.run({"path": path})["path"], want)


def test_pieces_print_as_the_statement_in_c_text():
    compiled = floyd_warshall().compile(params={"n": 16}, threads=1, scheduler="original",
                                        tile=False)
    text = c_text(compiled.compilation.program,
                  {"S0": (("k", "i", "j"), "P[(i)][(j)] = f((k))")})
    assert text.splitlines()[:4] == ["#define S0(k, i, j) P[(i)][(j)] = f((k))",
                                     "#define S0_0(k, i, j) S0(k, i, j)",
                                     "#define S0_1(k, i, j) S0(k, i, j)",
                                     "#define S0_2(k, i, j) S0(k, i, j)"]
    loops = text.split("\n\n", 1)[1]
    assert loops.index("S0_0(") < loops.index("S0_1(") < loops.index("S0_2(")
