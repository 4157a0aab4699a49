"""Register tiles for the host's vector width against AVX-512's, next to onnxruntime.

    python benchmarks/registers.py [--repeat N] [--threads 1] [--cases matmul1024,...]
                                   [--json out.json]

For products and convolutions of ``benchmarks/run.py``, it compiles each model twice,
with register tiles for the host's vector width (the default) and with
``vector_bits=512`` (AVX-512's tiles, which every host got before the tiles followed the
width: :mod:`polyc.tiling.microkernel`), checks both against onnxruntime, and times
both and onnxruntime interleaved (one call of each per round). On an AVX-512 host the
two builds are the same tiles. Results go to JSON (default
benchmarks/results/registers.json).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import harness  # noqa: E402

harness.pin_threads(sys.argv[1:])  # before numpy and onnxruntime start their thread pools

import numpy as np  # noqa: E402
import run  # noqa: E402  (the cases)

import polyc  # noqa: E402
from polyc.host import host_vector_bits  # noqa: E402

NAMES = ["matmul512", "matmul1024", "matmul1000x1100x1200", "matmul_add_relu", "mlp2_b1",
         "mlp2_b64", "batched", "matmul512_f64", "conv3x3_56", "conv1x1_56", "conv3x3s2_28",
         "conv1x1_14", "conv1x1_7", "conv3x3_7", "conv7x7s2_224", "conv3x3s2_160"]
CASES = {name: run.CASES[name] for name in NAMES}
BUILDS = {"host": {}, "avx512": {"vector_bits": 512}}


def run_case(name, repeat, threads):
    label, model, inputs, _ = CASES[name]()
    session = harness.onnxruntime_session(model, threads)
    expected = session.run(None, inputs)
    compiled = {build: polyc.compile(model, cache=False, **options)
                for build, options in BUILDS.items()}
    for c in compiled.values():
        for got, want in zip(c.run(inputs).values(), expected):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    runs = {f"{build}_s": (lambda c=c: c.run(inputs)) for build, c in compiled.items()}
    times = harness.median_times({**runs, "onnxruntime_s": lambda: session.run(None, inputs)},
                                 repeat)
    tiles = {build: sorted({m for d in c.schedule.decisions
                            for m in re.findall(r"register tile (\d+x\d+)", d)})
             for build, c in compiled.items()}
    return {"case": label, **times, "tiles": tiles, "host_bits": host_vector_bits(),
            "host/avx512": times["host_s"] / times["avx512_s"],
            "host/onnxruntime": times["host_s"] / times["onnxruntime_s"],
            "avx512/onnxruntime": times["avx512_s"] / times["onnxruntime_s"]}


def print_table(rows, threads):
    print(f"\n{threads} thread{'s' if threads > 1 else ''}, host vectors of "
          f"{rows[0]['host_bits'] if rows else '?'} bits")
    print(f"{'case':<34}{'host ms':>10}{'avx512 ms':>11}{'ort ms':>10}{'host/avx512':>13}"
          f"{'host/ort':>10}{'avx512/ort':>12}  tiles host / avx512")
    for r in rows:
        print(f"{r['case']:<34}{harness.fmt_ms(r['host_s']):>10}{harness.fmt_ms(r['avx512_s']):>11}"
              f"{harness.fmt_ms(r['onnxruntime_s']):>10}{harness.fmt_ratio(r['host/avx512']):>13}"
              f"{harness.fmt_ratio(r['host/onnxruntime']):>10}"
              f"{harness.fmt_ratio(r['avx512/onnxruntime']):>12}  "
              f"{','.join(r['tiles']['host'])} / {','.join(r['tiles']['avx512'])}")


def main(argv=None):
    args = harness.arguments(__doc__.splitlines()[0], CASES,
                             json_path=HERE / "results" / "registers.json", threads=[1],
                             repeat=15, argv=argv)
    threads = args.threads[0] if args.worker else None
    harness.drive(args, __file__, lambda name: run_case(name, args.repeat, threads),
                  harness.tables(print_table), polyc.__version__)


if __name__ == "__main__":
    main()
