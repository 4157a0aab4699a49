"""Compile time against graph size: long chains and wide Concats.

    python benchmarks/graph_size.py [--sizes 100,1000,10000] [--kinds chain,unfused,concat]
                                    [--json out.json]

Generated graphs: a chain of N elementwise ops over [64, 64] (Add, Mul and Relu in turn,
a constant operand), the same chain compiled with ``fuse="none"`` (one loop nest per op,
each written in place; at most 2,000 ops) and a Concat of N/5 branches (Relu or Neg of
a [2, 8] input, at most 2,000). For each size it prints the compile time
(``polyc.compile``, default options but ``fuse``, one thread), the statements left after
inlining and the time per node, and checks the result against onnxruntime; the JSON
(default benchmarks/results/graph_size.json) has one row per graph and size.
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

KINDS = ("chain", "unfused", "concat")


def measure(kind: str, nodes: int) -> dict:
    model = wide_concat(nodes) if kind == "concat" else chain(nodes)
    start = time.perf_counter()
    compiled = polyc.compile(model, threads=1, fuse="none" if kind == "unfused" else "smart",
                             cache=False)
    seconds = time.perf_counter() - start
    shape = (2, 8) if kind == "concat" else (64, 64)
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    np.testing.assert_allclose(compiled.run({"x": x})["y"], run_onnxruntime(model, {"x": x})["y"],
                               rtol=1e-5, atol=1e-6)
    return {"graph": kind, "nodes": nodes, "compile_s": seconds,
            "statements": len(compiled.compilation.scop.statements)}


def _kinds(text: str) -> list[str]:
    kinds = text.split(",")
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown graph {unknown[0]!r}; "
                                         f"choose from {', '.join(KINDS)}")
    return kinds


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000",
                        type=lambda text: [int(n) for n in text.split(",")])
    parser.add_argument("--kinds", default=",".join(KINDS), type=_kinds,
                        help=f"graphs to measure, of {', '.join(KINDS)}")
    parser.add_argument("--json", default=str(HERE / "results" / "graph_size.json"))
    args = parser.parse_args(argv)
    rows = []
    print(f"{'graph':<8}{'nodes':>8}{'statements':>12}{'compile s':>11}{'ms / node':>11}")
    for kind in args.kinds:
        capped = [{"chain": size, "unfused": min(size, 2000),
                   "concat": min(size // 5, 2000)}[kind] for size in args.sizes]
        for nodes in dict.fromkeys(capped):  # a size capped twice is measured once
            row = measure(kind, nodes)
            rows.append(row)
            print(f"{kind:<8}{nodes:>8}{row['statements']:>12}{row['compile_s']:>11.2f}"
                  f"{row['compile_s'] / nodes * 1e3:>11.2f}", flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"polyc": polyc.__version__, "rows": rows}, indent=2))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
