"""One case through polyc's backend, and what its outcome means: pass, excluded, fail.

:func:`run_case` prepares and runs a case in this process; :func:`compare` checks the
outputs as onnx's runner does; :func:`error_reason` turns a polyc error into a reason
that groups with the same refusal of other cases.
"""

from __future__ import annotations

import re
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from onnx.backend.test.case.test_case import TestCase

from polyc.conformance.cases import case_data, case_model
from polyc.errors import (
    ModelError,
    PolycError,
    ShapeError,
    UnsupportedDtypeError,
    UnsupportedOpError,
)

PASS, EXCLUDED, FAIL = "pass", "excluded", "fail"
STATUSES = (PASS, EXCLUDED, FAIL)

# polyc's errors that say a model is out of scope (the others, e.g. IllegalScheduleError,
# CodegenError or InputError on the suite's own inputs, say that polyc is wrong: a failure).
OUT_OF_SCOPE = (ModelError, UnsupportedOpError, UnsupportedDtypeError, ShapeError)

# The prefix of every wrong-answer reason; only these may be known differences.
WRONG_ANSWER = "wrong answer"

# The suite's bfloat16 Attention outputs round every op to bfloat16 (numpy on ml_dtypes
# arrays); polyc computes in float32 and rounds the output once: 1 bfloat16 ulp apart.
_BFLOAT16_ROUNDING = ("bfloat16 rounding: the expected values round every op to bfloat16, "
                      "polyc computes in float32 and rounds the output (1 ulp apart)")

KNOWN_DIFFERENCES: dict[str, str] = {
    **{f"test_attention_{case}_bf16{expanded}": _BFLOAT16_ROUNDING
       for case in ("3d_causal", "4d_attn_mask_causal", "4d_causal", "4d_causal_padded_kv",
                    "4d_padded_kv")
       for expanded in ("", "_expanded")},
    **{name: ("the expected imaginary parts at the Nyquist frequency are numpy's FFT "
              "rounding (1.9e-7) where the exact value is 0; polyc's are 3e-15")
       for name in ("test_dft_inverse", "test_dft_inverse_opset19")},
    "test_identity_opt": "optional type: polyc compiles tensors only",
    "test_identity_sequence": "sequence type: polyc compiles tensors only",
}


@dataclass(frozen=True)
class Result:
    """The outcome of one case: its status, a one-line reason (empty for a pass) and
    the wall time of prepare and run."""

    kind: str
    name: str
    status: str
    reason: str = ""
    seconds: float = 0.0


def run_case(case: TestCase, backend=None) -> Result:
    """Prepare and run ``case`` through ``backend`` (default ``PolycBackend``), in this
    process, and classify the outcome."""
    if backend is None:
        from polyc.backend import PolycBackend as backend
    start = time.perf_counter()
    status, reason = _outcome(case, backend)
    if status == FAIL and reason.startswith(WRONG_ANSWER) and case.name in KNOWN_DIFFERENCES:
        status, reason = EXCLUDED, f"known difference: {KNOWN_DIFFERENCES[case.name]}"
    return Result(case.kind, case.name, status, reason, time.perf_counter() - start)


def _outcome(case: TestCase, backend) -> tuple[str, str]:
    try:
        model = case_model(case)
        rep = backend.prepare(model)
        for inputs, expected in case_data(case, model):
            mismatch = compare(list(rep.run(inputs)), expected, rtol=case.rtol, atol=case.atol)
            if mismatch:
                return FAIL, f"{WRONG_ANSWER}: {mismatch}"
    except OUT_OF_SCOPE as error:
        return EXCLUDED, error_reason(error)
    except PolycError as error:
        return FAIL, f"compiler error: {error_reason(error)}{raised_at(error)}"
    except Exception as error:  # noqa: BLE001 - any other exception is a defect to report
        return FAIL, f"error: {type(error).__name__}: {first_line(error)}{raised_at(error)}"
    return PASS, ""


def compare(outputs: Sequence, expected: Sequence, *, rtol: float, atol: float) -> str:
    """What differs between ``outputs`` and ``expected`` as onnx's runner compares them
    (count, then per output shape, dtype, values within ``rtol``/``atol``); '' if nothing."""
    if len(outputs) != len(expected):
        return f"{len(outputs)} outputs, expected {len(expected)}"
    for k, (got, want) in enumerate(zip(outputs, expected)):
        problem = _compare_value(got, want, rtol, atol)
        if problem:
            return f"output {k}: {problem}"
    return ""


def _compare_value(got, want, rtol: float, atol: float) -> str:
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)):
            return f"a {type(got).__name__}, expected a sequence"
        return compare(got, want, rtol=rtol, atol=atol)
    if want is None or not isinstance(got, np.ndarray):
        return "" if got is None and want is None else \
            f"a {type(got).__name__}, expected {type(want).__name__}"
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if want.dtype == object:
        return "" if np.array_equal(got, want) else "strings differ"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    try:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    except AssertionError as error:
        return _mismatch(str(error))
    return ""


def _mismatch(message: str) -> str:
    """numpy's assert_allclose message in one line: how many elements, how far off."""
    wanted = ("Mismatched elements", "Max absolute difference", "Max relative difference")
    lines = [line.strip() for line in message.splitlines() if line.strip().startswith(wanted)]
    lines = lines or [line.strip() for line in message.splitlines() if line.strip()][:1]
    return "; ".join(re.sub(r" among violations", "", line) for line in lines)


def error_reason(error: PolycError) -> str:
    """The error class and its first line, with what varies between cases (node and
    tensor names, model sources, numbers in shapes) taken out, so that reasons group."""
    name = type(error).__name__
    if isinstance(error, UnsupportedOpError):
        detail = str(error).partition(f"at node '{error.node_name}'")[2].lstrip(": ")
        detail = "" if detail == "no lowering for this op" else _generic(detail)
        return f"{name}: op {error.op_type}" + (f" ({detail})" if detail else "")
    text = first_line(error)
    if isinstance(error, UnsupportedDtypeError):
        dtype = re.search(r"dtype (\w+)|of (\w+?)(?:_type)? type", text)
        if dtype:
            return f"{name}: {dtype.group(1) or dtype.group(2)}"
    return f"{name}: {_generic(text)}"


def _generic(text: str) -> str:
    text = re.sub(r"<\w+>", "the model", text)  # the source of an in-memory model
    text = re.sub(r"(?<!domain )'[^']*'", "'…'", text)
    text = re.sub(r"\[[-\d, ?]*\]|\([\d, ]*\)", "[…]", text)
    return text.strip()


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s message ('' if it has none)."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else ""


PACKAGE = Path(__file__).resolve().parent.parent  # polyc/, the package itself


def raised_at(error: BaseException) -> str:
    """' (at polyc/x.py:12)': the innermost frame in polyc's package (not the harness
    here, nor a test in a checkout that is itself named polyc) where ``error`` was
    raised."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if _in_package(f.filename)]
    if not frames:
        return ""
    path = Path(frames[-1].filename).resolve().relative_to(PACKAGE.parent)
    return f" (at {path.as_posix()}:{frames[-1].lineno})"


def _in_package(filename: str) -> bool:
    path = Path(filename).resolve()
    return path.is_relative_to(PACKAGE) and not path.is_relative_to(PACKAGE / "conformance")
