"""Every strategy of the automatic tiling is a switch (``without=``): each one named
leaves its notes out of the decisions, the others stay, results stay right, and an
unknown name is a PolycError listing the strategies."""

import numpy as np
import pytest

from polyc.cli import main
from polyc.errors import PolycError
from polyc.scheduler import check_legality
from polyc.scop.polybench import KERNELS
from polyc.strategies import STRATEGIES

STENCIL = ("jacobi-1d", {"T": 20, "N": 3000})


def compiled(name, params, **options):
    kernel = KERNELS[name]
    result = kernel.build().compile(params=params, threads=1, **options)
    check_legality(result.compilation.scop, result.schedule.schedule)
    arrays = kernel.inputs(seed=2, params=params)
    out = result.run(arrays)
    for array, value in kernel.reference(params, arrays).items():
        np.testing.assert_allclose(out[array], value, rtol=1e-4, atol=1e-4)
    return [d for d in result.schedule.decisions if d.startswith("tiling")]


def test_the_stencil_strategies_turn_off_one_by_one():
    notes = " ".join(compiled(*STENCIL))
    assert "diamond tiles" in notes and "distributed over S1, S2" in notes
    plain = " ".join(compiled(*STENCIL, without=("diamond",)))
    assert "diamond tiles" not in plain and "wavefront over tile loops" in plain
    assert "distributed over S1, S2" in plain
    notes = compiled(*STENCIL, without=("wavefront", "distribute", "diamond"))
    assert notes[-1] == "tiling: without diamond, distribute, wavefront"
    fused = " ".join(notes[:-1])
    assert "distributed" not in fused and "wavefront" not in fused and "diamond" not in fused


def test_without_the_recipe_a_contraction_is_tiled_like_any_band():
    params = {"M": 64, "N": 48, "K": 40}
    assert any("contraction S2" in n for n in compiled("matmul", params))
    notes = compiled("matmul", params, without=["recipe"])
    assert not any("contraction" in n for n in notes)
    assert any("band of S2" in n for n in notes)


def test_an_unknown_strategy_is_named():
    with pytest.raises(PolycError, match="unknown strategy 'diamonds' in without=; "
                                         "the strategies are inline, recipe, diamond"):
        KERNELS["matmul"].build().compile(params={"M": 4, "N": 4, "K": 4},
                                          without=("diamonds",))
    assert set(STRATEGIES) == {"inline", "recipe", "diamond", "wavefront", "distribute",
                               "reorder", "inward"}


def test_the_command_line_takes_without(capsys):
    assert main(["inspect", "jacobi-1d", "--param", "N=3000", "--param", "T=20",
                 "--without", "diamond,wavefront"]) == 0
    shown = capsys.readouterr().out
    assert "tiling: without diamond, wavefront" in shown and "diamond tiles" not in shown


def test_without_inlining_every_temporary_is_stored():
    from onnx import helper

    import polyc

    from onnx_helpers import make_model
    model = make_model([helper.make_node("Add", ["x", "x"], ["t"]),
                        helper.make_node("Relu", ["t"], ["y"])],
                       [("x", [16, 32])], [("y", [16, 32])])
    inlined = polyc.compile(model, cache=False)
    stored = polyc.compile(model, cache=False, without=["inline"])
    assert "inline" in dict(inlined.compilation.times)
    assert "inline" not in dict(stored.compilation.times)
    assert len(stored.compilation.scop.statements) == len(inlined.compilation.scop.statements) + 1
    x = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)
    np.testing.assert_array_equal(stored.run({"x": x})["y"], np.maximum(x + x, 0))
    np.testing.assert_array_equal(inlined.run({"x": x})["y"], np.maximum(x + x, 0))
