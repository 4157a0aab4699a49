"""PolyBench/C 4.2.1 as it is: polyc against the system C compilers, one thread.

    python benchmarks/polybench.py [--size LARGE] [--kernels gemm,lu] [--repeat 3]
                                   [--json benchmarks/results/polybench.json]

For each of the 30 kernels (third_party/polybench-c-4.2.1), at one dataset size, in
double (PolyBench's default):

- each C compiler found (``cc``; ``clang`` and clang with Polly, ``-mllvm -polly``,
  when installed) builds the benchmark as PolyBench ships it, ``-O3 -march=native``
  with ``-DPOLYBENCH_TIME -DPOLYBENCH_DUMP_ARRAYS``;
- polyc reads the kernel from the same source (``polyc.from_c``), compiles it (one
  thread, default options: the schedule chosen by the cost model unless
  ``--autoselect`` says otherwise; the time is the compile column) into a drop-in object
  (``polyc.runtime.c_library``), and PolyBench's own ``main`` (its file with the
  kernel's definition replaced by a declaration, ``polyc.scop.c.caller_source``,
  built by ``cc`` with the same flags) is linked with it;
- every binary runs ``--repeat`` times, the binaries interleaved; the kernel time is
  PolyBench's own timer (what its ``main`` prints), the median is kept; each
  compiler's dump of the output arrays is compared with polyc's (two decimals as
  PolyBench prints them: |a - b| <= 0.01 + 1e-8 |b|).

The table gives the kernel's median seconds per build and polyc's speed-up over each
compiler (their time / polyc's; above 1: polyc faster), and the geomean. A kernel
polyc refuses names the construct; a build or run that fails is reported and the
run goes on.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from harness import write_rows  # noqa: E402

import polyc  # noqa: E402
from polyc.runtime.c_library import write_c_library  # noqa: E402
from polyc.scop.c import caller_source, from_c  # noqa: E402
from polyc.tuner.targets import POLYBENCH_SIZES, polybench_kernels  # noqa: E402

POLYBENCH = ROOT / "third_party" / "polybench-c-4.2.1"
UTILITIES = POLYBENCH / "utilities"
FLAGS = ("-O3", "-march=native")
RUN_TIMEOUT = 600  # seconds for one run of one binary
SIZES = POLYBENCH_SIZES


def kernels() -> dict[str, Path]:
    return polybench_kernels()


def compilers() -> dict[str, list[str]]:
    """Each C compiler found, as the start of its command: ``cc``, ``clang`` and clang
    with Polly (``-mllvm -polly``) where they are installed."""
    found = {}
    if shutil.which("cc"):
        found["cc"] = [shutil.which("cc")]
    clang = shutil.which("clang")
    if clang:
        found["clang"] = [clang]
        with tempfile.TemporaryDirectory() as tmp:
            probe = Path(tmp, "probe.c")
            probe.write_text("int main(void) { return 0; }\n")
            if build([clang, "-O3", "-mllvm", "-polly", str(probe), "-o",
                      str(Path(tmp, "probe"))]) is None:
                found["polly"] = [clang, "-mllvm", "-polly"]
    return found


def build(command: list[str]) -> str | None:
    """Run a build command; its error text, or None."""
    done = subprocess.run(command, capture_output=True, text=True)
    return None if done.returncode == 0 else (done.stderr or done.stdout).strip()[:400]


def run(binary: Path, dump: bool) -> tuple[float, str | None]:
    """PolyBench's printed kernel time, and its dump when asked for."""
    done = subprocess.run([str(binary)], capture_output=True, text=True, timeout=RUN_TIMEOUT,
                          check=True)
    return float(done.stdout.split()[0]), (done.stderr if dump else None)


def compare(want: str, got: str) -> float | None:
    """The largest difference of two dumps' numbers, or None when their words differ."""
    def split(text):
        words = text.split()
        values = []
        for word in words:
            try:
                values.append(float(word))
            except ValueError:
                values.append(word)
        return values
    a, b = split(want), split(got)
    if len(a) != len(b) or any(isinstance(x, str) != isinstance(y, str) or
                               (isinstance(x, str) and x != y) for x, y in zip(a, b)):
        return None
    # beyond the relative part of the tolerance (then at most 0.01: the printing's)
    return max((abs(x - y) - 1e-8 * abs(x) for x, y in zip(a, b) if not isinstance(x, str)),
               default=0.0)


