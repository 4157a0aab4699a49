"""Tiling of permutable bands: results unchanged, legality kept, loops reordered for
vectors, tile sizes from the cache model.

Tiling only reorders instances along dependences that the band already respects, so
without fast-math a tiled program must reproduce the untiled one bit for bit. Tile
sizes 3 and 4 do not divide the kernels' extents: partial tiles everywhere.
"""

import numpy as np
import pytest
from onnx import TensorProto, helper
from test_models import MODELS

import polyc
from polyc.errors import PolycError
from polyc.notation import pluto_notation
from polyc.scop.polybench import KERNELS
from polyc.tiling.cache import Caches, host_caches, tile_size

from onnx_helpers import ATOL, RTOL, make_model, random_inputs, run_onnxruntime


@pytest.mark.parametrize("size", [3, 4])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_tiled_kernel_equals_untiled_bit_for_bit(name, size):
    kernel = KERNELS[name]
    arrays = kernel.inputs(seed=21)
    untiled = kernel.build().compile(params=kernel.params, tile=False, fast_math=False)
    tiled = kernel.build().compile(params=kernel.params, tile_size=size, fast_math=False)
    expected = untiled.run(arrays)  # both compiles ran the legality checker
    for array, value in tiled.run(arrays).items():
        np.testing.assert_array_equal(value, expected[array], err_msg=f"{name}: {array}")


def test_matmul_is_tiled_with_j_innermost_in_the_tile():
    kernel = KERNELS["matmul"]
    # (10 columns: too few for the contraction recipe, whose tiles are 16 wide or more)
    compiled = kernel.build().compile(params={"M": 20, "N": 10, "K": 9}, tile_size=8)
    decisions = compiled.schedule.decisions
    assert "tiling: band of S2: tiles 8x8x8, members reordered (0, 2, 1)" in decisions
    assert pluto_notation(compiled.schedule.schedule).splitlines()[1] == \
        "T(S2): (1, i/8, k/8, j/8, (i) mod 8, (k) mod 8, (j) mod 8)"
    a, b = np.ones((20, 9), np.float32), np.ones((9, 10), np.float32)
    np.testing.assert_array_equal(compiled.run({"A": a, "B": b})["C"], a @ b)


def test_skewed_stencil_band_is_tiled():
    kernel = KERNELS["seidel-2d"]
    compiled = kernel.build().compile(params={"T": 5, "N": 14}, tile_size=4)
    assert "tiling: band of S1: tiles 4x4x4" in compiled.schedule.decisions
    arrays = kernel.inputs(seed=3, params={"T": 5, "N": 14})
    expected = kernel.reference({"T": 5, "N": 14}, arrays)["A"]
    np.testing.assert_allclose(compiled.run(arrays)["A"], expected, rtol=RTOL, atol=ATOL)


def test_small_bands_are_one_tile_and_tiling_can_be_turned_off():
    kernel = KERNELS["matmul"]
    compiled = kernel.build().compile(params=kernel.params)  # 7 x 5 x 9: one tile
    assert any(d.startswith("tiling: band of S2: one tile") for d in compiled.schedule.decisions)
    off = kernel.build().compile(params=kernel.params, tile=False)
    assert "tiling: off" in off.schedule.decisions


def _last_layer(rows: int, inner: int):
    """``y = x @ w.T`` (a classifier of 10 classes, Gemm with transB) that the contraction
    recipe does not take (fewer columns than a vector)."""
    w = (np.random.default_rng(6).standard_normal((10, inner)) / inner).astype(np.float32)
    node = helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)
    return make_model([node], [("x", [rows, inner])], ["y"], initializers=[("w", w)])


