"""Steering a schedule by hand (polyc.Schedule): each primitive's effect in Pluto's
notation, its refusals with a witness dependence, compiled results against the
kernels' numpy references, and traces that save, load and replay to the same
schedule and code."""

import json

import islpy as isl
import numpy as np
import pytest

import polyc
from polyc.errors import IllegalScheduleError, PolycError, RefusedError
from polyc.scheduler import check_legality
from polyc.scop.nest import LoopNest
from polyc.scop.polybench import KERNELS

JACOBI = {"T": 12, "N": 200}


def original(name, params=None):
    kernel = KERNELS[name]
    return polyc.Schedule(kernel.build(), params=params or kernel.params,
                          scheduler="original")


def pluto_text(schedule) -> list[str]:
    return str(schedule).splitlines()


def matches_reference(name, schedule, params, **compile_options):
    kernel = KERNELS[name]
    compiled = schedule.compile(**compile_options)
    check_legality(compiled.compilation.scop, compiled.schedule.schedule)
    arrays = kernel.inputs(seed=3, params=params)
    out = compiled.run(arrays)
    expected = kernel.reference(params, arrays)
    for array, value in expected.items():  # float32, the same operations in another order
        np.testing.assert_allclose(out[array], value, rtol=1e-5, atol=1e-5)


def test_the_original_schedule_reads_as_the_loops_were_written():
    s = original("jacobi-1d", JACOBI)
    assert pluto_text(s) == ["T(S1): (t, 0, i)", "T(S2): (t, 1, i)"]
    assert s.bands() == [{"id": ("S1", 0), "statements": ["S1", "S2"], "flags": "ssp*",
                          "mark": None}]


def test_skew_shift_and_interchange_make_plutos_jacobi_1d_band():
    s = original("jacobi-1d", JACOBI)
    s.skew("S1", member=2, by=0, factor=2)
    assert pluto_text(s) == ["T(S1): (t, 0, 2*t + i)", "T(S2): (t, 1, 2*t + i)"]
    s.shift("S1", 2, {"S2": 1})
    assert pluto_text(s) == ["T(S1): (t, 0, 2*t + i)", "T(S2): (t, 1, 2*t + i + 1)"]
    s.interchange("S1", 1, 2)
    assert pluto_text(s) == ["T(S1): (t, 2*t + i, 0)", "T(S2): (t, 2*t + i + 1, 1)"]
    s.tile("S1", [4, 16])  # the first two members: split off and tiled
    assert pluto_text(s) == [
        "T(S1): (t/4, floor((2t + i)/16), (t) mod 4, (2t + i) mod 16, 0)",
        "T(S2): (t/4, floor((1 + 2t + i)/16), (t) mod 4, (1 + 2t + i) mod 16, 1)"]
    assert [b["flags"] for b in s.bands()] == ["ss", "ss", "s"]
    matches_reference("jacobi-1d", s, JACOBI)


def test_permute_and_reverse_of_matmul():
    s = original("matmul")
    assert pluto_text(s) == ["T(S1): (0, i, j, 0)", "T(S2): (1, i, j, k)"]
    assert s.bands()[1] == {"id": ("S2", 0), "statements": ["S2"], "flags": "pps",
                            "mark": None}
    s.permute("S2", [2, 0, 1])
    assert pluto_text(s) == ["T(S1): (0, i, j, 0)", "T(S2): (1, k, i, j)"]
    assert s.bands()[1]["flags"] == "spp"  # i and j carry nothing, with k outside
    s.reverse("S2", 1)
    assert pluto_text(s)[1] == "T(S2): (1, k, -i, j)"
    s.tile("S2", [4, 2, 8])
    matches_reference("matmul", s, KERNELS["matmul"].params)


