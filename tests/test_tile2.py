"""Second-level tiles (``tile2``, polyc.tiling.levels): the automatic tiling stage's
tree has the extra band level Schedule.tile2 makes by hand, the sizes come from the
host's caches or the ratio given, stencil and other shaped bands keep one level, the
results equal the kernels' numpy references, every schedule passes the legality
checker, and bad values are PolycErrors."""

import re

import islpy as isl
import numpy as np
import pytest

import polyc
from polyc.errors import PolycError
from polyc.notation import pluto_notation
from polyc.scheduler import check_legality
from polyc.scop.nest import LoopNest
from polyc.scop.polybench import KERNELS
from polyc.tiling import tile
from polyc.tiling.cache import tile_size, tiles_per_tile

# float32 sums in another order: relative 1e-4, and absolute 1e-5 of the array's largest
# value (gemver's w: sums of terms near 1e3 that cancel to 10 differ by 1e-3)
RTOL, ATOL = 1e-4, 1e-5


def scale() -> LoopNest:
    """``B[i][j] = 2 A[i][j] + c[j]``: one permutable band of two members, stride 1
    along ``j``, tiled rectangularly."""
    nest = LoopNest("scale", params=["N"])
    a, b, c = nest.array("A", ("N", "N")), nest.array("B", ("N", "N")), nest.array("c", ("N",))
    nest.statement("S1", "{ [i, j] : 0 <= i < N and 0 <= j < N }", write=b["i", "j"],
                   expr=a["i", "j"] * 2.0 + c["j"])
    return nest


def band_members(schedule: isl.Schedule) -> list[int]:
    """The member counts of the bands on the path from the root, top down."""
    found = []

    def visit(node: isl.ScheduleNode) -> bool:
        if node.get_type() == isl.schedule_node_type.band:
            found.append(node.band_n_member())
        return True

    schedule.get_root().foreach_descendant_top_down(visit)
    return found


def tiling(compiled) -> list[str]:
    return [d for d in compiled.schedule.decisions if d.startswith("tiling: ")]


def checked_against_reference(name, params, **options):
    """The kernel compiled with ``options`` (the legality checker on), checked again
    here, run on seeded inputs and compared with its numpy reference."""
    kernel = KERNELS[name]
    compiled = kernel.build().compile(params=params, threads=1, check=True, **options)
    check_legality(compiled.compilation.scop, compiled.schedule.schedule)
    arrays = kernel.inputs(seed=5, params=params)
    out = compiled.run(arrays)
    for array, value in kernel.reference(params, arrays).items():
        np.testing.assert_allclose(out[array], value, rtol=RTOL,
                                   atol=ATOL * max(1.0, float(np.abs(value).max())),
                                   err_msg=f"{name}: {array}")
    return compiled


def test_tile2_is_schedule_tile2_on_the_automatic_band():
    nest = scale()
    compiled = nest.compile(params={"N": 100}, tile_size=8, tile2=4, threads=1)
    by_hand = polyc.Schedule(nest, params={"N": 100}, scheduler="original").tile2("S1", 8, 4)
    assert pluto_notation(compiled.schedule.schedule) == str(by_hand)
    assert band_members(compiled.schedule.schedule) == [2, 2, 2]  # L2 tiles, L1 tiles, points
    assert band_members(nest.compile(params={"N": 100}, tile_size=8,
                                     threads=1).schedule.schedule) == [2, 2]
    assert tiling(compiled) == [
        "tiling: band of S1: tiles 8x8",
        "tiling: band of S1: second-level tiles of 4x4 tiles (32x32)",
        "tiling: tile2: second-level tiles of rectangular bands, 4 tiles per member"]
    arrays = {"A": np.random.default_rng(0).standard_normal((100, 100), dtype=np.float32),
              "c": np.random.default_rng(1).standard_normal(100, dtype=np.float32)}
    np.testing.assert_allclose(compiled.run(arrays)["B"], 2 * arrays["A"] + arrays["c"],
                               rtol=RTOL, atol=ATOL)


