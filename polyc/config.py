"""The one place polyc reads (and, to load libgomp, sets) its environment.

| variable            | meaning                                                        |
|---------------------|----------------------------------------------------------------|
| ``POLYC_DEBUG``     | 0 quiet; 1 stage names and times; 2 IR after each stage;       |
|                     | 3 dependences and scheduler systems; 4 LLVM IR                 |
| ``POLYC_CC``        | C compiler used to link AOT artifacts (default ``cc``)         |
| ``OMP_WAIT_POLICY`` | libgomp's wait policy; when neither it nor ``GOMP_SPINCOUNT``  |
| ``GOMP_SPINCOUNT``  | is set, polyc loads libgomp with :data:`POLYC_WAIT_POLICY`     |
|                     | (see :mod:`polyc.runtime.openmp`)                              |

Everything else in polyc calls :func:`debug_level` and :func:`log` instead of
reading ``os.environ`` or printing.
"""

import contextlib
import os
import sys
from collections.abc import Mapping

# libgomp's variables that decide how long its idle threads spin before they sleep,
# and what polyc gives libgomp when the user set neither: 3,000 spins (about 30 us here)
# instead of libgomp's 300,000 (3.2 ms). See polyc.runtime.openmp for the measurements.
WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
POLYC_WAIT_POLICY = {"GOMP_SPINCOUNT": "3000"}

STAGES = 1
IR = 2
SYSTEMS = 3
LLVM = 4


def debug_level() -> int:
    """The value of ``POLYC_DEBUG`` (0 when unset or not a number)."""
    try:
        return int(os.environ.get("POLYC_DEBUG", "0"))
    except ValueError:
        return 0


def c_compiler() -> str:
    """The C compiler that links AOT artifacts."""
    return os.environ.get("POLYC_CC", "cc")


def user_wait_policy() -> dict[str, str]:
    """The ``OMP_WAIT_POLICY`` and ``GOMP_SPINCOUNT`` the user set (``{}``: neither)."""
    return {name: os.environ[name] for name in WAIT_VARIABLES if name in os.environ}


@contextlib.contextmanager
def environment(variables: Mapping[str, str]):
    """``variables``, none of them set before, in the environment for the block only (a
    library loaded inside reads them; child processes started later do not)."""
    os.environ.update(variables)
    try:
        yield
    finally:
        for name in variables:
            os.environ.pop(name, None)


def log(level: int, text: str) -> None:
    """Write ``text`` to stderr when ``POLYC_DEBUG >= level``."""
    if debug_level() >= level:
        print(text, file=sys.stderr, flush=True)


def log_section(level: int, title: str, body) -> None:
    """Write a titled block (an IR dump) to stderr when ``POLYC_DEBUG >= level``;
    ``body`` is the text or a function that makes it, called only then (printing every
    stage's IR took 4% of a ResNet-18 compile with logging off)."""
    if debug_level() >= level:
        text = body() if callable(body) else body
        print(f"---- {title} ----\n{text.rstrip()}\n", file=sys.stderr, flush=True)
