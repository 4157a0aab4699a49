"""Helpers for frontend and backend tests: building models and running them.

``run_polyc`` is the one executor the numerical tests use: the whole compiler, native
code run in process. ``assert_matches_onnxruntime`` also checks the frontend's numpy
reference interpreter (``run_reference``) against onnxruntime.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import polyc
import polyc.codegen.target
from polyc.frontend import check_graph, evaluate, import_model

# onnx 1.23 writes IR version 14; onnxruntime 1.31 accepts at most 13.
IR_VERSION = 10

# Tolerances of every numerical comparison with onnxruntime.
RTOL = 1e-5
ATOL = 1e-6


def value_info(name: str, shape: Sequence | None, dtype: int = TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def make_model(nodes, inputs, outputs, *, initializers=(), opset: int = 13,
               name: str = "test", check: bool = True) -> onnx.ModelProto:
    """A model; ``inputs`` / ``outputs`` are ValueInfoProtos, (name, shape) or
    (name, shape, dtype) tuples; ``initializers`` TensorProtos or (name, array) pairs.

    An output given as a bare name (or with shape None) gets its shape from inference
    (with ``check``, which also runs onnx.checker; error tests turn it off).
    """
    inputs = [v if isinstance(v, onnx.ValueInfoProto) else value_info(*v) for v in inputs]
    outputs = [_output_info(v) for v in outputs]
    weights = [w if isinstance(w, onnx.TensorProto) else numpy_helper.from_array(w[1], w[0])
               for w in initializers]
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = IR_VERSION
    if check:
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
        onnx.checker.check_model(model)
    return model


def _output_info(spec) -> onnx.ValueInfoProto:
    if isinstance(spec, onnx.ValueInfoProto):
        return spec
    return value_info(spec, None) if isinstance(spec, str) else value_info(*spec)


def random_inputs(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    """Seeded float32 inputs in [-2, 2) for every non-initializer graph input."""
    rng = np.random.default_rng(seed)
    initializers = {init.name for init in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        feeds[value.name] = rng.uniform(-2, 2, size=shape).astype(np.float32)
    return feeds


# ops whose onnxruntime CPU kernels multiply bytes (QDQ models become them)
BYTE_PRODUCT_OPS = {"MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv", "QGemm",
                    "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "DequantizeLinear"}


def onnxruntime_saturates() -> bool:
    """Whether onnxruntime's byte products are inexact on this host: without VNNI
    (AVX-512 VNNI or AVX-VNNI) its u8 x s8 kernels add pairs of products in int16 with
    saturation (vpmaddubsw), as its documentation warns; 255 * 127 * 2 does not fit."""
    features = polyc.codegen.target.host_cpu()[1].split(",")
    return "+avx512vnni" not in features and "+avxvnni" not in features


def run_onnxruntime(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> dict:
    """onnxruntime's outputs; for a model with byte products on a host where its kernels
    saturate (:func:`onnxruntime_saturates`), those of polyc's reference interpreter
    (numpy, exact integer sums) instead."""
    if onnxruntime_saturates() and any(node.op_type in BYTE_PRODUCT_OPS
                                       for node in model.graph.node):
        return run_reference(model, inputs)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(inputs))))


def run_polyc(model, inputs: Mapping[str, np.ndarray], **options) -> dict:
    """polyc's outputs for ``inputs``: compiled to native code and run in process."""
    return polyc.compile(model, **options).run(dict(inputs))


def run_reference(model, inputs: Mapping[str, np.ndarray], **options) -> dict:
    """The frontend's core graph run by the numpy reference interpreter."""
    graph = import_model(model, **options)
    check_graph(graph)
    return evaluate(graph, inputs)


def assert_matches_onnxruntime(model: onnx.ModelProto, seed: int = 0, inputs=None) -> dict:
    """Run ``model`` with polyc and onnxruntime on the same seeded inputs and compare."""
    inputs = random_inputs(model, seed) if inputs is None else inputs
    expected = run_onnxruntime(model, inputs)
    actual = run_polyc(model, inputs)
    reference = run_reference(model, inputs)
    assert set(actual) == set(expected) == set(reference)
    for name, value in expected.items():
        assert actual[name].shape == value.shape, name
        np.testing.assert_allclose(actual[name], value, rtol=RTOL, atol=ATOL, err_msg=name)
        np.testing.assert_allclose(reference[name], value, rtol=RTOL, atol=ATOL, err_msg=name)
    return actual


def untiled_contraction(model: onnx.ModelProto):
    """The one contraction (:func:`polyc.tiling.contraction.match_contraction`) a band of
    ``model``'s untiled schedule runs."""
    from polyc.tiling.contraction import match_contraction

    compiled = polyc.compile(model, tile=False, threads=1)
    scop, tree = compiled.compilation.scop, compiled.schedule.schedule
    found = []
    tree.get_root().foreach_descendant_top_down(
        lambda n: found.append(match_contraction(scop, n)) or True
        if n.get_type().name == "band" else True)
    (c,) = [f for f in found if f is not None]
    return c