def test_tile2_true_sizes_both_levels_from_the_host_caches():
    first = tile_size(1, level=1)  # one array's slice in half of L1
    count = tiles_per_tile(first)  # ... and in half of L2
    assert count >= 2 and first * count <= 256
    n = first * count + 5  # more than one second-level tile, partial ones at the end
    compiled = checked_against_reference("gemver", {"N": n}, tile2=True)
    notes = tiling(compiled)
    assert f"tiling: band of S4: tiles {first}x{first}" in notes
    assert (f"tiling: band of S4: second-level tiles of {count}x{count} tiles "
            f"({first * count}x{first * count}) (from the caches)") in notes
    assert any(n.startswith("tiling: tile2: second-level tiles of rectangular bands sized "
                            "from the caches") for n in notes)
    default = KERNELS["gemver"].build().compile(params={"N": n}, threads=1)
    assert not any("tile2" in d or "second-level" in d for d in default.schedule.decisions)


@pytest.mark.parametrize("name, params, options", [
    ("trisolv", {"N": 70}, {"tile_size": 4, "tile2": 3}),  # triangular, wavefront of L2 tiles
    ("gemver", {"N": 45}, {"tile_size": [4, 8], "tile2": 2}),
    ("matmul", {"M": 37, "N": 41, "K": 29}, {"tile_size": 4, "tile2": 3,
                                             "without": ("recipe",)}),
])
def test_results_equal_the_references_with_two_levels(name, params, options):
    compiled = checked_against_reference(name, params, **options)
    assert any("second-level tiles of" in n for n in tiling(compiled))


def test_wavefront_runs_over_the_second_level_tiles():
    compiled = checked_against_reference("trisolv", {"N": 70}, tile_size=4, tile2=3)
    notes = tiling(compiled)
    assert notes.index("tiling: band of S2, S3: second-level tiles of 3x3 tiles (12x12)") \
        < notes.index("tiling: band of S2, S3: wavefront over tile loops 0+1 (tile loop 1 "
                      "parallel)")


def test_stencil_and_transposing_bands_keep_one_level():
    jacobi = checked_against_reference("jacobi-2d", {"T": 6, "N": 70}, tile2=4)
    assert "tiling: band of S1, S2: one level of tiles (a stencil band; second-level tiles " \
        "are for rectangular bands)" in tiling(jacobi)
    assert not any(n.startswith("tiling: band of") and "second-level tiles of" in n
                   for n in tiling(jacobi))
    mvt = checked_against_reference("mvt", {"N": 300}, tile2=True)
    assert "tiling: band of S1, S2: one level of tiles (a transposing band; second-level " \
        "tiles are for rectangular bands)" in tiling(mvt)


def test_a_band_one_second_level_tile_holds_keeps_one_level():
    compiled = scale().compile(params={"N": 30}, tile_size=8, tile2=4, threads=1)
    assert tiling(compiled)[1] == ("tiling: band of S1: one level of tiles (second-level "
                                   "tiles of 4x4 would hold the band, extents [30, 30])")
    assert band_members(compiled.schedule.schedule) == [2, 2]


@pytest.mark.parametrize("value", [1, 0, -4, 2.5, "yes", None, (2, 2)])
def test_bad_values_are_polyc_errors(value):
    nest = scale()
    with pytest.raises(PolycError, match=r"tile2 must be False .* or an int >= 2 .*, got "
                                         + re.escape(repr(value))):
        nest.compile(params={"N": 40}, tile2=value)
    schedule = polyc.Schedule(nest, params={"N": 40}, scheduler="original")
    scheduled = polyc.scheduler.ScheduleResult("original", schedule.tree, ())
    with pytest.raises(PolycError, match="tile2 must be"):
        tile(schedule.scop, scheduled, tile2=value)
