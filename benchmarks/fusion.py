"""Fusion policies on PolyBench/C: nofuse, smartfuse and maxfuse run times next to the
loops as written, the shape of Bondhugula et al.'s comparison of Pluto's fusion
heuristics (PLDI'08; Acharya and Bondhugula, "PLuTo+", PPoPP'15), measured on polyc.

    python benchmarks/fusion.py [--size MEDIUM] [--repeat 10] [--kernels 2mm,gemver,...]
                                [--json out.json] [--plot out.png]

Each kernel is read by polyc's C frontend from PolyBench/C 4.2.1 at ``--size`` and
compiled four ways, one thread: the loops as written (``scheduler="original",
tile=False``), and Pluto's schedule, tiled, under ``fuse="none"``, ``"smart"`` and
``"max"`` (no cost model choosing among schedules: the policy alone differs). Every
build is checked against the loops compiled in IEEE order (``fast_math=False``) on
seeded inputs, then all are timed interleaved (``polyc.tuner``: one call of each per
round; a call includes copying the inputs in). The table gives medians and speed-ups
over the loops as written; the plot (``--plot``, default next to the JSON) the
speed-ups per kernel and policy. Results go to JSON (default
benchmarks/results/fusion.json).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import polyc
from polyc.tuner import BASELINE, Point, tune
from polyc.tuner.results import rows
from polyc.tuner.targets import target

HERE = Path(__file__).resolve().parent
# kernels of several statements whose fusion the policies decide differently
KERNELS = ("2mm", "3mm", "atax", "bicg", "gemver", "gesummv", "mvt", "correlation",
           "covariance", "fdtd-2d", "jacobi-2d", "syr2k")
POLICIES = {"none": "nofuse", "smart": "smartfuse", "max": "maxfuse"}  # Pluto's names


def strategies() -> list[Point]:
    return [Point(BASELINE, {"scheduler": "original", "tile": False}),
            *(Point(label, {"scheduler": "pluto", "tile": True, "fuse": policy})
              for policy, label in POLICIES.items())]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="MEDIUM")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--kernels", default=",".join(KERNELS))
    parser.add_argument("--json", type=Path, default=HERE / "results" / "fusion.json")
    parser.add_argument("--plot", type=Path, default=None)
    args = parser.parse_args(argv)
    found = {}
    for name in args.kernels.split(","):
        start = time.perf_counter()
        chosen = tune(target(f"polybench:{name}", size=args.size, threads=1),
                      strategies=strategies(), repeat=args.repeat)
        found[name] = rows(chosen)
        print(f"{name}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    labels = [p.label for p in strategies()]
    print(f"\nPolyBench/C {args.size}, one thread, medians of {args.repeat} interleaved "
          "rounds (ms) and speed-up over the loops as written")
    print(f"{'kernel':<14}" + "".join(f"{label:>12}" for label in labels)
          + "".join(f"{label:>12}" for label in labels[1:]))
    for name, table in found.items():
        by = {row["label"]: row for row in table}
        ms = [f"{by[label]['median_s'] * 1e3:.3f}" if by[label]["median_s"] else "-"
              for label in labels]
        ratio = [f"{by[label]['speedup']:.2f}" if by[label]["speedup"] else
                 (by[label]["error"] or "-")[:10] for label in labels[1:]]
        print(f"{name:<14}" + "".join(f"{v:>12}" for v in ms) + "".join(f"{v:>12}" for v in ratio))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"meta": {"size": args.size, "repeat": args.repeat,
                                              "polyc": polyc.__version__},
                                     "kernels": found}, indent=1) + "\n")
    print(f"wrote {args.json}")
    plot(args.plot or args.json.with_suffix(".png"), found, labels[1:], args.size)


def plot(path: Path, found: dict, labels: list[str], size: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(found)
    figure, axes = plt.subplots(figsize=(max(6.0, 0.9 * len(names) + 2), 4))
    width = 0.8 / len(labels)
    for k, label in enumerate(labels):
        values = [next(r["speedup"] or 0 for r in found[name] if r["label"] == label)
                  for name in names]
        axes.bar([i + (k - (len(labels) - 1) / 2) * width for i in range(len(names))],
                 values, width, label=label)
    axes.axhline(1.0, linestyle="--", color="gray", label="loops as written")
    axes.set_xticks(range(len(names)), names, rotation=45, ha="right")
    axes.set_yscale("log")
    axes.set_ylabel("speed-up over the loops as written")
    axes.set_title(f"PolyBench/C {size}, one thread: Pluto's schedule under each fusion policy")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
