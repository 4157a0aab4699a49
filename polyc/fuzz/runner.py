"""Run a fuzzer over many seeds, each case isolated and under a time limit; count the
outcomes; shrink every failure to a small reproducer.

Outcomes: ``ok``; ``wrong`` (the fuzzer's :class:`~polyc.fuzz.Mismatch`: polyc's answer
differs from the reference); ``error`` (any other exception, a :class:`PolycError`
included: fuzzers draw only what polyc supports); ``crash`` (the worker process died,
e.g. a signal); ``hang`` (no result within the time limit). Cases run in worker
processes of :mod:`polyc.conformance.pool`, so a crash or a hang loses one case only.

Shrinking asks the fuzzer for smaller candidates of a failing case and keeps the first
that fails the same way (same outcome and, for errors, the same exception type), until
no candidate does or its time is up.
"""

from __future__ import annotations

import importlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType

from polyc.conformance.classify import Result, first_line, raised_at
from polyc.conformance.pool import run_cases
from polyc.fuzz import Mismatch

OK, WRONG, ERROR, CRASH, HANG = "ok", "wrong", "error", "crash", "hang"
OUTCOMES = (OK, WRONG, ERROR, CRASH, HANG)
FUZZERS = ("graphs", "programs")


def fuzzer(name: str) -> ModuleType:
    """The fuzzer module :mod:`polyc.fuzz.<name>`."""
    if name not in FUZZERS:
        raise ValueError(f"no fuzzer {name!r}; there are {', '.join(FUZZERS)}")
    return importlib.import_module(f"polyc.fuzz.{name}")


@dataclass(frozen=True)
class Seeded:
    """A case to build in the worker from its seed (nothing but an int crosses to it)."""

    kind: str
    seed: int

    @property
    def name(self) -> str:
        return f"seed {self.seed}"


@dataclass(frozen=True)
class Built:
    """A case already built (a shrinking candidate), checked as it is."""

    kind: str
    case: object
    name: str = "candidate"


@dataclass(frozen=True)
class Failure:
    """A failing seed: its first outcome and the smallest case that fails the same way."""

    seed: int
    result: Result
    case: object
    shrunk: Result
    steps: int


def check_one(module: ModuleType, case) -> tuple[str, str]:
    """(outcome, one-line reason) of ``module.check(case)`` in this process."""
    try:
        module.check(case)
    except Mismatch as error:
        return WRONG, first_line(error)[:300]
    except Exception as error:  # noqa: BLE001 - every other exception is a finding
        return ERROR, f"{type(error).__name__}: {first_line(error)[:300]}{raised_at(error)}"
    return OK, ""


def worker(module: ModuleType) -> Callable[[Seeded | Built], Result]:
    """The function a worker runs on each case it is sent."""

    def run(item: Seeded | Built) -> Result:
        start = time.perf_counter()
        try:
            case = module.generate(item.seed) if isinstance(item, Seeded) else item.case
        except Exception as error:  # noqa: BLE001 - a generator defect, reported as one
            outcome, reason = ERROR, f"generate: {type(error).__name__}: {first_line(error)[:300]}"
        else:
            outcome, reason = check_one(module, case)
        return Result(item.kind, item.name, outcome, reason, time.perf_counter() - start)

    return run


def lost(item, reason: str, seconds: float) -> Result:
    """A case whose worker died or ran past the time limit."""
    outcome = HANG if reason.startswith("timeout") else CRASH
    return Result(item.kind, item.name, outcome, reason, seconds)


def fuzz(module: ModuleType | str, seeds: Sequence[int], *, jobs: int = 2,
         timeout: float = 60.0, shrink_seconds: float = 300.0,
         progress: Callable[[Result, int, int], None] | None = None,
         ) -> tuple[list[Result], list[Failure]]:
    """Every seed's result, and each failure shrunk (for at most ``shrink_seconds``);
    ``module`` is a fuzzer or its name."""
    module = fuzzer(module) if isinstance(module, str) else module
    kind = module.__name__.rsplit(".", 1)[-1]
    items = [Seeded(kind, seed) for seed in seeds]
    results = run_cases(items, worker(module), jobs=jobs, timeout=timeout,
                        progress=progress, lost=lost)
    failures = []
    for item, result in zip(items, results):
        if result.status == OK:
            continue
        if result.reason.startswith("generate:"):  # nothing to shrink or reproduce
            failures.append(Failure(item.seed, result, None, result, 0))
            continue
        small, shrunk, steps = shrink(module, module.generate(item.seed), result, jobs=jobs,
                                      timeout=timeout, seconds=shrink_seconds)
        failures.append(Failure(item.seed, result, small, shrunk, steps))
    return results, failures


def shrink(module: ModuleType, case, result: Result, *, jobs: int = 2,
           timeout: float = 60.0, seconds: float = 300.0) -> tuple[object, Result, int]:
    """(smallest case found that fails as ``result`` did, its result, steps taken)."""
    deadline = time.monotonic() + seconds
    steps = 0
    while time.monotonic() < deadline:
        found = _first_failing(module, list(module.smaller(case)), result, jobs, timeout,
                               deadline)
        if found is None:
            break
        case, result = found
        steps += 1
    return case, result, steps


def _first_failing(module, candidates: list, failed: Result, jobs: int, timeout: float,
                   deadline: float):
    """(candidate, result) of the first candidate, in order, that fails like ``failed``."""
    run = worker(module)
    for start in range(0, len(candidates), max(jobs, 1)):
        if time.monotonic() >= deadline:
            return None
        batch = candidates[start:start + max(jobs, 1)]
        items = [Built(failed.kind, case) for case in batch]
        for case, result in zip(batch, run_cases(items, run, jobs=jobs, timeout=timeout,
                                                 lost=lost)):
            if same_failure(result, failed):
                return case, result
    return None


def same_failure(result: Result, failed: Result) -> bool:
    """``result`` fails the way ``failed`` did: same outcome, and for errors the same
    exception type."""
    if result.status != failed.status:
        return False
    if result.status == ERROR:
        return result.reason.split(":")[0] == failed.reason.split(":")[0]
    return True


def counts(results: Sequence[Result]) -> Counter:
    """How many results had each outcome."""
    return Counter(r.status for r in results)
