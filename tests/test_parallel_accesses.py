"""Innermost loops that carry no dependence tell LLVM so (``llvm.loop.parallel_accesses``
over an access group of their loads and stores); loops that carry one, or touch
temporaries, do not. Results against numpy (exact for ints; float64 rtol 1e-12)."""

import re

import numpy as np

from polyc.scop.nest import LoopNest, fn


def _parallel_loops(llvm_ir: str) -> int:
    groups = re.findall(r"^(![0-9]+) = distinct !\{\}$", llvm_ir, flags=re.M)
    marked = re.findall(r'!\{ !"llvm.loop.parallel_accesses", (![0-9]+) \}', llvm_ir)
    assert set(marked) <= set(groups)
    for group in marked:
        assert f"!llvm.access.group {group}" in llvm_ir
    return len(marked)


def test_a_loop_that_carries_nothing_is_marked_parallel_for_llvm():
    # (an update: polyc leaves its loop to LLVM's vectorizer; polyc's own vector code,
    # of loops that do not read what they write, needs no hint)
    nest = LoopNest("shifted", ["n"])
    a = nest.array("A", ("n", "n + 1"), "int32")
    b = nest.array("B", ("n", "n"), "int32")
    nest.statement("S0", "{ [i, j] : 0 <= i, j < n }", write=b["i", "j"],
                   expr=fn.min(b["i", "j"], a["i", "j + 1"] + a["i", "0"]))
    compiled = nest.compile(params={"n": 37}, scheduler="original", tile=False, threads=1)
    assert _parallel_loops(compiled.compilation.llvm_ir) == 1
    x = np.random.default_rng(0).integers(0, 100, size=(37, 38)).astype(np.int32)
    y = np.random.default_rng(3).integers(0, 100, size=(37, 37)).astype(np.int32)
    np.testing.assert_array_equal(compiled.run({"A": x, "B": y})["B"],
                                  np.minimum(y, x[:, 1:] + x[:, :1]))


def test_a_loop_that_carries_a_dependence_is_not_marked():
    nest = LoopNest("prefix", ["n"])
    a = nest.array("A", ("n", "n"), "float64")
    nest.statement("S0", "{ [i, j] : 0 <= i < n and 1 <= j < n }", write=a["i", "j"],
                   expr=a["i", "j"] + a["i", "j - 1"])
    compiled = nest.compile(params={"n": 19}, scheduler="original", tile=False, threads=1)
    assert _parallel_loops(compiled.compilation.llvm_ir) == 0
    x = np.random.default_rng(1).uniform(size=(19, 19))
    np.testing.assert_allclose(compiled.run({"A": x})["A"], np.cumsum(x, axis=1), rtol=1e-12)


def test_the_pieces_of_a_split_loop_are_marked():
    from test_split import floyd_warshall, floyd_warshall_reference

    compiled = floyd_warshall().compile(params={"n": 29}, scheduler="original", tile=False,
                                        threads=1)
    assert _parallel_loops(compiled.compilation.llvm_ir) == 2  # j < k and j > k
    path = np.random.default_rng(2).integers(0, 50, size=(29, 29)).astype(np.int32)
    np.testing.assert_array_equal(compiled.run({"path": path})["path"],
                                  floyd_warshall_reference(path))


def test_width_hints_name_one_register_of_the_widest_type(monkeypatch):
    # off by default (LLVM's own width was as fast on PolyBench); on, each loop marked
    # parallel also gets llvm.loop.vectorize.width: a register's lanes of its type
    import polyc.codegen.llvm as emitter
    from polyc.host import vector_bits

    nest = LoopNest("scaled", ["n"])
    a = nest.array("A", ("n", "n"), "float64")
    b = nest.array("B", ("n", "n"), "float64")
    nest.statement("S0", "{ [i, j] : 0 <= i, j < n }", write=b["i", "j"],
                   expr=b["i", "j"] * 2.0 + a["i", "j"])
    options = dict(params={"n": 23}, scheduler="original", tile=False, threads=1)
    assert "llvm.loop.vectorize.width" not in nest.compile(**options).compilation.llvm_ir
    monkeypatch.setattr(emitter, "WIDTH_HINTS", True)
    compiled = nest.compile(**options)
    widths = re.findall(r'!"llvm.loop.vectorize.width", i32 ([0-9]+)',
                        compiled.compilation.llvm_ir)
    assert _parallel_loops(compiled.compilation.llvm_ir) == 1
    assert widths == [str(vector_bits() // 64)]
    x, y = np.random.default_rng(4).uniform(size=(2, 23, 23))
    np.testing.assert_allclose(compiled.run({"A": x, "B": y})["B"], y * 2 + x, rtol=1e-12)
