"""The Pluto scheduler on PolyBench-style kernels: Pluto's published transformations,
legality, and results equal to the original loop order.

Schedules are compared as isl maps for the transformations Pluto's papers print, and
as golden Pluto notation for all kernels. Every kernel is then compiled with the
"pluto", "isl" and "original" schedulers without fast-math: a legal schedule keeps
the order of every dependent pair, float sums included, so the three results must be
bit-identical. Against the numpy reference (same loops, numpy's float32 arithmetic):
``rtol=1e-5, atol=1e-6``.
"""

import re

import islpy as isl
import numpy as np
import pytest

from polyc.fusion.groups import fuse
from polyc.notation import pluto_notation
from polyc.scheduler import check_legality, schedule
from polyc.scop.dependences import compute_dependences
from polyc.scop.polybench import KERNELS

RTOL, ATOL = 1e-5, 1e-6

# Pluto's transformations as isl maps (domains are intersected in): the list.
PLUTO_MAPS = {
    "matmul": "{ S1[i, j] -> [0, i, j, 0]; S2[i, j, k] -> [1, i, j, k] }",
    # S1(t, i) reads A[i - 1] before S2(t, i - 1) writes it, at the same (t, 2t + i):
    # the scalar dimension that orders them is part of Pluto's output too.
    "jacobi-1d": "{ S1[t, i] -> [t, 2t + i, 0]; S2[t, i] -> [t, 2t + i + 1, 1] }",
    "jacobi-2d": "{ S1[t, i, j] -> [t, 2t + i, 2t + j]; "
                "S2[t, i, j] -> [t, 2t + i + 1, 2t + j + 1] }",
    "seidel-2d": "{ S1[t, i, j] -> [t, t + i, 2t + i + j] }",
    "heat-3d": "{ S1[t, i, j, k] -> [t, t + i, t + j, t + k] }",
}

# Pluto notation of every kernel under smartfuse, and the coincidence flags of its
# bands in order ('p' parallel, 's' sequential).
GOLDEN = {
    "matmul": (["T(S1): (0, i, j, 0)", "T(S2): (1, i, j, k)"], ["pp", "pps"]),
    "jacobi-1d": (["T(S1): (t, 2*t + i, 0)", "T(S2): (t, 2*t + i + 1, 1)"], ["ss"]),
    "jacobi-2d": (["T(S1): (t, 2*t + i, 2*t + j)", "T(S2): (t, 2*t + i + 1, 2*t + j + 1)"],
                 ["sss"]),
    "seidel-2d": (["T(S1): (t, t + i, 2*t + i + j)"], ["sss"]),
    "heat-3d": (["T(S1): (t, t + i, t + j, t + k)"], ["ssss"]),
    # Pluto's fdtd-2d: one 3-d band for all four statements, hz shifted by one.
    "fdtd-2d": (["T(S1): (t, t + j, t)", "T(S2): (t, t + j, t + i)",
                "T(S3): (t, t + j, t + i)", "T(S4): (t, t + j + 1, t + i + 1)"], ["sss"]),
    "lu": (["T(S1): (k, j, k)", "T(S2): (k, j, i)"], ["sss"]),
    "mvt": (["T(S1): (i, j)", "T(S2): (i, j)"], ["ps"]),
    # Pluto's gemver: S1 interchanged so that S2 can fuse with it.
    "gemver": (["T(S1): (0, j, i, 0)", "T(S2): (0, i, j, 1)", "T(S3): (1, i, 0, 0)",
                "T(S4): (2, i, j, 0)"], ["ps", "p", "ps"]),
    "2mm": (["T(S1): (0, i, j, 0)", "T(S2): (1, i, j, k)", "T(S3): (2, i, l, 0)",
             "T(S4): (3, i, l, j)"], ["pp", "pps", "pp", "pps"]),
    "3mm": (["T(S1): (0, i, j, 0)", "T(S2): (1, i, j, k)", "T(S3): (2, i, j, 0)",
             "T(S4): (3, i, j, k)", "T(S5): (4, i, j, 0)", "T(S6): (5, i, j, k)"],
            ["pp", "pps", "pp", "pps", "pp", "pps"]),
    # sum[] is shared by all (r, q): r and q are sequential bands of their own.
    "doitgen": (["T(S1): (r, q, 0, p, 0, 0)", "T(S2): (r, q, 0, p, s, 1)",
                 "T(S3): (r, q, 1, p, 0, 0)"], ["s", "s", "ps", "p"]),
    "trisolv": (["T(S1): (0, i, 0)", "T(S2): (1, i, j)", "T(S3): (1, i, i)"], ["p", "ss"]),
    "fusion": (["T(S1): (0, i, j, 0)", "T(S2): (0, i, j, 1)", "T(S3): (1, i, 0, 0)"],
               ["pp", "p"]),
    "independent": (["T(S1): (i, j)", "T(S2): (i, j)", "T(S3): (i, j)"], ["pp"]),
}

