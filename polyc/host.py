"""The host CPU as LLVM sees it: its name, its features, and the width of its widest
vector registers, which code generation targets and the tiling stage sizes register
tiles for (:mod:`polyc.tiling.microkernel`). A bottom module: the tiling stage reads
the width here without importing code generation, a later stage.

A compile may assume another width than the host's (``Options.vector_bits``,
:func:`assumed`): register tiles for AVX2 on an AVX-512 host, or the reverse, and a
trace that replays to the same tiles on either (:mod:`polyc.trace`).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools

import llvmlite.binding as llvm

from polyc.options import checked_vector_bits

# Without this the x86 backend keeps 256-bit vectors on AVX-512 CPUs.
WIDE_VECTORS = "-prefer-256-bit"

# the width a compile assumes instead of the host's (Options.vector_bits), while it runs
_ASSUMED: contextvars.ContextVar[int | None] = contextvars.ContextVar("vector_bits",
                                                                      default=None)


@functools.cache
def initialize() -> None:
    """Initialise LLVM's native target and asm printer, once per process.

    ``llvm.initialize()`` raises in llvmlite 0.50 and must not be called.
    """
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


@functools.cache
def host_cpu() -> tuple[str, str]:
    """``(cpu name, feature string)`` of this machine, features ending in ``-prefer-256-bit``."""
    initialize()
    features = [f for f in llvm.get_host_cpu_features().flatten().split(",") if f]
    return llvm.get_host_cpu_name(), ",".join([*features, WIDE_VECTORS])


@functools.cache
def host_vector_bits() -> int:
    """The width of this CPU's widest vector registers in bits: 512 with AVX-512F, 256
    with AVX, else 128 (SSE)."""
    features = host_cpu()[1].split(",")
    return 512 if "+avx512f" in features else 256 if "+avx" in features else 128


def vector_bits() -> int:
    """The vector width a compile sizes for: the one it assumes (:func:`assumed`), else
    the host's."""
    return _ASSUMED.get() or host_vector_bits()


@contextlib.contextmanager
def assumed(bits: int | None):
    """Within the block, :func:`vector_bits` is ``bits`` (None: the host's)."""
    if bits is None:
        yield
        return
    token = _ASSUMED.set(checked_vector_bits(bits))
    try:
        yield
    finally:
        _ASSUMED.reset(token)
