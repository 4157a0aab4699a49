"""Threads on a busy machine: polyc's parallel loops idle and under load, next to onnxruntime.

    python benchmarks/threads.py [--repeat 20] [--rounds 3] [--load 4] [--threads 1,2]
                                 [--cases mlp,matmul_relu512] [--env GOMP_SPINCOUNT=300000]
                                 [--json out.json]

Each case is compiled with ``threads=None`` (the default: libgomp's thread count, here
the number of CPUs) and with each of ``--threads``, and run by onnxruntime with
``intra_op_num_threads`` set to each of them (its idle threads not spinning, see
:func:`harness.onnxruntime_session`); outputs are checked against onnxruntime first.
A round times every contender interleaved (one call of each in turn, ``--repeat``
calls) once on the machine as it is and once with ``--load`` busy-loop processes
started for the phase and stopped after it; a row gives the median over ``--rounds``
rounds of each phase's median, and the 1-minute load average (``os.getloadavg``) seen
at the phase's start. The CPUs may be shared with other work: ``meta.loadavg`` records
the load average before the run.

Each ``--env`` value (``NAME=VALUE[,NAME=VALUE]``, ``""`` for none) runs the whole
measurement in a fresh process with those variables added to the environment:
libgomp reads ``OMP_WAIT_POLICY`` and ``GOMP_SPINCOUNT`` once, when it is loaded, and
polyc sets its own policy only when neither is set (see :mod:`polyc.runtime.openmp`);
``--env GOMP_SPINCOUNT=300000`` gives libgomp's default. Each table names the policy
the worker's libgomp got.
Results go to JSON (default benchmarks/results/threads.json).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from harness import (  # noqa: E402
    arguments,
    fmt_ms,
    fmt_ratio,
    in_subprocess,
    median_times,
    metadata,
    onnxruntime_session,
    write_rows,
)  # noqa: E402
from onnx import helper  # noqa: E402

import polyc  # noqa: E402
from polyc.runtime import openmp  # noqa: E402

from onnx_helpers import make_model, random_inputs  # noqa: E402

SETTLE_S = 0.3  # busy loops started this long before a loaded phase is timed
RTOL, ATOL = 1e-4, 1e-4
WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")  # libgomp reads them when loaded


def mlp():
    """The bundled example (Gemm, Relu, Gemm, Softmax on a 4x64 input)."""
    model = onnx.load(str(HERE.parent / "examples" / "mlp.onnx"))
    return model, {"x": np.load(HERE.parent / "examples" / "mlp_input.npy")}


def matmul_relu(size):
    """``relu(a @ b)``, both ``size`` x ``size`` inputs: parallel packing and row blocks."""
    nodes = [helper.make_node("MatMul", ["a", "b"], ["t"]),
             helper.make_node("Relu", ["t"], ["y"])]
    model = make_model(nodes, [("a", [size, size]), ("b", [size, size])], ["y"])
    return model, random_inputs(model, seed=0)


CASES = {"mlp": mlp, "matmul_relu512": lambda: matmul_relu(512)}


def contenders(name: str, counts: list[int]) -> dict:
    """``{column: call}``: polyc at the default and each thread count, onnxruntime at
    each, after checking every polyc output against onnxruntime."""
    model, inputs = CASES[name]()
    compiled = {"default": polyc.compile(model),
                **{str(n): polyc.compile(model, threads=n) for n in counts}}
    sessions = {n: onnxruntime_session(model, n) for n in counts}
    expected = sessions[counts[0]].run(None, inputs)
    for label, model_ in compiled.items():
        for got, want in zip(model_.run(inputs).values(), expected):
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL,
                                       err_msg=f"{name}: polyc {label}")
    calls = {f"polyc_{label}_s": (lambda m=m: m.run(inputs)) for label, m in compiled.items()}
    calls.update({f"ort_{n}_s": (lambda s=s: s.run(None, inputs)) for n, s in sessions.items()})
    return calls


@contextlib.contextmanager
def busy(processes: int):
    """``processes`` busy-loop processes for the duration of the block."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(processes)]
    try:
        if loops:
            time.sleep(SETTLE_S)
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def measure(args) -> list[dict]:
    """A worker's rows: one per case and load, medians over the rounds."""
    names = args.cases.split(",")
    calls = {name: contenders(name, args.threads) for name in names}
    loads = sorted({0, args.load})
    phases = {(name, load): [] for name in names for load in loads}
    for _ in range(args.rounds):
        for load in loads:
            with busy(load):
                for name in names:
                    loadavg = os.getloadavg()[0]
                    phases[name, load].append({"loadavg": loadavg,
                                               **median_times(calls[name], args.repeat)})
    rows = []
    for (name, load), runs in phases.items():
        columns = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        rows.append({"case": name, "load": load, **columns})
    return rows


