"""The fuzz runner: outcomes of isolated cases (ok, wrong, error, crash, hang), shrinking
to the smallest case that fails the same way, and the command line's counts and
reproducers. A fake fuzzer whose cases are integers stands in for the real ones."""

import json
import os
import signal
import time
import types

import pytest

from polyc.fuzz import Mismatch
from polyc.fuzz.__main__ import main
from polyc.fuzz.runner import CRASH, ERROR, HANG, OK, WRONG, counts, fuzz


def _check(n: int) -> None:
    """Wrong for n = 3 mod 10, ValueError for n = 5 mod 10, killed by a signal at 7,
    hangs at 9; the rest pass."""
    if n % 10 == 3:
        raise Mismatch(f"case {n}: 1.0 != 2.0")
    if n % 10 == 5:
        raise ValueError(f"bad {n}")
    if n == 7:
        os.kill(os.getpid(), signal.SIGSEGV)
    if n == 9:
        time.sleep(60)


def _smaller(n: int):
    """n - 10 keeps the failure; n - 1 changes it (tried first, so shrinking must skip it)."""
    return [m for m in (n - 1, n - 10) if m >= 0]


FAKE = types.ModuleType("polyc.fuzz.fake")
FAKE.generate = lambda seed: seed
FAKE.check = _check
FAKE.smaller = _smaller
FAKE.describe = lambda n: f"case {n}"
FAKE.reproducer = lambda n: f"print({n})\n"


def test_outcomes_are_counted_and_failures_shrunk():
    results, failures = fuzz(FAKE, [0, 23, 15, 7, 9, 1], jobs=2, timeout=3.0,
                             shrink_seconds=30.0)
    assert [r.status for r in results] == [OK, WRONG, ERROR, CRASH, HANG, OK]
    assert counts(results) == {OK: 2, WRONG: 1, ERROR: 1, CRASH: 1, HANG: 1}
    assert "SIGSEGV" in results[3].reason and "timeout" in results[4].reason
    assert results[2].reason.startswith("ValueError: bad 15")
    shrunk = {f.seed: (f.case, f.steps) for f in failures}
    assert shrunk[23] == (3, 2)  # 23 -> 13 -> 3, never to 22 (passes) or 12
    assert shrunk[15] == (5, 1)  # 15 -> 5: the same exception type
    assert shrunk[7] == (7, 0)   # 6 passes and -3 is not a case
    assert set(shrunk) == {23, 15, 7, 9}


def test_command_prints_counts_and_writes_reproducers(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("polyc.fuzz.runner.fuzzer", lambda name: FAKE)
    monkeypatch.setattr("polyc.fuzz.__main__.fuzzer", lambda name: FAKE)
    report = tmp_path / "report.json"
    status = main(["graphs", "--first", "21", "--count", "5", "--out", str(tmp_path / "f"),
                   "--json", str(report)])
    out = capsys.readouterr().out
    assert status == 1
    assert "ok 3  wrong 1  error 1  crash 0  hang 0" in out
    assert (tmp_path / "f" / "graphs-seed23.py").read_text() == "print(3)\n"
    assert (tmp_path / "f" / "graphs-seed24.py").exists() is False
    data = json.loads(report.read_text())["graphs"]
    assert data["counts"]["wrong"] == 1 and data["seeds"] == [21, 26]
    assert {f["seed"] for f in data["failures"]} == {23, 25}


def test_command_refuses_bad_arguments(tmp_path):
    with pytest.raises(SystemExit):
        main(["graphs", "--count", "0"])
    with pytest.raises(SystemExit):
        main(["nosuch"])
    assert main(["graphs", "--json", str(tmp_path)]) == 2  # a directory: nothing run