@pytest.mark.parametrize("rows, inner, one_tile", [(8, 256, True), (64, 1024, False)])
def test_bands_whose_arrays_fit_in_l1_are_one_tile(rows, inner, one_tile):
    """8x256 @ 256x10 (18 KB of arrays) runs its loops untiled, as one tile whatever
    the tile size; 64x1024 @ 1024x10 (296 KB) is tiled; both match onnxruntime."""
    model = _last_layer(rows, inner)
    compiled = polyc.compile(model, threads=1)
    decisions = [d for d in compiled.schedule.decisions if "gemm_update" in d]
    assert any("(its arrays fit in L1)" in d for d in decisions) == one_tile
    assert any(": tiles " in d for d in decisions) != one_tile
    inputs = random_inputs(model, seed=7)
    expected = run_onnxruntime(model, inputs)
    np.testing.assert_allclose(compiled.run(inputs)["y"], expected["y"], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", list(MODELS))
def test_tiled_models_match_onnxruntime(name):
    model = MODELS[name]()
    inputs = random_inputs(model, seed=5)
    expected = run_onnxruntime(model, inputs)
    actual = polyc.compile(model, tile_size=3).run(inputs)
    for key, value in expected.items():
        np.testing.assert_allclose(actual[key], value, rtol=RTOL, atol=ATOL, err_msg=key)


def test_bad_tile_size_is_refused():
    kernel = KERNELS["matmul"]
    for size in (0, -4, 2.5):
        with pytest.raises(PolycError, match="tile_size must be a positive int"):
            kernel.build().compile(params=kernel.params, tile_size=size)


def test_cache_sizes_from_sysfs(tmp_path):
    for k, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"),
                                             (2, "Unified", "2048K"), (3, "Unified", "64M")]):
        index = tmp_path / f"index{k}"
        index.mkdir()
        (index / "level").write_text(f"{level}\n")
        (index / "type").write_text(f"{kind}\n")
        (index / "size").write_text(f"{size}\n")
    assert host_caches(tmp_path) == Caches(48 * 1024, 2048 * 1024, 64 * 1024 ** 2)
    assert host_caches(tmp_path / "missing") == Caches(32 * 1024, 1024 ** 2, 8 * 1024 ** 2)


def test_tile_size_model():
    l2_2m = Caches(48 * 1024, 2 * 1024 ** 2, 32 * 1024 ** 2)
    assert tile_size(3, l2_2m) == 256  # sqrt(2 MiB / 2 / 4 B / 3) = 295 -> capped
    assert tile_size(3, Caches(32 * 1024, 256 * 1024, 0)) == 96  # sqrt(10922) = 104 -> 96
    assert tile_size(1000, l2_2m) == 16  # at least one vector


@pytest.mark.parametrize("perm, tiles", [([1, 0], "64x112"), ([0, 2, 1], "1x64x112")])
def test_a_transposing_band_gets_tiles_of_rows_of_both_arrays(perm, tiles):
    """Reads stride 1 along one loop, writes stride 1 along another: 64 x 112 tiles
    (the rows of both arrays in L1), not one tile of the whole 3-D band or squares;
    the other loops get 1. A broadcast read (stride 0 along the inner loop) does not
    make a band transposing."""
    shape = [300, 200] if len(perm) == 2 else [3, 130, 150]
    model = make_model([helper.make_node("Transpose", ["x"], ["t"], perm=perm),
                        helper.make_node("Relu", ["t"], ["y"])], [("x", shape)], ["y"])
    compiled = polyc.compile(model)
    assert f"tiling: band of S0_relu: tiles {tiles}" in compiled.schedule.decisions
    inputs = random_inputs(model, seed=4)
    np.testing.assert_array_equal(compiled.run(inputs)["y"],
                                  np.maximum(inputs["x"].transpose(perm), 0))
    bias = make_model([helper.make_node("Add", ["x", "b"], ["y"])],
                      [("x", [300, 200]), ("b", [300, 1])], ["y"])
    assert not any("64x112" in d for d in polyc.compile(bias).schedule.decisions)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape, perm, dtype, merged", [
    ([1, 1152, 7, 7], [0, 2, 3, 1], TensorProto.FLOAT, True),  # NCHW -> NHWC: 49 pixels
    ([1, 7, 7, 1152], [0, 3, 1, 2], TensorProto.FLOAT, True),  # NHWC -> NCHW
    ([50, 37], [1, 0], TensorProto.FLOAT, False),  # partial blocks along both loops
    ([40, 3, 33], [2, 1, 0], TensorProto.INT64, False),
    ([33, 40], [1, 0], TensorProto.BOOL, False),
])
def test_transposing_copies_are_register_transposes(shape, perm, dtype, merged, threads):
    """A transposing copy is cut into 16x16 blocks, each loaded along the read's rows,
    transposed in registers and stored along the write's (partial blocks masked); an
    image's rows and columns, contiguous in both layouts, become one loop of pixels
    first (7 x 7 is too short for a block). Results are numpy's, element for element,
    for any element type, on one and two threads."""
    model = make_model([helper.make_node("Transpose", ["x"], ["y"], perm=perm)],
                       [("x", shape, dtype)], [("y", None, dtype)])
    compiled = polyc.compile(model, threads=threads)
    decisions = compiled.schedule.decisions
    assert "tiling: band of S0_copy: 16x16 blocks transposed in registers" in decisions
    assert any("rows merged into one loop" in d for d in decisions) == merged
    x = np.random.default_rng(5).integers(-1000, 1000, size=shape)
    x = x > 0 if dtype == TensorProto.BOOL else x.astype(helper.tensor_dtype_to_np_dtype(dtype))
    np.testing.assert_array_equal(compiled.run({"x": x})["y"], x.transpose(perm))