def test_parallel_marks_a_loop_that_carries_nothing_and_refuses_one_that_does():
    params = {"M": 40, "N": 30, "K": 20}
    s = original("matmul", params)
    with pytest.raises(RefusedError, match=r"parallel band 'S2' \(member=2\) refused: its "
                                           r"loop carries the RAW dependence S2 -> S2") as no:
        s.parallel("S2", 2)
    assert no.value.witness.get_tuple_name(isl.dim_type.out) == "S2"
    s.parallel("S2", 1)
    assert pluto_text(s)[1] == "T(S2): (1, i, j, k)"  # the same times, the band split
    assert [(b["id"], b["flags"], b["mark"]) for b in s.bands()[1:]] == [
        (("S2", 0), "p", None), (("S2", 1), "p", "parallel"), (("S2", 2), "s", None)]
    compiled = s.compile(threads=2)
    assert "parallel: as marked (1 loop)" in compiled.schedule.decisions
    matches_reference("matmul", s, params, threads=2)
    assert str(s.trace.replay(KERNELS["matmul"].build()).tree) == str(s.tree)


def test_an_unmarked_steered_schedule_gets_parallel_loops_from_its_dependences():
    params = {"M": 300, "N": 300, "K": 30}  # (short sums: float32 within the tolerance)
    s = original("matmul", params).tile("S2", 32)  # "original" sets no coincident flags
    assert s.bands()[2]["flags"] == "pps"
    compiled = s.compile(threads=2)
    assert "parallel: S2: loop i/32 (c0)" in compiled.schedule.decisions
    matches_reference("matmul", s, params, threads=2)


def test_diamond_tiles_and_a_wavefront_of_plutos_jacobi_1d_band():
    params = {"T": 40, "N": 600}
    s = polyc.Schedule(KERNELS["jacobi-1d"].build(), params=params)
    assert pluto_text(s) == ["T(S1): (t, 2*t + i, 0)", "T(S2): (t, 2*t + i + 1, 1)"]
    s.diamond("S1", [8, 16])
    assert pluto_text(s) == [
        "T(S1): (floor((2t - i)/8), floor((2t + i)/16), t, 2*t + i, 0)",
        "T(S2): (floor((1 + 2t - i)/8), floor((1 + 2t + i)/16), t, 2*t + i + 1, 1)"]
    assert "diamond band 'S1': first tile row S1: 2*t - i; S2: 2*t - i + 1" in s.decisions
    s.wavefront("S1")
    assert pluto_text(s)[0].startswith("T(S1): (floor((2t - i)/8) + floor((2t + i)/16), ")
    assert s.bands()[0]["flags"] == "sp"  # the tiles of a wavefront run at once
    s.parallel("S1", 1)
    matches_reference("jacobi-1d", s, params, threads=2)


def test_diamonds_need_a_stencil_band():
    s = original("jacobi-1d", JACOBI)
    with pytest.raises(RefusedError, match="diamond band 'S1' refused: not a stencil band"):
        s.diamond("S1", [8, 16, 1])
    with pytest.raises(PolycError, match="tile sizes must be 3 positive ints"):
        s.diamond("S1", [8, 16])
    with pytest.raises(PolycError, match="a wavefront needs a band of two or more members"):
        original("matmul").parallel("S2", 1).wavefront(("S2", 1))


def test_distribute_splits_a_fused_band_statement_by_statement():
    kernel = KERNELS["mvt"]
    s = polyc.Schedule(kernel.build(), params=kernel.params)
    assert pluto_text(s) == ["T(S1): (i, j)", "T(S2): (i, j)"]
    s.distribute("S1", 1)
    assert pluto_text(s) == ["T(S1): (i, 0, j)", "T(S2): (i, 1, j)"]
    matches_reference("mvt", s, kernel.params, threads=1)
    first = polyc.Schedule(kernel.build(), params=kernel.params).distribute("S1", 0, ["S2"])
    assert pluto_text(first) == ["T(S1): (1, i, j)", "T(S2): (0, i, j)"]
    with pytest.raises(PolycError, match=r"an order names the band's statements \(S1, S2\) "
                                         r"once each, got \['S3'\]"):
        first.distribute("S1", 0, ["S3"])


