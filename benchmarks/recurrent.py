"""Recurrent layers: one LSTM, GRU or RNN node, polyc next to onnxruntime, same process.

    python benchmarks/recurrent.py [--repeat N] [--threads 1,2] [--cases lstm_b1,gru_b16]
                                   [--json out.json]

Each case is a forward layer over 100 time steps with 256 inputs and 256 hidden units
at batch 1 or 16 (``lstm_b16``: LSTM at batch 16), weights uniform in +-1/sqrt(hidden)
(PyTorch's initialisation: the recurrence stays stable, so results over 100 steps
compare), seeded, with initial states. For each case it checks polyc's outputs against
onnxruntime (rtol 1e-4, atol 1e-5), then prints the compile time and the median run
time of polyc and onnxruntime (interleaved, one call of each per round) and their ratio
(below 1.0 means polyc is faster). Each thread count runs in its own process. Results go
to JSON (default benchmarks/results/recurrent.json).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

from harness import (  # noqa: E402
    arguments,
    compiled_vs_onnxruntime,
    drive,
    pin_threads,
    print_compared,
    tables,
)

pin_threads(sys.argv)

import numpy as np  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import polyc  # noqa: E402

STEPS, INPUTS, HIDDEN = 100, 256, 256
GATES = {"lstm": 4, "gru": 3, "rnn": 1}
CASES = [f"{op}_b{batch}" for op in GATES for batch in (1, 16)]
RTOL, ATOL = 1e-4, 1e-5


def layer_case(name: str, seed: int = 0):
    """The model and inputs of case ``name`` (``<op>_b<batch>``)."""
    op, batch = name.split("_b")
    batch = int(batch)
    rng = np.random.default_rng(seed)
    bound = 1 / np.sqrt(HIDDEN)
    gates = GATES[op] * HIDDEN

    def uniform(*shape):
        return rng.uniform(-bound, bound, shape).astype(np.float32)

    weights = {"W": uniform(1, gates, INPUTS), "R": uniform(1, gates, HIDDEN),
               "B": uniform(1, 2 * gates), "h0": uniform(1, batch, HIDDEN)}
    names = ["X", "W", "R", "B", "", "h0"]
    outputs = ["Y", "Y_h"]
    if op == "lstm":
        weights["c0"] = uniform(1, batch, HIDDEN)
        names.append("c0")
        outputs.append("Y_c")
    node = helper.make_node(op.upper(), names, outputs, hidden_size=HIDDEN)
    graph = helper.make_graph(
        [node], name, [helper.make_tensor_value_info("X", TensorProto.FLOAT,
                                                     (STEPS, batch, INPUTS))],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, (STEPS, 1, batch, HIDDEN)
                                       if o == "Y" else (1, batch, HIDDEN)) for o in outputs],
        initializer=[helper.make_tensor(k, TensorProto.FLOAT, v.shape, v.ravel())
                     for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    inputs = {"X": rng.uniform(-1, 1, (STEPS, batch, INPUTS)).astype(np.float32)}
    return model, inputs


def run_case(name: str, repeat: int, threads: int) -> dict:
    model, inputs = layer_case(name)
    return compiled_vs_onnxruntime(name, model, inputs, repeat, threads, rtol=RTOL, atol=ATOL)


def print_table(rows, threads: int) -> None:
    print_compared(rows, threads, "layer", 3)


def main(argv=None):
    args = arguments(__doc__.splitlines()[0], CASES,
                     json_path=HERE / "results" / "recurrent.json", threads=[1, 2],
                     repeat=20, argv=argv)
    drive(args, __file__, lambda name: run_case(name, args.repeat, args.threads[0]),
          tables(print_table), polyc.__version__)


if __name__ == "__main__":
    main()
