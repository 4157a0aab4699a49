"""Stencil tiling: sizes per member, diamond tiles, the wavefront over tile loops.

Every tiled schedule passes the legality checker, and without fast-math reproduces the
untiled program bit for bit (tiling only reorders instances the band leaves free).
Odd sizes (3, 5) leave partial tiles everywhere; the model's sizes are exercised at
parameters large enough to tile.
"""

import islpy as isl
import numpy as np
import pytest

from polyc.fusion.groups import fuse
from polyc.islutil import union_sets
from polyc.scheduler import check_legality, schedule
from polyc.scheduler.pluto import concurrent_start
from polyc.scop.dependences import compute_dependences
from polyc.scop.params import bind_parameters
from polyc.scop.polybench import KERNELS
from polyc.tiling.cache import Caches, host_caches
from polyc.tiling.rectangular import tile_bands
from polyc.tiling.stencil import Stencil, stencil_band, stencil_sizes

RTOL, ATOL = 1e-5, 1e-6
STENCILS = ["jacobi-1d", "jacobi-2d", "seidel-2d", "heat-3d", "fdtd-2d"]
# Parameters at which the model's sizes tile some member. heat-3d compiles take a second
# or two (its scheduling and diamond ILPs, a 4-d AST): it gets sizes 3 and the model's.
TILED = {"jacobi-1d": {"T": 20, "N": 3000}, "jacobi-2d": {"T": 18, "N": 300},
         "seidel-2d": {"T": 18, "N": 40}, "heat-3d": {"T": 9, "N": 12},
         "fdtd-2d": {"T": 18, "NX": 20, "NY": 300}}
DIAMONDS = {"jacobi-1d": "S1: 2*t - i; S2: 2*t - i + 1",
            "jacobi-2d": "S1: 2*t - i; S2: 2*t - i + 1",
            "heat-3d": "S1: t - i"}
L1_48K = Caches(48 * 1024, 2 * 1024 ** 2, 32 * 1024 ** 2)


def scheduled(name, params):
    """The kernel's SCoP (dependences computed, parameters bound) and Pluto schedule."""
    scop = compute_dependences(KERNELS[name].build().scop())
    result = schedule(scop, fuse(scop, policy="smart"), scheduler="pluto")
    return bind_parameters(scop, params), result.schedule


def outer_band(tree: isl.Schedule) -> isl.ScheduleNode:
    node = tree.get_root()
    while node.get_type() != isl.schedule_node_type.band:
        node = node.child(0)
    return node


def coincident(scop, band: isl.ScheduleNode, member: int) -> bool:
    """No dependence between the band's instances has distance 0 on the members before
    ``member`` and a non-zero distance on it (the band is outermost)."""
    times = band.band_get_partial_schedule_union_map()
    zero = isl.Val.zero(scop.ctx)
    deps = scop.dependences.all.intersect_params(scop.context)
    for distances in union_sets(deps.apply_domain(times).apply_range(times).deltas()):
        for k in range(member):
            distances = distances.fix_val(isl.dim_type.set, k, zero)
        if not distances.is_subset(distances.fix_val(isl.dim_type.set, member, zero)):
            return False
    return True


def compile_pair(name, params, **options):
    kernel = KERNELS[name]
    tiled = kernel.build().compile(params=params, fast_math=False, **options)
    untiled = kernel.build().compile(params=params, fast_math=False, tile=False)
    return tiled, untiled


def assert_same_results(name, params, tiled, untiled):
    kernel = KERNELS[name]
    arrays = kernel.inputs(seed=5, params=params)
    expected = untiled.run(arrays)
    reference = kernel.reference(params, arrays)
    for array, value in tiled.run(arrays).items():
        np.testing.assert_array_equal(value, expected[array], err_msg=f"{name}: {array}")
        np.testing.assert_allclose(value, reference[array], rtol=RTOL, atol=ATOL,
                                   err_msg=f"{name}: {array}")


@pytest.mark.parametrize(("name", "size"), [(name, size) for name in STENCILS
                                             for size in (3, 5, None)
                                             if (name, size) != ("heat-3d", 5)])
def test_stencil_tiles_are_legal_and_exact(name, size):
    params = TILED[name]
    tiled, untiled = compile_pair(name, params, tile_size=size)
    check_legality(tiled.compilation.scop, tiled.schedule.schedule)  # the pipeline did too
    assert_same_results(name, params, tiled, untiled)
    notes = [d for d in tiled.schedule.decisions if d.startswith("tiling: band")]
    assert any(" tiles " in n for n in notes), notes
    assert any(n.endswith("wavefront over tile loops 0+1 (tile loop 1 parallel)")
               for n in notes), notes
    assert any(" diamond tiles" in n for n in notes) == (name in DIAMONDS)