def test_distributing_a_time_loop_is_refused():
    s = polyc.Schedule(KERNELS["jacobi-1d"].build(), params=JACOBI)
    with pytest.raises(RefusedError, match=r"distribute band 'S1' \(at=0, order=\[\]\) "
                                           r"refused: RAW dependence S2 -> S1"):
        s.distribute("S1", 0)


def test_fuse_sibling_loops_of_the_fusion_kernel():
    kernel = KERNELS["fusion"]
    s = original("fusion")
    assert pluto_text(s) == ["T(S1): (0, i, j)", "T(S2): (1, i, j)", "T(S3): (2, i, 0)"]
    s.fuse("S1")  # as many loops as every sibling has: one
    assert pluto_text(s) == ["T(S1): (i, 0, j)", "T(S2): (i, 1, j)", "T(S3): (i, 2, 0)"]
    assert [b["statements"] for b in s.bands()] == [["S1", "S2", "S3"], ["S1"], ["S2"]]
    matches_reference("fusion", s, kernel.params, threads=1)
    with pytest.raises(PolycError, match="not right below a sequence"):
        s.fuse("S1")
    with pytest.raises(PolycError, match=r"fuse 1..1 loops \(as many as every sibling has\)"):
        original("fusion").fuse("S1", 2)


def test_fuse_through_fuses_a_chosen_run_of_siblings_only():
    kernel = KERNELS["fusion"]
    s = original("fusion").fuse("S2", through="S3")
    assert pluto_text(s) == ["T(S1): (0, i, j, 0)", "T(S2): (1, i, 0, j)",
                             "T(S3): (1, i, 1, 0)"]
    assert s.trace.steps == [{"op": "fuse", "band": "S2", "depth": None, "through": "S3"}]
    assert str(s.trace.replay(kernel.build()).tree) == str(s.tree)
    matches_reference("fusion", s, kernel.params, threads=1)
    with pytest.raises(PolycError, match=r"fuse through 'S9': no such statement below a "
                                         r"sibling of the band \(below the sequence: S1, "
                                         r"S2, S3\)"):
        original("fusion").fuse("S1", through="S9")
    with pytest.raises(PolycError, match="a statement of the band itself"):
        original("fusion").fuse("S1", through="S1")


def test_fusing_products_that_need_each_others_whole_result_is_refused():
    params = KERNELS["2mm"].params
    s = original("2mm")
    with pytest.raises(RefusedError, match=r"fuse band 'S2' \(depth=2, through='S4'\) "
                                           r"refused: RAW dependence S2 -> S4"):
        s.fuse("S2", 2, through="S4")  # S4's row needs the whole of S2's
    s.fuse("S2", 2, through="S3")      # S3 shares nothing with S2: legal, S4 apart
    assert pluto_text(s)[1:] == ["T(S2): (1, i, j, 0, k)", "T(S3): (1, i, l, 1, 0)",
                                 "T(S4): (2, i, l, j, 0)"]
    matches_reference("2mm", s, params, threads=1)
    s = original("2mm")
    with pytest.raises(RefusedError, match=r"fuse band 'S1' \(depth=2\) refused: RAW "
                                           r"dependence S2 -> S4 is not respected"):
        s.fuse("S1", 2)
    s.fuse("S1", 1)  # the rows i together: legal
    assert pluto_text(s)[3] == "T(S4): (i, 3, l, j)"


def test_two_levels_of_tiles():
    params = {"M": 100, "N": 90, "K": 80}
    s = original("matmul", params).tile2("S2", [8, 8, 8], 4)
    assert pluto_text(s)[1].startswith("T(S2): (1, i/32, ")
    assert pluto_text(s)[1].endswith(", (i) mod 8, 7 - (7 + 7j) mod 8, 7 - (7 + 7k) mod 8)")
    assert [b["flags"] for b in s.bands()[1:]] == ["pps", "pps", "pps"]
    assert [step["sizes"] for step in s.trace.steps] == [[8, 8, 8], [4, 4, 4]]
    matches_reference("matmul", s, params, threads=1)


