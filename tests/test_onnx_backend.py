"""The onnx package's backend test suite through polyc: the part CI runs.

``python -m polyc.conformance`` runs the whole suite (four kinds, about 2,000 cases, in
worker processes) and prints the numbers (README, Conformance). These tests apply the
same classification (:func:`polyc.conformance.run_case`) in process to:

- every case whose ops polyc lowers, decided from the op table (``polyc.frontend.ops.OPS``
  at the case's opset, as ``onnx.defs`` versions each op), so that a newly lowered op
  brings its cases in by itself: each passes, or is listed in ``KNOWN_DIFFERENCES`` with
  its reason (and a listed case that passes must leave the list). Should there be more
  than :data:`CI_CASES` of them, CI runs a deterministic subset (:func:`ci_subset`):
  the first case (by name) of every set of ops a model uses, then the second, and so
  on, until :data:`CI_CASES` are chosen;
- every case using an op without a lowering (each is refused in milliseconds): each is
  refused with one of polyc's own errors, never a crash, another exception or a wrong
  answer.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from polyc.backend import PolycBackend
from polyc.conformance import (
    EXCLUDED,
    FAIL,
    KNOWN_DIFFERENCES,
    PASS,
    case_model,
    load_cases,
    run_case,
    unlowered_ops,
)

from onnx_helpers import make_model

# At about 0.1 s a case, 500 cases take under 1.5 minutes.
CI_CASES = 500


def ci_subset(cases, limit: int) -> list:
    """``cases`` if there are at most ``limit``; else ``limit`` of them, taken round-robin
    over the groups of cases whose models use the same set of ops (in name order)."""
    if len(cases) <= limit:
        return list(cases)
    groups = defaultdict(list)
    for case in sorted(cases, key=lambda c: (c.kind, c.name)):
        groups[frozenset(n.op_type for n in case_model(case).graph.node)].append(case)
    rounds = itertools.zip_longest(*groups.values())
    chosen = [case for round_ in rounds for case in round_ if case is not None][:limit]
    return sorted(chosen, key=lambda c: (c.kind, c.name))


# Written by ``python -m polyc.conformance --passing tests/conformance_passing.txt``.
PASSING = frozenset(Path(__file__).with_name("conformance_passing.txt").read_text().split())

CASES = load_cases()
LOWERED = [case for case in CASES if not unlowered_ops(case_model(case))]
UNLOWERED = [case for case in CASES if unlowered_ops(case_model(case))]


@pytest.mark.parametrize("case", ci_subset(LOWERED, CI_CASES), ids=lambda c: c.name)
def test_case_with_lowered_ops_passes(case):
    """The case's data sets at the suite's own tolerances (rtol 1e-3, atol 1e-7 unless
    the case says otherwise), or its listed known difference. A case may still be
    refused with polyc's own error (a dtype, an attribute value), unless it is one of the
    cases that passed when ``PASSING`` was written: those must keep passing."""
    result = run_case(case)
    if case.name in KNOWN_DIFFERENCES:
        assert result.status == EXCLUDED, \
            result.reason or f"{case.name} passes now: remove it from KNOWN_DIFFERENCES"
    elif f"{case.kind}/{case.name}" in PASSING:
        assert result.status == PASS, result.reason
    else:
        assert result.status != FAIL, result.reason


def test_cases_with_unlowered_ops_are_refused_cleanly():
    """Every case with an op polyc does not lower ends in a PolycError (or passes, when
    clean-up folds the op away): never a crash, another exception or a wrong answer."""
    results = [run_case(case) for case in UNLOWERED]
    failed = [f"{r.name}: {r.reason}" for r in results if r.status == FAIL]
    assert failed == []


def test_known_differences_name_cases_with_lowered_ops():
    """Every entry names a case CI runs: none is a typo or hides an unlowered op."""
    assert set(KNOWN_DIFFERENCES) - {case.name for case in LOWERED} == set()
    assert all(KNOWN_DIFFERENCES.values())


def test_ci_subset_takes_every_op_set_first():
    subset = ci_subset(LOWERED, 20)
    assert len(subset) == 20
    assert subset == ci_subset(LOWERED, 20)  # deterministic
    op_sets = {frozenset(n.op_type for n in case_model(c).graph.node) for c in LOWERED}
    chosen = {frozenset(n.op_type for n in case_model(c).graph.node) for c in subset}
    assert len(chosen) == min(20, len(op_sets))
    assert ci_subset(LOWERED[:5], 20) == LOWERED[:5]


def test_suite_has_lowered_and_unlowered_cases():
    kinds = {case.kind for case in CASES}
    assert kinds == {"node", "simple", "pytorch-converted", "pytorch-operator"}
    assert len(LOWERED) >= 189 and len(UNLOWERED) > 0


def test_backend_takes_positional_inputs_and_binds_int64_inputs():
    model = make_model([helper.make_node("Reshape", ["x", "shape"], ["y"])],
                       [("x", (2, 3)), ("shape", (2,), TensorProto.INT64)], [("y", (3, 2))])
    rep = PolycBackend.prepare(model)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = rep.run([x, np.array([3, 2])])
    np.testing.assert_array_equal(y, x.reshape(3, 2))
    (y,) = rep.run({"x": x, "shape": np.array([-1, 2])})
    np.testing.assert_array_equal(y, x.reshape(3, 2))
    assert PolycBackend.supports_device("CPU") and not PolycBackend.supports_device("CUDA")
