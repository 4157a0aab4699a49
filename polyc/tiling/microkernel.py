"""The contraction recipe as a schedule subtree: cache blocks, packed panels and a
register tile of vector accumulators (the loop structure of BLIS / GotoBLAS).

For ``C[i, j] += A[i, k] * Bp[j/nr, k, j%nr]``, its packing copy ``P`` (none when B
is a constant, packed at compile time in panels of 16 columns: ``Bp[j/16, k, j%16]``),
and the
statements attached to its tiles (:mod:`polyc.tiling.epilogue`: the init ``I`` of C
and an elementwise ``E`` reading C)::

    band  [batch.., j/nc, k/kc]          cache blocks (I at the first k block, E at the last)
      sequence
        P: band [jb, k, jj/16]  mark vector  band [jj]     pack the kc x nc block
        band [i/mc, i/mr, j/nr]                            one register tile
          sequence
            I: mark register_tile  band [i, j/16]     mark vector  band [j]
            S: mark register_tile  band [k, i, j/16]  mark vector  band [j]
            E: mark register_tile  band [i, j/16]     mark vector  band [j]

Inside a full register tile the ``k`` loop carries ``mr x nr/16`` vector accumulators
(the loads and stores of C do not depend on ``k``, so LLVM keeps them in registers);
each step broadcasts ``mr`` elements of A and loads ``nr/16`` vectors of packed B.
The ``mr`` rows of A stay in L1 while the tile walks along the packed ``kc x nc``
block, which streams from L2 (column tiles inside row tiles: on this machine kind
MatMul+Add+Relu 1024^3 went from 1.03 to 0.93 of onnxruntime's time, the other cases
within noise). ``I`` and ``E`` touch the tile while it is in registers or L1, instead
of a pass over the whole of C each. Full tiles are separated from partial ones with isl's
``isolate`` option on each ``register_tile`` band, with ``i`` and ``j/16`` unrolled (by
codegen: their loops have constant trip counts); partial tiles run the same loops
with masked lanes. Every ``k`` stays in its original order for each ``C`` element, so the sums
are the same as the untiled loops' (bit for bit without fast-math).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import islpy as isl

from polyc.errors import PolycError
from polyc.frontend.ops.conv import ends_in_half_vector
from polyc.islutil import multi_union, outer_schedule, param_aff, statement_names, variable
from polyc.marks import HALF, LANES
from polyc.marks import REGISTER_TILE as REGISTER_MARK
from polyc.marks import UNROLL as UNROLL_MARK
from polyc.marks import VECTOR as VECTOR_MARK
from polyc.tiling.cache import FLOAT_BYTES, Caches
from polyc.tiling.contraction import Contraction
from polyc.tiling.epilogue import Attached
from polyc.tiling.packing import Packed

# mr x nr, 24 zmm accumulators each; 1024^3 measured 145, 142 and 137 GFLOP/s
REGISTER_TILES = ((6, 64), (8, 48), (12, 32))
# Of doubles (a 16-lane vector is 2 zmm registers): 24 registers of accumulators too.
WIDE_TILES = ((6, 32), (12, 16))
DOUBLE_BYTES = 8
# With symbolic rows (a batch) the last row tile is partial at most values, and its loops
# then have no constant trip count: tiles of 8 or 4 rows divide the usual batch sizes.
# Measured against artifacts compiled for the batch (1 thread): a symbolic N x 512 x 1024
# matmul took 1.05-1.07x their time at N = 8 / 64 / 200 with 8x32 or 4x64 tiles, and
# 1.08-1.26x with 6x64; the 512-1024-256 MLP took 0.94 / 1.03x at batch 8 / 64 with
# 8x32 and 1.14 / 1.07x with 4x64 (at batch 3: 1.11 and 1.00x).
SYMBOLIC_ROW_TILES = ((8, 32), (4, 64), (4, 48))
# The reduction in the fewest equal blocks of at most KC steps (measured: before, blocks
# of 256 and a last one of what was left; 1 thread, artifacts interleaved with
# onnxruntime: matmul 512^3 2.650 -> 2.515 ms, the 2-layer MLP at batch 64 0.982 ->
# 0.938, 1x1 conv 1024 -> 256 at 14x14 0.974 -> 0.955, EfficientNet's 1152 -> 192
# projections at 7x7 in 5 blocks of 256 / 3 of 384 ~209 / 200 us; 512 and 1024 within
# noise on the models).
KC = 512
# A tile of all of few rows needs this many reduction steps (see ACCUMULATORS).
FEW_ROWS_STEPS = 256
# Fewer rows than this many tiles of the chosen height, one of them partial: a tile that
# divides the rows (and columns) instead, if one does. A 784->256 layer at batch 8
# (examples like tests' mlp2) with 6x64 tiles, one of 2 rows: 75 us when the columns
# were blocked for threads (LLVM kept the full tile's 24 accumulators in registers
# around the partial tile's loop, which spilled), 28 us with 8x32 (116 GFLOP/s).
FEW_ROW_TILES = 4
# A product of at most this many rows that its tile's height leaves a partial tile of,
# and that SEVEN_ROW_TILE's rows divide (a 1x1 conv over 7x7 pixels: 49 = 8 x 6 + 1),
# takes that tile, even with a partial column tile (1 thread, interleaved with
# onnxruntime, 6x64 -> 7x48, 1x1 convs at 7x7 over onnxruntime's time: 960 -> 320
# 0.96 -> 0.92, 160 -> 960 0.97 -> 0.92, 320 -> 1280 0.98 -> 0.94, 512 -> 2048 0.96 ->
# 0.94, 2048 -> 512 0.97 -> 0.95; at 14x14, 196 rows, within noise). In parallel when
# the busier of two threads then computes fewer rows x columns (:func:`_two_thread_work`),
# its column blocks sized to balance them (:func:`_balanced_share`): with blocks of
# PARALLEL_COLUMN_BLOCKS, 2048 -> 512's were 3 x 96 and 2 x 96 + 32 (0.555 -> 0.593 ms;
# 6x64: 2 x 128 each, kept). Default builds, 2 threads: 960 -> 320 0.178 -> 0.152 ms,
# 160 -> 960 0.082 -> 0.076, 320 -> 1280 0.234 -> 0.197, 512 -> 2048 0.512 -> 0.487.
SEVEN_ROWS = 64
SEVEN_ROW_TILE = (7, 48)  # 21 accumulators
# A direct conv's tile (weights packed, output channels in the lanes) is 6 to 8 pixels
# of an output row x 32 channels, as many pixels as leave the fewest to a partial tile
# (7 before 8 before 6): 3x3 convs + Relu, 1 thread, time over onnxruntime's with 5x64
# -> 7x32 tiles: 64ch at 56x56 1.01 -> 0.96, 128ch at 28x28 0.97 -> 0.94, 256ch at
# 14x14 1.00 -> 0.98, 512ch at 7x7 1.07 -> 0.94 (7x48: 0.98, 0.97, 1.05, 0.97; 8x32:
# 1.00, 0.97, 0.98, 0.98). With 6x64 LLVM spilled an accumulator.
PACKED_DIRECT_ROWS = (7, 8, 6)
# When none of those divides a row of pixels, a count of these that does, the largest
# (at most 24 accumulators): squeezenet's 3x3 convs, 1 thread, 55 pixels a row 7x32
# -> 11x32 tiles 508 -> 486 us, 27 a row 7x32 -> 9x32 477 -> 463 us.
EXACT_DIRECT_ROWS = range(5, 13)
PACKED_DIRECT_COLUMNS = 32
# Channels that leave one vector to a last tile (48, 80, 144, 240...) take tiles one
# vector wide: the partial tile's masked half had cost its FMAs (a 1x1 conv 16 -> 72
# channels, rounded to 80, at 56x56 + Relu: 97-102 us with 7x32 tiles, 85 us with
# 8x16). 1 thread, each model's artifacts with and without interleaved with
# onnxruntime: mobilenetv3 1.80 -> 1.72 and 1.90 -> 1.84 ms, mobilenetv2 6.70 -> 6.58
# and 6.50 -> 6.44, efficientnet 10.43 -> 10.27 (2 threads: mobilenetv3 1.36 -> 1.29,
# efficientnet 6.80 -> 6.82).
# With fewer output channels than its columns, the tile is as many vectors wide as they
# fill, and this many accumulators: 16x16 (3x3 stride-2 convs + Relu, 1 thread,
# time over onnxruntime's: 3->16 channels at 320x320 1.09-1.12 with 8 or 16 rows, 1.25
# with 20, 1.33 with 24).
NARROW_DIRECT_ACCUMULATORS = 16
# With fewer rows than any tile (a conv over 1 to 4 pixels, as a transposed product), a
# tile of all of them and as many vectors as make ACCUMULATORS, at most FEW_ROWS_VECTORS
# (the loads of B per step: 2 per cycle keep pace with the FMAs), when the reduction has
# at least KC steps (examples/mlp.onnx, 4x64 @ 64x128, took 1.31-1.34x onnxruntime's
# time with the recipe, 1.26-1.29x without) or B is not read along the lanes as it is
# (a squeeze-excite's 1x1 conv 48 -> 1152 on one pixel, its weights [m, c] read
# across j, ran the plain loops at 1.8 GFLOP/s).
ACCUMULATORS = 24
FEW_ROWS_VECTORS = 8
# Run in parallel, a contraction has at least this many column blocks (nc) of whole
# register tiles when it has as many tiles (the fewest blocks that makes), so that the
# outermost loop splits the columns (and B's panels) between the threads once per call,
# unless it has a single k block and twice as many row tiles (a direct conv: output
# rows), which the threads then split. Otherwise they would split the row tiles inside
# every k block (3x3 conv 512ch at 7x7, 2 threads: 1.01 ms with nc = 512, its 7 output
# rows split 4 + 3 in each of 19 k blocks; 0.86 ms with nc = 128; onnxruntime 0.78
# ms). When the best register tile for the shape leaves fewer column tiles and another
# divides the columns as exactly, that one is taken. 1x1 convs at 7x7, 2 threads
# (EfficientNet's projections 1152 -> 192): a product 0.131 ms with 6x64 tiles (3
# column blocks; the threads split 9 row tiles in each of 15 blocks), 0.109 ms with 8x48
# (4 blocks, split once), onnxruntime 0.172 ms; in the model (7x32 direct tiles) 6
# blocks of 32 columns, not 3 of 64: 0.19-0.22 -> 0.15 ms each. With fewer tiles than
# that the columns stay in one block: blocks of a tile each (the fewest had been 1) are
# too few for the threads to split, which then split the rows inside every block, and
# on one thread each block re-read the input (squeezenet's conv1, 3 -> 96 channels,
# 3 blocks 1.00 ms, 1 block 0.88; squeezenet default build, 1 / 2 threads: 6.95 ->
# 6.60 ms, 4.09 -> 3.70). A direct conv over output rows (a batch the threads can
# split) with one k block splits its columns only when it has fewer than twice
# PARALLEL_COLUMN_BLOCKS rows: otherwise the threads split the rows, once, and one
# thread is not left with blocks that each re-read the input (default builds,
# interleaved, 1 / 2 threads: mobilenetv3 1.679 -> 1.646 / 1.138 -> 1.058 ms,
# mobilenetv2 6.296 -> 6.229 / 3.894 -> 3.810, efficientnet 9.802 -> 9.742 / 6.408 ->
# 6.184, resnet18 0.965 -> 0.954 / 0.655 -> 0.614, squeezenet 7.109 -> 6.979 / 4.030
# -> 3.929).
PARALLEL_COLUMN_BLOCKS = 4


@dataclass(frozen=True)
class RegisterFile:
    """The register tiles of one vector width (the constants above are AVX-512's, whose
    32 zmm registers hold 24 accumulators of 16 floats). Accumulators are counted in
    polyc's vectors of :data:`LANES` floats, whatever registers they take."""

    tiles: tuple[tuple[int, int], ...]
    symbolic_tiles: tuple[tuple[int, int], ...]
    wide_tiles: tuple[tuple[int, int], ...]
    seven_row_tile: tuple[int, int] | None  # (None: no such tile)
    accumulators: int
    few_rows_vectors: int
    direct_rows: tuple[int, ...]
    exact_direct_rows: Sequence[int]
    direct_columns: int
    narrow_direct_accumulators: int


