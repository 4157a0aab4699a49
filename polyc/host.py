"""The host's cache sizes (Linux sysfs), read at run time: the frontend sizes some
lowerings by them (a strided conv's weights in L2), the tiling stage its tiles and
blocks (:mod:`polyc.tiling.cache`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")
DEFAULTS = {1: 32 * 1024, 2: 1024 * 1024, 3: 8 * 1024 * 1024}  # when sysfs says nothing


@dataclass(frozen=True)
class Caches:
    l1: int  # data cache bytes per core
    l2: int
    l3: int


@functools.cache
def host_caches(root: Path = SYSFS) -> Caches:
    """Data/unified cache sizes per level from sysfs; the defaults where missing."""
    found: dict[int, int] = {}
    for index in sorted(root.glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = _bytes((index / "size").read_text().strip())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified"):
            found[level] = size
    sizes = {level: found.get(level, default) for level, default in DEFAULTS.items()}
    return Caches(sizes[1], sizes[2], sizes[3])


def _bytes(text: str) -> int:
    units = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
    if text[-1:].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)
