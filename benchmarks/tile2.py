"""Second-level tiles: polyc's rectangular tiling in one level and in two (``tile2``).

    python benchmarks/tile2.py [--repeat N] [--threads 1] [--cases gemver,matmul]
                               [--json out.json]

For each PolyBench-like loop nest (:mod:`polyc.scop.polybench`) whose bands polyc tiles
rectangularly, at a size whose arrays do not fit in L2, it prints the median run time of
polyc's default tiling (one level, tiles for half of L2), of ``tile2=True`` (tiles for
half of L1 inside tiles for half of L2, :mod:`polyc.tiling.levels`) and of ``tile2=8``
(Pluto's ratio: 8 first-level tiles per member), all interleaved (one call of each per
round), and the ratios to one level (below 1.0: two levels are faster). matmul and 2mm
run ``without=("recipe",)``: their contractions tiled as plain bands rather than by the
contraction recipe, which has its own cache blocks and no second level. Before timing,
each build's output is checked against the kernel's numpy reference at a small size.
Results go to JSON (default benchmarks/results/tile2.json).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import harness  # noqa: E402

harness.pin_threads(sys.argv[1:])  # before numpy starts its thread pool

import polyc  # noqa: E402
from polyc.scop.polybench import KERNELS  # noqa: E402

PLAIN = {"without": ("recipe",)}
# name -> (benchmark parameters, small parameters for the check, options of every build)
CASES = {
    "gemver": ({"N": 4000}, {"N": 50}, {}),
    "trisolv": ({"N": 4000}, {"N": 50}, {}),
    "matmul": ({"M": 1000, "N": 1000, "K": 1000}, {"M": 40, "N": 50, "K": 60}, PLAIN),
    "2mm": ({"NI": 600, "NJ": 700, "NK": 800, "NL": 900},
            {"NI": 30, "NJ": 40, "NK": 50, "NL": 60}, PLAIN),
}

# the builds timed: label -> compile options (added to the case's)
BUILDS = {"one level": {}, "tile2": {"tile2": True}, "tile2=8": {"tile2": 8}}


def run_case(name, repeat):
    params, small, common = CASES[name]
    kernel = KERNELS[name]
    builds = {label: {**common, "threads": 1, **options} for label, options in BUILDS.items()}
    harness.check_nest_builds(name, kernel, small, builds.values())
    arrays = kernel.inputs(seed=0, params=params)
    compiled, compile_s = harness.compile_nest_builds(kernel, params, builds)
    runs = {label: (lambda c=c: c.run(arrays)) for label, c in compiled.items()}
    times = harness.median_times(runs, repeat)
    return {"case": name, "params": params, "options": {k: list(v) for k, v in common.items()},
            "times_s": times, "compile_s": compile_s,
            "ratios": {label: times[label] / times["one level"] for label in BUILDS},
            "tiling": {label: [d for d in c.schedule.decisions if d.startswith("tiling")]
                       for label, c in compiled.items()}}


def print_table(rows, threads):
    print(f"\n{threads} thread{'s' if threads > 1 else ''}")
    print(f"{'case':<34}" + "".join(f"{label + ' ms':>15}" for label in BUILDS)
          + "".join(f"{label + '/one':>14}" for label in list(BUILDS)[1:]))
    for r in rows:
        size = " ".join(f"{k}={v}" for k, v in r["params"].items())
        times = "".join(f"{harness.fmt_ms(r['times_s'][label], 1):>15}" for label in BUILDS)
        ratios = "".join(f"{harness.fmt_ratio(r['ratios'][label]):>14}"
                         for label in list(BUILDS)[1:])
        print(f"{r['case'] + ' ' + size:<34}{times}{ratios}")
    for r in rows:
        for label in list(BUILDS)[1:]:
            print(f"  {r['case']} {label}: "
                  + "; ".join(d.split(": ", 1)[1] for d in r["tiling"][label]))


def main(argv=None):
    args = harness.arguments(__doc__.splitlines()[0], CASES,
                             json_path=HERE / "results" / "tile2.json", threads=[1], repeat=10,
                             argv=argv)
    harness.drive(args, __file__, lambda name: run_case(name, args.repeat),
                  harness.tables(print_table), polyc.__version__)


if __name__ == "__main__":
    main()
