"""Random ONNX graphs of ops polyc supports, compared with onnxruntime.

A :class:`GraphCase` is a description, not a model: graph inputs and weights
(:class:`Leaf`, values drawn from the case's data seed), op records (:class:`Node`,
constant inputs such as axes and shapes written out as :class:`Literal`), the graph
outputs and the compile :class:`~polyc.fuzz.Config` (:mod:`polyc.fuzz.graph_case`).
:func:`model` builds the ONNX model (opset :data:`OPSET`) from it, so :func:`smaller`
(:mod:`polyc.fuzz.graph_shrink`) shrinks descriptions.

:func:`generate` (:mod:`polyc.fuzz.graph_ops`) grows a graph op by op and runs each new
op with onnxruntime, so it knows every value: it keeps them where the reference is well
conditioned (guards put an ``Abs``/``Add`` before Log and Sqrt, a ``Clip`` before Exp
and Softmax of large values; divisors are fresh tensors of magnitude in [0.5, 2],
integer divisors nonzero; LayerNormalization only over rows that are not nearly
constant), and compares (Less, Equal, ...) and casts float to int64 or bool only values
that are *exact*: inputs, weights and results of ops that round nothing (Relu, Max,
MaxPool, Transpose, ...), since a rounding difference would flip them.
"""

from __future__ import annotations

import math

import numpy as np

from polyc.fuzz import Mismatch
from polyc.fuzz.graph_case import (
    OPSET,
    GraphCase,
    Leaf,
    Literal,
    Node,
    feeds,
    leaf_values,
    model,
    reference,
    run_onnxruntime,
)
from polyc.fuzz.graph_ops import generate
from polyc.fuzz.graph_shrink import SIMPLEST, size, smaller

__all__ = ["OPSET", "SIMPLEST", "GraphCase", "Leaf", "Literal", "Node", "check", "compare",
           "describe", "error_scales", "feeds", "generate", "leaf_values", "model",
           "reference", "reproducer", "run_onnxruntime", "size", "smaller"]

RTOL = 1e-4
ATOL = 1e-4


# -- comparing -----------------------------------------------------------------------------

