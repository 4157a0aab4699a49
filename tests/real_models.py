"""The real model graphs polyc is checked on: the onnx package's ``light`` models
(full-size CNNs whose weights are ConstantOfShape nodes) and the PyTorch exports of
:mod:`torch_models`. ``load(name)`` gives a model and a seeded input for it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
LIGHT = sorted(p.stem.removeprefix("light_") for p in LIGHT_DIR.glob("light_*.onnx"))
TORCH = ("resnet18", "mlp2", "bert_layer", "encoder6")
RTOL, ATOL = 1e-4, 1e-5  # the tolerances, unless a model documents otherwise


def load(name: str, seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A light model (an image in [0, 1) as input) or a PyTorch export by name."""
    if name in TORCH:
        from torch_models import export  # torch is imported only when needed
        return export(name, seed)
    model = onnx.load(str(LIGHT_DIR / f"light_{name}.onnx"))
    initializers = {i.name for i in model.graph.initializer}
    rng = np.random.default_rng(seed)
    inputs = {}
    for value in model.graph.input:
        if value.name not in initializers:
            shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
            inputs[value.name] = rng.random(shape, dtype=np.float32)
    return model, inputs


def run_onnxruntime(model: onnx.ModelProto, inputs, threads: int = 1):
    """onnxruntime's outputs (a list in graph order) on one thread by default, and the session."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, inputs), session
