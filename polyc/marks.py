"""The names of the schedule tree's marks, and the vector shape, that tiling places
and code generation reads: a bottom module (it imports nothing of polyc), so the
scheduler's legality checker and the tiling stage name them without importing code
generation, a later stage.

- ``parallel``: the loop of the band below runs on threads (polyc.tiling.parallel
  places it, polyc.codegen.parallel outlines it to OpenMP);
- ``vector``: the loop below runs in :data:`LANES` lanes (polyc.codegen.vector);
- ``register_tile``: a contraction's register tile (polyc.tiling.microkernel);
- ``unroll``: a register tile's rows and vectors, unrolled in full tiles;
- ``transpose``: 16x16 blocks transposed in registers (polyc.codegen.transpose).
"""

PARALLEL = "parallel"
VECTOR = "vector"
REGISTER_TILE = "register_tile"
UNROLL = "unroll"
TRANSPOSE = "transpose"

LANES = 16  # lanes of polyc's own vector statements
# A vector statement of exactly this many lanes (a register tile's last 8 of 24 or 40
# channels) runs as a vector of its own width, unmasked: on AVX-512 a ymm register,
# whose FMAs take half a zmm FMA's slots on hosts that split 512-bit operations (Zen
# 4); a masked 16-lane tile costs every lane.
HALF = LANES // 2
# An accumulation's innermost loop of at most this many whole vectors (a reduction's
# sums of consecutive channels) runs unrolled, so LLVM keeps the sums in registers
# across the loops around it (polyc.tiling.reduction).
ACCUMULATOR_VECTORS = 16
