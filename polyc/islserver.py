"""isl work that may run for minutes, done in a child process that can be stopped.

isl counts little of some of its work against a context's operation budget (the
Farkas dual of ``coefficients()``, its scheduler's LP solver, dataflow analysis with
parameters, large ILPs) and an isl call cannot be interrupted. Such work is sent to
one child process, forked the first time it is needed, which serves every request over
a pipe: a fork of a compile grown to hundreds of MB costs 10-30 ms, too much for work
that is usually quick and asked for hundreds of times per model. A request that takes
longer than its time limit gets the child killed (the next request forks a new one).

A request names a module-level function ``f(ctx, *texts) -> str`` and gives the texts
of its isl arguments; the answer is the text of its result. Both sides parse texts in
their own isl context. The child finds the function by module and name, so the
function's module is whatever stage owns the work.
"""

from __future__ import annotations

import importlib
import os
import select
import signal
import struct
import time
from typing import Callable, Sequence

import islpy as isl

_HEADER = struct.Struct("<Q")
_SEPARATOR = "\0"  # between the texts of a request (isl texts hold no NUL)


class Unanswered(Exception):
    """The child did not answer: past the time limit, or the function failed there."""


class _Child:
    """The serving child: its pid and the two ends of its pipes."""

    def __init__(self):
        child_reads, parent_writes = os.pipe()
        parent_reads, child_writes = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            status = 1
            try:
                os.close(parent_writes)
                os.close(parent_reads)
                _serve(child_reads, child_writes)
                status = 0
            finally:
                os._exit(status)
        os.close(child_reads)
        os.close(child_writes)
        self.requests, self.answers = parent_writes, parent_reads

    def stop(self) -> None:
        for fd in (self.requests, self.answers):
            os.close(fd)
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)


_child: _Child | None = None
_owner = 0  # the pid that forked the child (a forked process must not use its parent's)


def call(function: Callable[..., str], texts: Sequence[str], seconds: float) -> str:
    """``function(ctx, *texts)`` in the serving child, as text. Unanswered past
    ``seconds`` (the child is killed) or when it raised there."""
    global _child, _owner
    if _child is None or _owner != os.getpid():
        _child, _owner = _Child(), os.getpid()
    child = _child
    name = f"{function.__module__}:{function.__qualname__}"
    try:
        _send(child.requests, _SEPARATOR.join([name, *texts]).encode())
        answer = _receive(child.answers, seconds)
    except OSError:
        answer = None
    if answer is None:  # too slow, or the child died: start afresh next time
        child.stop()
        _child = None
        raise Unanswered(f"took over {seconds:g} s")
    status, _, result = answer.decode().partition("\n")
    if status != "ok":
        raise Unanswered(f"failed: {result.strip().splitlines()[0]}")
    return result


def _serve(requests: int, answers: int) -> None:
    """The child's loop: answer each request until the parent closes the pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ctx = isl.Context()
    while True:
        request = _receive(requests, None)
        if request is None:
            return
        name, *texts = request.decode().split(_SEPARATOR)
        try:
            answer = f"ok\n{_function(name)(ctx, *texts)}"
        except Exception as error:  # noqa: BLE001 - reported to the parent as a failure
            answer = f"error\n{type(error).__name__}: {error}"
        _send(answers, answer.encode())


def _function(name: str) -> Callable[..., str]:
    module, _, qualname = name.partition(":")
    return getattr(importlib.import_module(module), qualname)


def _send(fd: int, data: bytes) -> None:
    message = _HEADER.pack(len(data)) + data
    while message:
        message = message[os.write(fd, message):]


def _receive(fd: int, seconds: float | None) -> bytes | None:
    """One message from ``fd``; None at end of file or when ``seconds`` pass before all
    of it has come (one deadline for the whole message, not one per read)."""
    deadline = None if seconds is None else time.monotonic() + seconds
    header = _read(fd, _HEADER.size, deadline)
    if header is None:
        return None
    return _read(fd, _HEADER.unpack(header)[0], deadline)


def _read(fd: int, size: int, deadline: float | None) -> bytes | None:
    data = b""
    while len(data) < size:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return None
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return data