ZMM = RegisterFile(REGISTER_TILES, SYMBOLIC_ROW_TILES, WIDE_TILES, SEVEN_ROW_TILE,
                   ACCUMULATORS, FEW_ROWS_VECTORS, PACKED_DIRECT_ROWS, EXACT_DIRECT_ROWS,
                   PACKED_DIRECT_COLUMNS, NARROW_DIRECT_ACCUMULATORS)
# AVX2's 16 ymm registers of 8 floats: 12 accumulators (6 of polyc's vectors), a
# broadcast of A and a load of B, as BLIS's 6x16 Haswell kernel. AVX-512's tiles there
# (24 zmm accumulators: 48 ymm) spilled: matmul+add+relu 1024^3, 1 thread, interleaved
# with onnxruntime (AVX2 Zen 3): 6x64 tiles 81.6-86.0 ms, 3.1-3.2x onnxruntime's
# time; 6x16, 5x16 and 4x16 24.6-27.2 ms, 0.93-1.02x; 3x32 54.1 ms, 2x48 48.2 ms. No
# 4x16 though: where A is read through divisions (BERT's attention output projection,
# its context head-major) 4x16 tiles ran at 19-28 GFLOP/s, 3x16 at 66, 5x16 and 6x16
# at 75-89 (bert4, 128 x 512 x 512, 1 thread, polyc's profile).
# Doubles: 16 lanes are 4 ymm registers, so tiles of 8 (half) or 16 columns.
YMM = RegisterFile(tiles=((6, 16), (5, 16)),
                   symbolic_tiles=((4, 16), (2, 32)),
                   wide_tiles=((6, 8), (3, 16)),
                   seven_row_tile=None, accumulators=6, few_rows_vectors=4,
                   direct_rows=(6, 5, 4), exact_direct_rows=range(3, 7), direct_columns=16,
                   narrow_direct_accumulators=6)


