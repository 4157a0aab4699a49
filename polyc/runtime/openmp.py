"""libgomp, loaded so that polyc's threads never spin for long.

libgomp reads its wait policy from the environment once, when it is loaded. Left to its
default, an idle thread spins 300,000 times (3.2 ms of CPU measured here) before it
sleeps: a worker after each region, and the thread that started a region while it
waits at the region's end. When other processes keep the CPUs busy, the spinning thread
holds a CPU that the thread it waits for is waiting to get, and a region can cost up to
about two spin periods: a 512x512x512 MatMul + Relu (4 regions) took 19-25 ms on two
threads against 1.4 ms on one, and 55-75 ms with two busy loops running
(``benchmarks/threads.py``).

So polyc loads libgomp itself, once per process, before its JIT or an artifact needs it
(:func:`load_libgomp`). When the user set neither ``OMP_WAIT_POLICY`` nor
``GOMP_SPINCOUNT``, the load runs with :data:`polyc.config.POLYC_WAIT_POLICY`
(``GOMP_SPINCOUNT=3000``, about 30 us) in the environment, taken out again afterwards so
that child processes do not inherit it. Measured on an idle machine (2 threads against
1 on that MatMul): 1.69x with 3,000 spins, 1.67x with 10,000, 1.79x with 300,000, and
1.30x with none (``OMP_WAIT_POLICY=passive``: every region waits for a sleeping thread
to wake). With the CPUs busy, 3,000 spins cost little more than none (4.0-5.0 ms
against 3.1-4.5 ms): what is left is the wait for a thread that has no CPU, which no
wait policy removes.

A user's variables are left alone. A libgomp that another library loaded first has read
the environment already and keeps its policy: polyc then warns (``RuntimeWarning``),
unless the user set one of the variables. The returned :class:`WaitPolicy` says which
of these happened.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from polyc import config

LIBRARY = "gomp"
SONAME = "libgomp.so"  # the file name of the libgomp that generated code links with
MAPS = Path("/proc/self/maps")
_loaded: list[ctypes.CDLL] = []  # never unloaded: its threads outlive any one model


@dataclass(frozen=True)
class WaitPolicy:
    """How this process's libgomp waits. ``source`` is ``"polyc"`` (loaded with
    ``variables``, polyc's policy), ``"user"`` (the user's ``variables``),
    ``"preloaded"`` (another library loaded libgomp first: its policy is whatever the
    environment said then) or ``"missing"`` (no libgomp found)."""

    source: str
    variables: Mapping[str, str] = field(default_factory=dict)
    library: str | None = None

    def __str__(self) -> str:
        settings = " ".join(f"{name}={value}" for name, value in self.variables.items())
        return f"{self.source}: {settings or 'libgomp defaults'} ({self.library or 'none'})"


def mapped_libgomp(maps: str | None = None) -> str | None:
    """The path of a ``libgomp.so*`` mapped into this process (``maps``: the text of
    ``/proc/self/maps``, read when not given), or None. Copies that wheels bundle under
    other names (``libgomp-1a2b3c4d.so.1``) are separate libraries and do not count."""
    if maps is None:
        try:
            maps = MAPS.read_text()
        except OSError:
            return None
    for line in maps.splitlines():
        columns = line.split(maxsplit=5)
        if len(columns) == 6 and Path(columns[5]).name.startswith(SONAME):
            return columns[5]
    return None


@functools.cache
def load_libgomp() -> WaitPolicy:
    """Load libgomp under polyc's wait policy (see the module's docstring), once per
    process, and say how it waits. Call it before anything that loads libgomp."""
    path = ctypes.util.find_library(LIBRARY)
    if path is None:
        return WaitPolicy("missing")
    user, preloaded = config.user_wait_policy(), mapped_libgomp()
    if user:
        policy = WaitPolicy("user", user, path)
    elif preloaded:
        policy = WaitPolicy("preloaded", {}, preloaded)
        warnings.warn(f"{preloaded} was loaded before polyc loaded it, so its idle threads "
                      "spin for milliseconds, which is slow on busy CPUs; set "
                      "OMP_WAIT_POLICY=passive in the environment the process starts with "
                      "(see README, Threads)", RuntimeWarning, stacklevel=2)
    else:
        policy = WaitPolicy("polyc", dict(config.POLYC_WAIT_POLICY), path)
    try:
        with config.environment(policy.variables if policy.source == "polyc" else {}):
            _loaded.append(ctypes.CDLL(path))
    except OSError:
        return WaitPolicy("missing")
    config.log(config.STAGES, f"polyc: libgomp wait policy {policy}")
    return policy
