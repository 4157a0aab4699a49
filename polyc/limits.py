"""Memory a compiled model needs, checked at compile time against a limit.

A model whose tensors cannot fit the machine used to compile without a word and then
fail in the first call (an input of [65536, 65536]: "internal error"), or exhaust the
machine while compiling (ArgMax over an axis of 2^31 built a 16 GiB table of
positions). The compiler now adds up what a call needs, inputs, outputs, constants and
scratch, and stops with a :class:`~polyc.errors.ResourceError` giving the sizes when
the sum passes the limit: this machine's memory by default, or ``memory_limit=`` (bytes;
``--memory-limit 64G`` on the command line). A tensor too large for 64-bit byte
offsets is a ShapeError whatever the limit.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from polyc.errors import ResourceError, ShapeError

ADDRESSABLE = 1 << 62  # bytes: offsets and sizes stay below this in 64-bit arithmetic


def machine_memory() -> int:
    """This machine's physical memory in bytes (the default limit)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 1 << 40  # unknown: 1 TiB


def size_text(nbytes: int) -> str:
    """``nbytes`` as ``512 B``, ``3.0 MiB``, ``16.0 GiB``..."""
    value, unit = float(nbytes), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if value < 1024 or unit == "EiB":
            break
        value /= 1024
    return f"{nbytes} B" if unit == "B" else f"{value:.1f} {unit}"


def tensor_bytes(name: str, shape, itemsize: int) -> int:
    """The bytes of a tensor of static ``shape`` (0 if a dim is symbolic); ShapeError
    past :data:`ADDRESSABLE`."""
    if not all(isinstance(d, int) for d in shape):
        return 0
    nbytes = itemsize
    for extent in shape:
        nbytes *= extent
    if nbytes >= ADDRESSABLE:
        raise ShapeError(f"tensor '{name}' of shape {list(shape)} would take "
                         f"{size_text(nbytes)}: more than 64-bit offsets address")
    return nbytes


def check_memory(parts: Mapping[str, int], limit: int | None) -> None:
    """ResourceError when the bytes of ``parts`` (``{"inputs": n, ...}``) add up to more
    than ``limit`` (None: :func:`machine_memory`)."""
    total = sum(parts.values())
    allowed = machine_memory() if limit is None else limit
    if total > allowed:
        what = ", ".join(f"{name} {size_text(n)}" for name, n in parts.items())
        source = "this machine's memory" if limit is None else "memory_limit"
        needed, bound = size_text(total), size_text(allowed)
        if needed == bound:
            needed, bound = f"{total} B", f"{allowed} B"
        raise ResourceError(f"the model needs {needed} per call ({what}), more than {bound} "
                            f"({source}); raise it with memory_limit= (--memory-limit SIZE) "
                            "if the machine that runs it has more")
