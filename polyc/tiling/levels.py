"""Tiles of tiles: a tiled band's band of tile loops tiled again (Pluto's
``--second-level-tile``, ``--l2tile`` in older versions), so that tiles sized for L1
run inside tiles sized for L2. On ``(i, j)``, first-level tiles of ``s`` and ``r``
of them per member in a second-level tile::

    (i, j) -> (i/(s*r), j/(s*r), i/s mod r, j/s mod r, i mod s, j mod s)

Legal for the reason the first tiling is: the band of tile loops is permutable
(``band_tile`` gives both bands the flags of the band it tiles).

The tiling stage's switch ``tile2`` (:class:`polyc.options.Options`): False, one
level (the default); True, both levels from the host's caches
(:mod:`polyc.tiling.cache`: one array's slice of a first-level tile in half of L1, of
a second-level tile in half of L2); an int ``r`` >= 2, ``r`` first-level
tiles per member (Pluto's ratio, 8 by default over first-level tiles of 32; Pluto sizes
neither level from caches when it tiles twice, refusing its tile size model). A
``tile_size`` fixes the first level.

Only bands tiled rectangularly with sizes from the cache model or ``tile_size`` get a
second level. Stencil bands keep one (their sizes model a time tile's cross-section in
L1, or L2 for distributed point loops; diamond tiles would need the second level along
their own rows, and the wavefront over their tiles a model of its own), as do
transposing bands and channel windows, whose tile shapes are for registers and L1.

Off by default: ``python benchmarks/tile2.py`` (1 thread, interleaved, medians of 10,
15 and 10 in three runs; AVX2 Zen 3, L1d 32 KiB, L2 512 KiB), time with two levels over
one, ``tile2=True`` / ``tile2=8``: gemver N=4000 1.09-1.16 / 1.10-1.14, trisolv
N=4000 0.90-0.93 / 0.90-0.96, matmul 1000^3 without the recipe 0.78-0.89 / 0.66-0.74,
2mm without the recipe 0.99-1.10 / 0.55-0.61; matmul and 2mm run the contraction
recipe by default.
"""

from __future__ import annotations

from collections.abc import Sequence

import islpy as isl

from polyc.tiling.cache import host_caches, tiles_per_tile


def describe(tile2: bool | int) -> str:
    """The switch as the tiling stage's decisions note it."""
    if tile2 is True:
        caches = host_caches()
        return (f"tile2: second-level tiles of rectangular bands sized from the caches (L1 "
                f"tiles for {caches.l1 // 1024} KiB inside L2 tiles for "
                f"{caches.l2 // 1024} KiB)")
    return f"tile2: second-level tiles of rectangular bands, {tile2} tiles per member"


def tile_options(ctx: isl.Context) -> None:
    """isl's tiling options as polyc tiles: tile loops count tiles (``i = size * T +
    p``), point loops run from 0 within their tile."""
    ctx.set_tile_scale_tile_loops(0)
    ctx.set_tile_shift_point_loops(1)


def sizes_value(band: isl.ScheduleNode, sizes: Sequence[int]) -> isl.MultiVal:
    """``sizes``, one per member of ``band``, as the MultiVal ``band_tile`` takes."""
    values = isl.MultiVal.zero(band.band_get_space())
    for k, chosen in enumerate(sizes):
        values = values.set_val(k, isl.Val.int_from_si(band.get_ctx(), chosen))
    return values


def tiled(band: isl.ScheduleNode, sizes: Sequence[int]) -> isl.ScheduleNode:
    """``band`` tiled by ``sizes`` (one per member): its band of tile loops, above the
    band of point loops. Given a band of tile loops, the second level of tiles, ``sizes``
    first-level tiles per member."""
    tile_options(band.get_ctx())
    return band.band_tile(sizes_value(band, sizes))


def ratios(tile2: bool | int, sizes: Sequence[int]) -> list[int]:
    """First-level tiles per member of a second-level tile, for first-level tiles of
    ``sizes``."""
    if tile2 is True:
        return [tiles_per_tile(size) for size in sizes]
    return [tile2] * len(sizes)


def worth_it(extents: Sequence[int | None], sizes: Sequence[int],
             counts: Sequence[int]) -> bool:
    """Whether second-level tiles of ``counts`` first-level tiles of ``sizes`` split a
    band of these extents (None: not constant) at all: some member runs longer than
    one of them."""
    return any(c > 1 for c in counts) and any(
        e is None or e > s * c for e, s, c in zip(extents, sizes, counts))
