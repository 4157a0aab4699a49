"""Real models: polyc's compile time and run time next to onnxruntime's, same process.

    python benchmarks/models.py [--repeat N] [--threads 1,2] [--cases mobilenetv2,bert4]
                                [--json out.json]

The cases are the onnx package's light models (full-size CNNs), the PyTorch exports
of tests/torch_models.py (needs the ``test`` extra: torch): ResNet-18-, MobileNetV2-,
MobileNetV3- and EfficientNet-style CNNs, a YOLO-style detector, BERT-style encoders, an
LSTM tagger and a GRU frame classifier; and an int8 MLP quantized by onnxruntime's
``quantize_dynamic`` (tests/real_models.py).
Each thread count (default 1 and 2) runs in its own process, with ``OMP_NUM_THREADS``
(polyc's parallel loops) and onnxruntime's ``intra_op_num_threads`` set to it. For each
model it checks polyc's output against onnxruntime (rtol 1e-4, atol 1e-5), then prints
the compile time and the median run time of polyc and onnxruntime (interleaved, one
call of each per round) and their ratio (below 1.0 means polyc is faster); each table
ends with the geometric mean of the ratios. Results go to JSON (default
benchmarks/results/models.json), one row per model and thread count.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from harness import (  # noqa: E402
    arguments,
    compiled_vs_onnxruntime,
    drive,
    fmt_ratio,
    pin_threads,
    print_compared,
    tables,
)

pin_threads(sys.argv)

import numpy as np  # noqa: E402
import onnx  # noqa: E402

import polyc  # noqa: E402

from real_models import ATOL, LIGHT, QUANTIZED, RTOL, TORCH, load  # noqa: E402

CASES = LIGHT + list(TORCH) + list(QUANTIZED)


# PyTorch exports run in a process of their own: torch brings its own libgomp, whose
# idle threads spin (polyc bounds that only for a libgomp it loads first), and on a busy
# machine the 2-thread runs of the timing process then took up to 8x longer.
EXPORT = """
import sys
sys.path.insert(0, sys.argv[3])
import numpy as np, onnx
from real_models import load
model, inputs = load(sys.argv[1], random_weights=True)
onnx.save(model, sys.argv[2] + "/model.onnx")
np.savez(sys.argv[2] + "/inputs.npz", **inputs)
"""


def load_case(name: str):
    """The model and inputs of case ``name`` (a PyTorch export made in a subprocess)."""
    if name not in TORCH:
        return load(name, random_weights=True)
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([sys.executable, "-c", EXPORT, name, folder,
                        str(HERE.parent / "tests")], check=True)
        with np.load(Path(folder, "inputs.npz")) as saved:
            return onnx.load(str(Path(folder, "model.onnx"))), dict(saved)


def run_case(name: str, repeat: int, threads: int) -> dict:
    model, inputs = load_case(name)
    return compiled_vs_onnxruntime(name, model, inputs, repeat, threads, rtol=RTOL, atol=ATOL)


def print_table(rows, threads: int) -> None:
    print_compared(rows, threads, "model", 2)
    mean = statistics.geometric_mean(r["polyc/onnxruntime"] for r in rows)
    print(f"{'geometric mean':<49}{fmt_ratio(mean):>11}")


def main(argv=None):
    args = arguments(__doc__.splitlines()[0], CASES, json_path=HERE / "results" / "models.json",
                     threads=[1, 2], repeat=10, argv=argv)

    drive(args, __file__, lambda name: run_case(name, args.repeat, args.threads[0]),
          tables(print_table), polyc.__version__)


if __name__ == "__main__":
    main()
