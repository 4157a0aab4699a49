"""Symbolic dims: one artifact for every batch size against one compiled for the size.

For each model, polyc compiles it twice: with the dynamic dim symbolic (``symbolic=``)
and with it fixed (``dims=``) at the benchmark value. The script checks the symbolic
one against onnxruntime at several values (no recompilation), then times both and
onnxruntime at the value, interleaved, and prints the compile times and the ratio
symbolic / fixed (the issue's target: at most 1.25 at batch 8).

    python benchmarks/symbolic.py [--repeat 20] [--threads 1,2] [--cases mlp,cnn]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from harness import (  # noqa: E402
    arguments,
    drive,
    fmt_ms,
    fmt_ratio,
    median_times,
    onnxruntime_session,
    pin_threads,
    tables,
)  # noqa: E402

pin_threads(sys.argv)

import numpy as np  # noqa: E402
import symbolic_models  # noqa: E402

import polyc  # noqa: E402

# case -> (model builder, dim name, benchmark value)
CASES = {
    "mlp": (lambda: symbolic_models.mlp(512, 1024, 256), "batch", 8),
    "cnn": (lambda: symbolic_models.cnn(64, (16, 32)), "batch", 8),
    "encoder": (lambda: symbolic_models.encoder(128, 4, 256), "seq", 64),
}
CHECKED_AT = (1, 3, 17)  # values checked against onnxruntime from the one artifact
RTOL, ATOL = 1e-4, 1e-5


def run_case(name: str, repeat: int, threads: int) -> dict:
    build, dim, value = CASES[name]
    model = build()
    session = onnxruntime_session(model, threads)
    start = time.perf_counter()
    symbolic = polyc.compile(model, symbolic=[dim])
    symbolic_s = time.perf_counter() - start
    start = time.perf_counter()
    fixed = polyc.compile(model, dims={dim: value})
    fixed_s = time.perf_counter() - start
    for size in CHECKED_AT + (value,):
        inputs = symbolic_models.inputs(model, size, seed=size)
        (want,) = session.run(None, inputs)
        np.testing.assert_allclose(symbolic.run(inputs)["y"], want, rtol=RTOL, atol=ATOL)
    inputs = symbolic_models.inputs(model, value)
    np.testing.assert_allclose(fixed.run(inputs)["y"], session.run(None, inputs)[0],
                               rtol=RTOL, atol=ATOL)
    times = median_times({"symbolic_s": lambda: symbolic.run(inputs),
                          "fixed_s": lambda: fixed.run(inputs),
                          "onnxruntime_s": lambda: session.run(None, inputs)}, repeat)
    return {"case": name, "dim": f"{dim}={value}", "compile_symbolic_s": symbolic_s,
            "compile_fixed_s": fixed_s, **times,
            "symbolic/fixed": times["symbolic_s"] / times["fixed_s"],
            "symbolic/onnxruntime": times["symbolic_s"] / times["onnxruntime_s"]}


def print_table(rows, threads: int) -> None:
    print(f"\n{threads} thread{'s' if threads > 1 else ''}")
    print(f"{'model':<9}{'at':>10}{'compile sym s':>15}{'compile fixed s':>17}{'sym ms':>9}"
          f"{'fixed ms':>10}{'ort ms':>9}{'sym/fixed':>11}{'sym/ort':>9}")
    for r in rows:
        print(f"{r['case']:<9}{r['dim']:>10}{r['compile_symbolic_s']:>15.2f}"
              f"{r['compile_fixed_s']:>17.2f}{fmt_ms(r['symbolic_s']):>9}"
              f"{fmt_ms(r['fixed_s']):>10}{fmt_ms(r['onnxruntime_s']):>9}"
              f"{fmt_ratio(r['symbolic/fixed']):>11}{fmt_ratio(r['symbolic/onnxruntime']):>9}")


def main(argv=None):
    args = arguments(__doc__.splitlines()[0], CASES,
                     json_path=HERE / "results" / "symbolic.json", threads=[1], repeat=20,
                     argv=argv)

    drive(args, __file__, lambda name: run_case(name, args.repeat, args.threads[0]),
          tables(print_table), polyc.__version__)


if __name__ == "__main__":
    main()
