"""Worker processes that run cases in isolation: a crash or a hang fails one case only.

Workers are forked from the process that loaded the cases (node cases are built in
memory: nothing to pickle but an index) and get case indices over a pipe. A worker
whose case kills it (segfault, abort) or runs past the timeout is replaced, and the
case fails with the signal and the last line the worker wrote to stderr, or with the
timeout. Every :data:`RECYCLE` cases a worker is replaced as well, which bounds the
memory that JIT-compiled code keeps.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import tempfile
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sequence

from onnx.backend.test.case.test_case import TestCase

from polyc.conformance.classify import FAIL, Result

RECYCLE = 100
_FORK = multiprocessing.get_context("fork")


def run_cases(cases: Sequence[TestCase], run: Callable[[TestCase], Result], *,
              jobs: int = 2, timeout: float = 120.0,
              progress: Callable[[Result, int, int], None] | None = None,
              lost: Callable[[TestCase, str, float], Result] | None = None) -> list[Result]:
    """``run(case)`` of every case, in ``cases`` order, each in one of ``jobs`` worker
    processes; a case that crashes its worker or takes over ``timeout`` seconds fails:
    its result is ``lost(case, reason, seconds)`` (default a FAIL with the reason, which
    starts with "crash:" or "timeout:"). ``progress(result, done, total)`` is called as
    results arrive."""
    import polyc.pipeline  # noqa: F401 - imported once here, not in every worker

    lost = lost or _failed
    results: list[Result | None] = [None] * len(cases)
    for done, (index, result) in enumerate(_isolated(cases, run, jobs, timeout, lost),
                                           start=1):
        results[index] = result
        if progress:
            progress(result, done, len(cases))
    return results


def _failed(case: TestCase, reason: str, seconds: float) -> Result:
    return Result(case.kind, case.name, FAIL, reason, seconds)


def _isolated(cases, run, jobs: int, timeout: float, lost) -> Iterator[tuple[int, Result]]:
    """(index, result) of every case, as workers finish them."""
    pending = deque(range(len(cases)))
    busy: list[_Worker] = []
    idle: list[_Worker] = []
    try:
        while pending or busy:
            while pending and len(busy) < max(jobs, 1):
                worker = idle.pop() if idle else _Worker(cases, run)
                worker.submit(pending.popleft())
                busy.append(worker)
            _wait(busy, timeout)
            for worker in list(busy):
                finished = worker.collect(timeout, lost)
                if finished is None:
                    continue
                busy.remove(worker)
                yield finished
                if worker.healthy and worker.count < RECYCLE:
                    idle.append(worker)
                else:
                    worker.stop()
    finally:
        for worker in busy + idle:
            worker.stop()


def _wait(busy: list[_Worker], timeout: float) -> None:
    """Until a busy worker sends a result or dies, or the earliest timeout is due."""
    due = min(w.started for w in busy) + timeout - time.monotonic()
    handles = [w.conn for w in busy] + [w.process.sentinel for w in busy]
    multiprocessing.connection.wait(handles, timeout=max(due, 0.0))


class _Worker:
    """One forked process running cases by index; its stderr goes to a temporary file."""

    def __init__(self, cases: Sequence[TestCase], run: Callable[[TestCase], Result]):
        self.cases = cases
        self.log = tempfile.TemporaryFile()
        self.conn, child = _FORK.Pipe()
        self.process = _FORK.Process(target=_serve, args=(cases, run, child, self.log.fileno()),
                                     daemon=True)
        self.process.start()
        child.close()
        self.index = -1
        self.started = 0.0
        self.count = 0
        self.healthy = True

    def submit(self, index: int) -> None:
        self.conn.send(index)
        self.index, self.started = index, time.monotonic()
        self.count += 1

    def collect(self, timeout: float, lost) -> tuple[int, Result] | None:
        """(index, result) of the current case when it is over, else None."""
        if self.conn.poll():
            try:
                return self.index, self.conn.recv()
            except EOFError:  # the worker died: its sentinel says how below
                pass
        elapsed = time.monotonic() - self.started
        if self.process.is_alive() and elapsed < timeout:
            return None
        self.healthy = False
        if self.process.is_alive():
            reason = f"timeout: no result after {timeout:g} s"
        else:
            reason = f"crash: {self._death()}"
        return self.index, lost(self.cases[self.index], reason, elapsed)

    def _death(self) -> str:
        """How the process ended, with the last line it wrote to stderr."""
        self.process.join()
        code = self.process.exitcode
        how = signal.Signals(-code).name if code < 0 else f"exit status {code}"
        self.log.seek(0)
        lines = [line.strip() for line in self.log.read().decode(errors="replace").splitlines()]
        last = next((line for line in reversed(lines) if line), "")
        return f"{how} ({last[:160]})" if last else how

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()
        self.log.close()


def _serve(cases, run, conn, log_fd: int) -> None:
    """The worker's loop: run the case of each index received; None ends it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    faulthandler.disable()  # a crash's reason is the last line the crashing code wrote
    os.dup2(log_fd, 2)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - the worker's, for its life
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    warnings.simplefilter("ignore")
    while (index := conn.recv()) is not None:
        os.ftruncate(2, 0)
        os.lseek(2, 0, os.SEEK_SET)
        conn.send(run(cases[index]))
