"""Cache sizes of the host (Linux sysfs), and the tile size they suggest.

The model: a rectangular tile of a band touches, per array it accesses, about
``size ** 2`` elements (2-d slices: matrices, stencil planes); the tiles of all arrays
should fit in half the L2 cache, so a tile's data is reused from L2 across the loops
inside it. Sizes are multiples of 16 floats (one zmm vector) between 16 and 256.

With second-level tiles (:mod:`polyc.tiling.levels`) each level holds one array's
``size ** 2`` slice (the operand the loops inside the tile reuse, matmul's ``B``
across ``i``): the first level in half of L1, the second in half of L2
(:func:`tiles_per_tile`). Counting every array, as one level does, made first-level
tiles of 16 to 32 on this host, and those lost 1.3x to 3.9x (the loops inside them too
short): see :mod:`polyc.tiling.levels`.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from math import isqrt
from pathlib import Path

SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")
DEFAULTS = {1: 32 * 1024, 2: 1024 * 1024, 3: 8 * 1024 * 1024}  # when sysfs says nothing
FLOAT_BYTES = 4
VECTOR = 16  # floats per zmm register


@dataclass(frozen=True)
class Caches:
    l1: int  # data cache bytes per core
    l2: int
    l3: int


# the sizes a compile tiles for instead of the host's (Options.caches), while it runs
_ASSUMED: contextvars.ContextVar[Caches | None] = contextvars.ContextVar("caches", default=None)


@contextlib.contextmanager
def assumed(levels: Mapping[str, int] | None):
    """Within the block, :func:`host_caches` gives ``levels`` (bytes by level name:
    ``{"l2": 262144}``) for the levels given, the host's for the others; None: the
    host's."""
    if not levels:
        yield
        return
    token = _ASSUMED.set(dataclasses.replace(host_caches(), **levels))
    try:
        yield
    finally:
        _ASSUMED.reset(token)


def host_caches(root: Path = SYSFS) -> Caches:
    """The cache sizes tiling sizes for: the host's (:func:`sysfs_caches`), or those
    a compile assumes instead (:func:`assumed`)."""
    return _ASSUMED.get() or sysfs_caches(root)


@functools.cache
def sysfs_caches(root: Path = SYSFS) -> Caches:
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


def tile_size(arrays: int, caches: Caches | None = None, *, level: int = 2) -> int:
    """Tile size for a band accessing ``arrays`` distinct arrays, its tiles' data in
    half of the cache of ``level`` (2: L2, 1: L1)."""
    caches = caches or host_caches()
    cache = caches.l1 if level == 1 else caches.l2
    elements = cache // 2 // FLOAT_BYTES // max(arrays, 1)
    size = isqrt(elements) // VECTOR * VECTOR
    return min(max(size, VECTOR), 256)


def tiles_per_tile(first: int, caches: Caches | None = None) -> int:
    """First-level tiles of ``first`` iterations per member of a second-level tile: one
    array's slice in half of L2 (at least one first-level tile)."""
    return max(tile_size(1, caches) // first, 1)