def test_vectorize_puts_a_strip_of_lanes_innermost_under_a_vector_mark():
    params = {"M": 37, "N": 45, "K": 23}  # 45 columns: a partial strip of 13
    s = original("matmul", params)
    with pytest.raises(RefusedError, match=r"vectorize band 'S2' \(member=2\) refused: "
                                           r"its lanes would carry the RAW dependence"):
        s.vectorize("S2", 2)  # k: the sum's own chain
    s.vectorize("S2", 1)
    assert pluto_text(s)[1] == "T(S2): (1, i, j/16, k, (j) mod 16)"
    assert [(b["flags"], b["mark"]) for b in s.bands()[1:]] == [("pps", None), ("p", "vector")]
    compiled = s.compile(threads=1)
    assert "<16 x float>" in compiled.compilation.llvm_ir  # polyc's own vector statements
    matches_reference("matmul", s, params, threads=1)


def test_unroll_and_jam_of_matmuls_rows():
    params = {"M": 37, "N": 29, "K": 23}  # 37 rows: a partial strip of 1
    s = original("matmul", params)
    s.unroll_jam("S2", 0, 4)
    assert pluto_text(s)[1] == "T(S2): (1, i/4, j, k, (i) mod 4)"
    assert s.bands()[1]["flags"] == "ppsp"
    compiled = s.compile(threads=1)
    loops = str(compiled.compilation.program)
    assert "S2(4 * c0, c1, c2);" in loops and "S2(4 * c0 + 3, c1, c2);" in loops  # jammed
    matches_reference("matmul", s, params, threads=1)
    with pytest.raises(PolycError, match="an unroll factor is 2 or more, got 1"):
        s.unroll_jam("S1", 0, 1)


def transposed_sum() -> LoopNest:
    """C = 2 A + B^T over M x N: a 2-d nest whose tiles are partial at two edges."""
    nest = LoopNest("transposed_sum", params=["M", "N"])
    A, B, C = nest.array("A", ("M", "N")), nest.array("B", ("N", "M")), nest.array("C", ("M", "N"))
    nest.statement("S1", "{ [i, j] : 0 <= i < M and 0 <= j < N }", write=C["i", "j"],
                   expr=A["i", "j"] * 2.0 + B["j", "i"])
    return nest


def matches_transposed_sum(compiled, params):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((params["M"], params["N"])).astype(np.float32)
    b = rng.standard_normal((params["N"], params["M"])).astype(np.float32)
    out = compiled.run({"A": a, "B": b})
    np.testing.assert_allclose(out["C"], 2 * a + b.T, rtol=1e-6, atol=0)  # the same 2 ops


FULL_TILE = ("for (int c2 = 0; c2 <= 7; c2 += 1)\n"   # constant bounds: no min
             "        for (int c3 = 0; c3 <= 15; c3 += 1)\n"
             "          S1(8 * c0 + c2, 16 * c1 + c3);")


def test_isolate_generates_full_tiles_apart_with_constant_bounds():
    params = {"M": 37, "N": 45}  # tiles of 8 x 16: 4 x 2 full ones, the rest partial
    s = polyc.Schedule(transposed_sum(), params=params, scheduler="original")
    s.tile("S1", [8, 16])
    before = str(s.compile(threads=1).compilation.program)
    assert "c2 <= min(7, -8 * c0 + 36)" in before and "c3 <= 15;" not in before
    s.isolate("S1")
    assert pluto_text(s) == ["T(S1): (i/8, j/16, (i) mod 8, (j) mod 16)"]  # the same times
    assert s.trace.steps[-1] == {"op": "isolate", "band": "S1"}
    compiled = s.compile(threads=1)
    loops = str(compiled.compilation.program)
    assert loops.startswith("{\n  for (int c0 = 0; c0 <= 3; c0 += 1) {\n"
                            "    for (int c1 = 0; c1 <= 1; c1 += 1)\n      " + FULL_TILE)
    assert "c3 <= min(15, -16 * c1 + 44)" in loops  # the last row of tiles, apart
    matches_transposed_sum(compiled, params)