def _reduction_length(node: Node, values: dict) -> int:
    """How many terms one output element of ``node`` sums (1 for an elementwise op)."""
    first = values[node.inputs[0]] if isinstance(node.inputs[0], str) else None
    out = values[node.output]
    attrs = dict(node.attrs)
    if node.op == "MatMul":
        return first.shape[-1]
    if node.op == "Gemm":
        return first.shape[0 if attrs.get("transA") else 1]
    if node.op == "Conv":
        return int(np.prod(values[node.inputs[1]].shape[1:]))
    if node.op in ("ReduceSum", "ReduceMean", "GlobalAveragePool"):
        return max(1, first.size // max(1, out.size))
    if node.op == "AveragePool":
        return int(np.prod(attrs["kernel_shape"]))
    if node.op == "Softmax":
        return first.shape[attrs.get("axis", -1)]
    if node.op == "LayerNormalization":
        return int(np.prod(first.shape[attrs.get("axis", -1):]))
    return 1


def error_scales(case: GraphCase, values: dict) -> dict[str, tuple[float, float]]:
    """For every value: the largest float magnitude among it and the values it is
    computed from, and the number of rounding steps on its longest path (each op counts
    its reduction length)."""
    scales = {}
    for leaf in case.leaves:
        v = values[leaf.name]
        scales[leaf.name] = (_magnitude(v), 0.0)
    for node in case.nodes:
        sources = [scales[x] for x in node.inputs if isinstance(x, str) and x]
        magnitude = max([_magnitude(values[node.output])] + [s[0] for s in sources])
        steps = max([0.0] + [s[1] for s in sources]) + _reduction_length(node, values)
        scales[node.output] = (magnitude, steps)
    return scales


def _magnitude(value: np.ndarray) -> float:
    """The largest finite magnitude of a float array (0 for other types)."""
    if value.dtype != np.float32 or value.size == 0:
        return 0.0
    finite = np.abs(value[np.isfinite(value)])
    return float(finite.max()) if finite.size else 0.0


def compare(name: str, actual: np.ndarray, expected: np.ndarray, atol: float) -> None:
    """Raise :class:`Mismatch` unless ``actual`` has ``expected``'s shape and dtype and
    its values: equal for integers and bools; for floats NaN and infinities at the same
    places and elsewhere ``|actual - expected| <= atol + RTOL * |expected|``."""
    actual = np.asarray(actual)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        raise Mismatch(f"output {name}: polyc gives {actual.dtype}{list(actual.shape)}, "
                       f"onnxruntime {expected.dtype}{list(expected.shape)}")
    if expected.dtype != np.float32:
        wrong = actual != expected
    else:
        special = ~np.isfinite(expected) | ~np.isfinite(actual)
        same_special = np.isnan(actual) & np.isnan(expected) | (actual == expected)
        with np.errstate(invalid="ignore"):
            error = np.abs(actual.astype(np.float64) - expected)
        wrong = np.where(special, ~same_special, error > atol + RTOL * np.abs(expected))
    if not wrong.any():
        return
    position = np.unravel_index(int(np.argmax(wrong)), wrong.shape)
    raise Mismatch(f"output {name}: {int(wrong.sum())} of {wrong.size} elements differ "
                   f"{_error_summary(actual, expected)}, first at {list(map(int, position))}: "
                   f"polyc {actual[position]}, onnxruntime {expected[position]} (atol {atol:.3g}, "
                   f"rtol {RTOL})")


def _error_summary(actual: np.ndarray, expected: np.ndarray) -> str:
    """Max absolute and relative error, over the elements finite in both."""
    both = np.isfinite(actual.astype(np.float64)) & np.isfinite(expected.astype(np.float64))
    if not both.any():
        return "(no finite elements)"
    error = np.abs(actual[both].astype(np.float64) - expected[both].astype(np.float64))
    relative = error / np.maximum(np.abs(expected[both].astype(np.float64)), 1e-30)
    return f"(max abs error {error.max():.3g}, max rel error {relative.max():.3g})"


def check(case: GraphCase) -> None:
    """Compile and run ``case`` with polyc and compare every output with onnxruntime's.

    Shapes and dtypes must be equal, integer and bool values exactly; floats must have
    NaN and infinities at the same places and elsewhere satisfy
    ``|polyc - ort| <= atol + 1e-4 * |ort|`` with ``atol = 1e-4 * max(1, M) * sqrt(n)``,
    where M is the largest magnitude among the output and every value it is computed
    from and n the rounding steps on its longest path (an op adds the number of terms
    it sums: MatMul its K, Conv C/group * kernel size, a reduction its length): polyc
    compiles with fast-math, so sums are reassociated. Raises :class:`Mismatch`.
    """
    import polyc

    proto = model(case)
    values = reference(case)
    scales = error_scales(case, values)
    actual = polyc.compile(proto, cache=False, **case.config.options()).run(feeds(case))
    if sorted(actual) != sorted(case.outputs):
        raise Mismatch(f"polyc's outputs {sorted(actual)}, expected {sorted(case.outputs)}")
    for name in case.outputs:
        magnitude, steps = scales[name]
        atol = ATOL * max(1.0, magnitude) * math.sqrt(max(1.0, steps))
        compare(name, actual[name], values[name], atol)


# -- describing ------------------------------------------------------------------------------

def describe(case: GraphCase) -> str:
    """One line: op count and types, graph inputs with shapes, the config."""
    inputs = ",".join(f"{leaf.name}[{','.join(map(str, leaf.shape))}]"
                      for leaf in case.leaves if not leaf.weight)
    ops = ",".join(node.op for node in case.nodes)
    return f"{len(case.nodes)} ops: {ops} inputs {inputs or '-'} {case.config}"


def reproducer(case: GraphCase) -> str:
    """A standalone script that rebuilds ``case`` (its values come from its data seed)
    and runs :func:`check` on it."""
    return (f'"""polyc graph fuzzer case: {describe(case)}"""\n'
            "from polyc.fuzz import Config\n"
            "from polyc.fuzz.graphs import GraphCase, Leaf, Literal, Node, check\n\n"
            f"CASE = {case!r}\n\n"
            'if __name__ == "__main__":\n'
            "    check(CASE)\n"
            '    print("polyc agrees with onnxruntime")\n')


