"""Cache sizes of the host (:mod:`polyc.host`), and the tile size they suggest.

The model: a rectangular tile of a band touches, per array it accesses, about
``size ** 2`` elements (2-d slices: matrices, stencil planes); the tiles of all arrays
should fit in half the L2 cache, so a tile's data is reused from L2 across the loops
inside it. Sizes are multiples of 16 floats (one zmm vector) between 16 and 256.
"""

from __future__ import annotations

from math import isqrt

from polyc.host import SYSFS, Caches, host_caches  # noqa: F401  (re-exported)

FLOAT_BYTES = 4
VECTOR = 16  # floats per zmm register


def tile_size(arrays: int, caches: Caches | None = None) -> int:
    """Tile size for a band accessing ``arrays`` distinct arrays."""
    caches = caches or host_caches()
    elements = caches.l2 // 2 // FLOAT_BYTES // max(arrays, 1)
    size = isqrt(elements) // VECTOR * VECTOR
    return min(max(size, VECTOR), 256)