def test_an_isolated_band_survives_automatic_tiling_and_a_parallel_mark():
    params = {"M": 1500, "N": 1501}  # large enough for polyc's tiling to tile the band
    s = polyc.Schedule(transposed_sum(), params=params, scheduler="original")
    s.tile("S1", [8, 16]).isolate("S1")
    tiled = s.compile(threads=1, tile=True)  # (isl tiles no isolated band: left as it is)
    assert FULL_TILE in str(tiled.compilation.program)
    matches_transposed_sum(tiled, params)
    s.parallel("S1", 0)
    compiled = s.compile(threads=2)
    loops = str(compiled.compilation.program)
    assert loops.startswith("// parallel\nfor (int c0 = 0; c0 <= 187; c0 += 1) {")  # one loop
    assert "c3 <= 15; c3 += 1)\n          S1(8 * c0 + c2, 16 * c1 + c3);" in loops
    assert "GOMP_parallel" in compiled.compilation.llvm_ir
    matches_transposed_sum(compiled, params)


def test_isolate_needs_a_tiled_band_with_a_full_tile():
    s = polyc.Schedule(transposed_sum(), params={"M": 37, "N": 45}, scheduler="original")
    with pytest.raises(RefusedError, match=r"isolate band 'S1' refused: not a band of tile "
                                           r"loops"):
        s.isolate("S1")
    s.tile("S1", [8, 16])
    with pytest.raises(RefusedError, match=r"isolate band \('S1', 1\) refused: not a band "
                                           r"of tile loops"):
        s.isolate(("S1", 1))  # the point loops
    assert [step["op"] for step in s.trace.steps] == ["tile"]
    small = polyc.Schedule(transposed_sum(), params={"M": 7, "N": 45}, scheduler="original")
    with pytest.raises(RefusedError, match=r"isolate band 'S1' refused: no tile of sizes "
                                           r"\[8, 16\] is full"):
        small.tile("S1", [8, 16]).isolate("S1")
    s.isolate("S1")
    with pytest.raises(PolycError, match=r"interchange band 'S1': the band or one below it "
                                         r"is isolated"):
        s.interchange("S1", 0, 1)
    fusion = original("fusion").tile("S1", [4, 4]).isolate("S1")
    with pytest.raises(PolycError, match="a band below the sequence is isolated"):
        fusion.fuse("S2")  # a sibling's band is isolated


def test_an_unroll_and_jam_across_a_time_loop_is_refused():
    s = original("jacobi-1d", JACOBI)
    with pytest.raises(RefusedError, match=r"unroll_jam band 'S1' \(member=0, factor=4\) "
                                           r"refused: RAW dependence S2 -> S1 is not "
                                           r"respected"):
        s.unroll_jam("S1", 0, 4)


def test_tiling_a_band_that_is_not_permutable_is_refused_with_a_witness():
    s = original("jacobi-1d", JACOBI)
    before = str(s)
    with pytest.raises(RefusedError, match=r"not permutable: its member 1 runs the RAW "
                                           r"dependence S2 -> S1 backward") as refused:
        s.tile("S1", 16)
    witness = refused.value.witness
    assert isinstance(witness, isl.Map)
    assert witness.get_tuple_name(isl.dim_type.in_) == "S2"
    assert str(s) == before and s.trace.steps == []  # left as it was


def test_an_interchange_that_runs_a_dependence_backward_is_refused():
    s = original("jacobi-1d", JACOBI)
    with pytest.raises(RefusedError, match=r"interchange band 'S1' \(first=0, second=2\) "
                                           r"refused: \w+ dependence S\d -> S\d is not "
                                           r"respected") as refused:
        s.interchange("S1", 0, 2)
    assert not refused.value.witness.is_empty()
    assert pluto_text(s) == ["T(S1): (t, 0, i)", "T(S2): (t, 1, i)"]


