"""Choosing a loop nest's schedule (polyc.autoselect): the cost model of
polyc.scheduler.cost (statement instances over the vector lanes of their innermost
loop) on schedules whose vectorization is known, the choice it makes, and that the
chosen code computes what the reference does. Tests check what is chosen by the
model's numbers, never timings."""

from __future__ import annotations

import numpy as np
import pytest

from polyc.errors import PolycError
from polyc.pipeline import Options, _Stages, lower_scop
from polyc.scheduler.cost import MARGIN, Estimate, choose, estimate
from polyc.scop.polybench import KERNELS


def lowered(name: str, **options):
    kernel = KERNELS[name]
    scop = kernel.build().scop()
    return kernel, lower_scop(scop, Options(params=kernel.params, threads=1, **options),
                              _Stages())


def model_note(compilation) -> str:
    (note,) = [d for d in compilation.schedule.decisions if d.startswith("autoselect")]
    return note


def test_a_skewed_stencil_is_scalar_and_the_original_order_runs_in_lanes():
    """jacobi-1d: Pluto fuses its two statements in a skewed loop that carries their
    dependences (no lanes); the original order's two i loops are parallel, stride 1."""
    _, pluto = lowered("jacobi-1d", tile=False)
    _, original = lowered("jacobi-1d", scheduler="original", tile=False)
    skewed = estimate(pluto.scop, pluto.schedule.schedule)
    plain = estimate(original.scop, original.schedule.schedule)
    assert skewed.vectorized == () and set(skewed.scalar) == {"S1", "S2"}
    assert set(plain.vectorized) == {"S1", "S2"}
    assert skewed.cost == pytest.approx(16 * plain.cost)  # float32: 16 lanes


def test_the_model_keeps_a_vectorized_product_and_leaves_a_skewed_stencil():
    """matmul: Pluto's j innermost runs in lanes, the original k innermost reads B
    with a stride of a row (a gather). (PolyBench's gemm keeps its contraction
    recipe: tests/test_c_frontend.py.)"""
    _, matmul = lowered("matmul", autoselect="model")
    assert model_note(matmul).endswith("-> pluto")
    kernel, jacobi = lowered("jacobi-1d", autoselect="model")
    assert model_note(jacobi).endswith("-> original")
    assert jacobi.schedule.scheduler == "original"


def test_a_reduction_runs_in_lanes_with_fast_math_only():
    _, compilation = lowered("trisolv", scheduler="original", tile=False)
    scop, tree = compilation.scop, compilation.schedule.schedule
    fast = estimate(scop, tree, fast_math=True)
    strict = estimate(scop, tree, fast_math=False)
    assert set(strict.vectorized) < set(fast.vectorized)


def test_choose_keeps_the_first_unless_another_is_cheaper_by_the_margin():
    def e(cost):
        return Estimate(cost, (), ())
    assert choose([e(100.0), e(100.0 / MARGIN * 1.01)]) == 0
    assert choose([e(100.0), e(100.0 / MARGIN * 0.99), e(10.0)]) == 2
    assert choose([e(10.0), e(100.0)]) == 0


@pytest.mark.parametrize("name", ["jacobi-1d", "trisolv", "matmul", "fdtd-2d", "lu"])
def test_the_chosen_schedule_computes_the_reference(name):
    kernel = KERNELS[name]
    compiled = kernel.build().compile(params=kernel.params, autoselect="model", threads=1)
    assert any(d.startswith("autoselect: model") for d in compiled.schedule.decisions)
    inputs = kernel.inputs(seed=3)
    expected = kernel.reference(kernel.params, inputs)
    actual = compiled.run(inputs)
    for array, value in expected.items():
        np.testing.assert_allclose(actual[array], value, rtol=1e-4, atol=1e-4, err_msg=array)


def test_autoselect_is_checked():
    kernel = KERNELS["matmul"]
    with pytest.raises(PolycError, match="autoselect must be one of None, model, measure"):
        kernel.build().compile(params=kernel.params, autoselect="fastest")


@pytest.mark.parametrize("l2, vectors_win, chosen", [(64 << 10, 100, "pluto"),
                                                      (64 << 10, None, "original"),
                                                      (1 << 30, 100, "original")])
def test_tiles_are_kept_where_data_reused_exceeds_l2(monkeypatch, l2, vectors_win, chosen):
    """PolyBench's jacobi-2d (SMALL: two 0.06 MB arrays, 38 statement instances per
    element) with the innermost point loop of its tiles left fused
    (:func:`polyc.tiling.stencil.distribution` off): the original order vectorizes
    both statements, Pluto's skewed tiles neither; the model's vectors prefer the
    original, and arrays larger than L2 keep the tiles (PolyBench's cholesky at LARGE
    had run 1.25x slower untiled) unless the vectors make the original
    :data:`VECTORS_WIN` times cheaper (here 8x: the original wins by default, and with
    the threshold raised the tiles are kept)."""
    from polyc import autoselect
    from polyc.scop.c import from_c
    from polyc.tiling import stencil
    from polyc.tiling.cache import Caches

    from c_reference import POLYBENCH, UTILITIES
    monkeypatch.setattr(autoselect, "host_caches", lambda: Caches(32 << 10, l2, 32 << 20))
    monkeypatch.setattr(stencil, "distribution", lambda band, deps: ())
    if vectors_win is not None:
        monkeypatch.setattr(autoselect, "VECTORS_WIN", vectors_win)
    kernel = from_c(POLYBENCH / "stencils" / "jacobi-2d" / "jacobi-2d.c",
                    defines=["SMALL_DATASET"], include=[UTILITIES])
    note = model_note(kernel.compile().compilation)
    assert note.endswith(f"-> {chosen}")
    assert ("the tiles kept" in note) == (chosen == "pluto")


def test_a_kernel_that_reads_each_element_once_is_not_tiled(tmp_path):
    """PolyBench's trisolv does about one statement instance per element (the
    triangle of L once): the chosen schedule stays untiled (tiles keep nothing for
    later and cut the rows the prefetcher streams), and computes what cc does."""
    from test_c_frontend import check_against_cc

    from polyc.scop.c import from_c

    from c_reference import POLYBENCH, UTILITIES, reference_library
    source = POLYBENCH / "linear-algebra" / "solvers" / "trisolv" / "trisolv.c"
    kernel = from_c(source, defines=["SMALL_DATASET"], include=[UTILITIES])
    compiled = kernel.compile(threads=1)
    note = model_note(compiled.compilation)
    assert "instances per element: untiled" in note and note.endswith("-> pluto, untiled")
    assert "tiling: off" in compiled.schedule.decisions
    library = reference_library(source, tmp_path, defines=["SMALL_DATASET"],
                                includes=[UTILITIES], extra=[UTILITIES / "polybench.c"])
    check_against_cc(kernel, library)
