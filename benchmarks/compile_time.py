"""Compile time, stage by stage: cold, and again from the compile cache.

    python benchmarks/compile_time.py [--cases mlp,mobilenetv3,chain1000] [--json out.json]

The cases are examples/mlp.onnx, the onnx package's light models and the PyTorch exports
of benchmarks/models.py, and two generated chains of 1,000 and 10,000 elementwise ops
over [64, 64] (benchmarks/graph_size.py's). Each case compiles (default options) in
this process, from an .onnx file, into a compile cache of its own (a temporary
folder), on the processes POLYC_JOBS allows (default: every CPU; polyc.workers): once
cold, its time split into the pipeline's stages, then once more, which reads the
cache. The table gives the cold time, its largest stages grouped (frontend + SCoP +
inlining + dependences + fusion, schedule + legality, tiling + parallel, AST (with the
IR of nests generated apart), LLVM IR, LLVM O3 + object, the rest), the cached compile
(key, checks and read) plus the load into the process, and the number of statements
after inlining; the JSON (default benchmarks/results/compile_time.json) has one row per
case with every stage's time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

import onnx  # noqa: E402
from harness import write_rows  # noqa: E402

import polyc  # noqa: E402
from polyc import workers  # noqa: E402
from polyc.pipeline import build  # noqa: E402

from real_models import LIGHT, TORCH  # noqa: E402

CHAINS = {"chain1000": 1000, "chain10000": 10000}
CASES = ["mlp", *LIGHT, *TORCH, *CHAINS]
GROUPS = {  # the table's columns: stages of polyc.pipeline, grouped
    "front": ("frontend", "scop", "inline", "dependences", "fusion", "parameters"),
    "schedule": ("schedule", "legality", "legality wait"),
    "tiling": ("tiling", "parallel", "in place"),
    "ast": ("ast", "nests"),  # nests: AST and LLVM IR of the nests, on several processes
    "llvm IR": ("llvm", "buffers"),
    "O3+obj": ("optimize", "object"),
}


def load(name: str):
    if name == "mlp":
        return onnx.load(HERE.parent / "examples" / "mlp.onnx")
    if name in CHAINS:
        from test_deep_graphs import chain
        return chain(CHAINS[name])
    from models import load_case
    return load_case(name)[0]


def measure(name: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="polyc-cache-") as folder:
        model = Path(folder, f"{name}.onnx")  # compiled from a file, as users do
        onnx.save(load(name), model)
        os.environ["POLYC_CACHE_DIR"] = str(Path(folder, "cache"))
        start = time.perf_counter()
        cold = build(model, cache=True)
        cold_s = time.perf_counter() - start
        stages = list(cold.compilation.times) + list(cold.native.times)
        start = time.perf_counter()
        warm = build(model, cache=True).loaded()
        cached_s = time.perf_counter() - start
        assert warm.cached, f"{name}: the second compile missed the cache"
    row = {"case": name, "cold_s": cold_s, "cached_s": cached_s,
           "statements": len(cold.compilation.scop.statements),
           "stages": [[stage, seconds] for stage, seconds in stages]}
    for column, members in GROUPS.items():
        row[column] = sum(s for stage, s in stages if stage in members)
    row["other"] = cold_s - sum(row[column] for column in GROUPS)
    return row


def print_table(rows) -> None:
    columns = [*GROUPS, "other"]
    print(f"{'case':<16}{'stmts':>7}{'cold s':>9}" + "".join(f"{c:>10}" for c in columns)
          + f"{'cached s':>10}")
    for r in rows:
        print(f"{r['case']:<16}{r['statements']:>7}{r['cold_s']:>9.2f}"
              + "".join(f"{r[c]:>10.2f}" for c in columns) + f"{r['cached_s']:>10.3f}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--json", default=str(HERE / "results" / "compile_time.json"))
    args = parser.parse_args(argv)
    names = args.cases.split(",")
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    rows = []
    for name in names:
        rows.append(measure(name))
        print(f"{name}: cold {rows[-1]['cold_s']:.2f} s, cached {rows[-1]['cached_s']:.3f} s",
              file=sys.stderr, flush=True)
    print_table(rows)
    write_rows(args.json, {"polyc": polyc.__version__, "jobs": workers.jobs()},
               rows)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
