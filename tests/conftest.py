"""Test-wide settings: the compile cache is off (tests patch compiler internals and
compile the same model both ways); the cache's own tests turn it on in a folder of
their own. ``avx512_register_tiles``: register tiles sized for AVX-512 on every host,
for the tests that name them (``pytestmark = pytest.mark.usefixtures(...)``)."""

import os

import pytest

os.environ["POLYC_CACHE"] = "0"
# One process a compile: pytest-xdist already runs a worker per core, and more processes
# than cores starve the isl server's child, whose answers have a time budget (the
# scheduler's ILPs); tests/test_parallel_compile.py sets POLYC_JOBS where it tests them.
os.environ["POLYC_JOBS"] = "1"


@pytest.fixture
def avx512_register_tiles():
    """The register tiles a test names are AVX-512's: sized for it on every host
    (tests/test_registers.py checks AVX2's)."""
    from polyc.host import assumed
    with assumed(512):
        yield
