"""The real model graphs polyc is checked on: the onnx package's ``light`` models
(full-size CNNs whose weights are ConstantOfShape nodes), the PyTorch exports of
:mod:`torch_models`, and an MLP and a CNN quantized by onnxruntime (:data:`QUANTIZED`).
``load(name)`` gives a model and a seeded input for it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
LIGHT = sorted(p.stem.removeprefix("light_") for p in LIGHT_DIR.glob("light_*.onnx"))
TORCH = ("resnet18", "mlp2", "bert_layer", "encoder6", "mobilenetv2", "mobilenetv3", "efficientnet",
         "yolo_head", "bert4", "lstm_tagger", "gru_frames")
# float models quantized by onnxruntime.quantization: mlp_int8 dynamically (int8 weights,
# activations quantized at run time: DynamicQuantizeLinear, MatMulInteger), cnn_int8
# statically in the QDQ format (DequantizeLinear -> Conv -> QuantizeLinear), cnn_uint8
# dynamically (uint8 weights with zero points: ConvInteger), cnn_qoperator statically in
# the QOperator format (QLinearConv and onnxruntime's com.microsoft QLinear* ops),
# bert_int8 the bert_layer export quantized dynamically (int8 weights, MatMulInteger over
# [batch, seq, hidden] activations)
QUANTIZED = ("mlp_int8", "cnn_int8", "cnn_uint8", "cnn_qoperator", "bert_int8")
RTOL, ATOL = 1e-4, 1e-5  # the tolerances, unless a model documents otherwise


def load(name: str, seed: int = 0, *, random_weights: bool = False
         ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A light model (an image in [0, 1) as input) or a PyTorch export by name.

    A light model's weights are all 0.02, so its output is a near-uniform softmax that
    would hide many errors; ``random_weights`` replaces them with seeded random ones
    (:func:`randomize_weights`)."""
    if name in TORCH:
        from torch_models import export  # torch is imported only when needed
        return export(name, seed)
    if name == "bert_int8":
        return quantized_dynamically(*load("bert_layer", seed))
    if name in QUANTIZED:
        return quantized_mlp(seed) if name == "mlp_int8" else \
            quantized_cnn(seed, dynamic=name == "cnn_uint8",
                          operators=name == "cnn_qoperator")
    model = onnx.load(str(LIGHT_DIR / f"light_{name}.onnx"))
    if random_weights:
        model = randomize_weights(model, seed)
    initializers = {i.name for i in model.graph.initializer}
    rng = np.random.default_rng(seed)
    inputs = {}
    for value in model.graph.input:
        if value.name not in initializers:
            shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
            inputs[value.name] = rng.random(shape, dtype=np.float32)
    return model, inputs


def randomize_weights(model: onnx.ModelProto, seed: int) -> onnx.ModelProto:
    """``model`` with every ConstantOfShape weight replaced by a seeded random initializer:
    a tensor of rank 2 or more uniform in +-sqrt(3 / fan-in) (activations keep their
    scale through the layers), a vector (bias, batch-norm parameters) in [0.5, 1.5]
    (positive, as a variance must be)."""
    from onnx import numpy_helper

    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    shapes = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    rng = np.random.default_rng(seed)
    nodes = []
    for node in graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in shapes:
            nodes.append(node)
            continue
        shape = tuple(int(d) for d in shapes[node.input[0]])
        if len(shape) >= 2:
            bound = np.sqrt(3.0 / np.prod(shape[1:]))
            value = rng.uniform(-bound, bound, shape)
        else:
            value = rng.uniform(0.5, 1.5, shape)
        graph.initializer.append(numpy_helper.from_array(value.astype(np.float32),
                                                         node.output[0]))
        # these models' IR version wants every initializer to be a graph input as well
        graph.input.append(onnx.helper.make_tensor_value_info(
            node.output[0], onnx.TensorProto.FLOAT, shape))
    del graph.node[:]
    graph.node.extend(nodes)
    used = {name for node in nodes for name in node.input}
    for values in (graph.initializer, graph.input):  # the weights' shapes, now unused
        kept = [v for v in values if v.name in used or v.name not in shapes]
        del values[:]
        values.extend(kept)
    return model