def register_file(bits: int | None = None) -> RegisterFile:
    """The register tiles for vectors of ``bits`` (default: the width the compile sizes
    for, :func:`polyc.host.vector_bits`): :data:`ZMM` with AVX-512, else :data:`YMM`
    (SSE's 16 xmm registers too, which then spill: no SSE-only host has been measured)."""
    from polyc.host import vector_bits  # (llvmlite: only when a contraction is tiled)
    return ZMM if (bits or vector_bits()) >= 512 else YMM


@dataclass(frozen=True)
class Blocking:
    """Register tile ``mr x nr`` and cache blocks ``mc x nc x kc`` (in elements)."""

    mr: int
    nr: int
    mc: int
    nc: int
    kc: int

    def __post_init__(self):
        values = (self.mr, self.nr, self.mc, self.nc, self.kc)
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
            raise PolycError(f"blocking sizes must be positive ints, got {self!r}")
        if self.nr % HALF or self.mc % self.mr or self.nc % self.nr:
            raise PolycError(f"blocking {self!r}: nr must be a multiple of {HALF} (half "
                             "the vector width), mc of mr and nc of nr")

    def __str__(self) -> str:
        return (f"register tile {self.mr}x{self.nr}, blocks mc={self.mc} nc={self.nc} "
                f"kc={self.kc}")


