"""Scratch memory per model: one slot per temporary against the planned buffer.

    python benchmarks/scratch.py [MODEL ..]     (default: resnet18 squeezenet mlp2 bert_layer)

Models are those of tests/real_models.py (light models with seeded random weights).
For each it prints the temporaries, how many are written in place, the scratch bytes
without reuse (one 64-byte-aligned slot each, as before memory planning) and as
planned (shared by liveness, in place), and polyc's largest difference from
onnxruntime on the model's seeded input.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import numpy as np  # noqa: E402

import polyc  # noqa: E402

from real_models import load, run_onnxruntime  # noqa: E402

DEFAULT = ("resnet18", "squeezenet", "mlp2", "bert_layer")


def row(name: str) -> str:
    model, inputs = load(name, random_weights=True)
    compiled = polyc.compile(model, threads=1)
    plan = compiled.compilation.plan
    expected, _ = run_onnxruntime(model, inputs)
    error = max(float(np.max(np.abs(got - want)))
                for got, want in zip(compiled.run(inputs).values(), expected))
    return (f"{name:<12}{len(plan.scratch):>7}{len(plan.in_place):>10}"
            f"{plan.unshared_bytes:>15,}{plan.scratch_bytes:>13,}"
            f"{plan.scratch_bytes / max(plan.unshared_bytes, 1):>8.2f}{error:>11.1e}")


def main(argv: list[str]) -> None:
    print(f"{'model':<12}{'temps':>7}{'in place':>10}{'no reuse B':>15}{'planned B':>13}"
          f"{'ratio':>8}{'max err':>11}")
    for name in argv or DEFAULT:
        print(row(name), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