@pytest.mark.parametrize("call, message", [
    (lambda s: s.permute("S1", [2, 1, 0]), r"permute band 'S1' \(order=\[2, 1, 0\]\) refused: "
                                           r"RAW dependence S2 -> S1 is not respected"),
    (lambda s: s.shift("S1", 0, {"S2": -1}), r"shift band 'S1' \(member=0, amounts=\{'S2': "
                                             r"-1\}\) refused: RAW dependence S1 -> S2"),
    (lambda s: s.reverse("S1", 0), r"reverse band 'S1' \(member=0\) refused: RAW dependence "
                                   r"S2 -> S1 is not respected"),
    (lambda s: s.tile2("S1", 8, 2), r"tile band 'S1' refused: the band is not permutable: "
                                    r"its member 1 runs the RAW dependence S2 -> S1"),
    (lambda s: s.wavefront("S1"), r"wavefront band 'S1' \(\) refused: RAW dependence "
                                  r"S2 -> S1 is not respected"),
])
def test_a_primitive_that_breaks_a_dependence_is_refused_and_changes_nothing(call, message):
    s = original("jacobi-1d", JACOBI)
    before = str(s.tree)
    with pytest.raises(RefusedError, match=message) as refused:
        call(s)
    assert not refused.value.witness.is_empty()
    assert str(s.tree) == before and s.trace.steps == []


def test_a_refused_second_level_leaves_the_first_undone():
    s = polyc.Schedule(KERNELS["jacobi-1d"].build(), params=JACOBI)  # Pluto's band: tileable
    before = str(s.tree)
    with pytest.raises(PolycError, match="tile sizes must be up to 2 positive ints"):
        s.tile2("S1", [8, 16], [2, 2, 2])
    assert str(s.tree) == before and s.trace.steps == []
    s.tile2("S1", [8, 16], [2, 2])
    assert [step["sizes"] for step in s.trace.steps] == [[8, 16], [2, 2]]


def test_a_skew_that_reverses_time_is_refused():
    s = original("seidel-2d", {"T": 3, "N": 12})
    with pytest.raises(RefusedError, match="refused"):
        s.skew("S1", member=0, by=1, factor=-1)


@pytest.mark.parametrize("call, message", [
    (lambda s: s.interchange("S9", 0, 1), r"no statement 'S9' in the schedule; it has S1, S2"),
    (lambda s: s.interchange(("S1", 3), 0, 1), r"S1 has 1 band\(s\) above it; there is no "
                                                r"band at depth 3"),
    (lambda s: s.interchange(7, 0, 1), r"name a band by a statement below it"),
    (lambda s: s.interchange("S1", 0, 3), r"the band has members 0..2, got 3"),
    (lambda s: s.skew("S1", 1, 1), r"not by itself"),
    (lambda s: s.skew("S1", 1, 0, 1.5), r"factor must be an integer, got 1.5"),
    (lambda s: s.shift("S1", 1, {"S7": 1}), r"statement 'S7' is not in the band"),
    (lambda s: s.permute("S1", [0, 0, 1]), r"must name each of 0..2 once"),
    (lambda s: s.tile("S1", [0, 4]), r"tile sizes must be up to 3 positive ints"),
    (lambda s: s.tile("S1", [4, 4, 4, 4]), r"tile sizes must be up to 3 positive ints"),
])
def test_wrong_arguments_name_what_is_wrong(call, message):
    s = original("jacobi-1d", JACOBI)
    with pytest.raises(PolycError, match=message):
        call(s)


