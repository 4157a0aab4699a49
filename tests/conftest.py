"""Test-wide settings: the compile cache is off (tests patch compiler internals and
compile the same model both ways); the cache's own tests turn it on in a folder of
their own."""

import os

os.environ["POLYC_CACHE"] = "0"
# One process a compile: pytest-xdist already runs a worker per core, and more processes
# than cores starve the isl server's child, whose answers have a time budget (the
# scheduler's ILPs); tests/test_parallel_compile.py sets POLYC_JOBS where it tests them.
os.environ["POLYC_JOBS"] = "1"
