"""The one place polyc reads (and, to load libgomp, sets) its environment.

| variable            | meaning                                                        |
|---------------------|----------------------------------------------------------------|
| ``POLYC_DEBUG``     | 0 quiet; 1 stage names and times; 2 IR after each stage;       |
|                     | 3 dependences and scheduler systems; 4 LLVM IR                 |
| ``POLYC_CC``        | C compiler that links AOT artifacts and preprocesses C sources |
|                     | (``polyc cc``; default ``cc``)                                 |
| ``POLYC_PROGRESS``  | ``0`` / ``off``: no progress line for long compiles on a terminal |
| ``POLYC_CACHE``     | ``0`` / ``off``: no compile cache (see :mod:`polyc.cache`)     |
| ``POLYC_CACHE_DIR`` | the compile cache's folder (default ``~/.cache/polyc``)        |
| ``POLYC_CACHE_SIZE``| its bound in bytes, or with a unit: ``512M``, ``8G``           |
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
from pathlib import Path

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
    """The C compiler that links AOT artifacts and preprocesses C sources."""
    return os.environ.get("POLYC_CC", "cc")


def _switch(name: str) -> bool:
    """Whether the on/off variable ``name`` is on (unset counts as on)."""
    return os.environ.get(name, "1").strip().lower() not in ("0", "off", "no", "false")


def progress_enabled() -> bool:
    """Whether long compiles on a terminal show their progress (``POLYC_PROGRESS``)."""
    return _switch("POLYC_PROGRESS")


def cache_enabled() -> bool:
    """Whether compiles use the compile cache (``POLYC_CACHE`` is not 0/off/no/false)."""
    return _switch("POLYC_CACHE")


def cache_dir() -> Path:
    """``$POLYC_CACHE_DIR``, else ``$XDG_CACHE_HOME/polyc``, else ``~/.cache/polyc``."""
    if os.environ.get("POLYC_CACHE_DIR"):
        return Path(os.environ["POLYC_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "polyc"


SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """``"64G"`` -> bytes (units K, M, G, T of 1024; a plain number is bytes); ValueError
    for anything else, or a size below one byte."""
    text = text.strip()
    unit = text[-1:].upper() if text[-1:].upper() in SIZE_UNITS else ""
    value = int(float(text[:len(text) - len(unit)]) * SIZE_UNITS[unit])
    if value < 1:
        raise ValueError(f"not a positive size: {text!r}")
    return value


def cache_size(default: int) -> int:
    """``$POLYC_CACHE_SIZE`` in bytes (``default`` when unset; a bad value warns)."""
    text = os.environ.get("POLYC_CACHE_SIZE")
    if not text:
        return default
    try:
        return parse_size(text)
    except ValueError:
        print(f"polyc: POLYC_CACHE_SIZE={text!r} is not a size such as 512M or 8G; "
              f"using {default} bytes", file=sys.stderr)
        return default


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