def test_a_loop_of_one_iteration_does_not_hide_the_stride_1_loop():
    """Batch 1: isl simplifies the row of the single-iteration loop to 0; the columns
    of the product must still go innermost (not the reduction)."""
    from onnx import helper

    from onnx_helpers import make_model

    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])],
                       [("x", [1, 300]), ("w", [300, 200])], ["y"])
    compiled = polyc.compile(model, tile_size=64)
    assert ("tiling: band of S1_matmul_update: tiles 64x64x64, members reordered (0, 2, 1)"
            in compiled.schedule.decisions)
    inputs = random_inputs(model, seed=8)
    np.testing.assert_allclose(compiled.run(inputs)["y"], run_onnxruntime(model, inputs)["y"],
                               rtol=RTOL, atol=1e-5)


@pytest.mark.parametrize("axis", [1, 0])
def test_a_reduction_band_keeps_the_contiguous_loop_innermost(axis):
    """max over the contiguous axis: the reduction loop i1 goes innermost (x stride 1, the
    accumulator invariant in a register), not the output loop, which would stride x by
    a whole row; over axis 0 the output loop i1 is stride-1 for x and y and goes there."""
    from onnx import helper

    from onnx_helpers import make_model

    model = make_model([helper.make_node("ReduceMax", ["x"], ["y"], axes=[axis], keepdims=0)],
                       [("x", [70, 90])], ["y"])
    compiled = polyc.compile(model, tile_size=32)
    update = [line for line in pluto_notation(compiled.schedule.schedule).splitlines()
              if line.startswith("T(S1_reduce_max_update)")]
    assert update[0].endswith(", (i1) mod 32)")
    inputs = random_inputs(model, seed=8)
    np.testing.assert_array_equal(compiled.run(inputs)["y"], run_onnxruntime(model, inputs)["y"])


def two_band_model():
    """A transpose-and-scale (one 2-D band) and an elementwise square (another)."""
    from onnx import helper

    from onnx_helpers import make_model

    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Exp", ["t"], ["e"], name="exp_node"),
             helper.make_node("ReduceSum", ["e", "axes"], ["s"], keepdims=0),
             helper.make_node("Add", ["x", "x"], ["y"], name="add_node")]
    return make_model(nodes, [("x", [70, 90])], ["s", "y"],
                      initializers=[("axes", np.array([1], np.int64))])