@pytest.mark.parametrize("name", STENCILS)
def test_wavefront_makes_the_second_tile_loop_parallel(name):
    scop, tree = scheduled(name, TILED[name])
    band = outer_band(tree)
    assert not any(band.band_member_get_coincident(k) for k in range(band.band_n_member()))
    tiled, notes = tile_bands(scop, tree, 4)
    check_legality(scop, tiled)
    tile = outer_band(tiled)
    assert tile.band_get_permutable()
    flags = [tile.band_member_get_coincident(k) for k in range(tile.band_n_member())]
    assert flags == [False, True] + [False] * (len(flags) - 2)
    assert coincident(scop, tile, 1)  # the flag is true: T1 carries no dependence
    assert not coincident(scop, tile, 0)  # T0 + T1 runs the wavefronts in order
    statements = ", ".join(sorted(s.name for s in scop.statements))
    assert f"band of {statements}: wavefront over tile loops 0+1 (tile loop 1 parallel)" in notes


def test_model_sizes_per_member():
    cases = {  # (members, arrays, recurrence, diamond): sizes, with a 48 KiB L1
        "jacobi-2d": ((3, 2, False, True), [16, 16, 256]),
        "jacobi-2d parallelograms": ((3, 2, False, False), [16, 16, 256]),
        "jacobi-1d": ((2, 2, False, True), [2048, 2048]),
        "jacobi-1d parallelograms": ((2, 2, False, False), [16, 2048]),
        "seidel-2d": ((3, 1, True, False), [16, 64, 8]),
        "heat-3d": ((4, 1, False, True), [8, 8, 8, 256]),
        "fdtd-2d": ((3, 4, False, False), [8, 8, 256]),
    }
    for case, ((n, arrays, recurrence, diamond), sizes) in cases.items():
        stencil = Stencil((), None, recurrence, arrays)
        assert stencil_sizes(stencil, n, L1_48K, diamond=diamond) == sizes, case
    small = Caches(16 * 1024, 256 * 1024, 0)  # 16 KiB / (2 arrays * 4 B * 256): 8 rows
    assert stencil_sizes(Stencil((), None, False, 2), 3, small, diamond=False) == [8, 8, 256]
    # innermost point loops distributed: the cross-section from half of L2, elements
    # of 8 bytes (1 MiB / (2 arrays * 8 B * 256): 256 rows, at most 64)
    distributed = {
        "jacobi-2d": ((3, 2, True, L1_48K), [64, 64, 256]),
        "fdtd-2d": ((3, 4, False, Caches(32 << 10, 512 << 10, 0)), [16, 32, 256]),
    }
    for case, ((n, arrays, diamond, caches), sizes) in distributed.items():
        stencil = Stencil((), None, False, arrays, ("S1", "S2"), 8)
        assert stencil_sizes(stencil, n, caches, diamond=diamond) == sizes, case


@pytest.mark.parametrize("name", STENCILS)
def test_the_innermost_point_loop_is_distributed_where_statements_depend_along_it(name):
    """jacobi-1d/2d: S1 at ``i + 1`` writes what S2 at ``i`` reads in the same iteration
    of the outer point loops (Pluto's shift fuses them), fdtd-2d likewise: each
    statement gets its own innermost loop, which then carries no dependence and runs in
    vector lanes. heat-3d's statements depend along outer members only; seidel-2d has
    one statement."""
    from polyc.scheduler.cost import estimate
    scop, tree = scheduled(name, TILED[name])
    stencil = stencil_band(scop, outer_band(tree))
    expected = {"jacobi-1d": ("S1", "S2"), "jacobi-2d": ("S1", "S2"),
                "fdtd-2d": ("S1", "S2", "S3", "S4")}.get(name, ())
    assert stencil.distributed == expected
    tiled, notes = tile_bands(scop, tree, None)
    check_legality(scop, tiled)
    statements = ", ".join(sorted(s.name for s in scop.statements))
    note = f"band of {statements}: innermost point loop distributed over {', '.join(expected)}"
    assert any(n.startswith(note) for n in notes) == bool(expected), notes
    if expected:
        assert set(estimate(scop, tiled, fast_math=False).vectorized) == set(expected)


@pytest.mark.parametrize("name", STENCILS)
def test_pipeline_uses_the_model_sizes(name):
    scop, tree = scheduled(name, TILED[name])
    stencil = stencil_band(scop, outer_band(tree))
    assert stencil is not None
    assert stencil.recurrence == (name == "seidel-2d")  # A[i][j - 1] of this time step
    tiled, notes = tile_bands(scop, tree, None)
    n = outer_band(tree).band_n_member()
    sizes = stencil_sizes(stencil, n, host_caches(), diamond=name in DIAMONDS)
    expected = f"tiles {'x'.join(map(str, sizes))}"
    assert any(expected in n and n.endswith("(stencil sizes)") for n in notes), notes
    check_legality(scop, tiled)


