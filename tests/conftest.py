"""Test-wide settings: the compile cache is off (tests patch compiler internals and
compile the same model both ways); the cache's own tests turn it on in a folder of
their own."""

import os

os.environ["POLYC_CACHE"] = "0"
