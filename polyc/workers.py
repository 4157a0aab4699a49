"""Work on several cores: calls run in forked copies of this process.

A forked child shares everything this process has built (isl and LLVM state need no
transfer) and returns its result as a pickle in a file; this process runs the first
call itself meanwhile. A child that raises passes its exception back; one that dies
(a signal from LLVM, the kernel's OOM killer) is a :class:`PolycError` naming the
signal and the work. Without ``fork`` (not Linux) or with one job, the calls run here in turn.

``POLYC_JOBS`` bounds the processes (default: the CPUs this process may run on).
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from polyc.errors import PolycError

POLL_SECONDS = 0.005  # how often run_queued looks for a child that has ended


def jobs() -> int:
    """How many processes parallel work may use: ``POLYC_JOBS``, else the CPUs this
    process may run on; 1 where this module cannot fork."""
    if not sys.platform.startswith("linux"):
        return 1
    text = os.environ.get("POLYC_JOBS", "").strip()
    if text:
        try:
            value = int(text)
        except ValueError:
            raise PolycError(f"POLYC_JOBS must be a positive number of processes, "
                             f"got {text!r}") from None
        if value < 1:
            raise PolycError(f"POLYC_JOBS must be a positive number of processes, got {value}")
        return value
    return max(1, len(os.sched_getaffinity(0)))


def deal(weights: Sequence[float], shares: int) -> list[list[int]]:
    """The indices of ``weights`` dealt out to ``shares`` lists, heaviest first, each to
    the lightest share so far (in the order dealt)."""
    dealt: list[list[int]] = [[] for _ in range(shares)]
    loads = [0.0] * shares
    for k in sorted(range(len(weights)), key=lambda k: -weights[k]):
        least = loads.index(min(loads))
        dealt[least].append(k)
        loads[least] += weights[k]
    return dealt


def run_all(calls: Sequence[Callable[[], Any]], what: str) -> list[Any]:
    """The results of ``calls``, the first run in this process and each other in a
    forked child; ``what`` names the work in errors."""
    if len(calls) < 2 or jobs() < 2:
        return [call() for call in calls]
    with tempfile.TemporaryDirectory(prefix="polyc-jobs-") as folder:
        children = [(_fork(call, Path(folder, f"result{k}")), Path(folder, f"result{k}"))
                    for k, call in enumerate(calls[1:], 1)]
        try:
            first = calls[0]()
        finally:
            outcomes = [_wait(pid, path, what) for pid, path in children]
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return [first, *outcomes]


def run_queued(calls: Sequence[Callable[[], Any]], what: str) -> list[Any]:
    """The results of ``calls``, each in a forked child, at most :func:`jobs` at once,
    in the order given (put the longest first): many small pieces keep every core busy
    to the end, where one process per core waits for its slowest piece."""
    limit = jobs()
    if len(calls) < 2 or limit < 2:
        return [call() for call in calls]
    outcomes: dict[int, Any] = {}
    with tempfile.TemporaryDirectory(prefix="polyc-jobs-") as folder:
        paths = [Path(folder, f"result{k}") for k in range(len(calls))]
        running: dict[int, int] = {}  # pid -> call
        waiting = list(range(len(calls)))
        try:
            while waiting or running:
                while waiting and len(running) < limit:
                    k = waiting.pop(0)
                    running[_fork(calls[k], paths[k])] = k
                # (each of ours by its pid: os.wait would reap others' children too)
                ended = [(pid, status) for pid in list(running)
                         for done, status in [os.waitpid(pid, os.WNOHANG)] if done]
                for pid, status in ended:
                    k = running.pop(pid)
                    outcomes[k] = _outcome(status, paths[k], what)
                if not ended:
                    time.sleep(POLL_SECONDS)
        finally:
            for pid in running:  # (only after an interrupt) no orphan keeps working
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
    for k in range(len(calls)):
        if isinstance(outcomes[k], BaseException):
            raise outcomes[k]
    return [outcomes[k] for k in range(len(calls))]


class Background:
    """A call running in a forked child while this process goes on (with one job, or
    without fork, it has run already): :meth:`wait` returns its result or raises its
    exception. Wait for it before the process ends (an object never waited for leaves
    a zombie child until then)."""

    def __init__(self, call: Callable[[], Any], what: str):
        self.what = what
        self._outcome: Any = None
        self._pid: int | None = None
        if jobs() < 2:
            try:
                self._outcome = call()
            except BaseException as error:
                self._outcome = error
            return
        self._folder = tempfile.TemporaryDirectory(prefix="polyc-jobs-")
        self._path = Path(self._folder.name, "result")
        self._pid = _fork(call, self._path)

    def wait(self) -> Any:
        """The call's result (raises what it raised); the seconds waited are
        :attr:`waited`."""
        start = time.perf_counter()
        if self._pid is not None:
            try:
                self._outcome = _wait(self._pid, self._path, self.what)
            finally:
                self._pid = None
                self._folder.cleanup()
        self.waited = time.perf_counter() - start
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        return self._outcome


def _fork(call: Callable[[], Any], path: Path) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:  # the child: nothing of this process's but the call and the file
        try:
            data = pickle.dumps((True, call()))
        except BaseException as error:  # passed back whole
            data = pickle.dumps((False, _picklable(error)))
        path.write_bytes(data)
        code = 0
    finally:
        os._exit(code)


def _picklable(error: BaseException) -> BaseException:
    try:
        pickle.dumps(error)
        return error
    except Exception:
        return PolycError(f"{type(error).__name__}: {error}")


def _wait(pid: int, path: Path, what: str) -> Any:
    """A child's result, or the exception it raised or that its end makes."""
    _, status = os.waitpid(pid, 0)
    return _outcome(status, path, what)


def _outcome(status: int, path: Path, what: str) -> Any:
    """What a child that ended with ``status`` left in ``path``: its result, or the
    exception it raised or that its end makes."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = f" ({signal.Signals(number).name})"
        except ValueError:
            name = ""
        return PolycError(f"{what}: a worker process died of signal {number}{name}")
    try:
        _, value = pickle.loads(path.read_bytes())
    except (OSError, EOFError, pickle.UnpicklingError) as error:
        return PolycError(f"{what}: a worker process ended without its result "
                          f"(exit status {os.waitstatus_to_exitcode(status)}, {error})")
    return value