def test_an_explicit_tile_size_overrides_the_model():
    scop, tree = scheduled("jacobi-2d", TILED["jacobi-2d"])
    _, notes = tile_bands(scop, tree, 7)
    assert "band of S1, S2: tiles 7x7x7" in notes


@pytest.mark.parametrize("name", sorted(DIAMONDS))
def test_diamond_tiles_start_concurrently(name):
    scop, tree = scheduled(name, TILED[name])
    tiled, notes = tile_bands(scop, tree, 4)
    names = ", ".join(sorted(s.name for s in scop.statements))
    assert (f"band of {names}: diamond tiles, first tile row {DIAMONDS[name]} "
            "(concurrent start along t)") in notes
    check_legality(scop, tiled)
    # the loops inside a tile keep the band's own rows: time outermost (the innermost
    # one distributed over the statements, each its own loop, where a dependence
    # between them runs along it)
    assert _point_rows(outer_band(tiled).child(0)).is_equal(
        outer_band(tree).band_get_partial_schedule_union_map())
    # concurrent start: the tiles that hold t = 0 share a wavefront...
    tile = outer_band(tiled)
    first = isl.UnionMap.from_union_pw_aff(tile.band_get_partial_schedule().get_at(0))
    start = _time_zero(scop)
    wavefronts = first.intersect_domain(start).range()
    assert _span(wavefronts) <= 2
    # ...while parallelogram tiles start one after another along the face
    para, _ = tile_bands(scop, tree, 4, without=("diamond",))
    first = isl.UnionMap.from_union_pw_aff(outer_band(para).band_get_partial_schedule().get_at(0))
    assert _span(first.intersect_domain(start).range()) > 2


def _point_rows(point: isl.ScheduleNode) -> isl.UnionMap:
    """The rows of the point band, with those of the loops it was distributed into."""
    rows = point.band_get_partial_schedule_union_map()
    below = point.child(0)
    if below.get_type() != isl.schedule_node_type.sequence:
        return rows
    inner = None
    for k in range(below.n_children()):
        band = below.child(k).child(0)
        part = band.band_get_partial_schedule_union_map().intersect_domain(
            below.child(k).filter_get_filter())
        inner = part if inner is None else inner.union(part)
    return rows.flat_range_product(inner)


def _time_zero(scop) -> isl.UnionSet:
    zero = isl.Val.zero(scop.ctx)
    result = None
    for statement in scop.statements:
        part = isl.UnionSet.from_set(statement.domain.fix_val(isl.dim_type.set, 0, zero))
        result = part if result is None else result.union(part)
    return result.intersect_params(scop.context)


def _span(values: isl.UnionSet) -> int:
    (single,) = union_sets(values)
    return (single.dim_max_val(0).to_python() - single.dim_min_val(0).to_python()) + 1


@pytest.mark.parametrize("name", ["jacobi-1d", "jacobi-2d"])
def test_parallelogram_tiles_stay_available(name):
    params = TILED[name]
    scop, tree = scheduled(name, params)
    tiled, notes = tile_bands(scop, tree, 5, without=("diamond",))
    check_legality(scop, tiled)
    assert not any("diamond" in n for n in notes)


def test_seidel_has_no_concurrent_start():
    """-(t + i) + 2t would run the intra-step dependence A[i - 1][j] backwards."""
    scop, tree = scheduled("seidel-2d", TILED["seidel-2d"])
    stencil = stencil_band(scop, outer_band(tree))
    assert concurrent_start(scop, stencil.dependences, list(stencil.rows)) is None


def test_concurrent_start_row_is_valid_and_strictly_inside_the_cone():
    scop, tree = scheduled("jacobi-1d", TILED["jacobi-1d"])
    stencil = stencil_band(scop, outer_band(tree))
    row = concurrent_start(scop, stencil.dependences, list(stencil.rows))
    assert row == {"S1": ((2, -1), 0), "S2": ((2, -1), 1)}
    # t = (c + phi_1) / 4 with phi_1 = 2t + i: both weights positive
    for name, (coefs, _) in row.items():
        phi = stencil.rows[1][name][0]
        assert [c + p for c, p in zip(coefs, phi)] == [4, 0]


def test_non_stencil_bands_keep_one_size_and_their_parallel_loops():
    scop, tree = scheduled("matmul", {"M": 40, "N": 50, "K": 30})
    _, notes = tile_bands(scop, tree, None)
    assert not any("stencil" in n or "wavefront" in n for n in notes), notes