def test_a_trace_saves_loads_and_replays_to_the_same_schedule_and_code(tmp_path):
    kernel = KERNELS["jacobi-1d"]
    s = original("jacobi-1d", JACOBI)
    s.skew("S1", 2, 0, 2).shift("S1", 2, {"S2": 1}).interchange("S1", 1, 2).tile("S1", [4, 8])
    path = tmp_path / "trace.json"
    s.trace.save(path)
    data = json.loads(path.read_text())
    assert [step["op"] for step in data["steps"]] == ["skew", "shift", "interchange", "tile"]
    assert str(s.trace).splitlines()[1:] == [
        "  .skew(band='S1', member=2, by=0, factor=2)",
        "  .shift(band='S1', member=2, amounts={'S2': 1})",
        "  .interchange(band='S1', first=1, second=2)",
        "  .tile(band='S1', sizes=[4, 8])"]
    replayed = polyc.Trace.load(path).replay(kernel.build())
    assert str(replayed.tree) == str(s.tree)
    assert replayed.compile().compilation.llvm_ir == s.compile().compilation.llvm_ir


def test_a_trace_with_isolate_replays_to_the_same_tree_and_code(tmp_path):
    kernel = KERNELS["jacobi-1d"]
    s = original("jacobi-1d", JACOBI)
    s.skew("S1", 2, 0, 2).shift("S1", 2, {"S2": 1}).interchange("S1", 1, 2).tile("S1", [4, 8])
    s.isolate("S1")
    assert 'options: "[T, N] -> { isolate[[] -> [' in str(s.tree)  # in the recorded tree
    path = tmp_path / "trace.json"
    s.trace.save(path)
    assert str(polyc.Trace.load(path)).splitlines()[-1] == "  .isolate(band='S1')"
    replayed = polyc.Trace.load(path).replay(kernel.build())
    assert str(replayed.tree) == str(s.tree)
    compiled = s.compile(threads=1)
    assert replayed.compile(threads=1).compilation.llvm_ir == compiled.compilation.llvm_ir
    matches_reference("jacobi-1d", s, JACOBI, threads=1)


def test_a_replay_starts_from_the_recorded_schedule_not_a_new_one():
    kernel = KERNELS["matmul"]
    s = polyc.Schedule(kernel.build(), params=kernel.params, scheduler="original")
    s.interchange("S2", 0, 1)
    trace = s.trace
    trace.start["scheduler"] = "pluto"  # the scheduler now gives another tree
    replayed = trace.replay(kernel.build())
    assert pluto_text(replayed)[1] == "T(S2): (1, j, i, k)"
    assert any("as the trace recorded it" in d for d in replayed.decisions)


def test_bad_traces_are_refused(tmp_path):
    path = tmp_path / "t.json"
    path.write_text("{not json")
    with pytest.raises(PolycError, match="is not JSON"):
        polyc.Trace.load(path)
    path.write_text(json.dumps({"version": 99}))
    with pytest.raises(PolycError, match="not a polyc schedule trace of version 1"):
        polyc.Trace.load(path)
    with pytest.raises(PolycError, match="cannot read the trace"):
        polyc.Trace.load(tmp_path / "missing.json")
    s = original("matmul")
    trace = s.trace
    trace.steps.append({"op": "explode", "band": "S1"})
    with pytest.raises(PolycError, match="unknown schedule primitive 'explode'"):
        trace.replay(KERNELS["matmul"].build())


def test_the_legality_checker_refuses_a_band_marked_permutable_that_is_not():
    s = original("jacobi-1d", JACOBI)
    band = s.tree.get_root().child(0)
    marked = band.band_set_permutable(1).get_schedule()
    with pytest.raises(IllegalScheduleError, match=r"band of S1, S2 is marked permutable but "
                                                   r"its member 1 .* runs a RAW dependence "
                                                   r"S2 -> S1 backward"):
        check_legality(s.scop, marked)


def test_kernels_go_by_polybench_names_and_the_old_ones():
    assert KERNELS["jacobi-2d"] is KERNELS["jacobi2d"]
    assert KERNELS["2mm"] is KERNELS["mm2"]
    with pytest.raises(KeyError, match="no loop-nest kernel 'jacobi-3d'; choose one of "
                                       "matmul, jacobi-1d"):
        KERNELS["jacobi-3d"]