def test_tile_sizes_per_statement_and_per_loop():
    model = two_band_model()
    compiled = polyc.compile(model, threads=1, tile_size={"add_node": (16, 32)})
    tiling = [d for d in compiled.schedule.decisions if d.startswith("tiling: band")]
    assert "tiling: band of S3_add: tiles 16x32" in tiling
    assert not any("tiles 16x32" in d for d in tiling if "S3_add" not in d)
    by_name = polyc.compile(model, threads=1, tile_size={"S3_add": 8})
    assert "tiling: band of S3_add: tiles 8x8" in by_name.schedule.decisions
    inputs = random_inputs(model, seed=4)
    expected = run_onnxruntime(model, inputs)
    for result in (compiled, by_name):
        for name, value in result.run(inputs).items():
            np.testing.assert_allclose(value, expected[name], rtol=RTOL, atol=1e-5)


def test_bad_per_statement_tile_sizes_are_refused():
    model = two_band_model()
    with pytest.raises(PolycError, match="tile_size names 'S9_nothing': no such statement"):
        polyc.compile(model, tile_size={"S9_nothing": 8})
    with pytest.raises(PolycError, match="3 sizes for a band of 2 loops"):
        polyc.compile(model, tile_size={"S3_add": (8, 8, 8)})
    with pytest.raises(PolycError, match="tile_size must be a positive int"):
        polyc.compile(model, tile_size={"S3_add": 0})


def test_cli_tile_size_per_statement(tmp_path, capsys):
    import onnx

    from polyc.cli import main

    path = tmp_path / "m.onnx"
    onnx.save(two_band_model(), str(path))
    assert main(["inspect", str(path), "--threads", "1", "--tile-size", "S3_add=16,32"]) == 0
    assert "tiling: band of S3_add: tiles 16x32" in capsys.readouterr().out
    assert main(["inspect", str(path), "--tile-size", "8", "--tile-size", "S3_add=4"]) == 1
    assert "give one value for every loop nest, or NAME=VALUE" in capsys.readouterr().err


def _add_relu(rows: int, cols: int):
    nodes = [helper.make_node("Add", ["x", "b"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    return make_model(nodes, [("x", [rows, cols]), ("b", [1, cols])], ["y"])


def _row_sums(rows: int, cols: int):
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    return make_model([node], [("x", [rows, cols])], ["y"],
                      initializers=[("axes", np.array([1], np.int64))])


@pytest.mark.parametrize("make, cols, hinted", [(_row_sums, 24, True), (_row_sums, 7, False),
                                                (_row_sums, 300, False), (_add_relu, 24, False)])
def test_short_inner_loops_get_unroll_disable_hints(make, cols, hinted):
    """Only scalar innermost loops of 16-32 iterations (a row sum: its write does not
    move) carry ``llvm.loop.unroll.disable`` (LLVM would unroll them fully and vectorize
    the copies badly); an elementwise row of 24 runs 16 lanes at a time, the rest
    masked, with no loop left to hint; results are unchanged."""
    model = make(64, cols)
    compiled = polyc.compile(model)
    assert ("llvm.loop.unroll.disable" in compiled.compilation.llvm_ir) == hinted
    inputs = random_inputs(model, seed=3)
    expected = run_onnxruntime(model, inputs)
    np.testing.assert_allclose(compiled.run(inputs)["y"], expected["y"], rtol=RTOL, atol=ATOL)


def _depthwise_silu(width: int):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], group=8, pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["y"])]
    w = np.random.default_rng(4).standard_normal((8, 1, 3, 3)).astype(np.float32)
    return make_model(nodes, [("x", [1, 8, 12, width])], ["y"], initializers=[("w", w)])


@pytest.mark.parametrize("width, hinted", [(112, True), (160, False)])
def test_short_vector_loops_with_masked_reads_are_unrolled(width, hinted):
    """A row of a 3x3 depthwise conv + SiLU, its reads masked lane by lane at the row's
    ends: its vector loop carries ``llvm.loop.unroll.full`` when it has at most 8 whole
    vectors (112 = 7 vectors; 160 = 10 keep the loop), so the masks become constants;
    results match onnxruntime."""
    model = _depthwise_silu(width)
    compiled = polyc.compile(model, threads=1)
    assert ("llvm.loop.unroll.full" in compiled.compilation.llvm_ir) == hinted
    inputs = random_inputs(model, seed=5)
    expected = run_onnxruntime(model, inputs)
    np.testing.assert_allclose(compiled.run(inputs)["y"], expected["y"], rtol=RTOL, atol=ATOL)