def quantized_mlp(seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """An MLP (784 -> 256, Relu, -> 10; MatMul + Add, seeded weights uniform in
    +-sqrt(3 / fan-in)) quantized by onnxruntime's ``quantize_dynamic`` (int8 weights),
    and a batch of 8 inputs."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(seed)
    weights = {}
    for k, (fan_in, fan_out) in enumerate([(784, 256), (256, 10)], 1):
        bound = np.sqrt(3.0 / fan_in)
        weights[f"W{k}"] = rng.uniform(-bound, bound, (fan_in, fan_out)).astype(np.float32)
        weights[f"b{k}"] = rng.uniform(-0.1, 0.1, fan_out).astype(np.float32)
    node = helper.make_node
    nodes = [node("MatMul", ["x", "W1"], ["h"]), node("Add", ["h", "b1"], ["hb"]),
             node("Relu", ["hb"], ["r"]), node("MatMul", ["r", "W2"], ["o"]),
             node("Add", ["o", "b2"], ["y"])]
    graph = helper.make_graph(
        nodes, "mlp_int8", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, (8, 784))],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, (8, 10))],
        initializer=[numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return quantized_dynamically(model, {"x": rng.standard_normal((8, 784), dtype=np.float32)})


def quantized_dynamically(model: onnx.ModelProto, inputs: dict
                          ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """``model`` quantized by onnxruntime's ``quantize_dynamic`` (int8 weights), and
    ``inputs`` as they are."""
    import tempfile

    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as folder:
        onnx.save(model, f"{folder}/float.onnx")
        quantize_dynamic(f"{folder}/float.onnx", f"{folder}/int8.onnx",
                         weight_type=QuantType.QInt8)
        return onnx.load(f"{folder}/int8.onnx"), inputs


def quantized_cnn(seed: int = 0, *, dynamic: bool = False, operators: bool = False
                  ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A MobileNet-style CNN (3x3 stride-2 conv, three depthwise 3x3 + pointwise pairs,
    Relu after each conv, global average pool, a 128 -> 10 classifier; He-scaled seeded
    weights) over a 96x96 image, and a seeded input. Quantized by onnxruntime's
    ``quantize_static`` in the QDQ format (uint8 activations calibrated on 4 seeded
    inputs, int8 weights per channel; ``operators``: in the QOperator format), or with
    ``dynamic`` by ``quantize_dynamic`` (uint8
    weights with their own zero points, activations quantized at run time:
    DynamicQuantizeLinear, ConvInteger, MatMulInteger)."""
    import tempfile

    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    rng = np.random.default_rng(seed)
    model = _float_cnn(rng)
    images = [{"x": rng.standard_normal((1, 3, 96, 96), dtype=np.float32)} for _ in range(5)]

    class Images(CalibrationDataReader):
        def __init__(self):
            self.left = iter(images[:4])

        def get_next(self):
            return next(self.left, None)

    with tempfile.TemporaryDirectory() as folder:
        onnx.save(model, f"{folder}/float.onnx")
        if dynamic:
            quantize_dynamic(f"{folder}/float.onnx", f"{folder}/int8.onnx",
                             weight_type=QuantType.QUInt8)
        else:
            quantize_static(f"{folder}/float.onnx", f"{folder}/int8.onnx", Images(),
                            quant_format=QuantFormat.QOperator if operators
                            else QuantFormat.QDQ, per_channel=True)
        quantized = onnx.load(f"{folder}/int8.onnx")
    return quantized, images[4]


def _float_cnn(rng) -> onnx.ModelProto:
    """The float model :func:`quantized_cnn` quantizes."""
    from onnx import helper, numpy_helper

    weights, nodes = {}, []

    def conv(name, x, cin, cout, kernel, stride=1, group=1):
        fan_in = cin // group * kernel * kernel
        weights[f"{name}_w"] = (rng.standard_normal((cout, cin // group, kernel, kernel))
                                * np.sqrt(2 / fan_in)).astype(np.float32)
        weights[f"{name}_b"] = (rng.standard_normal(cout) * 0.1).astype(np.float32)
        nodes.append(helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_c"],
                                      kernel_shape=[kernel] * 2, pads=[kernel // 2] * 4,
                                      strides=[stride] * 2, group=group))
        nodes.append(helper.make_node("Relu", [f"{name}_c"], [f"{name}_r"]))
        return f"{name}_r"

    x = conv("c1", "x", 3, 32, 3, 2)
    for k, (cin, cout, stride) in enumerate([(32, 64, 1), (64, 128, 2), (128, 128, 1)]):
        x = conv(f"p{k}", conv(f"d{k}", x, cin, cin, 3, stride, group=cin), cin, cout, 1)
    weights["fc_w"] = (rng.standard_normal((128, 10)) * 0.1).astype(np.float32)
    nodes += [helper.make_node("GlobalAveragePool", [x], ["gap"]),
              helper.make_node("Flatten", ["gap"], ["flat"]),
              helper.make_node("MatMul", ["flat", "fc_w"], ["y"])]
    graph = helper.make_graph(
        nodes, "cnn_int8", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                          (1, 3, 96, 96))],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, (1, 10))],
        initializer=[numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def run_onnxruntime(model: onnx.ModelProto, inputs, threads: int = 1):
    """onnxruntime's outputs (a list in graph order) on one thread by default, and the session."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, inputs), session