def print_table(label: str, rows: list[dict], counts: list[int]) -> None:
    polyc_columns = ["default", *map(str, counts)]
    print(f"\nenvironment: {label or '(as given)'}; libgomp's wait policy: "
          f"{rows[0]['wait_policy']}")
    print(f"{'case':<16}{'load':>5}{'loadavg':>8}"
          + "".join(f"{'polyc ' + c:>14}" for c in polyc_columns)
          + "".join(f"{'ort ' + str(n):>9}" for n in counts)
          + f"{'default/1':>11}{'1/2':>7}")
    for r in rows:
        ratios = [r["polyc_default_s"] / r["polyc_1_s"] if "polyc_1_s" in r else None,
                  r["polyc_1_s"] / r["polyc_2_s"] if {"polyc_1_s", "polyc_2_s"} <= set(r)
                  else None]
        print(f"{r['case']:<16}{r['load']:>5}{r['loadavg']:>8.2f}"
              + "".join(f"{fmt_ms(r[f'polyc_{c}_s']):>14}" for c in polyc_columns)
              + "".join(f"{fmt_ms(r[f'ort_{n}_s']):>9}" for n in counts)
              + f"{fmt_ratio(ratios[0]):>11}{fmt_ratio(ratios[1]):>7}")


def environment(assignments: str) -> dict:
    """This process's environment plus ``NAME=VALUE[,NAME=VALUE]``."""
    added = dict(part.split("=", 1) for part in assignments.split(",") if part)
    return {**os.environ, **added}


def options(parser) -> None:
    parser.add_argument("--load", type=int, default=2 * os.cpu_count(),
                        help="busy-loop processes of the loaded phases (default: two per CPU; "
                             "with one per CPU libgomp's default spinning was rarely slow)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="idle and loaded phases, interleaved")
    parser.add_argument("--env", action="append",
                        help="NAME=VALUE[,NAME=VALUE] for one run (repeatable; default: none)")


def main(argv=None):
    args = arguments(__doc__.splitlines()[0], CASES, json_path=HERE / "results" / "threads.json",
                     threads=[1, 2], repeat=20, argv=argv, more=options)
    meta = {**metadata(args, polyc.__version__), "loadavg": os.getloadavg(),
            "cpus": os.cpu_count(), "load": args.load, "rounds": args.rounds}
    if args.worker:
        seen = {name: os.environ.get(name) for name in WAIT_VARIABLES}
        rows = measure(args)
        policy = str(openmp.load_libgomp())  # loaded already, when polyc compiled
        write_rows(args.json, meta, [dict(row, environment=seen, wait_policy=policy)
                                     for row in rows])
        return
    worker = ["--threads", ",".join(map(str, args.threads)), "--repeat", str(args.repeat),
              "--cases", args.cases, "--load", str(args.load), "--rounds", str(args.rounds)]
    rows = []
    for label in args.env or [""]:
        run = in_subprocess(__file__, worker, environment(label))
        print_table(label, run, args.threads)
        rows += [dict(row, env=label) for row in run]
    write_rows(args.json, meta, rows)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
