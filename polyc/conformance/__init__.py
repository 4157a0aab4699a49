"""ONNX conformance: the onnx package's backend test suite run through polyc.

    python -m polyc.conformance [--kind KIND ..] [--match REGEX] [--jobs 2] [--timeout 120]
                                [--report docs/conformance.md] [--json PATH] [-v]

Every case of the selected kinds (``node``, ``simple``, ``pytorch-converted``,
``pytorch-operator``) is prepared and run through :class:`polyc.backend.PolycBackend`
on each of its data sets, in worker processes, and gets one status:

- ``pass``: every output has the expected shape and dtype and agrees within the case's
  tolerances (onnx's runner: ``rtol`` 1e-3, ``atol`` 1e-7 unless the case says otherwise);
- ``excluded``: polyc refused the model with an error saying it is out of scope
  (:data:`~polyc.conformance.classify.OUT_OF_SCOPE`); the reason is the error class and
  its first line with names taken out, so that cases group ("UnsupportedOpError: op
  Conv"). A wrong answer of a case listed in ``KNOWN_DIFFERENCES`` is excluded with the
  reason given there;
- ``fail``: a wrong answer, any other exception (a defect, named by where it was
  raised), a crash of the worker process, or a timeout.

The stages: :mod:`.cases` loads the suite, :mod:`.classify` runs one case and judges
it, :mod:`.pool` isolates cases in worker processes, :mod:`.report` prints the numbers.
"""

from polyc.conformance.cases import KINDS, case_data, case_model, load_cases, unlowered_ops
from polyc.conformance.classify import (
    EXCLUDED,
    FAIL,
    KNOWN_DIFFERENCES,
    PASS,
    Result,
    compare,
    error_reason,
    run_case,
)
from polyc.conformance.pool import run_cases

__all__ = ["EXCLUDED", "FAIL", "KINDS", "KNOWN_DIFFERENCES", "PASS", "Result", "case_data",
           "case_model", "compare", "error_reason", "load_cases", "run_case", "run_cases",
           "unlowered_ops"]
