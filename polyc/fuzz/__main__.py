"""``python -m polyc.fuzz``: run the fuzzers over a range of seeds, print the counts,
shrink each failure and write its reproducer."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from polyc.errors import PolycError
from polyc.fuzz.runner import FUZZERS, OK, OUTCOMES, counts, fuzz, fuzzer
from polyc.runtime.output import check_target, replacing

EXAMPLES = """examples:
  python -m polyc.fuzz graphs --count 200               # seeds 0..199, 2 workers
  python -m polyc.fuzz programs --count 5000 --first 10000 --json programs.json
  python -m polyc.fuzz all --count 50 -v                # both fuzzers
  python -m polyc.fuzz graphs --first 1234 --count 1 --no-shrink   # one seed again
"""


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m polyc.fuzz", epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Compile random ONNX graphs (compared with onnxruntime) or random "
                    "affine loop programs (compared with a plain-Python interpreter) under "
                    "drawn schedulers, fusion policies, tiling and thread counts. Prints "
                    "the count of each outcome (ok, wrong, error, crash, hang), shrinks "
                    "each failure and writes a reproducer script for it. Exits with "
                    "status 1 when a case fails.")
    parser.add_argument("fuzzer", choices=FUZZERS + ("all",), help="which fuzzer to run")
    parser.add_argument("--count", type=int, default=100, help="seeds to run (default 100)")
    parser.add_argument("--first", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds a case may take before it is a hang (default 60)")
    parser.add_argument("--shrink-seconds", type=float, default=300.0,
                        help="time to shrink each failure (default 300)")
    parser.add_argument("--no-shrink", action="store_true", help="report failures as drawn")
    parser.add_argument("--out", type=Path, default=Path("fuzz-failures"),
                        help="folder for the reproducers of failures (default fuzz-failures)")
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help="write counts, timings and failures as JSON")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print every case's outcome as it arrives")
    args = parser.parse_args(argv)
    if args.count < 1 or args.jobs < 1 or args.timeout <= 0:
        parser.error("--count, --jobs and --timeout must be positive")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        if args.json:
            check_target(args.json)
        names = FUZZERS if args.fuzzer == "all" else (args.fuzzer,)
        report = {name: _run(name, args) for name in names}
        if args.json:
            with replacing(args.json) as temporary:
                temporary.write_text(json.dumps(report, indent=1) + "\n")
    except PolycError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    failed = sum(len(r["failures"]) for r in report.values())
    return 1 if failed else 0


def _run(name: str, args) -> dict:
    """Fuzz with ``name``, print its table and failures; its part of the JSON report."""
    seeds = range(args.first, args.first + args.count)
    start = time.perf_counter()
    results, failures = fuzz(name, seeds, jobs=args.jobs, timeout=args.timeout,
                             shrink_seconds=0.0 if args.no_shrink else args.shrink_seconds,
                             progress=_progress(name, args.verbose))
    seconds = time.perf_counter() - start
    tally = counts(results)
    times = [r.seconds for r in results]
    print(f"{name}: seeds {seeds.start}..{seeds.stop - 1}, {len(results)} cases in "
          f"{seconds:.0f} s (median {statistics.median(times):.2f} s, max {max(times):.1f} s"
          f" a case, {args.jobs} workers, limit {args.timeout:g} s)")
    print("  " + "  ".join(f"{outcome} {tally[outcome]}" for outcome in OUTCOMES))
    module = fuzzer(name)
    written = [_report_failure(module, name, failure, args.out) for failure in failures]
    return {"seeds": [seeds.start, seeds.stop], "seconds": round(seconds, 1),
            "counts": {o: tally[o] for o in OUTCOMES},
            "median_case_seconds": round(statistics.median(times), 3),
            "failures": written}


def _report_failure(module, name: str, failure, out: Path) -> dict:
    """Print a failure, write its reproducer; its JSON record."""
    result, shrunk = failure.result, failure.shrunk
    print(f"  seed {failure.seed}: {result.status}: {result.reason}")
    if failure.case is None:  # the generator failed: the seed is the reproducer
        return {"seed": failure.seed, "outcome": result.status, "reason": result.reason}
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}-seed{failure.seed}.py"
    with replacing(path) as temporary:
        temporary.write_text(module.reproducer(failure.case))
    print(f"    shrunk in {failure.steps} steps to: {module.describe(failure.case)}")
    if shrunk.reason != result.reason:
        print(f"    which fails with: {shrunk.reason}")
    print(f"    reproducer: {path}")
    return {"seed": failure.seed, "outcome": result.status, "reason": result.reason,
            "shrunk": module.describe(failure.case), "shrunk_reason": shrunk.reason,
            "reproducer": str(path)}


def _progress(name: str, verbose: bool):
    """Each result on stderr (``verbose``), or the counts so far every 100 cases."""
    seen: dict[str, int] = {}

    def show(result, done: int, total: int) -> None:
        seen[result.status] = seen.get(result.status, 0) + 1
        if verbose or result.status != OK:
            print(f"[{name} {done}/{total}] {result.status:<6} {result.name} "
                  f"({result.seconds:.2f} s) {result.reason}".rstrip(), file=sys.stderr)
        elif done % 100 == 0 or done == total:
            tally = ", ".join(f"{k} {v}" for k, v in sorted(seen.items()))
            print(f"[{name} {done}/{total}] {tally}", file=sys.stderr, flush=True)

    return show


if __name__ == "__main__":
    sys.exit(main())
