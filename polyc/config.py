"""The one place polyc reads its environment.

| variable            | meaning                                                        |
|---------------------|----------------------------------------------------------------|
| ``POLYC_DEBUG``     | 0 quiet; 1 stage names and times; 2 IR after each stage;       |
|                     | 3 dependences and scheduler systems; 4 LLVM IR                 |
| ``POLYC_CC``        | C compiler used to link AOT artifacts (default ``cc``)         |

Everything else in polyc calls :func:`debug_level` and :func:`log` instead of
reading ``os.environ`` or printing.
"""

import os
import sys

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


def log(level: int, text: str) -> None:
    """Write ``text`` to stderr when ``POLYC_DEBUG >= level``."""
    if debug_level() >= level:
        print(text, file=sys.stderr, flush=True)


def log_section(level: int, title: str, body: str) -> None:
    """Write a titled block (an IR dump) to stderr when ``POLYC_DEBUG >= level``."""
    if debug_level() >= level:
        print(f"---- {title} ----\n{body.rstrip()}\n", file=sys.stderr, flush=True)