def _row_sum_nest(last: bool):
    """C[r] = sum of A[r, :] * 2 (copied through B) with a statement fused into the
    row's loop at one column: C's initialisation at the first (which may go first), or
    D[r] = B[r, N - 1] at the last (which must stay after the copy of that element)."""
    from polyc.scop.nest import LoopNest

    nest = LoopNest("rows", params=["R", "N"])
    a, b, c, d = (nest.array(n, s) for n, s in (("A", ("R", "N")), ("B", ("R", "N")),
                                                ("C", ("R",)), ("D", ("R",))))
    nest.statement("S1", "{ [r, i] : 0 <= r < R and 0 <= i < N }", write=b["r", "i"],
                   expr=a["r", "i"] * 2.0, schedule="{ [r, i] -> [r, i, 0] }")
    if last:
        nest.statement("S2", "{ [r, i] : 0 <= r < R and i = N - 1 }", write=d["r"],
                       expr=b["r", "N - 1"] + 0.0, schedule="{ [r, i] -> [r, i, 1] }")
    else:
        nest.statement("S2", "{ [r, i] : 0 <= r < R and i = 0 }", write=c["r"],
                       expr=a["r", "0"] * 0.0, schedule="{ [r, i] -> [r, i, 1] }")
    nest.statement("S3", "{ [r, i] : 0 <= r < R and 0 <= i < N }", write=c["r"],
                   expr=c["r"] + b["r", "i"], schedule="{ [r, i] -> [r, i, 2] }")
    return nest


@pytest.mark.parametrize("last", [False, True])
def test_a_statement_run_once_in_a_loop_goes_before_it_when_legal(last):
    """The statement runs before the loop (no ``if`` in the body, the whole trip count
    for vectors) unless a dependence on the loop's iterations keeps it inside."""
    compiled = _row_sum_nest(last).compile(params={"R": 3, "N": 37}, fast_math=False)
    hoisted = [d for d in compiled.schedule.decisions if "hoist" in d]
    assert hoisted == ([] if last else ["tiling: hoist S2 before its loop"])
    assert ("if (" in str(compiled.compilation.program)) == last
    x = np.random.default_rng(4).standard_normal((3, 37)).astype(np.float32)
    got = compiled.run({"A": x, "C": np.zeros(3, np.float32)})
    b = x * np.float32(2)
    want = np.zeros(3, np.float32)
    for i in range(37):
        want = want + b[:, i]
    np.testing.assert_array_equal(got["B"], b)
    np.testing.assert_array_equal(got["C"], want)
    if last:
        np.testing.assert_array_equal(got["D"], b[:, -1])


def test_outer_schedule_is_isls_prefix_schedule_at_every_node():
    """islutil.outer_schedule (made from the bands above a node) equals isl's prefix
    schedule restricted to the node's instances, or to a part of them, on a tree with
    nested bands, a sequence under a band, marks and a statement under no band."""
    import islpy as isl

    from polyc.islutil import outer_schedule
    tree = isl.Schedule(
        '{ domain: "[N] -> { A[i, j] : 0 <= i, j < N; B[i] : 0 <= i < N; C[k] : 0 <= k < 4 }", '
        'child: { sequence: [ { filter: "{ A[i, j]; B[i] }", '
        'child: { schedule: "[{ A[i, j] -> [(i)]; B[i] -> [(i)] }]", '
        'child: { mark: "outer", child: { sequence: [ { filter: "{ A[i, j] }", '
        'child: { schedule: "[{ A[i, j] -> [(j)] }, { A[i, j] -> [(i + j)] }]" } }, '
        '{ filter: "{ B[i] }" } ] } } } }, { filter: "{ C[k] }" } ] } }')
    checked = []

    def visit(node: isl.ScheduleNode) -> bool:
        domain = node.get_domain()
        some = isl.UnionSet("[N] -> { A[i, j] : i = 1; C[k] : k < 2 }")
        for part in (domain, domain.intersect(some)):
            expected = node.get_prefix_schedule_union_map().intersect_domain(part)
            assert outer_schedule(node, part).is_equal(expected), node
        checked.append(str(node.get_type()))
        return True

    tree.get_root().foreach_descendant_top_down(visit)
    assert len(checked) == 13  # every node, the three leaves included
    leaf_of_a = tree.get_root()
    for _ in range(8):  # sequence, filter, band, mark, sequence, filter, band, leaf
        leaf_of_a = leaf_of_a.child(0)
    assert outer_schedule(leaf_of_a).is_equal(isl.UnionMap(
        "[N] -> { A[i, j] -> [i, j, i + j] : 0 <= i, j < N }"))