def as_blocking(value) -> Blocking | None:
    """A :class:`Blocking` from itself, ``(mr, nr, mc, nc, kc)`` or None."""
    if value is None or isinstance(value, Blocking):
        return value
    try:
        mr, nr, mc, nc, kc = value
    except (TypeError, ValueError):
        raise PolycError(f"blocking must be (mr, nr, mc, nc, kc), got {value!r}") from None
    return Blocking(mr, nr, mc, nc, kc)


def choose_blocking(c: Contraction, caches: Caches, *, parallel: bool = False,
                    registers: RegisterFile | None = None) -> Blocking:
    """Sizes from the shape and the caches:

    - the register tile that leaves the fewest columns (then rows) to partial tiles
      (of :data:`SYMBOLIC_ROW_TILES` when the rows are symbolic; 7x48 for a few rows
      that 7 divides, :data:`SEVEN_ROWS`); rows first with
      inner reductions (a direct convolution), :data:`PACKED_DIRECT_ROWS` (or
      :data:`EXACT_DIRECT_ROWS`) x :data:`PACKED_DIRECT_COLUMNS` when its weights are
      packed (one vector wide when that would leave a last tile of one vector;
      narrower for fewer channels: :data:`NARROW_DIRECT_ACCUMULATORS`);
      all the rows when there are fewer than any tile has and at least
      :data:`FEW_ROWS_STEPS` reduction steps (see :data:`ACCUMULATORS`);
    - with inner reductions (a direct convolution: ``k`` its input channels), all of
      them when one register tile's panel of weights (``nr`` x ``k`` x ``inner_size``)
      fits half of L2, else the fewest equal blocks that do: each k block is a pass
      over the whole output, which at 56x56 and more pixels does not stay in L2 (3x3
      conv + Relu, 1 thread, the conv's time: 64ch at 224x224 21.0 ms with blocks of
      28 channels, 28 + 28 + 8, 17.9 ms with all 64; 512ch at 28x28 21.4 -> 19.7 ms;
      512ch at 7x7 the same);
    - ``kc``: the fewest equal blocks of at most :data:`KC` steps (96 and 128 lost 30%);
    - ``nc`` so the packed block ``kc x nc`` fills half of L2, reused by every row tile,
      and, ``parallel``, the columns make at least :data:`PARALLEL_COLUMN_BLOCKS`
      blocks (when there are as many register tiles; a narrower tile is taken when
      that makes enough) if there are several k blocks or fewer than twice as many
      row tiles (a direct conv: output rows);
    - ``mc`` so a block of A ``mc x kc`` fills an eighth of L2 (row tiles per block;
      with column tiles inside row tiles it matters little).

    Blocks never exceed the extents (rounded up to whole register tiles). A product of
    doubles: :func:`_wide_blocking`. The tiles are those of ``registers`` (default:
    :func:`register_file`, the host's vector width): the names above are AVX-512's."""
    r = registers or register_file()
    if c.wide:
        return _wide_blocking(c, caches, r)
    m, n, k = c.size("i"), c.size("j"), c.size("k")
    tiles = r.symbolic_tiles if isinstance(c.extent("i"), str) else r.tiles
    inner = c.inner_size
    columns = lambda t: _columns_left(n, t)  # noqa: E731
    # a direct convolution: the most work in full tiles, then full rows (3x3 conv 64ch
    # at 56x56: 8x48 231 GFLOP/s; 6x64 and 12x32, each a partial tile of 4 rows, 161-169)
    full = lambda t: (m // t[0] * t[0] / m) * (n // t[1] * t[1] / n)  # noqa: E731
    mr, nr = min(tiles, key=(lambda t: (-full(t), m % t[0])) if c.inner else
                 (lambda t: (columns(t), m % t[0])))
    if not c.inner and m % mr and m < FEW_ROW_TILES * mr:  # a partial tile of many rows
        exact = [t for t in r.tiles + r.symbolic_tiles
                 if m % t[0] == 0 and columns(t) == 0]
        if exact:
            mr, nr = max(exact, key=lambda t: t[0] * t[1])
    seven = r.seven_row_tile
    if seven and not c.inner and m % mr and m <= SEVEN_ROWS and m % seven[0] == 0 \
            and n >= seven[1] and tiles is r.tiles and (
                not parallel or _two_thread_work(m, n, seven, _balanced_share)
                < _two_thread_work(m, n, (mr, nr), _floor_share)):
        mr, nr = seven
    if parallel and not c.inner and n // nr < PARALLEL_COLUMN_BLOCKS and columns((mr, nr)) == 0:
        split = [t for t in tiles if columns(t) == 0 and n // t[1] >= PARALLEL_COLUMN_BLOCKS
                 and m % t[0] <= m % mr]
        if split:  # the widest tile whose columns the threads split
            mr, nr = max(split, key=lambda t: t[1])
    if not c.inner and LANES <= n < min(t[1] for t in tiles):  # narrow: whole vectors
        nr = n // LANES * LANES
        mr = max(1, min(r.accumulators // (nr // LANES), m))
    few_rows = m < min(t[0] for t in tiles) and n >= LANES
    if few_rows and (k >= FEW_ROWS_STEPS or not c.b_contiguous):
        mr, nr = m, LANES * max(1, min(r.few_rows_vectors, r.accumulators // m, n // LANES))
    if c.direct:  # a direct conv, its weights packed
        mr, nr = _direct_tile(m, n, r)
    # with inner reductions a k step is a whole kernel window
    kc = _even_blocks(k, KC) if not c.inner else \
        _even_blocks(k, caches.l2 // 2 // (inner * nr * FLOAT_BYTES))
    mc, nc = _cache_blocks(caches, kc * inner, FLOAT_BYTES, (mr, nr), m, n)
    rows_inside = c.direct and c.shared_rows
    tiles = -(-n // nr)
    row_tiles = c.shared_size if rows_inside else -(-m // mr)
    if parallel and tiles >= PARALLEL_COLUMN_BLOCKS and (
            k > kc or row_tiles < 2 * PARALLEL_COLUMN_BLOCKS):
        share = _balanced_share if (mr, nr) == seven else _floor_share
        nc = min(nc, nr * share(tiles))
    return Blocking(mr, nr, mc, nc, kc)


def _wide_blocking(c: Contraction, caches: Caches, r: RegisterFile) -> Blocking:
    """A product of doubles (a vector of 16 is two registers): of :data:`WIDE_TILES`, the
    one leaving the fewest columns (then rows) to partial tiles (all the rows when there
    are fewer); blocks as for floats with 8-byte elements."""
    m, n, k = c.size("i"), c.size("j"), c.size("k")
    mr, nr = min(r.wide_tiles, key=lambda t: (_columns_left(n, t), m % t[0]))
    mr = min(mr, m)
    kc = _even_blocks(k, KC)
    mc, nc = _cache_blocks(caches, kc, DOUBLE_BYTES, (mr, nr), m, n)
    return Blocking(mr, nr, mc, nc, kc)


def _columns_left(n: int, tile: tuple[int, int]) -> int:
    """The columns of ``n`` that ``tile``'s full column tiles leave over (all when it is
    wider than ``n``)."""
    return n % tile[1] if tile[1] <= n else n


def _cache_blocks(caches: Caches, steps: int, element: int, tile: tuple[int, int],
                  m: int, n: int) -> tuple[int, int]:
    """``(mc, nc)``: a packed block of ``steps`` x ``nc`` elements fills half of L2, a
    block of A ``mc`` x ``steps`` an eighth (whole register tiles, within the extents)."""
    mr, nr = tile
    return (_fit(caches.l2 // 16 // (steps * element), mr, m),
            _fit(caches.l2 // 2 // (steps * element), nr, n))


def _floor_share(tiles: int) -> int:
    """Column tiles per block on threads: PARALLEL_COLUMN_BLOCKS blocks or more."""
    return max(tiles // PARALLEL_COLUMN_BLOCKS, 1)


def _balanced_share(tiles: int) -> int:
    """Column tiles per block on threads for a tile whose last column tile is partial
    (7x48): the most, at most :func:`_floor_share`, that leave the busier of two
    threads the fewest tiles (43 tiles in blocks of 10 split 30 / 13 between them, in
    blocks of 2, 22 / 21)."""
    return min(range(1, _floor_share(tiles) + 1), key=lambda s: (_busier(tiles, s), -s))


def _busier(tiles: int, share: int) -> int:
    """The column tiles of the busier of two threads that split blocks of ``share``
    tiles (the first thread takes the first half of the blocks, rounded up)."""
    blocks = -(-tiles // share)
    return min((blocks + 1) // 2 * share, tiles)


def _two_thread_work(m: int, n: int, tile: tuple[int, int], share) -> int:
    """Rows x columns the busier of two threads computes with ``tile`` when they split
    its column tiles in blocks of ``share(tiles)`` (rows rounded up to whole tiles):
    49 x 2048 with 7x48 tiles 49 x 1056, with 6x64 54 x 1024."""
    mr, nr = tile
    tiles = -(-n // nr)
    return -(-m // mr) * mr * _busier(tiles, share(tiles)) * nr


def _direct_tile(m: int, n: int, r: RegisterFile) -> tuple[int, int]:
    """The register tile of a direct conv with packed weights over ``m`` pixels of an
    output row and ``n`` channels (see :func:`choose_blocking`)."""
    # 24, 40 or 56 channels (MobileNet's and EfficientNet's projections), which the
    # lowering computes as they are: one tile wide, its last 8 a half vector (codegen's
    # HALF lanes)
    half_vector = ends_in_half_vector(n)
    columns = r.direct_columns
    if n >= columns or half_vector:
        if half_vector:
            nr = n
        elif n % columns == LANES:  # (a last tile of one vector)
            nr = LANES
        else:
            nr = columns
        mr = min(r.direct_rows, key=lambda rows: -(-m // rows) * rows)
        exact = [rows for rows in r.exact_direct_rows if m % rows == 0]
        if m % mr and exact:
            mr = max(exact)
        if r is not ZMM:  # no more accumulators than the registers hold (vectors rounded up)
            mr = max(1, min(mr, r.accumulators // -(-nr // LANES)))
    else:  # fewer channels: a narrower tile, more pixels
        nr = max(n // LANES, 1) * LANES
        mr = r.narrow_direct_accumulators // (nr // LANES)
    return min(mr, m), nr  # a row of fewer pixels: one tile of all of them


def _even_blocks(extent: int, most: int) -> int:
    """The size of the fewest equal blocks of at most ``most`` (at least 1) that cover
    ``extent``."""
    blocks = -(-extent // max(most, 1))
    return -(-extent // blocks)


def _fit(budget: int, unit: int, extent: int) -> int:
    """``budget`` rounded down to a multiple of ``unit`` (at least one unit), and no
    more than ``extent`` rounded up to one."""
    size = max(budget // unit, 1) * unit
    return min(size, -(-extent // unit) * unit)


def recipe_schedule(packed: Packed, block: Blocking,
                    attached: Sequence[Attached] = ()) -> isl.Schedule:
    """The subtree above (domain: the statement, its packing copy unless B was packed
    at compile time, and the statements ``attached`` to its register tiles)."""
    c, copy = packed.contraction, packed.copy
    s_space = c.statement.domain.get_space()
    nb, panel = len(c.batch), packed.nr
    s = lambda d: variable(s_space, d)  # noqa: E731

    i, j, k = s(c.i), s(c.j), s(c.k)
    parts = [(c.statement.domain, None)] + [(a.statement.domain, a) for a in attached]
    trees = {}
    for domain, a in parts:  # innermost: a row of vectors; k outside them for S
        tree = _band(isl.Schedule.from_domain(isl.UnionSet.from_set(domain)),
                     [(domain, a)], [j])
        tree = _band(_mark(tree, VECTOR_MARK), [(domain, a)],
                     ([] if a else [s(d) for d in c.reductions]) + [i, _div(j, LANES)])
        trees[domain.get_tuple_name()] = _mark(tree, REGISTER_MARK)
    order = [a.statement.name for a in attached if a.prologue] + [c.statement.name] + \
        [a.statement.name for a in attached if not a.prologue]
    tile_tree = trees[order[0]]
    for name in order[1:]:
        tile_tree = tile_tree.sequence(trees[name])
    # batch loops that B's panels (packed at compile time) do not vary with run inside
    # the cache blocks, as more rows: each k x nc block of B serves all of them
    shared = [] if copy is not None else list(c.shared_batch)
    outer = [d for d in c.batch if d not in shared]
    tile_tree = _band(tile_tree, parts, [s(d) for d in shared]
                      + [_div(i, block.mc), _div(i, block.mr), _div(j, block.nr)])
    band = tile_tree.get_root().child(0)
    for member in range(len(shared) + 2):  # batches, row and column blocks of C: no
        band = band.band_member_set_coincident(member, 1)  # dependence crosses them

    rows = [_rows(parts, s(d)) for d in outer]
    rows.append(_rows(parts, _div(j, block.nc)))
    k_blocks = _union(c.statement.domain, _div(k, block.kc))
    if copy is None:  # packed at compile time
        tree = band.get_schedule()
    else:
        tree = _copy_tree(packed).sequence(band.get_schedule())
        p_space = copy.domain.get_space()
        p = lambda d: variable(p_space, d)  # noqa: E731
        p_j = p(nb).scale_val(_val(p_space, panel)).add(p(nb + 2))
        rows = [row.union_add(_union(copy.domain, p(n))) for n, row in enumerate(rows[:nb])] \
            + [rows[nb].union_add(_union(copy.domain, _div(p_j, block.nc)))]
        k_blocks = k_blocks.union_add(_union(copy.domain, _div(p(nb + 1), block.kc)))
    for a in attached:  # the first k block for a prologue, the last for an epilogue
        a_space = a.statement.domain.get_space()
        k_blocks = k_blocks.union_add(_union(a.statement.domain, _constant(a_space, 0)
                                             if a.prologue else
                                             _last_block(a_space, c.extent("k"), block.kc)))
    rows.append(k_blocks)
    node = tree.insert_partial_schedule(_multi(rows)).get_root().child(0)
    node = node.band_set_permutable(1)
    for member in range(len(outer) + 1):  # batch and column blocks: no dependence crosses them
        node = node.band_member_set_coincident(member, 1)
    return node.get_schedule()


def _copy_tree(packed: Packed) -> isl.Schedule:
    """The packing copy's loops: panels, rows, and a row's vectors; for a ``b`` not read
    along the lanes (each vector a gather of 16 rows of ``b``, K^T of attention), a
    vector's rows of the panel inside, so its 16 lines of ``b`` serve 16 rows of the
    panel in turn. Row by row, a panel of 64 columns gathered from 64 lines, which rows
    of K 2 KB apart put in two of L1's 64 sets, and missed L1 every time (attention
    scores of 8 heads of 64 at seq 128, 1 thread: 320 us, the product alone 170 us)."""
    copy, nb = packed.copy, len(packed.contraction.batch)
    p_space = copy.domain.get_space()
    p = lambda d: variable(p_space, d)  # noqa: E731
    tree = _band(isl.Schedule.from_domain(isl.UnionSet.from_set(copy.domain)),
                 [(copy.domain, None)], [p(nb + 2)])
    tree = _mark(tree, VECTOR_MARK)
    rows, vectors = p(nb + 1), _div(p(nb + 2), LANES)
    order = [rows, vectors] if packed.contraction.b_contiguous else [vectors, rows]
    tree = _band(tree, [(copy.domain, None)], [p(nb)] + order)
    band = tree.get_root().child(0)
    for member in (0, 1):  # panels and rows of the copy: each element is written once
        band = band.band_member_set_coincident(member, 1)
    return band.get_schedule()


def isolate_full_tiles(schedule: isl.Schedule, full: dict[str, isl.Set],
                       isl_unrolled: frozenset[str] = frozenset()) -> isl.Schedule:
    """Set the ``isolate`` option on every register-tile band of ``schedule`` (``full``
    maps statement names to their instances in full tiles, :func:`full_tiles`) and mark
    the band for unrolling: isl unrolls the rows and vectors of partial tiles (their
    trip counts vary; copies past the end are guarded), codegen those of full tiles
    (:data:`UNROLL_MARK`), whose loops have constant trip counts. Unrolled by isl, full
    tiles took 2.6 of the 3.6 s of resnet18's AST generation. The statements in
    ``isl_unrolled`` (byte dot products: unrolled by codegen, cnn_int8's depthwise +
    pointwise nests kept their accumulators in memory, 0.273 -> 0.314 ms) have their
    full tiles unrolled by isl as well."""
    def visit(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if (node.get_type() != isl.schedule_node_type.mark
                or node.mark_get_id().get_name() != REGISTER_MARK):
            return node
        band = node.child(0)
        (name,) = statement_names(band.get_domain())
        instances = isl.UnionSet.from_set(full[name])
        prefix = outer_schedule(band, instances)
        members = band.band_get_partial_schedule_union_map().intersect_domain(instances)
        pairs = isl.Map.from_union_map(prefix.reverse().apply_range(members))
        option = pairs.wrap().set_tuple_name("isolate")
        band = band.band_set_ast_build_options(isl.UnionSet.from_set(option))
        n = band.band_n_member()
        for member in (n - 2, n - 1):  # i within the tile, and the vectors of a row
            band = band.band_member_set_ast_loop_type(member, isl.ast_loop_type.unroll)
            if name in isl_unrolled:
                band = band.band_member_set_isolate_ast_loop_type(member,
                                                                  isl.ast_loop_type.unroll)
        return band.insert_mark(isl.Id(UNROLL_MARK, context=band.get_ctx())).parent()

    return schedule.map_schedule_node_bottom_up(visit)


def full_tiles(c: Contraction, block: Blocking, attached: Sequence[Attached] = ()
               ) -> dict[str, isl.Set]:
    """The instances of the contraction, and of the statements attached to it, that
    lie in full register tiles."""
    domain = c.statement.domain
    for dim, size in ((c.i, block.mr), (c.j, block.nr)):
        extent = c.extents[dim]
        if isinstance(extent, str):  # the tile of x ends by the extent: mr*floor(x/mr)+mr <= N
            space = domain.get_space()
            end = isl.PwAff.from_aff(_div(variable(space, dim), size).scale_val(
                _val(space, size)).add_constant_val(_val(space, size)))
            domain = domain.intersect(end.le_set(isl.PwAff.from_aff(param_aff(space, extent))))
            continue
        last = extent // size * size - 1
        domain = domain.upper_bound_val(isl.dim_type.set, dim,
                                        isl.Val.int_from_si(domain.get_ctx(), last))
    result = {c.statement.name: domain}
    for a in attached:
        result[a.statement.name] = a.statement.domain.intersect(
            domain.preimage_multi_aff(a.to_contraction))
    return result


def _last_block(space: isl.Space, extent: int | str, kc: int) -> isl.Aff:
    """``floor((extent - 1) / kc)``, the last block of the reduction, on ``space``."""
    if isinstance(extent, int):
        return _constant(space, (extent - 1) // kc)
    bound = param_aff(space, extent)
    return _div(bound.add_constant_val(_val(space, -1)), kc)


def _rows(parts, aff: isl.Aff) -> isl.UnionPwAff:
    """The row ``aff`` (on the contraction's instances) for every part ``(domain,
    attached)``: pulled back to an attached statement's instances."""
    result = None
    for domain, a in parts:
        row = _union(domain, aff if a is None else aff.pullback_multi_aff(a.to_contraction))
        result = row if result is None else result.union_add(row)
    return result


def _band(tree: isl.Schedule, parts, affs: list[isl.Aff]) -> isl.Schedule:
    """``tree`` under a band of the rows ``affs`` (see :func:`_rows` for ``parts``)."""
    return tree.insert_partial_schedule(_multi([_rows(parts, a) for a in affs]))


def _constant(space: isl.Space, value: int) -> isl.Aff:
    return isl.Aff.zero_on_domain(isl.LocalSpace.from_space(space)).set_constant_val(
        _val(space, value))


def _val(space: isl.Space, value: int) -> isl.Val:
    return isl.Val.int_from_si(space.get_ctx(), value)


def _div(aff: isl.Aff, size: int) -> isl.Aff:
    return aff.scale_down_val(_val(aff.get_domain_space(), size)).floor()


def _union(domain: isl.Set, aff: isl.Aff) -> isl.UnionPwAff:
    return isl.UnionPwAff.from_pw_aff(isl.PwAff.from_aff(aff).intersect_domain(domain))


def _multi(rows: list[isl.UnionPwAff]) -> isl.MultiUnionPwAff:
    return multi_union(isl.Space.set_alloc(rows[0].get_ctx(), 0, len(rows)), rows)


def _mark(tree: isl.Schedule, name: str) -> isl.Schedule:
    mark = isl.Id(name, context=tree.get_ctx())
    return tree.get_root().child(0).insert_mark(mark).get_schedule()
