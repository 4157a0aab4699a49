"""The contraction recipe: packing copies, cache blocks, register tiles, vector lanes.

Small blockings make every part appear on small matrices: partial register tiles in
both directions, several row, column and reduction blocks, masked lanes. The recipe
keeps each output element's reduction in its original order, so without fast-math it
must reproduce the untiled program bit for bit; with fast-math it is compared with
onnxruntime or numpy. Every compile here runs the legality checker on the final,
packed schedule (``check=True`` is the default).
"""

import re

import islpy as isl
import numpy as np
import pytest
from onnx import helper

import polyc
from polyc.cli import main
from polyc.errors import PolycError
from polyc.islutil import union_maps
from polyc.scheduler import check_legality
from polyc.scop.nest import LoopNest
from polyc.scop.polybench import KERNELS
from polyc.tiling.cache import Caches
from polyc.tiling.microkernel import Blocking, choose_blocking

from onnx_helpers import ATOL, RTOL, make_model, random_inputs, run_onnxruntime, untiled_contraction

pytestmark = pytest.mark.usefixtures("avx512_register_tiles")  # the tiles named here


SMALL = Blocking(mr=3, nr=32, mc=6, nc=64, kc=8)  # partial tiles on odd shapes


def matmul_model(m, k, n, *, batch=(), b_batch=None):
    b_batch = batch if b_batch is None else b_batch
    return make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                      [("a", [*batch, m, k]), ("b", [*b_batch, k, n])], ["y"])


def gemm_model(m, k, n, trans_a, trans_b):
    a_shape = [k, m] if trans_a else [m, k]
    b_shape = [n, k] if trans_b else [k, n]
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=2.0,
                            transA=trans_a, transB=trans_b)
    return make_model([node], [("a", a_shape), ("b", b_shape), ("c", [n])], ["y"])


def contraction_notes(compiled):
    return [d for d in compiled.schedule.decisions if d.startswith("tiling: contraction")]


@pytest.mark.parametrize("shape", [(37, 29, 70), (12, 64, 96), (5, 3, 33)])
def test_matmul_with_partial_tiles_matches_onnxruntime(shape):
    model = matmul_model(*shape)
    inputs = random_inputs(model, seed=1)
    compiled = polyc.compile(model, blocking=SMALL)
    assert contraction_notes(compiled) == [
        "tiling: contraction S1_matmul_update: b packed into b_packed by "
        f"S1_matmul_update_pack, {SMALL}, prologue S0_matmul_init in its register tiles"]
    expected = run_onnxruntime(model, inputs)["y"]
    np.testing.assert_allclose(compiled.run(inputs)["y"], expected, rtol=RTOL, atol=ATOL)


def test_recipe_is_bit_identical_to_the_untiled_loops_without_fast_math():
    model = matmul_model(37, 29, 70)
    inputs = random_inputs(model, seed=2)
    untiled = polyc.compile(model, tile=False, fast_math=False).run(inputs)["y"]
    tiled = polyc.compile(model, blocking=SMALL, fast_math=False)
    assert contraction_notes(tiled)
    np.testing.assert_array_equal(tiled.run(inputs)["y"], untiled)


