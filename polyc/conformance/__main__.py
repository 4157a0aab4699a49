"""``python -m polyc.conformance``: run the suite, print the numbers, write the reports."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from polyc.conformance.cases import KINDS, load_cases
from polyc.conformance.classify import FAIL, PASS, Result, run_case
from polyc.conformance.pool import run_cases
from polyc.conformance.report import as_json, markdown, summary

EXAMPLES = """examples:
  python -m polyc.conformance                          # the whole suite, 2 workers
  python -m polyc.conformance --report docs/conformance.md
  python -m polyc.conformance --kind node --match '^test_(softmax|gemm)' -v
"""


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m polyc.conformance", epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the onnx package's backend test suite through polyc and print "
                    "passed / excluded (with reasons) / failed per kind. Exits with "
                    "status 1 when a case fails.")
    parser.add_argument("--kind", action="append", choices=KINDS,
                        help="a kind of cases to run (repeatable; default: all four)")
    parser.add_argument("--match", metavar="REGEX", help="only cases whose name matches")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds a case may take before it fails (default 120)")
    parser.add_argument("--report", type=Path, metavar="PATH",
                        help="write the per-case Markdown report (docs/conformance.md)")
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help="write counts and every case's result as JSON")
    parser.add_argument("--passing", type=Path, metavar="PATH",
                        help="write the names of the passing cases, one a line (CI "
                             "checks that each still passes: tests/conformance_passing.txt)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print every case's result as it arrives")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    cases = load_cases(args.kind or KINDS, args.match)
    if not cases:
        print("no case matches", file=sys.stderr)
        return 2
    start = time.perf_counter()
    results = run_cases(cases, run_case, jobs=args.jobs, timeout=args.timeout,
                        progress=_progress(args.verbose))
    print(summary(results, seconds=time.perf_counter() - start))
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(markdown(results))
    if args.json:
        args.json.write_text(json.dumps(as_json(results), indent=1) + "\n")
    if args.passing:
        names = sorted(f"{r.kind}/{r.name}" for r in results if r.status == PASS)
        args.passing.write_text("".join(f"{name}\n" for name in names))
    return 1 if any(r.status == FAIL for r in results) else 0


def _progress(verbose: bool):
    """Each result on stderr (``verbose``), or a count every 100 cases."""

    def show(result: Result, done: int, total: int) -> None:
        if verbose:
            line = f"{result.status:<8} {result.kind}/{result.name} ({result.seconds:.2f} s)"
            print(f"[{done}/{total}] {line} {result.reason}".rstrip(), file=sys.stderr)
        elif done % 100 == 0 or done == total:
            print(f"[{done}/{total}]", file=sys.stderr, flush=True)

    return show


if __name__ == "__main__":
    sys.exit(main())
