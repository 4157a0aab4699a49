"""Scheduling time: polyc's Pluto scheduler next to isl's, kernel by kernel.

    python benchmarks/schedule.py [--repeat 5] [--json benchmarks/results/schedule.json]

For every kernel of ``polyc.scop.polybench`` (smartfuse) and for the 121-node MLP of
the test suite (smartfuse and maxfuse), it prints the median time of the schedule
stage of each scheduler (dependences already computed), and the bands each found:
one flag per band member, ``p`` parallel or ``s`` sequential.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from polyc.frontend import import_model  # noqa: E402
from polyc.fusion.groups import fuse  # noqa: E402
from polyc.scheduler import schedule  # noqa: E402
from polyc.scheduler.tree import band_summary  # noqa: E402
from polyc.scop.build import build_scop  # noqa: E402
from polyc.scop.dependences import compute_dependences  # noqa: E402
from polyc.scop.polybench import KERNELS  # noqa: E402


def cases():
    for name, kernel in KERNELS.items():
        yield name, "smart", compute_dependences(kernel.build().scop())
    from test_models import deep_mlp  # the largest ONNX model of the test suite
    scop = compute_dependences(build_scop(import_model(deep_mlp())))
    for policy in ("smart", "max"):
        yield "mlp-121-nodes", policy, scop


def measure(scop, policy: str, scheduler: str, repeat: int):
    times, result = [], None
    groups = fuse(scop, policy=policy)
    for _ in range(repeat):
        start = time.perf_counter()
        result = schedule(scop, groups, scheduler=scheduler)
        times.append(time.perf_counter() - start)
    fallbacks = sum("fell back" in d for d in result.decisions)
    return statistics.median(times), " ".join(band_summary(result.schedule)), fallbacks


def _short(bands: str) -> str:
    parts = bands.split()
    members = len(bands.replace(" ", ""))
    return bands if len(parts) <= 8 else f"{len(parts)} bands, {members} members"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per case (median)")
    parser.add_argument("--json", default=str(HERE / "results" / "schedule.json"))
    args = parser.parse_args(argv)
    rows = []
    header = (f"{'kernel':<15} {'fuse':<6} {'stmts':>5} {'pluto ms':>9} {'isl ms':>8}  "
              f"{'pluto bands':<22} {'isl bands'}")
    print(header)
    print("-" * len(header))
    for name, policy, scop in cases():
        pluto_s, pluto_bands, fallbacks = measure(scop, policy, "pluto", args.repeat)
        isl_s, isl_bands, _ = measure(scop, policy, "isl", args.repeat)
        row = {"kernel": name, "fuse": policy, "statements": len(scop.statements),
               "pluto_ms": pluto_s * 1e3, "isl_ms": isl_s * 1e3, "pluto_bands": pluto_bands,
               "isl_bands": isl_bands, "pluto_fallbacks": fallbacks}
        rows.append(row)
        note = f"  ({fallbacks} group(s) fell back to isl)" if fallbacks else ""
        print(f"{name:<15} {policy:<6} {row['statements']:>5} {row['pluto_ms']:>9.1f} "
              f"{row['isl_ms']:>8.1f}  {_short(pluto_bands):<22} {_short(isl_bands)}{note}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"repeat": args.repeat, "cases": rows}, indent=1))
    print(f"\nwritten {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