def test_a_parallel_member_runs_inside_a_recurrence(tmp_path):
    """PolyBench's adi: its sweeps' ``p[i][j] = -c / (a * p[i][j - 1] + b)`` chains each
    ``j`` to the one before; the rows ``i`` are independent, so the tiles run ``i``
    innermost (the chains side by side, the loop free of dependences). Legal and as cc
    computes it. syrk's innermost member carries a reduction (one element written
    along it), which keeps its place: it runs in vector lanes with fast math."""
    from test_c_frontend import check_against_cc

    from polyc.scheduler import check_legality
    from polyc.scop.c import from_c

    from c_reference import POLYBENCH, UTILITIES, reference_library
    source = POLYBENCH / "stencils" / "adi" / "adi.c"
    kernel = from_c(source, defines=["SMALL_DATASET"], include=[UTILITIES])
    compiled = kernel.compile(threads=1)
    notes = [d for d in compiled.schedule.decisions if "carries a recurrence" in d]
    assert len(notes) == 2 and all(n.endswith(
        "members reordered (1, 0) (member 1 carries a recurrence, member 0 is parallel: "
        "innermost)") for n in notes), notes
    check_legality(compiled.compilation.scop, compiled.schedule.schedule)
    library = reference_library(source, tmp_path, defines=["SMALL_DATASET"],
                                includes=[UTILITIES], extra=[UTILITIES / "polybench.c"])
    check_against_cc(kernel, library)
    syrk = from_c(POLYBENCH / "linear-algebra" / "blas" / "syrk" / "syrk.c",
                  defines=["SMALL_DATASET"], include=[UTILITIES]).compile(threads=1)
    assert not any("recurrence" in d for d in syrk.schedule.decisions)


def test_a_parallel_loop_moves_inside_a_recurrence_in_blocks(tmp_path):
    """PolyBench's deriche: isl's schedule runs the backward and column passes as a
    parallel loop around a loop carrying a chain (``y2[i][j]`` from ``yp1``, which the
    statement after it set to ``y2[i][j + 1]``); the parallel loop goes inside it in
    blocks of 64 (a loop of its own per statement). Legal and as cc computes it."""
    from test_c_frontend import check_against_cc

    from polyc.scheduler import check_legality
    from polyc.scop.c import from_c
    from polyc.tiling.inward import BLOCK

    from c_reference import POLYBENCH, UTILITIES, reference_library
    source = POLYBENCH / "medley" / "deriche" / "deriche.c"
    kernel = from_c(source, defines=["SMALL_DATASET"], include=[UTILITIES])
    compiled = kernel.compile(threads=1)
    moved = [d for d in compiled.schedule.decisions
             if d.endswith(f"parallel around a recurrence, moved inside it in blocks of {BLOCK}")]
    assert len(moved) == 3, compiled.schedule.decisions
    check_legality(compiled.compilation.scop, compiled.schedule.schedule)
    library = reference_library(source, tmp_path, defines=["SMALL_DATASET"],
                                includes=[UTILITIES], extra=[UTILITIES / "polybench.c"])
    check_against_cc(kernel, library)
    check_against_cc(kernel, library, seed=1, scheduler="isl")
