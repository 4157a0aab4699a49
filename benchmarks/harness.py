"""What the benchmark scripts share: one process per thread count, medians, formatting.

A script calls :func:`pin_threads` before it imports numpy (OpenBLAS and OpenMP read
their thread counts once, when they start), parses ``--threads 1,2`` with
:func:`thread_counts`, and runs each count through :func:`in_subprocess`, which calls
the same script again with ``--worker --threads N`` and reads back its JSON rows.
This module imports nothing that starts a thread pool.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
# OpenBLAS's idle threads (numpy's) poll for 2^28 cycles by default, a tenth of a second
# after each call: interleaved with them on two CPUs, polyc and onnxruntime ran on one
# (2 threads, fifteenth session: matmul 1024^3 polyc 21.95 ms, onnxruntime 24.52, numpy
# 10.95; with 2^4 cycles 12.44, 12.42, 12.63). The shortest wait OpenBLAS allows.
OPENBLAS_WAIT = ("OPENBLAS_THREAD_TIMEOUT", "4")


def pin_threads(argv) -> None:
    """In a worker (``--worker --threads N``), set every thread-count variable to N.
    OpenMP's wait policy is left to polyc (:mod:`polyc.runtime.openmp` bounds libgomp's
    spinning unless the user sets it), so benchmarks time what users get; onnxruntime's
    idle threads do not spin either (:func:`onnxruntime_session`), nor numpy's OpenBLAS
    threads for long (:data:`OPENBLAS_WAIT`, unless set)."""
    if "--worker" in argv and "--threads" in argv:
        count = argv[argv.index("--threads") + 1]
        for name in THREAD_VARIABLES:
            os.environ[name] = count
        os.environ.setdefault(*OPENBLAS_WAIT)


def thread_counts(text: str) -> list[int]:
    """``"1,2"`` -> ``[1, 2]`` (an argparse type)."""
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"expected thread counts like 1,2, got {text!r}")
    return counts


def in_subprocess(script: str, options: list[str], env: dict | None = None) -> list[dict]:
    """Run ``script --worker *options`` in a fresh process (environment ``env``, default
    this process's) and read back the rows it writes to its ``--json`` file."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        subprocess.run([sys.executable, script, "--worker", *options, "--json", str(out)],
                       check=True, env=env)
        return json.loads(out.read_text())["rows"]


def onnxruntime_session(model, threads: int):
    """An onnxruntime session of ``model`` (an ONNX ModelProto) on ``threads`` intra-op
    threads and one inter-op thread, whose idle threads do not spin. Spinning threads
    took the cores from the polyc call timed next on this 2-vCPU machine kind (2
    threads: a CNN at 5.2 ms instead of 1.9 ms, single convolutions 5-165x slower than
    on 1 thread); without spinning the interleaved order is fair."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def median_time(fn, repeat: int) -> float:
    """The median of ``repeat`` timed calls of ``fn``, after one warm-up call."""
    return median_times({"fn": fn}, repeat)["fn"]


# Rounds go on past ``repeat`` until the slowest contender has run this long, at most
# MAX_ROUNDS_FACTOR x ``repeat`` rounds: 10 calls of a 0.04 ms model are 0.4 ms of
# samples, and their median moved by 2x between runs (mlp2 in benchmarks/models.py).
MIN_SECONDS = 0.3
MAX_ROUNDS_FACTOR = 1000


def median_times(fns: dict, repeat: int, min_seconds: float = MIN_SECONDS) -> dict:
    """``{name: median seconds}`` of at least ``repeat`` timed calls of each of ``fns``
    (more for fast calls, see :data:`MIN_SECONDS`), after one warm-up call each. The
    calls are interleaved (one of each per round), so a slow phase of a noisy machine
    slows every contender alike and the ratios hold."""
    samples = {name: [] for name in fns}
    for fn in fns.values():
        fn()
    rounds = 0
    while rounds < repeat or (rounds < MAX_ROUNDS_FACTOR * repeat and
                              min(sum(times) for times in samples.values()) < min_seconds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
        rounds += 1
    return {name: statistics.median(times) for name, times in samples.items()}


def check_nest_builds(name: str, kernel, small: dict, option_sets, others=()) -> None:
    """Each of ``option_sets`` (compile options) of the loop-nest ``kernel`` at the small
    parameters ``small``, and each of ``others`` (``fn(params, arrays) -> arrays``, a
    numpy version), against the kernel's reference on seeded inputs (rtol, atol 1e-4)."""
    import numpy as np

    arrays = kernel.inputs(seed=1, params=small)
    expected = kernel.reference(small, arrays)
    outputs = [kernel.build().compile(params=small, **options).run(arrays)
               for options in option_sets]
    outputs += [fn(small, arrays) for fn in others]
    for out in outputs:
        for array, value in expected.items():
            np.testing.assert_allclose(out[array], value, rtol=1e-4, atol=1e-4,
                                       err_msg=f"{name}: {array}")