@pytest.mark.parametrize("b_batch", [None, ()])  # a batch of B, or one B for all
def test_batched_matmul_packs_per_batch(b_batch):
    model = matmul_model(13, 7, 40, batch=(2, 3), b_batch=b_batch)
    inputs = random_inputs(model, seed=3)
    compiled = polyc.compile(model, blocking=SMALL)
    assert contraction_notes(compiled)
    packed = compiled.compilation.scop.array("b_packed")
    assert packed.shape == (2, 3, 2, 7, 32)  # batch, panels of 32 columns, k, lanes
    expected = run_onnxruntime(model, inputs)["y"]
    np.testing.assert_allclose(compiled.run(inputs)["y"], expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("batch", [(1,), (1, 3), (3, 1)])
def test_a_batch_loop_of_one_iteration_keeps_the_recipe(batch):
    """isl simplifies a single-iteration loop's schedule row and strides to 0: that loop
    is a batch loop, not a second reduction."""
    model = matmul_model(13, 7, 40, batch=batch)
    inputs = random_inputs(model, seed=6)
    compiled = polyc.compile(model, blocking=SMALL)
    assert contraction_notes(compiled)
    expected = run_onnxruntime(model, inputs)["y"]
    np.testing.assert_allclose(compiled.run(inputs)["y"], expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_gemm_with_transposed_operands(trans_a, trans_b):
    model = gemm_model(19, 23, 50, trans_a, trans_b)
    inputs = random_inputs(model, seed=4)
    compiled = polyc.compile(model, blocking=SMALL)
    assert contraction_notes(compiled)
    expected = run_onnxruntime(model, inputs)["y"]
    np.testing.assert_allclose(compiled.run(inputs)["y"], expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", ["matmul", "2mm", "3mm"])
def test_polybench_products_with_the_recipe_equal_untiled(name):
    kernel = KERNELS[name]
    params = {p: 20 + 3 * n for n, p in enumerate(kernel.params)}
    arrays = kernel.inputs(seed=5, params=params)
    untiled = kernel.build().compile(params=params, tile=False, fast_math=False).run(arrays)
    tiled = kernel.build().compile(params=params, blocking=(2, 16, 4, 32, 5), fast_math=False)
    assert contraction_notes(tiled)
    for array, value in tiled.run(arrays).items():
        np.testing.assert_array_equal(value, untiled[array], err_msg=f"{name}: {array}")
    expected = kernel.reference(params, arrays)
    for array, value in tiled.run(arrays).items():
        np.testing.assert_allclose(value, expected[array], rtol=RTOL, atol=1e-5)


def test_packed_schedule_passes_the_legality_checker():
    compiled = polyc.compile(matmul_model(20, 9, 40), blocking=SMALL)
    scop = compiled.compilation.scop
    assert {s.name for s in scop.statements} == {
        "S0_matmul_init", "S1_matmul_update", "S1_matmul_update_pack"}
    check_legality(scop, compiled.schedule.schedule)  # raises when a dependence breaks
    text = compiled.inspect()
    assert "register_tile" in text and "// vector" in text


def test_small_or_non_contraction_bands_keep_rectangular_tiling():
    compiled = polyc.compile(matmul_model(2, 9, 40), blocking=SMALL)  # 2 rows < mr
    assert not contraction_notes(compiled)
    np.testing.assert_equal(len(compiled.compilation.scop.statements), 2)


def test_operand_written_during_the_contraction_is_not_packed():
    nest = LoopNest("update_b", params=["N"])
    A, B, C = (nest.array(n, ("N", "N")) for n in "ABC")
    nest.statement("S1", "{ [i, j, k] : 0 <= i, j, k < N }", write=C["i", "j"],
                   expr=C["i", "j"] + A["i", "k"] * B["k", "j"],
                   schedule="{ [i, j, k] -> [i, 0, j, k] }")
    nest.statement("S2", "{ [i, j] : 0 <= i, j < N }", write=B["i", "j"], expr=B["i", "j"] * 2.0,
                   schedule="{ [i, j] -> [i, 1, j, 0] }")
    params = {"N": 40}
    arrays = {n: np.random.default_rng(6).standard_normal((40, 40)).astype(np.float32)
              for n in "ABC"}
    tiled = nest.compile(params=params, blocking=SMALL, fast_math=False)
    assert not contraction_notes(tiled)
    untiled = nest.compile(params=params, tile=False, fast_math=False).run(arrays)
    for array, value in tiled.run(arrays).items():
        np.testing.assert_array_equal(value, untiled[array])


def test_roles_of_a_batched_product():
    c = untiled_contraction(matmul_model(13, 7, 40, batch=(2,)))
    assert (c.batch, c.i, c.j, c.k, c.extents) == ((0,), 1, 2, 3, (2, 13, 40, 7))


def test_blocking_from_the_shape_and_caches():
    c = untiled_contraction(matmul_model(1024, 1024, 1024))
    caches = Caches(48 * 1024, 2048 * 1024, 64 * 1024 ** 2)
    assert choose_blocking(c, caches) == Blocking(mr=6, nr=64, mc=60, nc=512, kc=512)


def test_reduction_blocks_are_equal():
    """The reduction is cut into the fewest equal blocks of at most KC steps (1100 ->
    3 x 367, not 512 + 512 + 76), or taken whole when shorter."""
    caches = Caches(48 * 1024, 1024 * 1024, 32 * 1024 ** 2)
    for k, kc in ((1100, 367), (1152, 384), (320, 320), (20, 20)):
        assert choose_blocking(untiled_contraction(matmul_model(64, k, 128)), caches).kc == kc


def test_blocking_for_threads_takes_a_tile_that_splits_the_columns():
    """Run on threads, 50 rows by 192 columns take 8x48 register tiles, four column
    blocks the threads split at the outermost loop, not the 6x64 tiles of one thread
    (three column blocks: the threads would split the row tiles inside every k block);
    results match onnxruntime."""
    model = matmul_model(50, 1152, 192)
    c = untiled_contraction(model)
    caches = Caches(48 * 1024, 1024 * 1024, 32 * 1024 ** 2)
    one_thread = choose_blocking(c, caches)
    assert (one_thread.mr, one_thread.nr) == (6, 64)
    block = choose_blocking(c, caches, parallel=True)
    assert (block.mr, block.nr, block.nc) == (8, 48, 48)
    compiled = polyc.compile(model, threads=2)
    notes = [d for d in compiled.schedule.decisions if d.startswith("parallel:")]
    assert any(n.endswith("loop i1/48 (c0)") for n in notes), notes
    inputs = random_inputs(model, seed=1)  # sums of 1152 products: within 1e-5 of the
    expected = run_onnxruntime(model, inputs)["y"]  # largest output
    np.testing.assert_allclose(compiled.run(inputs)["y"], expected, rtol=RTOL,
                               atol=1e-5 * np.abs(expected).max())


@pytest.mark.parametrize("columns", [144, 200, 2048])
def test_few_rows_that_seven_divides_take_seven_row_tiles(columns):
    """49 rows (a 1x1 conv at 7x7 as a product) take 7x48 tiles instead of 6x64 with a
    last tile of one row, also when 48 does not divide the columns (a partial column
    tile) on one thread; on threads when the busier of two does less work so (200
    columns: 3 of 5 tiles of 48 against 2 of 4 of 64; 2048: 22 of 43 in blocks of 2
    against 16 of 32). 196 rows keep their tile. Results match onnxruntime on both
    builds."""
    caches = Caches(48 * 1024, 1024 * 1024, 32 * 1024 ** 2)
    model = matmul_model(49, 96, columns)
    c = untiled_contraction(model)
    assert (choose_blocking(c, caches).mr, choose_blocking(c, caches).nr) == (7, 48)
    threads = choose_blocking(c, caches, parallel=True)
    assert ((threads.mr, threads.nr) == (7, 48)) == (columns != 200)
    if columns == 2048:
        assert threads.nc == 2 * 48
    bigger = choose_blocking(untiled_contraction(matmul_model(196, 96, columns)), caches)
    assert bigger.mr != 7
    inputs = random_inputs(model, seed=2)
    expected = run_onnxruntime(model, inputs)["y"]
    for count in (1, 2):
        got = polyc.compile(model, threads=count).run(inputs)["y"]
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("transposed", [False, True])
def test_a_transposed_operand_is_packed_a_vector_of_its_rows_at_a_time(transposed):
    """B = b^T (attention's K^T) is gathered, 16 rows of b per vector: the packing
    copy runs the panel's rows (the reduction, 29) inside each vector of columns, so
    the 16 lines of b a vector reads serve all of them; a B read along the lanes is
    copied row by row, a row's vectors inside. Results match onnxruntime."""
    nodes = [helper.make_node("MatMul", ["a", "bt" if transposed else "b"], ["y"])]
    if transposed:
        nodes.insert(0, helper.make_node("Transpose", ["b"], ["bt"], perm=[1, 0]))
    model = make_model(nodes, [("a", [37, 29]), ("b", [70, 29] if transposed else [29, 70])],
                       ["y"])
    compiled = polyc.compile(model, threads=1)
    lines = compiled.inspect().split("== LOOPS ==")[1].splitlines()
    at = next(k for k, line in enumerate(lines) if "_pack(" in line)
    assert lines[at - 2].strip() == "// vector"
    inner, outer = lines[at - 3], lines[at - 4]  # the two loops around the vector
    rows = re.compile(r"for \(int c\d+ = 0; c\d+ <= 28; ")
    assert bool(rows.search(inner)) == transposed and bool(rows.search(outer)) != transposed
    inputs = random_inputs(model, seed=1)
    expected = run_onnxruntime(model, inputs)["y"]
    np.testing.assert_allclose(compiled.run(inputs)["y"], expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("m", [2, 4])
def test_fewer_rows_than_a_tile_take_a_tile_of_all_of_them(m):
    """A product of 2 or 4 rows and 300 reduction steps (a conv over a few pixels,
    transposed) gets the recipe with an ``m``-row tile of up to 24 accumulators, bit
    for bit the untiled sums; with 50 steps (a small MLP) it does not."""
    model = weight_model(m, 300, 200)
    vectors = min(8, 24 // m)
    compiled = polyc.compile(model)
    assert contraction_notes(compiled)[0].startswith(
        "tiling: contraction S1_matmul_update: w packed into w_packed at compile time, "
        f"register tile {m}x{16 * vectors}")
    inputs = random_inputs(model, seed=3)
    exact = polyc.compile(model, fast_math=False).run(inputs)["y"]
    np.testing.assert_array_equal(exact, polyc.compile(model, tile=False, fast_math=False)
                                  .run(inputs)["y"])
    np.testing.assert_allclose(compiled.run(inputs)["y"], run_onnxruntime(model, inputs)["y"],
                               rtol=RTOL, atol=ATOL)
    assert not contraction_notes(polyc.compile(weight_model(m, 50, 200)))


def test_a_few_rows_take_a_tile_that_divides_them():
    """8 rows by 256 columns: an 8x32 tile (no partial tile) rather than 6x64 and a tile
    of 2 rows, compiled for threads or not; bit for bit the untiled sums without
    fast-math, and onnxruntime's with it (sums of 300 products up to 50 in size: atol
    1e-4)."""
    model = weight_model(8, 300, 256)
    inputs = random_inputs(model, seed=4)
    untiled = polyc.compile(model, tile=False, fast_math=False).run(inputs)["y"]
    expected = run_onnxruntime(model, inputs)["y"]
    for threads in (1, None):
        compiled = polyc.compile(model, threads=threads)
        assert "register tile 8x32," in contraction_notes(compiled)[0]
        np.testing.assert_allclose(compiled.run(inputs)["y"], expected, rtol=RTOL, atol=1e-4)
        exact = polyc.compile(model, threads=threads, fast_math=False).run(inputs)["y"]
        np.testing.assert_array_equal(exact, untiled)


def head_major_model(heads, seq, dim, n):
    """Attention's output projection: a context ``[1, heads, seq, dim]`` back to
    ``[1, seq, heads*dim]`` (Transpose, Reshape) times a constant ``w``."""
    rng = np.random.default_rng(12)
    w = rng.standard_normal((heads * dim, n)).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["ctx"], ["t"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["t", "shape"], ["r"]),
             helper.make_node("MatMul", ["r", "w"], ["y"])]
    shape = np.array([1, seq, heads * dim], np.int64)
    return make_model(nodes, [("ctx", [1, heads, seq, dim])], ["y"],
                      initializers=[("w", w), ("shape", shape)])


def test_an_operand_read_through_divisions_keeps_the_recipe():
    """The head-major context read as ``[seq, heads*dim]`` (``ctx[k/dim, i, k%dim]``,
    divisions in its index) is the product's broadcast operand: the recipe still
    applies, vectorized (5 -> 115 GFLOP/s measured at 8x128x64 @ 512x512), and is bit
    for bit the untiled loops' sums; the packed operand must stay affine."""
    model = head_major_model(4, 20, 16, 48)
    compiled = polyc.compile(model, blocking=SMALL)
    assert contraction_notes(compiled) == [
        "tiling: contraction S1_matmul_update: w packed into w_packed at compile time, "
        f"{SMALL}, prologue S0_matmul_init in its register tiles"]
    inputs = random_inputs(model, seed=5)
    exact = polyc.compile(model, blocking=SMALL, fast_math=False).run(inputs)["y"]
    np.testing.assert_array_equal(exact, polyc.compile(model, tile=False, fast_math=False)
                                  .run(inputs)["y"])
    np.testing.assert_allclose(compiled.run(inputs)["y"], run_onnxruntime(model, inputs)["y"],
                               rtol=RTOL, atol=ATOL)
    c = untiled_contraction(model)
    assert (c.i, c.j, c.k) == (1, 2, 3)


@pytest.mark.parametrize("trans_b", [0, 1])
def test_a_matrix_vector_product_with_constant_weights_takes_the_recipe(trans_b):
    """Batch 1 (no row loop: a classifier), constant weights: the recipe with a tile of
    one row and 128 columns, the weights packed at compile time (a 9216 -> 4096 Gemm,
    1 thread: 12.8 -> 6.2 ms, onnxruntime 6.4); bit for bit the untiled sums without
    fast-math, onnxruntime's within 1e-4 with it."""
    model = weight_model(1, 700, 300, trans_b=trans_b)
    compiled = polyc.compile(model)
    (note,) = contraction_notes(compiled)
    assert "w packed into w_packed at compile time, register tile 1x128," in note
    inputs = random_inputs(model, seed=6)
    exact = polyc.compile(model, fast_math=False).run(inputs)["y"]
    np.testing.assert_array_equal(exact, polyc.compile(model, tile=False, fast_math=False)
                                  .run(inputs)["y"])
    np.testing.assert_allclose(compiled.run(inputs)["y"], run_onnxruntime(model, inputs)["y"],
                               rtol=RTOL, atol=1e-4)


@pytest.mark.parametrize("trans_b", [0, 1])
def test_a_short_matrix_vector_product_takes_the_recipe_when_its_weights_run_across(trans_b):
    """48 reduction steps (a squeeze-excite's 1x1 conv 48 -> 1152 on one pixel): with
    the weights ``[n, k]`` read across the lanes (transB) the recipe packs them (the
    plain loops ran at 1.8 GFLOP/s); read along the lanes as they are, fewer than KC
    steps keep the plain loops."""
    model = weight_model(1, 48, 1152, trans_b=trans_b)
    compiled = polyc.compile(model)
    notes = contraction_notes(compiled)
    if trans_b:
        (note,) = notes
        assert "w packed into w_packed at compile time, register tile 1x128," in note
    else:
        assert notes == []
    inputs = random_inputs(model, seed=7)
    np.testing.assert_allclose(compiled.run(inputs)["y"], run_onnxruntime(model, inputs)["y"],
                               rtol=RTOL, atol=1e-4)


def test_bad_blocking_is_refused():
    model = matmul_model(8, 8, 32)
    for bad, message in [((3, 20, 6, 40, 8), "nr must be a multiple of 8"),
                         ((3, 32, 7, 64, 8), "mc of mr"),
                         ((0, 32, 6, 64, 8), "positive ints"),
                         ((3, 32), r"\(mr, nr, mc, nc, kc\)")]:
        with pytest.raises(PolycError, match=message):
            polyc.compile(model, blocking=bad)


def test_cli_blocking_option(tmp_path, capsys):
    model = matmul_model(20, 9, 40)
    path = tmp_path / "mm.onnx"
    path.write_bytes(model.SerializeToString())
    assert main(["inspect", str(path), "--blocking", "3,32,6,64,8"]) == 0
    assert "register tile 3x32, blocks mc=6 nc=64 kc=8" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["inspect", str(path), "--blocking", "3,32"])
    assert "expected MR,NR,MC,NC,KC" in capsys.readouterr().err


def artifact_round_trip(model, seed: int, path) -> dict:
    """Compile ``model`` with SMALL blocking, save and load it; check that the artifact
    computes what the JIT does; its manifest."""
    inputs = random_inputs(model, seed=seed)
    compiled = polyc.compile(model, blocking=SMALL)
    compiled.save(path)
    loaded = polyc.load(path)
    np.testing.assert_array_equal(loaded.run(inputs)["y"], compiled.run(inputs)["y"])
    return loaded.manifest


def test_packed_contraction_as_an_ahead_of_time_artifact(tmp_path):
    manifest = artifact_round_trip(matmul_model(37, 29, 70), 9, tmp_path / "mm.so")
    assert manifest["scratch_bytes"] >= 29 * 96 * 4  # the packed panels


def matmul_bias_relu_model(m, k, n, *, gemm=False):
    """relu(a @ w + b) as MatMul, Add, Relu, or as Gemm (bias in the init) and Relu."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    if gemm:
        nodes = [helper.make_node("Gemm", ["a", "w", "bias"], ["u"], beta=0.5),
                 helper.make_node("Relu", ["u"], ["y"])]
    else:
        nodes = [helper.make_node("MatMul", ["a", "w"], ["m"]),
                 helper.make_node("Add", ["m", "bias"], ["u"]),
                 helper.make_node("Relu", ["u"], ["y"])]
    return make_model(nodes, [("a", [m, k])], ["y"], initializers=[("w", w), ("bias", bias)])


@pytest.mark.parametrize("gemm", [False, True])
@pytest.mark.parametrize("shape", [(37, 29, 70), (12, 20, 64)])
def test_init_and_activation_run_inside_the_register_tiles(shape, gemm):
    model = matmul_bias_relu_model(*shape, gemm=gemm)
    inputs = random_inputs(model, seed=9)
    compiled = polyc.compile(model, blocking=SMALL)
    init = "S0_gemm_init" if gemm else "S0_matmul_init"
    (note,) = contraction_notes(compiled)
    epilogue = "S2_relu" if gemm else "S3_relu"
    assert note.endswith(f"prologue {init} and epilogue {epilogue} in its register tiles")
    # no band of their own: they run only at the first / last k block, inside the tiles
    assert not [d for d in compiled.schedule.decisions
                if d.startswith("tiling: band") and (init in d or epilogue in d)]
    scop = compiled.compilation.scop
    check_legality(scop, compiled.schedule.schedule)
    expected = run_onnxruntime(model, inputs)["y"]
    np.testing.assert_allclose(compiled.run(inputs)["y"], expected, rtol=RTOL, atol=ATOL)
    untiled = polyc.compile(model, tile=False, fast_math=False).run(inputs)["y"]
    exact = polyc.compile(model, blocking=SMALL, fast_math=False).run(inputs)["y"]
    np.testing.assert_array_equal(exact, untiled)


def test_a_statement_between_contraction_and_epilogue_keeps_it_outside():
    """relu(m) comes after another op that reads m: it is not the child right after the
    contraction in the schedule, so it keeps its own loops."""
    nodes = [helper.make_node("MatMul", ["a", "b"], ["m"]),
             helper.make_node("ReduceSum", ["m"], ["s"], keepdims=0),
             helper.make_node("Relu", ["m"], ["y"])]
    model = make_model(nodes, [("a", [13, 7]), ("b", [7, 40])], ["s", "y"])
    compiled = polyc.compile(model, blocking=SMALL)
    (note,) = contraction_notes(compiled)
    assert "epilogue" not in note
    inputs = random_inputs(model, seed=10)
    expected = run_onnxruntime(model, inputs)
    for name, value in compiled.run(inputs).items():
        np.testing.assert_allclose(value, expected[name], rtol=RTOL, atol=1e-5, err_msg=name)


def test_blocking_per_statement():
    """Only the named contraction gets the given blocking; the other keeps the model's."""
    rng = np.random.default_rng(3)
    w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((29, 70), (70, 40)))
    nodes = [helper.make_node("MatMul", ["a", "w1"], ["h"], name="first"),
             helper.make_node("MatMul", ["h", "w2"], ["y"], name="second")]
    model = make_model(nodes, [("a", [37, 29])], ["y"], initializers=[("w1", w1), ("w2", w2)])
    compiled = polyc.compile(model, blocking={"second": SMALL})
    notes = contraction_notes(compiled)
    assert len(notes) == 2 and str(SMALL) in notes[1] and str(SMALL) not in notes[0]
    inputs = random_inputs(model, seed=3)
    np.testing.assert_allclose(compiled.run(inputs)["y"], run_onnxruntime(model, inputs)["y"],
                               rtol=RTOL, atol=1e-4)
    with pytest.raises(PolycError, match="blocking names 'third'"):
        polyc.compile(model, blocking={"third": SMALL})


def weight_model(m, k, n, *, trans_b=0, batch=()):
    """a @ w with a constant weight ``w`` (Gemm when ``trans_b``, which needs no batch)."""
    rng = np.random.default_rng(11)
    w = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    node = (helper.make_node("Gemm", ["a", "w"], ["y"], transB=1) if trans_b
            else helper.make_node("MatMul", ["a", "w"], ["y"]))
    return make_model([node], [("a", [*batch, m, k])], ["y"], initializers=[("w", w)])


@pytest.mark.parametrize("trans_b", [0, 1])
def test_a_constant_operand_is_packed_at_compile_time(trans_b):
    model = weight_model(37, 29, 70, trans_b=trans_b)
    inputs = random_inputs(model, seed=12)
    compiled = polyc.compile(model, blocking=SMALL)
    assert contraction_notes(compiled)[0].startswith(
        "tiling: contraction S1_gemm_update: w packed into w_packed at compile time"
        if trans_b else
        "tiling: contraction S1_matmul_update: w packed into w_packed at compile time")
    scop = compiled.compilation.scop
    assert not any(s.name.endswith("_pack") for s in scop.statements)  # no copy at run time
    names = {a.name: a for a in scop.arrays}
    assert "w" not in names and names["w_packed"].kind == "constant"
    packed = scop.constants["w_packed"]
    assert packed.shape == (5, 29, 16)  # panels of 16 columns (one vector), k, lanes
    w = run_onnxruntime(model, {"a": np.eye(37, 29, dtype=np.float32)})["y"][:29]
    np.testing.assert_array_equal(packed[4, :, 6:], 0)  # past column 70: zeros
    np.testing.assert_array_equal(packed[1], w[:, 16:32])
    untiled = polyc.compile(model, tile=False, fast_math=False).run(inputs)["y"]
    exact = polyc.compile(model, blocking=SMALL, fast_math=False).run(inputs)["y"]
    np.testing.assert_array_equal(exact, untiled)
    expected = run_onnxruntime(model, inputs)["y"]
    np.testing.assert_allclose(compiled.run(inputs)["y"], expected, rtol=RTOL, atol=ATOL)


def test_a_constant_shared_by_a_batch_is_packed_at_compile_time_once():
    """The panels of a weight that every batch element reads are not repeated per
    batch element (a transposed strided conv's weights, shared by its output rows)."""
    model = weight_model(13, 7, 40, batch=(2, 3))
    inputs = random_inputs(model, seed=13)
    compiled = polyc.compile(model, blocking=SMALL)
    assert "w packed into w_packed at compile time" in contraction_notes(compiled)[0]
    scop = compiled.compilation.scop
    assert scop.constants["w_packed"].shape == (3, 7, 16)  # panels, k, lanes: no batch
    expected = run_onnxruntime(model, inputs)["y"]
    np.testing.assert_allclose(compiled.run(inputs)["y"], expected, rtol=RTOL, atol=ATOL)


def test_batch_loops_of_a_shared_constant_run_inside_its_cache_blocks():
    """Each k block of the panels serves every batch element before the next block
    (the batch loops run inside the k-block loop, which the packing copy of a computed
    B would not allow); results match onnxruntime."""
    model = weight_model(13, 20, 40, batch=(2, 3))
    compiled = polyc.compile(model, blocking=SMALL)
    (update,) = [m for m in union_maps(compiled.schedule.schedule.get_map())
                 if m.get_tuple_name(isl.dim_type.in_).endswith("_update")]
    times = isl.PwMultiAff.from_map(update)
    first = lambda var: min(d for d in range(times.dim(isl.dim_type.out))  # noqa: E731
                            if any(aff.involves_dims(isl.dim_type.in_, var, 1)
                                   for _, aff in times.get_pw_aff(d).get_pieces()))
    assert first(4) < first(0) and first(4) < first(1)  # k (of 20, kc=8) outside b0, b1
    inputs = random_inputs(model, seed=14)
    expected = run_onnxruntime(model, inputs)["y"]
    np.testing.assert_allclose(compiled.run(inputs)["y"], expected, rtol=RTOL, atol=ATOL)


def test_a_constant_packed_at_compile_time_in_an_ahead_of_time_artifact(tmp_path):
    manifest = artifact_round_trip(weight_model(37, 29, 70), 14, tmp_path / "w.so")
    assert manifest["scratch_bytes"] < 29 * 96 * 4  # no panels in scratch


@pytest.mark.parametrize("n", [17, 31])
def test_a_product_narrower_than_every_tile_takes_one_vector_wide_tiles(n):
    """16 to 31 columns (a classifier of 17 tags): tiles one vector wide (24 rows), the
    last columns a masked partial tile; against onnxruntime."""
    rng = np.random.default_rng(n)
    b = rng.standard_normal((256, n)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", [64, 256])],
                       [("y", [64, n])], initializers=[("b", b)])
    compiled = polyc.compile(model, threads=1)
    (note,) = contraction_notes(compiled)
    assert "register tile 24x16" in note
    inputs = random_inputs(model, seed=2)
    expected = run_onnxruntime(model, inputs)["y"]
    np.testing.assert_allclose(compiled.run(inputs)["y"], expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape, trans_b", [((37, 29, 70), 0), ((64, 200, 48), 1),
                                            ((5, 300, 33), 0), ((130, 64, 96), 1)])
def test_products_of_doubles_take_the_recipe(shape, trans_b, threads):
    """float64 Gemm (B transposed or not, partial tiles, fewer rows than a tile) with the
    register-tile recipe of doubles (WIDE_TILES), against numpy's float64 product."""
    from onnx import TensorProto

    m, k, n = shape
    rng = np.random.default_rng(m + n)
    a = rng.standard_normal((m, k))
    b = rng.standard_normal((n, k) if trans_b else (k, n))
    model = make_model([helper.make_node("Gemm", ["a", "b"], ["y"], transB=trans_b)],
                       [("a", [m, k], TensorProto.DOUBLE)], [("y", [m, n], TensorProto.DOUBLE)],
                       initializers=[("b", b)])
    compiled = polyc.compile(model, threads=threads)
    assert contraction_notes(compiled)
    expected = a @ (b.T if trans_b else b)
    np.testing.assert_allclose(compiled.run({"a": a})["y"], expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [64, 24])
def test_full_register_tiles_are_unrolled_by_codegen(n):
    """The rows and vectors of a full register tile stay loops in the AST, named by
    their band's unroll mark (isl unrolling them took 2.6 of resnet18's 3.6 s of AST
    generation), and codegen unrolls them: the optimized product (of a constant B,
    packed at compile time) has no masked load or store (its accumulators stay in
    registers; tiles of 24 columns end in a half vector)."""
    from polyc.runtime.jit import JitModule

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((96, 64), (64, n)))
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", [96, 64])],
                       ["y"], initializers=[("b", b)])
    compiled = polyc.compile(model, threads=1)
    program = str(compiled.compilation.program)
    marks = re.findall(r"// unroll (c\d+) (c\d+)", program)
    assert marks
    for rows, vectors in marks:
        assert f"for (int {rows} = " in program or f"for (int {vectors} = " in program
    c = compiled.compilation
    optimized = JitModule(c.llvm_ir, c.manifest, c.constants).optimized_ir
    assert "llvm.masked" not in optimized and "<16 x float>" in optimized
    (got,) = compiled.run({"a": a}).values()
    # (sums of 64 float32 products of N(0, 1) values: where they cancel, two float32
    # orders differ by ~1e-6; against float64, 1e-5 absolute)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-5)


def test_packed_constants_gathered_by_strides_equal_indexing():
    """``packing._gathered`` (a strided view, padded with zeros where the panels reach
    past the constant) against indexing with the positions themselves, on random
    shapes, signs of strides and offsets reaching either side."""
    from polyc.tiling.packing import _gathered

    rng = np.random.default_rng(11)
    for _ in range(200):
        shape = tuple(int(n) for n in rng.integers(1, 5, size=rng.integers(2, 5)))
        coefficients = [int(k) for k in rng.integers(-6, 7, size=len(shape))]
        value = rng.standard_normal(int(rng.integers(1, 60))).astype(np.float32)
        constant = int(rng.integers(-5, value.size + 5))
        grid = np.indices(shape)
        position = constant + np.tensordot(np.asarray(coefficients), grid, axes=1)
        inside = (position >= 0) & (position < value.size)
        expected = np.where(inside, value[np.clip(position, 0, value.size - 1)], 0)
        got = _gathered(value, coefficients, constant, shape)
        np.testing.assert_array_equal(np.where(inside, got, 0), expected)
        assert got.shape == shape
