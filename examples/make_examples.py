"""Regenerate the bundled example: ``examples/mlp.onnx`` and ``examples/mlp_input.npy``.

A small MLP with seeded weights::

    x[4, 64] -> Gemm(W1[64, 128], b1) -> Relu -> Gemm(W2[128, 10], b2) -> Softmax(axis=1) -> y

Run ``python examples/make_examples.py``; the output is the same on every run.
"""

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
BATCH, IN, HIDDEN, OUT = 4, 64, 128, 10
OPSET = 17
IR_VERSION = 10  # onnx 1.23 writes 14; onnxruntime 1.31 reads at most 13


def make_mlp(rng: np.random.Generator) -> onnx.ModelProto:
    """The MLP above, weights drawn from ``rng`` (He-scaled normal, small biases)."""
    def weight(name, *shape):
        scale = np.sqrt(2.0 / shape[0]) if len(shape) == 2 else 0.1
        values = (rng.standard_normal(shape) * scale).astype(np.float32)
        return numpy_helper.from_array(values, name)

    initializers = [weight("W1", IN, HIDDEN), weight("b1", HIDDEN),
                    weight("W2", HIDDEN, OUT), weight("b2", OUT)]
    nodes = [
        helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], name="gemm1"),
        helper.make_node("Relu", ["h"], ["a"], name="relu"),
        helper.make_node("Gemm", ["a", "W2", "b2"], ["logits"], name="gemm2"),
        helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "mlp",
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, IN])],
        outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, [BATCH, OUT])],
        initializer=initializers)
    model = helper.make_model(graph, producer_name="polyc-examples",
                              opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> None:
    rng = np.random.default_rng(0)
    model = make_mlp(rng)
    x = rng.standard_normal((BATCH, IN)).astype(np.float32)
    onnx.save(model, HERE / "mlp.onnx")
    np.save(HERE / "mlp_input.npy", x)
    print(f"wrote {HERE / 'mlp.onnx'} and {HERE / 'mlp_input.npy'}")


if __name__ == "__main__":
    main()
