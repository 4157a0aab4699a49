"""Stencil benchmarks: polyc's tiled loop nests next to the loops as written and numpy.

    python benchmarks/stencils.py [--repeat N] [--threads 1] [--cases jacobi-1d,heat-3d]
                                  [--json out.json]

For each PolyBench stencil (:mod:`polyc.scop.polybench`) at a size whose arrays do not
fit in L2, it prints polyc's compile time and the median run time of polyc as it
compiles by default (Pluto's schedule, tiled: stencil tile sizes, diamond tiles,
wavefront), of the original loops as written compiled by polyc (``scheduler=
"original", tile=False``: the honest baseline, the code the user wrote), of Pluto's
schedule untiled (``tile=False``: skewed loops, which tiling starts from) and of a
vectorized numpy version ('-' for seidel-2d, whose in-place sweep numpy cannot
vectorize), all interleaved (one call of each per round), and the ratios
polyc/original and polyc/numpy (below 1.0 means polyc is faster). Run times include
copying the input arrays, as ``run`` does. Before timing, each polyc build's output
is checked against the kernel's numpy reference at a small size. Each thread count runs
in its own process with ``OMP_NUM_THREADS`` set to it. Results go to JSON (default
benchmarks/results/stencils.json).
"""

from __future__ import annotations

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
    fmt_ratio,
    median_times,
    pin_threads,
    tables,
)

pin_threads(sys.argv[1:])  # before numpy starts its thread pool

import numpy as np  # noqa: E402

import polyc  # noqa: E402
from polyc.scop.polybench import KERNELS  # noqa: E402

F = np.float32


def jacobi1d_numpy(p, arrays):
    a, b = arrays["A"].copy(), np.zeros_like(arrays["A"])
    third = F(0.33333)
    for _ in range(p["T"]):
        b[1:-1] = (a[:-2] + a[1:-1] + a[2:]) * third
        a[1:-1] = b[1:-1]
    return {"A": a, "B": b}


def jacobi2d_numpy(p, arrays):
    a, b = arrays["A"].copy(), np.zeros_like(arrays["A"])
    fifth = F(0.2)
    for _ in range(p["T"]):
        b[1:-1, 1:-1] = fifth * (a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[2:, 1:-1]
                                 + a[:-2, 1:-1])
        a[1:-1, 1:-1] = b[1:-1, 1:-1]
    return {"A": a, "B": b}


# name -> (benchmark parameters, small parameters for the check, vectorized numpy or None)
CASES = {
    "jacobi-1d": ({"T": 500, "N": 400_000}, {"T": 7, "N": 300}, jacobi1d_numpy),
    "jacobi-2d": ({"T": 100, "N": 1000}, {"T": 6, "N": 70}, jacobi2d_numpy),
    "seidel-2d": ({"T": 20, "N": 1000}, {"T": 5, "N": 40}, None),
    "heat-3d": ({"T": 40, "N": 150}, {"T": 5, "N": 20}, KERNELS["heat-3d"].reference),  # numpy
}



# the builds timed: label -> compile options
BUILDS = {"polyc": {}, "original": {"scheduler": "original", "tile": False},
          "pluto untiled": {"tile": False}}


def run_case(name, repeat):
    params, small, numpy_fn = CASES[name]
    kernel = KERNELS[name]
    # every build (polyc's with small tiles too) and the numpy version
    check_nest_builds(name, kernel, small, [*BUILDS.values(), {"tile_size": 4}],
                      [numpy_fn] if numpy_fn is not None else [])
    arrays = kernel.inputs(seed=0, params=params)
    builds, compile_s = compile_nest_builds(kernel, params, BUILDS)
    fns = {label: (lambda c=c: c.run(arrays)) for label, c in builds.items()}
    if numpy_fn is not None:
        fns["numpy"] = lambda: numpy_fn(params, arrays)
    times = median_times(fns, repeat)
    row = {"case": name, "params": params, "compile_s": compile_s["polyc"],
           "polyc_s": times["polyc"], "original_s": times["original"],
           "pluto_untiled_s": times["pluto untiled"], "numpy_s": times.get("numpy"),
           "tiling": [d for d in builds["polyc"].schedule.decisions
                      if d.startswith(("tiling", "parallel"))]}
    row["polyc/original"] = row["polyc_s"] / row["original_s"]
    row["polyc/numpy"] = row["polyc_s"] / row["numpy_s"] if numpy_fn else None
    return row


def print_table(rows, threads):
    print(f"\n{threads} thread{'s' if threads > 1 else ''}")
    print(f"{'case':<26}{'compile ms':>11}{'polyc ms':>10}{'original ms':>13}"
          f"{'pluto untiled ms':>18}{'numpy ms':>10}{'polyc/original':>16}{'polyc/numpy':>13}")
    for r in rows:
        size = " ".join(f"{k}={v}" for k, v in r["params"].items())
        times = [fmt_ms(r[k], 1) for k in ("compile_s", "polyc_s", "original_s",
                                           "pluto_untiled_s", "numpy_s")]
        print(f"{r['case'] + ' ' + size:<26}{times[0]:>11}{times[1]:>10}{times[2]:>13}"
              f"{times[3]:>18}{times[4]:>10}"
              f"{fmt_ratio(r['polyc/original']):>16}{fmt_ratio(r['polyc/numpy']):>13}")
    for r in rows:
        print(f"  {r['case']}: " + "; ".join(d.split(": ", 1)[1] for d in r["tiling"]))


def main(argv=None):
    args = arguments(__doc__.splitlines()[0], CASES, json_path=HERE / "results" / "stencils.json",
                     threads=[1], repeat=10, argv=argv)

    drive(args, __file__, lambda name: run_case(name, args.repeat), tables(print_table),
          polyc.__version__)


if __name__ == "__main__":
    main()
