"""The single-core fp32 FMA peak of this machine, measured with LLVM's own code.

    python benchmarks/peak.py [--repeat 20]

A loop of independent 16-lane FMA chains (``acc_k = fma(acc_k, x, y)``, enough
accumulators to hide the FMA latency), compiled by the same target setup as polyc's
code (host CPU, 512-bit vectors, O3), on one thread. Prints GFLOP/s and writes
benchmarks/results/peak.json. Each FMA lane counts as 2 flops.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import time
from pathlib import Path

import llvmlite.binding as llvm
from llvmlite import ir

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from polyc.codegen import target  # noqa: E402

LANES = 16
CHAINS = 12  # FMA latency 4 cycles x 2 ports, plus slack
STEPS = 50_000_000 // (LANES * CHAINS)


def fma_kernel() -> str:
    """``float peak(i64 steps)``: ``CHAINS`` vector FMA chains, summed at the end so
    nothing is dead."""
    f32, i64 = ir.FloatType(), ir.IntType(64)
    vec = ir.VectorType(f32, LANES)
    module = ir.Module(name="peak")
    fn = ir.Function(module, ir.FunctionType(f32, [i64]), name="peak")
    fma = module.declare_intrinsic("llvm.fma.v16f32", fnty=ir.FunctionType(vec, [vec] * 3))
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.branch(loop)
    b.position_at_end(loop)
    k = b.phi(i64)
    accs = [b.phi(vec) for _ in range(CHAINS)]
    x = ir.Constant(vec, [0.999999] * LANES)
    y = ir.Constant(vec, [1e-7] * LANES)
    new = [b.call(fma, [acc, x, y]) for acc in accs]
    k_next = b.add(k, ir.Constant(i64, 1))
    b.cbranch(b.icmp_signed("<", k_next, fn.args[0]), loop, done)
    k.add_incoming(ir.Constant(i64, 0), entry)
    k.add_incoming(k_next, loop)
    for n, (acc, value) in enumerate(zip(accs, new)):
        acc.add_incoming(ir.Constant(vec, [float(n)] * LANES), entry)
        acc.add_incoming(value, loop)
    b.position_at_end(done)
    total = new[0]
    for value in new[1:]:
        total = b.fadd(total, value)
    b.ret(b.extract_element(total, ir.Constant(ir.IntType(32), 0)))
    return str(module)


def measure(repeat: int) -> float:
    tm = target.host_target_machine(jit=True)
    module = target.parse(fma_kernel(), tm)
    target.optimize(module, tm)
    engine = llvm.create_mcjit_compiler(module, tm)
    engine.finalize_object()
    peak = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(engine.get_function_address("peak"))
    peak(STEPS // 10)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        peak(STEPS)
        samples.append(time.perf_counter() - start)
    flops = 2 * LANES * CHAINS * STEPS
    return flops / statistics.median(samples) / 1e9


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--json", default=str(HERE / "results" / "peak.json"))
    args = parser.parse_args(argv)
    gflops = measure(args.repeat)
    print(f"fp32 FMA peak, 1 thread: {gflops:.1f} GFLOP/s ({CHAINS} chains of {LANES} lanes, "
          f"CPU {target.host_cpu()[0]})")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"cpu": target.host_cpu()[0], "threads": 1,
                                           "gflops": gflops}, indent=2))


if __name__ == "__main__":
    main()
