"""The conformance runner itself: comparison, reasons, classification, isolation, reports.

The suite's cases through polyc are in ``test_onnx_backend.py``; here small made-up cases
and backends check each piece of ``polyc.conformance``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from onnx.backend.test.case.test_case import TestCase

from polyc.backend import PolycBackendRep
from polyc.conformance import (
    EXCLUDED,
    FAIL,
    KNOWN_DIFFERENCES,
    PASS,
    Result,
    compare,
    error_reason,
    pool,
    run_case,
    run_cases,
)
from polyc.conformance.report import counts, markdown, summary
from polyc.errors import (
    IllegalScheduleError,
    ModelError,
    UnsupportedDtypeError,
    UnsupportedOpError,
)

from onnx_helpers import make_model

ROOT = Path(__file__).resolve().parents[1]
X = np.array([[1.0, -2.0], [3.0, -4.0]], dtype=np.float32)


def relu_case(name="test_made_up", expected=None) -> TestCase:
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", (2, 2))],
                       [("y", (2, 2))])
    expected = np.maximum(X, 0) if expected is None else expected
    return TestCase(name=name, model_name=name, url=None, model_dir=None, model=model,
                    data_sets=[([X], [expected])], kind="node", rtol=1e-3, atol=1e-7)


def raising_backend(error: Exception):
    class Backend:
        @staticmethod
        def prepare(model):
            raise error

    return Backend


# -- compare ------------------------------------------------------------------------------

def test_compare_accepts_values_within_tolerance_and_equal_nans():
    want = np.array([1.0, np.nan, 3.0], dtype=np.float32)
    got = want * np.float32(1 + 1e-4)
    assert compare([got], [want], rtol=1e-3, atol=1e-7) == ""


@pytest.mark.parametrize("got, want, message", [
    (np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32),
     "output 0: shape (2, 3), expected (3, 2)"),
    (np.zeros(3, np.float32), np.zeros(3, np.int64), "output 0: dtype float32, expected int64"),
    (np.array([1, 2, 3, 5], np.float32), np.array([1, 2, 3, 4], np.float32),
     "output 0: Mismatched elements: 1 / 4 (25%); Max absolute difference: 1."),
    (np.zeros(2, np.float32), [np.zeros(2, np.float32)],
     "output 0: a ndarray, expected a sequence"),
])
def test_compare_names_what_differs(got, want, message):
    assert compare([got], [want], rtol=1e-3, atol=1e-7).startswith(message)


def test_compare_counts_outputs_and_walks_sequences():
    one = np.ones(2, np.float32)
    assert compare([one], [one, one], rtol=1e-3, atol=0) == "1 outputs, expected 2"
    assert compare([[one, one]], [[one, one]], rtol=1e-3, atol=0) == ""
    assert compare([[one, 2 * one]], [[one, one]], rtol=1e-3, atol=0).startswith(
        "output 0: output 1: Mismatched elements: 2 / 2")
    assert compare([None], [None], rtol=1e-3, atol=0) == ""


# -- reasons ------------------------------------------------------------------------------

@pytest.mark.parametrize("error, reason", [
    (UnsupportedOpError("Conv", "conv_7", 13), "UnsupportedOpError: op Conv"),
    (UnsupportedOpError("Conv", "c", 13, "no lowering for this op"), "UnsupportedOpError: op Conv"),
    (UnsupportedOpError("Gemm", "g", 13, "attribute(s) foo not supported"),
     "UnsupportedOpError: op Gemm (attribute(s) foo not supported)"),
    (UnsupportedOpError("Reshape", "r", 13, "input 'shape' must be a constant, but 'x' is "
                                            "a graph input"),
     "UnsupportedOpError: op Reshape (input '…' must be a constant, but '…' is a graph input)"),
    (UnsupportedOpError("Foo", "f", 13, "domain 'com.x' is not supported"),
     "UnsupportedOpError: op Foo (domain 'com.x' is not supported)"),
    (UnsupportedDtypeError("graph input 'a' has dtype float16; polyc compiles float32, "
                           "int64, int32 and bool only"),
     "UnsupportedDtypeError: float16"),
    (UnsupportedDtypeError("graph output 'b' is of sequence_type type; polyc compiles ..."),
     "UnsupportedDtypeError: sequence"),
    (ModelError("<ModelProto> uses opset 9 of the default ONNX domain; polyc supports "
                "opsets 11 to 28\nmore"),
     "ModelError: the model uses opset 9 of the default ONNX domain; polyc supports "
     "opsets 11 to 28"),
])
def test_error_reason_groups_polyc_errors(error, reason):
    assert error_reason(error) == reason


# -- one case -----------------------------------------------------------------------------

def test_run_case_passes_a_right_answer_and_fails_a_wrong_one():
    assert run_case(relu_case()).status == PASS
    result = run_case(relu_case(expected=X))
    assert (result.status, result.kind, result.name) == (FAIL, "node", "test_made_up")
    assert result.reason.startswith("wrong answer: output 0: Mismatched elements: 2 / 4")


def test_run_case_excludes_a_known_difference(monkeypatch):
    monkeypatch.setitem(KNOWN_DIFFERENCES, "test_made_up", "documented deviation")
    result = run_case(relu_case(expected=X))
    assert (result.status, result.reason) == (EXCLUDED, "known difference: documented deviation")


@pytest.mark.parametrize("error, status, reason", [
    (UnsupportedOpError("Conv", "c", 13), EXCLUDED, "UnsupportedOpError: op Conv"),
    (IllegalScheduleError("S1 runs before S0"), FAIL,
     "compiler error: IllegalScheduleError: S1 runs before S0"),
    (KeyError("boom"), FAIL, "error: KeyError: 'boom'"),
])
def test_run_case_classifies_errors(error, status, reason, monkeypatch):
    monkeypatch.setitem(KNOWN_DIFFERENCES, "test_made_up", "only for wrong answers")
    result = run_case(relu_case(), raising_backend(error))
    assert (result.status, result.reason) == (status, reason)


def test_run_case_names_where_in_polyc_a_defect_was_raised():
    class Broken:  # its executor is missing: a TypeError raised inside polyc.backend
        @staticmethod
        def prepare(model):
            return PolycBackendRep(model, None)

    result = run_case(relu_case(), Broken)
    assert result.status == FAIL
    assert result.reason.startswith("error: TypeError: 'NoneType' object is not callable "
                                    "(at polyc/backend.py:")


# -- worker processes ---------------------------------------------------------------------

def fake_run(case: TestCase) -> Result:
    """A stand-in for run_case: the case's name says how it behaves."""
    if case.name == "segfault":
        print("about to crash", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
    if case.name == "hang":
        time.sleep(60)
    return Result(case.kind, case.name, PASS, str(os.getpid()))


def named(*names: str) -> list[TestCase]:
    return [TestCase(name=n, model_name=n, url=None, model_dir=None, model=None,
                     data_sets=None, kind="node", rtol=0, atol=0) for n in names]


def test_run_cases_survives_crashes_and_hangs():
    cases = named("a", "segfault", "b", "hang", "c")
    results = run_cases(cases, fake_run, jobs=2, timeout=2)
    assert [r.name for r in results] == ["a", "segfault", "b", "hang", "c"]
    assert [r.status for r in results] == [PASS, FAIL, PASS, FAIL, PASS]
    assert results[1].reason == "crash: SIGSEGV (about to crash)"
    assert results[3].reason == "timeout: no result after 2 s"


def test_run_cases_replaces_workers_every_recycle_cases(monkeypatch):
    monkeypatch.setattr(pool, "RECYCLE", 2)
    seen = []
    results = run_cases(named(*"abcde"), fake_run, jobs=1, timeout=30,
                        progress=lambda result, done, total: seen.append((done, total)))
    assert [r.status for r in results] == [PASS] * 5
    assert len({r.reason for r in results}) == 3  # worker process ids: 2 + 2 + 1 cases
    assert seen == [(k, 5) for k in range(1, 6)]


# -- reports and the command --------------------------------------------------------------

RESULTS = [
    Result("node", "test_a", PASS), Result("node", "test_b", EXCLUDED, "UnsupportedOpError: op X"),
    Result("node", "test_c", EXCLUDED, "UnsupportedOpError: op X"),
    Result("simple", "test_d", FAIL, "crash: SIGSEGV"),
]


def test_counts_summary_and_markdown():
    assert counts(RESULTS) == {
        "node": {"passed": 1, "excluded": 2, "failed": 0, "total": 3},
        "simple": {"passed": 0, "excluded": 0, "failed": 1, "total": 1},
        "total": {"passed": 1, "excluded": 2, "failed": 1, "total": 4}}
    text = summary(RESULTS)
    assert "     2  UnsupportedOpError: op X" in text
    assert "  simple/test_d: crash: SIGSEGV" in text
    report = markdown(RESULTS)
    assert "| total | 1 | 2 | 1 | 4 |" in report
    assert "- UnsupportedOpError: op X (2): `test_b`, `test_c`" in report
    assert "**Passed (1):** `test_a`" in report


def test_command_prints_numbers_and_writes_reports(tmp_path):
    command = [sys.executable, "-m", "polyc.conformance", "--kind", "node", "--match",
               "^test_(relu|det_2d)$", "--report", str(tmp_path / "c.md"),
               "--json", str(tmp_path / "c.json")]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert ["node", "1", "1", "0", "2"] in [line.split() for line in done.stdout.splitlines()]
    assert "UnsupportedOpError: op Det" in (tmp_path / "c.md").read_text()
    data = json.loads((tmp_path / "c.json").read_text())
    assert [(c["name"], c["status"]) for c in data["cases"]] == [
        ("test_det_2d", EXCLUDED), ("test_relu", PASS)]