def compile_nest_builds(kernel, params: dict, builds: dict) -> tuple[dict, dict]:
    """``builds`` (label -> compile options) of the loop-nest ``kernel`` at ``params``:
    the compiled nests and each one's compile seconds, by label."""
    compiled, seconds = {}, {}
    for label, options in builds.items():
        start = time.perf_counter()
        compiled[label] = kernel.build().compile(params=params, **options)
        seconds[label] = time.perf_counter() - start
    return compiled, seconds


def write_rows(path, meta: dict, rows: list[dict]) -> None:
    """A run's JSON: ``{"meta": meta, "rows": rows}``."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))


def fmt_ms(value, digits: int = 3) -> str:
    """Seconds as milliseconds, ``-`` for a missing value."""
    return "-" if value is None else f"{value * 1e3:.{digits}f}"


def fmt_ratio(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def arguments(description: str, cases, *, json_path: Path, threads: list[int],
              repeat: int, argv=None, more=None) -> argparse.Namespace:
    """The command line every benchmark script takes (``--worker`` is internal);
    ``more(parser)`` adds a script's own options."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--repeat", type=int, default=repeat)
    parser.add_argument("--threads", type=thread_counts, default=threads,
                        help="thread counts, each run in its own process (default "
                             f"{','.join(map(str, threads))})")
    parser.add_argument("--cases", default=",".join(cases))
    parser.add_argument("--json", default=str(json_path))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    if more is not None:
        more(parser)
    args = parser.parse_args(argv)
    unknown = [name for name in args.cases.split(",") if name not in cases]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(cases)}")
    return args


def tables(print_table):
    """A ``show`` for :func:`drive`: ``print_table(rows, threads)`` per thread count."""
    def show(runs: dict) -> None:
        for threads, rows in runs.items():
            print_table(rows, threads)
    return show


def metadata(args: argparse.Namespace, version: str) -> dict:
    """What the JSON of a run records about it."""
    return {"machine": platform.processor() or platform.machine(), "repeat": args.repeat,
            "polyc": version}


def drive(args: argparse.Namespace, script: str, run_one, show, version: str) -> None:
    """A worker runs ``run_one(case name)`` for every case and writes its rows; the
    parent runs one worker per thread count, calls ``show({threads: rows})`` and
    writes every row, tagged with its thread count, to ``args.json``."""
    meta = metadata(args, version)
    names = args.cases.split(",")
    if args.worker:
        write_rows(args.json, meta, [run_one(name) for name in names])
        return
    runs = {n: in_subprocess(script, ["--threads", str(n), "--repeat", str(args.repeat),
                                      "--cases", args.cases]) for n in args.threads}
    show(runs)
    write_rows(args.json, meta, [dict(row, threads=n) for n, rows in runs.items() for row in rows])
    print(f"wrote {args.json}")


def compiled_vs_onnxruntime(name: str, model, inputs: dict, repeat: int, threads: int, *,
                            rtol: float, atol: float) -> dict:
    """Compile ``model`` with polyc (timed), check its outputs against onnxruntime's on
    ``threads`` threads, then time both interleaved (:func:`median_times`): a row."""
    import numpy as np

    import polyc

    start = time.perf_counter()
    compiled = polyc.compile(model, cache=False)  # a cold compile, timed
    compile_s = time.perf_counter() - start
    session = onnxruntime_session(model, threads)
    expected = session.run(None, inputs)
    for got, want in zip(compiled.run(inputs).values(), expected):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    row = {"case": name, "compile_s": compile_s,
           **median_times({"polyc_s": lambda: compiled.run(inputs),
                           "onnxruntime_s": lambda: session.run(None, inputs)}, repeat)}
    row["polyc/onnxruntime"] = row["polyc_s"] / row["onnxruntime_s"]
    return row


def print_compared(rows, threads: int, label: str, digits: int) -> None:
    """The rows of :func:`compiled_vs_onnxruntime` as a table for ``threads``."""
    print(f"\n{threads} thread{'s' if threads > 1 else ''}")
    print(f"{label:<18}{'compile s':>10}{'polyc ms':>11}{'ort ms':>10}{'polyc/ort':>11}")
    for r in rows:
        print(f"{r['case']:<18}{r['compile_s']:>10.2f}{fmt_ms(r['polyc_s'], digits):>11}"
              f"{fmt_ms(r['onnxruntime_s'], digits):>10}{fmt_ratio(r['polyc/onnxruntime']):>11}")
