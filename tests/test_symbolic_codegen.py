"""Symbolic parameters kept through code generation (``LoopNest.compile(symbolic=...)``):
one compiled nest runs at any value, read from the array shapes; checked against numpy."""

import numpy as np
import pytest

import polyc
from polyc.errors import InputError, NestError, ShapeError
from polyc.scop.nest import LoopNest

RNG = np.random.default_rng(7)
SIZES = (1, 3, 17, 70)


def _matmul(k=256, n=192) -> LoopNest:
    nest = LoopNest("mm", params=["N"])
    a, b, c = nest.array("A", ("N", k)), nest.array("B", (k, n)), nest.array("C", ("N", n))
    nest.statement("S0", f"{{ [i, j] : 0 <= i < N and 0 <= j < {n} }}", write=c["i", "j"],
                   expr=0.0)
    nest.statement("S1", f"{{ [i, j, k] : 0 <= i < N and 0 <= j < {n} and 0 <= k < {k} }}",
                   write=c["i", "j"], expr=c["i", "j"] + a["i", "k"] * b["k", "j"])
    return nest


def _batched(m=24, k=64, n=48) -> LoopNest:
    """C[b] = A[b] @ B[b] with the batch symbolic: B's packed panels are a scratch
    array of symbolic size."""
    nest = LoopNest("bmm", params=["B"])
    x, y = nest.array("X", ("B", m, k)), nest.array("Y", ("B", k, n))
    z = nest.array("Z", ("B", m, n))
    box = f"0 <= b < B and 0 <= i < {m} and 0 <= j < {n}"
    nest.statement("S0", f"{{ [b, i, j] : {box} }}", write=z["b", "i", "j"], expr=0.0)
    nest.statement("S1", f"{{ [b, i, j, k] : {box} and 0 <= k < {k} }}", write=z["b", "i", "j"],
                   expr=z["b", "i", "j"] + x["b", "i", "k"] * y["b", "k", "j"])
    return nest


def _random(*shape):
    return RNG.standard_normal(shape, dtype=np.float32)


@pytest.mark.parametrize("tile", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_matmul_with_symbolic_rows_runs_at_every_size(tile, threads):
    compiled = _matmul().compile(symbolic=["N"], tile=tile, threads=threads)
    assert compiled.manifest["params"] == ["N"]
    assert compiled.manifest["outputs"][0]["shape"] == ["N", 256]
    if tile:
        assert any("register tile" in d for d in compiled.schedule.decisions)
    for n in SIZES:
        a, b = _random(n, 256), _random(256, 192)
        out = compiled.run({"A": a, "B": b})
        np.testing.assert_allclose(out["C"], a @ b, rtol=1e-4, atol=1e-4)


def test_symbolic_batch_has_a_scratch_size_function():
    compiled = _batched().compile(symbolic=["B"])
    assert compiled.manifest["scratch_bytes"] == "polyc_scratch_bytes"
    assert compiled.compilation.plan.symbolic  # the packed panels of Y, per batch
    for batch in (1, 4, 9):
        x, y = _random(batch, 24, 64), _random(batch, 64, 48)
        out = compiled.run({"X": x, "Y": y})
        np.testing.assert_allclose(out["Z"], x @ y, rtol=1e-4, atol=1e-4)


def test_artifact_round_trip_and_disagreeing_inputs(tmp_path):
    compiled = _batched().compile(symbolic=["B"], threads=2)
    path = tmp_path / "bmm.so"
    compiled.save(path)
    loaded = polyc.load(path)
    for batch in (2, 5):
        x, y = _random(batch, 24, 64), _random(batch, 64, 48)
        np.testing.assert_allclose(loaded.run({"X": x, "Y": y})["Z"], x @ y, rtol=1e-4,
                                   atol=1e-4)
    with pytest.raises(InputError, match="inputs must agree on B"):
        loaded.run({"X": _random(2, 24, 64), "Y": _random(3, 64, 48)})


def test_values_and_symbolic_parameters_are_checked():
    nest = _matmul()
    with pytest.raises(NestError, match="unknown parameter M"):
        nest.compile(symbolic=["M"])
    with pytest.raises(NestError, match="given a value and kept symbolic"):
        nest.compile(params={"N": 3}, symbolic=["N"])


def test_a_symbolic_extent_must_be_a_parameter():
    nest = LoopNest("pad", params=["N"])
    a, b = nest.array("A", ("N + 2",)), nest.array("B", ("N",))
    nest.statement("S", "{ [i] : 0 <= i < N }", write=b["i"], expr=a["i"] + a["i + 2"])
    with pytest.raises(ShapeError, match="extent 'N \\+ 2'"):
        nest.compile(symbolic=["N"])
    out = nest.compile(params={"N": 5}).run({"A": np.arange(7, dtype=np.float32)})
    np.testing.assert_array_equal(out["B"], np.arange(5) * 2 + 2)


@pytest.mark.parametrize("tile", [True, False])
def test_symbolic_inner_extents_are_addressed_per_dim(tile):
    """``B[j, i] = 2 * A[i, j] + A[i, N - 1 - j]`` with A of shape (3, N, M): the
    strides of A and B involve N and M, so codegen linearizes indices at run time."""
    nest = LoopNest("t", params=["N", "M"])
    a, b = nest.array("A", (3, "N", "M")), nest.array("B", ("M", "N", 3))
    nest.statement("S", "{ [c, i, j] : 0 <= c < 3 and 0 <= i < N and 0 <= j < M }",
                   write=b["j", "i", "c"], expr=a["c", "i", "j"] * 2.0 + a["c", "i", "M - 1 - j"])
    compiled = nest.compile(symbolic=["N", "M"], tile=tile)
    assert compiled.manifest["params"] == ["N", "M"]
    for n, m in ((1, 1), (5, 37), (20, 3)):
        x = _random(3, n, m)
        out = compiled.run({"A": x})["B"]
        np.testing.assert_allclose(out, (2 * x + x[:, :, ::-1]).transpose(2, 1, 0), rtol=1e-6)