FUSION_POLICIES = {
    "none": ["T(S1): (0, i, j)", "T(S2): (1, i, j)", "T(S3): (2, i, 0)"],
    "smart": ["T(S1): (0, i, j, 0)", "T(S2): (0, i, j, 1)", "T(S3): (1, i, 0, 0)"],
    "max": ["T(S1): (i, 0, j, 0)", "T(S2): (i, 0, j, 1)", "T(S3): (i, 1, 0, 0)"],
}


def _scop(name):
    return compute_dependences(KERNELS[name].build().scop())


def _pluto(scop, policy="smart"):
    result = schedule(scop, fuse(scop, policy=policy), scheduler="pluto")
    check_legality(scop, result.schedule)
    return result


def _band_flags(result):
    return [d.split("[", 1)[1].split("]", 1)[0] for d in result.decisions if " band [" in d]


def test_every_kernel_has_a_golden_schedule():
    assert set(GOLDEN) == set(KERNELS)


@pytest.mark.parametrize("name", sorted(PLUTO_MAPS))
def test_pluto_finds_the_published_transformation(name):
    scop = _scop(name)
    found = _pluto(scop).schedule.get_map()
    expected = isl.UnionMap.read_from_str(scop.ctx, PLUTO_MAPS[name]).intersect_domain(
        scop.domain).align_params(found.get_space())
    assert found.is_equal(expected), f"{name}: {found}"


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_pluto_schedule_and_bands(name):
    scop = _scop(name)
    result = _pluto(scop)
    notation, flags = GOLDEN[name]
    assert pluto_notation(result.schedule, scop).splitlines() == notation
    assert _band_flags(result) == flags
    assert not any("fell back" in d for d in result.decisions)


@pytest.mark.parametrize("policy", sorted(FUSION_POLICIES))
def test_fusion_policies_give_their_own_structure(policy):
    scop = _scop("fusion")
    assert pluto_notation(_pluto(scop, policy).schedule, scop).splitlines() == \
        FUSION_POLICIES[policy]


def test_pluto_fusion_policy_names_are_accepted():
    scop = _scop("fusion")
    for alias, policy in [("nofuse", "none"), ("smartfuse", "smart"), ("maxfuse", "max")]:
        assert pluto_notation(_pluto(scop, alias).schedule, scop).splitlines() == \
            FUSION_POLICIES[policy]


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_isl_schedule_is_legal_on_the_same_scop(name):
    scop = _scop(name)
    result = schedule(scop, fuse(scop, policy="smart"), scheduler="isl")
    check_legality(scop, result.schedule)
    assert result.schedule.get_domain().is_equal(scop.domain)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_transformed_code_equals_original_bit_for_bit(name):
    kernel = KERNELS[name]
    arrays = kernel.inputs(seed=11)
    given = {k: v.copy() for k, v in arrays.items()}
    results = {}
    for scheduler in ("original", "pluto", "isl"):
        compiled = kernel.build().compile(params=kernel.params, scheduler=scheduler,
                                          fast_math=False)
        results[scheduler] = compiled.run(arrays)
    for k, v in given.items():  # run() copies: the caller's arrays are untouched
        np.testing.assert_array_equal(arrays[k], v)
    expected = kernel.reference(kernel.params, arrays)
    assert set(results["original"]) == set(expected)
    for array, value in expected.items():
        np.testing.assert_allclose(results["original"][array], value, rtol=RTOL, atol=ATOL,
                                   err_msg=f"{name}: {array}")
        for scheduler in ("pluto", "isl"):
            np.testing.assert_array_equal(results[scheduler][array], results["original"][array],
                                          err_msg=f"{name}: {array} under {scheduler}")


@pytest.mark.parametrize("name", ["jacobi-2d", "gemver", "lu"])
def test_fast_math_results_stay_close(name):
    kernel = KERNELS[name]
    arrays = kernel.inputs(seed=12)
    compiled = kernel.build().compile(params=kernel.params)
    assert " reassoc contract arcp float " in compiled.compilation.llvm_ir
    strict = kernel.build().compile(params=kernel.params, fast_math=False)
    assert "reassoc" not in strict.compilation.llvm_ir
    assert re.search(r"= f(add|sub|mul) float ", strict.compilation.llvm_ir)
    out = compiled.run(arrays)
    for array, value in kernel.reference(kernel.params, arrays).items():
        np.testing.assert_allclose(out[array], value, rtol=RTOL, atol=ATOL)