def measure(name: str, source: Path, size: str, repeat: int, folder: Path,
            compilers_: dict[str, list[str]], autoselect: str = "model") -> dict:
    defines = [f"{size}_DATASET", "POLYBENCH_TIME", "POLYBENCH_DUMP_ARRAYS"]
    row: dict = {"kernel": name, "size": size}
    binaries: dict[str, Path] = {}
    for label, compiler in compilers_.items():
        binary = folder / f"{name}_{label}"
        error = build([*compiler, *FLAGS, *(f"-D{d}" for d in defines), f"-I{UTILITIES}",
                       str(source), str(UTILITIES / "polybench.c"), "-lm", "-o", str(binary)])
        if error:
            row[f"{label}_error"] = error
        else:
            binaries[label] = binary
    clock = time.perf_counter()
    try:
        kernel = from_c(source, defines=defines, include=[UTILITIES])
        compiled = kernel.compile(threads=1,
                                  autoselect=None if autoselect == "off" else autoselect)
        write_c_library(kernel, compiled.native, kernel.values(), folder / f"{name}_polyc.o")
        row["compile_s"] = time.perf_counter() - clock
        row["decision"] = _decision(compiled)
        caller = folder / f"{name}_main.c"
        caller.write_text(caller_source(kernel))
        binary = folder / f"{name}_polyc"
        error = build(["cc", *FLAGS, *(f"-D{d}" for d in defines), str(caller),
                       str(UTILITIES / "polybench.c"), f"-I{UTILITIES}",
                       str(folder / f"{name}_polyc.o"), "-lm", "-o", str(binary)])
        if error:
            row["polyc_error"] = f"linking PolyBench's main: {error}"
        else:
            binaries["polyc"] = binary
    except polyc.PolycError as error:
        row["polyc_error"] = f"{type(error).__name__}: {error}"
    times: dict[str, list[float]] = {label: [] for label in binaries}
    dumps: dict[str, str] = {}
    for k in range(repeat):
        for label, binary in binaries.items():
            try:
                seconds, dump = run(binary, dump=k == 0)
            except (subprocess.SubprocessError, ValueError, IndexError) as error:
                row[f"{label}_error"] = f"run failed: {error}"
                continue
            times[label].append(seconds)
            if dump is not None:
                dumps[label] = dump
    for label, values in times.items():
        if values:
            row[f"{label}_s"] = statistics.median(values)
    if "polyc" in dumps:
        for label in compilers_:
            if label in dumps:
                row[f"diff_vs_{label}"] = compare(dumps[label], dumps["polyc"])
    return row


def _decision(compiled) -> str:
    """The schedule the kernel got: the candidate autoselect chose, else Pluto's."""
    notes = [d for d in compiled.schedule.decisions if d.startswith("autoselect")]
    return notes[0].rsplit("-> ", 1)[1] if notes else "pluto"


def speedup(row: dict, label: str) -> float | None:
    if row.get("polyc_s") and row.get(f"{label}_s"):
        return row[f"{label}_s"] / row["polyc_s"]
    return None


def correct(row: dict, label: str) -> bool | None:
    diff = row.get(f"diff_vs_{label}", "missing")
    if diff == "missing":
        return None
    return diff is not None and diff <= 0.0100001


def print_table(rows: list[dict], labels: list[str]) -> None:
    head = ["kernel", "schedule", "compile s", "polyc s", *(f"{c} s" for c in labels),
            *(f"x vs {c}" for c in labels), "outputs"]
    print(" | ".join(head))
    for row in rows:
        cells = [row["kernel"], row.get("decision", "-"), _f(row.get("compile_s"), 2),
                 _f(row.get("polyc_s"), 4),
                 *(_f(row.get(f"{c}_s"), 4) for c in labels),
                 *(_f(speedup(row, c), 2) for c in labels)]
        checks = [correct(row, c) for c in labels]
        cells.append("same" if checks and all(checks) else
                     "DIFFERENT" if any(c is False for c in checks) else "-")
        print(" | ".join(cells))
        for key in [k for k in row if k.endswith("_error")]:
            print(f"    {key}: {row[key].splitlines()[0][:200]}")
    for label in labels:
        ratios = [s for s in (speedup(r, label) for r in rows) if s]
        if ratios:
            geomean = math.exp(sum(math.log(s) for s in ratios) / len(ratios))
            print(f"geomean speed-up vs {label}: {geomean:.2f} over {len(ratios)} kernels; "
                  f"slower than {label} on {sum(s < 1 for s in ratios)}")


def _f(value, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=SIZES, default="LARGE")
    parser.add_argument("--kernels", help="comma-separated names (default: all 30)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", default=str(HERE / "results" / "polybench.json"))
    parser.add_argument("--autoselect", choices=("model", "measure", "off"), default="model",
                        help="how polyc chooses each kernel's schedule (default: model, "
                             "polyc cc's default; off: Pluto's)")
    args = parser.parse_args(argv)
    found = kernels()
    names = args.kernels.split(",") if args.kernels else list(found)
    unknown = [n for n in names if n not in found]
    if unknown:
        parser.error(f"unknown kernels {unknown}; PolyBench has {', '.join(found)}")
    compilers_ = compilers()
    rows = []
    with tempfile.TemporaryDirectory(prefix="polybench-") as tmp:
        for name in names:
            rows.append(measure(name, found[name], args.size, args.repeat, Path(tmp),
                                compilers_, args.autoselect))
            row = rows[-1]
            print(f"{name}: polyc {_f(row.get('polyc_s'), 4)} s, "
                  + ", ".join(f"{c} {_f(row.get(f'{c}_s'), 4)} s" for c in compilers_),
                  flush=True)
    print_table(rows, list(compilers_))
    write_rows(args.json, {"size": args.size, "repeat": args.repeat, "flags": list(FLAGS),
                           "autoselect": args.autoselect,
                           "compilers": {k: " ".join(v) for k, v in compilers_.items()},
                           "polyc": polyc.__version__}, rows)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
