"""Benchmarks: polyc next to numpy and onnxruntime, measured in the same process.

    python benchmarks/run.py [--repeat N] [--threads 1,2] [--cases mlp,matmul512] [--json out.json]

Each thread count runs in its own process, with ``OMP_NUM_THREADS`` (polyc's parallel
loops, OpenBLAS under numpy) and onnxruntime's ``intra_op_num_threads`` set to it. For
each case it prints polyc's compile time and the median run time of polyc, polyc with
tiling disabled, numpy and onnxruntime (each after warm-up; polyc, numpy and onnxruntime
interleaved, one call of each per round, so the machine's slow phases hit them alike),
and the ratios polyc/numpy, polyc/onnxruntime and polyc/untiled (below 1.0 means polyc
is faster); then each one's speed-up from 1 to 2 threads. It checks polyc's outputs
against onnxruntime before timing. Results go to JSON (default
benchmarks/results/latest.json), one row per case and thread count.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from harness import (  # noqa: E402
    arguments,
    drive,
    fmt_ms,
    fmt_ratio,
    median_time,
    median_times,
    onnxruntime_session,
    pin_threads,
)

pin_threads(sys.argv[1:])  # before numpy and onnxruntime start their thread pools

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import polyc  # noqa: E402


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "bench", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def matmul_case(m, k, n, dtype=np.float32):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    kind = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    vi = lambda name, shape: helper.make_tensor_value_info(name, kind, list(shape))  # noqa: E731
    model = _model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                   [vi("a", a.shape), vi("b", b.shape)], [vi("y", (m, n))])
    suffix = "" if dtype == np.float32 else f" {np.dtype(dtype).name}"
    return f"matmul {m}x{k}x{n}{suffix}", model, {"a": a, "b": b}, lambda: a @ b


def batched_matmul_case(batch, m, k, n):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((batch, m, k), dtype=np.float32)
    b = rng.standard_normal((batch, k, n), dtype=np.float32)
    model = _model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                   [_vi("a", a.shape), _vi("b", b.shape)], [_vi("y", (batch, m, n))])
    return f"batched matmul {batch}x{m}x{k}x{n}", model, {"a": a, "b": b}, lambda: a @ b


def matmul_add_relu_case(size):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    w = rng.standard_normal((size, size), dtype=np.float32)
    bias = rng.standard_normal((size,), dtype=np.float32)
    nodes = [helper.make_node("MatMul", ["a", "w"], ["t"]),
             helper.make_node("Add", ["t", "bias"], ["u"]),
             helper.make_node("Relu", ["u"], ["y"])]
    inits = [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(bias, "bias")]
    model = _model(nodes, [_vi("a", a.shape)], [_vi("y", (size, size))], inits)
    return (f"matmul+add+relu {size}^3", model, {"a": a},
            lambda: np.maximum(a @ w + bias, 0))


def mlp2_case(batch, width=512, hidden=1024, classes=256):
    """Two dense layers (Gemm + Relu, Gemm) with constant weights."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, width), dtype=np.float32)
    w1 = rng.standard_normal((width, hidden), dtype=np.float32) * 0.05
    b1 = rng.standard_normal((hidden,), dtype=np.float32)
    w2 = rng.standard_normal((hidden, classes), dtype=np.float32) * 0.05
    b2 = rng.standard_normal((classes,), dtype=np.float32)
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["y"])]
    inits = [onnx.numpy_helper.from_array(v, n) for n, v in
             [("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2)]]
    model = _model(nodes, [_vi("x", x.shape)], [_vi("y", (batch, classes))], inits)
    return (f"2-layer mlp batch {batch}", model, {"x": x},
            lambda: np.maximum(x @ w1 + b1, 0) @ w2 + b2)


def elementwise_case(n=4 * 1024 * 1024):
    """Five elementwise ops in a chain: ((x * y + x) - y) -> relu -> tanh."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n,), dtype=np.float32)
    y = rng.standard_normal((n,), dtype=np.float32)
    nodes = [helper.make_node("Mul", ["x", "y"], ["t0"]),
             helper.make_node("Add", ["t0", "x"], ["t1"]),
             helper.make_node("Sub", ["t1", "y"], ["t2"]),
             helper.make_node("Relu", ["t2"], ["t3"]),
             helper.make_node("Tanh", ["t3"], ["z"])]
    model = _model(nodes, [_vi("x", x.shape), _vi("y", y.shape)], [_vi("z", x.shape)])
    return ("elementwise chain 5 ops 4M", model, {"x": x, "y": y},
            lambda: np.tanh(np.maximum(x * y + x - y, 0)))


def softmax_case(size=1024):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((size, size), dtype=np.float32)

    def reference():
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    model = _model([helper.make_node("Softmax", ["x"], ["y"], axis=1)],
                   [_vi("x", x.shape)], [_vi("y", x.shape)])
    return f"softmax {size}x{size}", model, {"x": x}, reference


def reduce_case(size=1024):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((size, size), dtype=np.float32)
    nodes = [helper.make_node("ReduceSum", ["x", "axes0"], ["s0"], keepdims=0),
             helper.make_node("ReduceMax", ["x"], ["m1"], axes=[1], keepdims=0)]
    inits = [onnx.numpy_helper.from_array(np.array([0], np.int64), "axes0")]
    model = _model(nodes, [_vi("x", x.shape)], [_vi("s0", (size,)), _vi("m1", (size,))],
                   inits)
    return (f"reducesum+reducemax {size}x{size}", model, {"x": x},
            lambda: (x.sum(axis=0), x.max(axis=1)))


def conv_case(name, channels, size, *, kernel=3, stride=1, out_channels=None,
              depthwise=False, relu=False):
    """One Conv (same padding) with a seeded He-scaled weight and a bias as initializers
    over a seeded ``[1, channels, size, size]`` input, optionally followed by Relu;
    ``depthwise`` makes it one group per channel. No numpy column."""
    out_channels = channels if depthwise or out_channels is None else out_channels
    groups = channels if depthwise else 1
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, channels, size, size), dtype=np.float32)
    fan_in = channels // groups * kernel * kernel
    w = rng.standard_normal((out_channels, channels // groups, kernel, kernel),
                            dtype=np.float32) * np.float32(np.sqrt(2 / fan_in))
    bias = rng.standard_normal((out_channels,), dtype=np.float32) * np.float32(0.1)
    out_size = (size + 2 * (kernel // 2) - kernel) // stride + 1
    conv_out = "t" if relu else "y"
    nodes = [helper.make_node("Conv", ["x", "w", "bias"], [conv_out], group=groups,
                              kernel_shape=[kernel, kernel], strides=[stride, stride],
                              pads=[kernel // 2] * 4)]
    if relu:
        nodes.append(helper.make_node("Relu", ["t"], ["y"]))
    inits = [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(bias, "bias")]
    model = _model(nodes, [_vi("x", x.shape)], [_vi("y", (1, out_channels, out_size, out_size))],
                   inits)
    return name, model, {"x": x}, None


def _quantized(name, node, x, w, out_shape, **attrs):
    """A QLinear* node over a uint8 input with int8 weights (scale per output channel for
    a conv), the scales and zero points as a static quantization writes them."""
    rng = np.random.default_rng(1)
    channels = w.shape[0] if node == "QLinearConv" else w.shape[1]
    w_scale = rng.uniform(0.002, 0.01, channels if node == "QLinearConv" else ()).astype(
        np.float32)
    inits = [("xs", np.array(0.02, np.float32)), ("xz", np.array(121, np.uint8)), ("w", w),
             ("ws", w_scale), ("wz", np.zeros(w_scale.shape, np.int8)),
             ("ys", np.array(0.05, np.float32)), ("yz", np.array(7, np.uint8))]
    nodes = [helper.make_node(node, ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"],
                              **attrs)]
    vi = lambda n, shape: helper.make_tensor_value_info(n, TensorProto.UINT8, list(shape))  # noqa: E731
    model = _model(nodes, [vi("x", x.shape)], [vi("y", out_shape)],
                   [onnx.numpy_helper.from_array(v, k) for k, v in inits])
    return name, model, {"x": x}, None


def qlinear_conv_case(name, channels, size, *, stride=1, out_channels=None):
    """QLinearConv 3x3 (same padding), uint8 activations, int8 weights."""
    out_channels = out_channels or channels
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (1, channels, size, size)).astype(np.uint8)
    w = rng.integers(-127, 128, (out_channels, channels, 3, 3)).astype(np.int8)
    out_size = (size - 1) // stride + 1
    return _quantized(name, "QLinearConv", x, w, (1, out_channels, out_size, out_size),
                      pads=[1] * 4, strides=[stride] * 2)


def qlinear_matmul_case(m, k, n):
    """QLinearMatMul of uint8 activations by int8 weights."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (m, k)).astype(np.uint8)
    w = rng.integers(-127, 128, (k, n)).astype(np.int8)
    return _quantized(f"qlinearmatmul {m}x{k}x{n}", "QLinearMatMul", x, w, (m, n))


def mlp_case():
    """The bundled example; its numpy column is left empty (onnxruntime is the reference)."""
    model = onnx.load(str(HERE.parent / "examples" / "mlp.onnx"))
    x = np.load(HERE.parent / "examples" / "mlp_input.npy")
    return "mlp (examples/mlp.onnx)", model, {"x": x}, None


CASES = {
    "mlp": mlp_case,
    "matmul256": lambda: matmul_case(256, 256, 256),
    "matmul512": lambda: matmul_case(512, 512, 512),
    "matmul1024": lambda: matmul_case(1024, 1024, 1024),
    "matmul512_f64": lambda: matmul_case(512, 512, 512, np.float64),
    "matmul1000x1100x1200": lambda: matmul_case(1000, 1100, 1200),
    "batched": lambda: batched_matmul_case(8, 128, 64, 128),
    "matmul_add_relu": lambda: matmul_add_relu_case(1024),
    "mlp2_b1": lambda: mlp2_case(1),
    "mlp2_b64": lambda: mlp2_case(64),
    "elementwise": elementwise_case,
    "softmax": softmax_case,
    "reduce": reduce_case,
    "conv3x3_56": lambda: conv_case("conv3x3 64x56x56", 64, 56),
    "conv1x1_56": lambda: conv_case("conv1x1 64->256 56x56", 64, 56, kernel=1,
                                    out_channels=256),
    "conv3x3s2_28": lambda: conv_case("conv3x3 s2 128->256 28x28", 128, 28, stride=2,
                                      out_channels=256),
    "dwconv3x3_112": lambda: conv_case("dwconv3x3 32x112x112", 32, 112, depthwise=True),
    "dwconv3x3s2_56": lambda: conv_case("dwconv3x3 s2 144x56x56", 144, 56, stride=2,
                                        depthwise=True),
    "dwconv5x5_28": lambda: conv_case("dwconv5x5 240x28x28", 240, 28, kernel=5,
                                      depthwise=True),
    "dwconv5x5_7": lambda: conv_case("dwconv5x5 1152x7x7", 1152, 7, kernel=5,
                                     depthwise=True),
    "conv1x1_14": lambda: conv_case("conv1x1 1024->256 14x14", 1024, 14, kernel=1,
                                    out_channels=256),
    "conv1x1_7": lambda: conv_case("conv1x1 512->2048 7x7", 512, 7, kernel=1,
                                   out_channels=2048),
    "conv3x3_4": lambda: conv_case("conv3x3 128x4x4", 128, 4),
    "conv3x3_7": lambda: conv_case("conv3x3 512x7x7", 512, 7),
    "conv3x3relu_56": lambda: conv_case("conv3x3+relu 64x56x56", 64, 56, relu=True),
    "conv7x7s2_224": lambda: conv_case("conv7x7 s2+relu 3->64 224x224", 3, 224, kernel=7,
                                       stride=2, out_channels=64, relu=True),
    "conv3x3s2_56": lambda: conv_case("conv3x3 s2 64->128 56x56", 64, 56, stride=2,
                                      out_channels=128),
    "conv3x3s2_160": lambda: conv_case("conv3x3 s2 16->32 160x160", 16, 160, stride=2,
                                       out_channels=32),
    "qmatmul512": lambda: qlinear_matmul_case(512, 512, 512),
    "qconv3x3_56": lambda: qlinear_conv_case("qlinearconv3x3 64x56x56", 64, 56),
    "qconv3x3s2_28": lambda: qlinear_conv_case("qlinearconv3x3 s2 128->256 28x28", 128, 28,
                                               stride=2, out_channels=256),
}



def run_case(name, model, inputs, numpy_fn, repeat, threads):
    start = time.perf_counter()
    compiled = polyc.compile(model, cache=False)  # a cold compile, timed
    compile_s = time.perf_counter() - start
    session = onnxruntime_session(model, threads)
    expected = session.run(None, inputs)
    got = compiled.run(inputs)
    for ref, out in zip(expected, got.values()):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    untiled = polyc.compile(model, tile=False)
    contenders = {"polyc_s": lambda: compiled.run(inputs),
                  "onnxruntime_s": lambda: session.run(None, inputs)}
    if numpy_fn:
        contenders["numpy_s"] = numpy_fn
    row = {"case": name, "compile_s": compile_s, "numpy_s": None,
           **median_times(contenders, repeat),
           "untiled_s": median_time(lambda: untiled.run(inputs), max(1, repeat // 4))}
    row["polyc/onnxruntime"] = row["polyc_s"] / row["onnxruntime_s"]
    row["polyc/numpy"] = row["polyc_s"] / row["numpy_s"] if numpy_fn else None
    row["polyc/untiled"] = row["polyc_s"] / row["untiled_s"]
    return row



def print_table(rows, threads):
    print(f"\n{threads} thread{'s' if threads > 1 else ''}")
    print(f"{'case':<34}{'compile ms':>11}{'polyc ms':>11}{'untiled ms':>12}{'numpy ms':>10}"
          f"{'ort ms':>10}{'polyc/numpy':>13}{'polyc/ort':>11}{'polyc/untiled':>15}")
    for r in rows:
        print(f"{r['case']:<34}{fmt_ms(r['compile_s']):>11}{fmt_ms(r['polyc_s']):>11}"
              f"{fmt_ms(r['untiled_s']):>12}{fmt_ms(r['numpy_s']):>10}{fmt_ms(r['onnxruntime_s']):>10}"
              f"{fmt_ratio(r['polyc/numpy']):>13}{fmt_ratio(r['polyc/onnxruntime']):>11}"
              f"{fmt_ratio(r['polyc/untiled']):>15}")


def print_scaling(runs):
    """polyc's, numpy's and onnxruntime's speed-up from the first thread count to the others."""
    counts = sorted(runs)
    if len(counts) < 2:
        return
    base = {r["case"]: r for r in runs[counts[0]]}
    for n in counts[1:]:
        print(f"\nspeed-up, {counts[0]} -> {n} threads (time ratio)")
        print(f"{'case':<34}{'polyc':>8}{'numpy':>8}{'ort':>8}")
        for r in runs[n]:
            b = base[r["case"]]
            speedup = {k: (b[k] / r[k] if r[k] and b[k] else None)
                       for k in ("polyc_s", "numpy_s", "onnxruntime_s")}
            print(f"{r['case']:<34}{fmt_ratio(speedup['polyc_s']):>8}{fmt_ratio(speedup['numpy_s']):>8}"
                  f"{fmt_ratio(speedup['onnxruntime_s']):>8}")


def main(argv=None):
    args = arguments(__doc__.splitlines()[0], CASES, json_path=HERE / "results" / "latest.json",
                     threads=[1, 2], repeat=20, argv=argv)

    def show(runs):
        for n, rows in runs.items():
            print_table(rows, n)
        print_scaling(runs)

    drive(args, __file__, lambda name: run_case(*CASES[name](), args.repeat, args.threads[0]),
          show, polyc.__version__)


if __name__ == "__main__":
    main()
