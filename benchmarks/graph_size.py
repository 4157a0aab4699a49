"""Compile time against graph size: long chains and wide Concats.

    python benchmarks/graph_size.py [--sizes 100,1000,10000] [--json out.json]

Two generated graphs: a chain of N elementwise ops over [64, 64] (Add, Mul and Relu in
turn, a constant operand) and a Concat of N/5 branches (Relu or Neg of a [2, 8] input,
at most 2,000). For each size it prints the compile time (``polyc.compile``, default
options, one thread), the statements left after inlining and the time per node, and
checks the result against onnxruntime; the JSON (default
benchmarks/results/graph_size.json) has one row per graph and size.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import numpy as np  # noqa: E402
from test_deep_graphs import chain, wide_concat  # noqa: E402

import polyc  # noqa: E402

from onnx_helpers import run_onnxruntime  # noqa: E402


def measure(kind: str, nodes: int) -> dict:
    model = chain(nodes) if kind == "chain" else wide_concat(nodes)
    start = time.perf_counter()
    compiled = polyc.compile(model, threads=1)
    seconds = time.perf_counter() - start
    shape = (64, 64) if kind == "chain" else (2, 8)
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    np.testing.assert_allclose(compiled.run({"x": x})["y"], run_onnxruntime(model, {"x": x})["y"],
                               rtol=1e-5, atol=1e-6)
    return {"graph": kind, "nodes": nodes, "compile_s": seconds,
            "statements": len(compiled.compilation.scop.statements)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000",
                        type=lambda text: [int(n) for n in text.split(",")])
    parser.add_argument("--json", default=str(HERE / "results" / "graph_size.json"))
    args = parser.parse_args(argv)
    rows = []
    print(f"{'graph':<8}{'nodes':>8}{'statements':>12}{'compile s':>11}{'ms / node':>11}")
    for kind in ("chain", "concat"):
        for size in args.sizes:
            nodes = size if kind == "chain" else min(size // 5, 2000)
            row = measure(kind, nodes)
            rows.append(row)
            print(f"{kind:<8}{nodes:>8}{row['statements']:>12}{row['compile_s']:>11.2f}"
                  f"{row['compile_s'] / nodes * 1e3:>11.2f}", flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"polyc": polyc.__version__, "rows": rows}, indent=2))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
