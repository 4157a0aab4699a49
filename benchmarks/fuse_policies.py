"""Fusion policies on a small CNN: compile stages, contraction recipes and run time.

    python benchmarks/fuse_policies.py [--size 32] [--policies smart,max] [--runs 50]

The model is tests/test_fusion.py's ``small_cnn`` (three 3x3 convs with bias and Relu,
a 2x2 max pool, global average pool, a Gemm) on a 1x3x size x size image, or
tests/real_models.py's float CNN of depthwise and 1x1 convs with ``--size 0``. Each
policy compiles in this process without the compile cache, on one thread; the table
gives the schedule stage and the whole compile in seconds, the fusion groups, the
convs that got the register-tile recipe (``tiling: contraction`` decisions), whether
a group fell back to isl's scheduler, the largest difference from onnxruntime and the
median run time of ``--runs`` calls, the policies interleaved (one call each per
round).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import numpy as np  # noqa: E402
from test_fusion import small_cnn  # noqa: E402

import polyc.pipeline  # noqa: E402

from real_models import _float_cnn, run_onnxruntime  # noqa: E402


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--policies", default="smart,max")
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args(argv)
    if args.size:
        model, size = small_cnn(args.size), args.size
    else:
        model, size = _float_cnn(np.random.default_rng(0)), 96
    inputs = {"x": np.random.default_rng(1).random((1, 3, size, size), dtype=np.float32)}
    (expected, *_), _ = run_onnxruntime(model, inputs)
    loaded = {}
    print(f"{'policy':<8}{'schedule s':>11}{'compile s':>11}{'groups':>8}{'recipes':>9}"
          f"{'fallback':>10}{'max err':>10}")
    for policy in args.policies.split(","):
        start = time.perf_counter()
        compiled = polyc.pipeline.build(model, fuse=policy, cache=False, threads=1)
        seconds = time.perf_counter() - start
        decisions = compiled.compilation.schedule.decisions
        recipes = sum(d.startswith("tiling: contraction") for d in decisions)
        fallback = any("fell back" in d for d in decisions)
        loaded[policy] = compiled.loaded()
        error = float(np.max(np.abs(loaded[policy].run(inputs)["y"] - expected)))
        print(f"{policy:<8}{dict(compiled.compilation.times)['schedule']:>11.2f}"
              f"{seconds:>11.2f}{len(compiled.compilation.groups.groups):>8}{recipes:>9}"
              f"{'yes' if fallback else 'no':>10}{error:>10.1e}", flush=True)
    times: dict[str, list[float]] = {policy: [] for policy in loaded}
    for _ in range(args.runs):
        for policy, program in loaded.items():
            start = time.perf_counter()
            program.run(inputs)
            times[policy].append(time.perf_counter() - start)
    for policy, seconds in times.items():
        print(f"{policy:<8}run median {statistics.median(seconds) * 1e3:.3f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
