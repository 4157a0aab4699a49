"""Diamond against parallelogram (pipelined) tiles on jacobi-1d and jacobi-2d, at 1 and
2 threads: the shape of Bandishti, Pananilath and Bondhugula, "Tiling stencil
computations to maximize parallelism" (SC'12), measured on polyc.

    python benchmarks/diamond.py [--repeat 10] [--threads 1,2] [--cases jacobi-1d,jacobi-2d]
                                 [--json out.json] [--plot out.png]

For each stencil (:mod:`polyc.scop.polybench`, float32, arrays larger than L2) three
builds of the same kernel, all checked against its numpy reference at a small size
first: the loops as written (``scheduler="original", tile=False``: the baseline),
Pluto's schedule in parallelogram tiles (``without=("diamond",)``: the tiles of a band
start one after another, a wavefront of them runs in parallel) and in diamond tiles
(the default: tiled along a row with concurrent start, ``2t - i`` next to ``2t + i``).
The three are timed interleaved (one call of each per round, median of ``--repeat``
rounds or more); each thread count runs in its own process with ``OMP_NUM_THREADS``
set. The table gives the medians and each build's speed-up over the original loops
on one thread; the plot (``--plot``, default next to the JSON) shows the speed-ups
per thread count. Results go to JSON (default benchmarks/results/diamond.json).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from harness import (  # noqa: E402
    arguments,
    check_nest_builds,
    compile_nest_builds,
    drive,
    fmt_ms,
    median_times,
    pin_threads,
)

pin_threads(sys.argv[1:])  # before numpy starts its thread pool


import polyc  # noqa: E402
from polyc.scop.polybench import KERNELS  # noqa: E402

# name -> (parameters, small parameters for the check)
CASES = {
    "jacobi-1d": ({"T": 500, "N": 400_000}, {"T": 7, "N": 300}),
    "jacobi-2d": ({"T": 100, "N": 1000}, {"T": 6, "N": 70}),
}
BUILDS = {"original": {"scheduler": "original", "tile": False},
          "parallelogram": {"without": ("diamond",)},
          "diamond": {}}


def run_case(name: str, repeat: int) -> dict:
    params, small = CASES[name]
    kernel = KERNELS[name]
    check_nest_builds(name, kernel, small, BUILDS.values())
    arrays = kernel.inputs(seed=0, params=params)
    builds, compile_s = compile_nest_builds(kernel, params, BUILDS)
    times = median_times({label: (lambda c=c: c.run(arrays)) for label, c in builds.items()},
                         repeat)
    tiling = {label: [d.split(": ", 1)[1] for d in c.schedule.decisions
                      if d.startswith(("tiling: band", "parallel:"))]
              for label, c in builds.items()}
    return {"case": name, "params": params, "compile_s": compile_s, "seconds": times,
            "tiling": tiling}


def show(runs: dict) -> None:
    serial = {row["case"]: row["seconds"]["original"] for row in runs.get(1, [])}
    print(f"\n{'case':<12}{'threads':>8}" + "".join(f"{label + ' ms':>18}" for label in BUILDS)
          + "".join(f"{label:>15}" for label in BUILDS) + "   (x original, 1 thread)")
    for threads, rows in runs.items():
        for row in rows:
            base = serial.get(row["case"], row["seconds"]["original"])
            print(f"{row['case']:<12}{threads:>8}"
                  + "".join(f"{fmt_ms(row['seconds'][label], 1):>18}" for label in BUILDS)
                  + "".join(f"{base / row['seconds'][label]:>15.2f}" for label in BUILDS))
    for threads, rows in runs.items():
        for row in rows:
            for label in ("parallelogram", "diamond"):
                print(f"  {row['case']} {label}, {threads} thread(s): "
                      + "; ".join(row["tiling"][label]))


def plot(path: Path, runs: dict) -> None:
    """Speed-up over the original loops on one thread, per case, thread count and build."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cases = [row["case"] for row in next(iter(runs.values()))]
    serial = {row["case"]: row["seconds"]["original"] for row in runs.get(1, [])}
    figure, axes = plt.subplots(1, len(cases), figsize=(5 * len(cases), 4), squeeze=False)
    for ax, case in zip(axes[0], cases):
        counts = sorted(runs)
        width = 0.8 / len(BUILDS)
        for k, label in enumerate(BUILDS):
            values = []
            for threads in counts:
                row = next(r for r in runs[threads] if r["case"] == case)
                values.append(serial.get(case, row["seconds"]["original"])
                              / row["seconds"][label])
            ax.bar([c + (k - 1) * width for c in range(len(counts))], values, width,
                   label=label)
        ax.set_xticks(range(len(counts)), [f"{n} thread{'s' if n > 1 else ''}" for n in counts])
        ax.set_ylabel("speed-up over the original loops, 1 thread")
        ax.set_title(case)
        ax.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    print(f"wrote {path}")


def main(argv=None):
    args = arguments(__doc__.splitlines()[0], CASES,
                     json_path=HERE / "results" / "diamond.json", threads=[1, 2], repeat=10,
                     argv=argv,
                     more=lambda p: p.add_argument("--plot", type=Path, default=None,
                                                   help="the plot's file (default: the "
                                                        "JSON's, .png)"))
    drive(args, __file__, lambda name: run_case(name, args.repeat), show, polyc.__version__)
    if not args.worker:
        data = json.loads(Path(args.json).read_text())
        runs: dict = {}
        for row in data["rows"]:
            runs.setdefault(row["threads"], []).append(row)
        plot(args.plot or Path(args.json).with_suffix(".png"), runs)


if __name__ == "__main__":
    main()
