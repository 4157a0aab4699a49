"""polyc as an ONNX backend (``onnx.backend.base``), e.g. for the ONNX node test suite.

``PolycBackend.prepare(model)`` returns a :class:`PolycBackendRep` whose ``run(inputs)``
gives the outputs in graph order. How a model is executed is pluggable:
:meth:`PolycBackend.executor` turns a model into a function from an input dict to an
output dict. By default it is the compiled pipeline, ``polyc.compile(model).run``;
a subclass may swap in another (the tests use ``import_model`` + ``evaluate``).

polyc compiles static shapes and needs shape-like inputs (shapes, axes, pads) to be
constants. int64 graph inputs, which ONNX models use for shapes and axes, are therefore
bound as constants when ``run`` receives their values: the model is specialised to
them and executed (compiled) once per distinct set of values (int64 data, e.g. Gather
indices, would also run as a graph input; binding it is merely slower). So are the
inputs that only say how an op works (the ``roi`` and ``scales`` of Resize, the
``scales`` of Upsample, the ``axis`` of CumSum and CumProd, the ``depth`` of OneHot),
which polyc also needs as constants.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from polyc.errors import InputError

Runner = Callable[[dict[str, np.ndarray]], Any]


def specialize(model: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """A copy of ``model`` whose graph inputs ``values`` are initializers with those values."""
    special = onnx.ModelProto()
    special.CopyFrom(model)
    kept = [v for v in special.graph.input if v.name not in values]
    del special.graph.input[:]
    special.graph.input.extend(kept)
    special.graph.initializer.extend(numpy_helper.from_array(np.asarray(value), name)
                                     for name, value in values.items())
    return special


def _array(value: Any) -> Any:
    """A numpy scalar or Python number as a 0-d array; anything else as it is."""
    return np.asarray(value) if isinstance(value, (np.generic, int, float, bool)) else value


class PolycBackendRep(BackendRep):
    """A prepared model: ``run`` maps inputs (positional or by name) to the outputs."""

    def __init__(self, model: onnx.ModelProto, executor: Callable[[onnx.ModelProto], Runner],
                 *, bind_int64_inputs: bool = True):
        initializers = {init.name for init in model.graph.initializer}
        self.input_names = tuple(v.name for v in model.graph.input
                                 if v.name not in initializers)
        self.output_names = tuple(v.name for v in model.graph.output)
        self._model = model
        self._executor = executor
        shape_like = _parameters(model.graph)
        self._bound = tuple(v.name for v in model.graph.input
                            if bind_int64_inputs and v.name not in initializers
                            and (v.type.tensor_type.elem_type == onnx.TensorProto.INT64
                                 or v.name in shape_like))
        self._runners: dict[tuple, Runner] = {}
        if not self._bound:
            self._runners[()] = executor(model)  # compile now: errors surface in prepare

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        feeds = self._feeds(inputs)
        bound = {name: np.asarray(feeds.pop(name)) for name in self._bound}
        outputs = self._runner(bound)(feeds)
        if isinstance(outputs, Mapping):
            outputs = [outputs[name] for name in self.output_names]
        return namedtupledict("Outputs", self.output_names)(*outputs)

    def _feeds(self, inputs: Any) -> dict[str, np.ndarray]:
        """The inputs by name; positional inputs follow the graph's (non-initializer) inputs."""
        if isinstance(inputs, Mapping):
            return {name: _array(value) for name, value in inputs.items()}
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        inputs = list(inputs)
        if len(inputs) != len(self.input_names):
            raise InputError(f"{len(inputs)} inputs given, the model takes "
                             f"{len(self.input_names)}: {', '.join(self.input_names)}")
        return {name: _array(value) for name, value in zip(self.input_names, inputs)}

    def _runner(self, bound: Mapping[str, np.ndarray]) -> Runner:
        key = tuple((name, v.dtype.str, v.shape, v.tobytes()) for name, v in bound.items())
        if key not in self._runners:
            self._runners[key] = self._executor(specialize(self._model, bound))
        return self._runners[key]


# Inputs that say how an op works rather than carrying data (how it resamples, along
# which axis it runs; polyc needs them constant): op -> input positions.
_PARAMETER_INPUTS = {"Resize": (1, 2), "Upsample": (1,), "CumSum": (1,), "CumProd": (1,),
                     "OneHot": (1,)}


def _parameters(graph: onnx.GraphProto) -> set[str]:
    """Names of the values only ever used as such parameters (see above)."""
    as_parameter, as_data = set(), set()
    for node in graph.node:
        positions = _PARAMETER_INPUTS.get(node.op_type, ()) if node.domain in ("", "ai.onnx") \
            else ()
        for k, name in enumerate(node.input):
            (as_parameter if k in positions else as_data).add(name)
    return as_parameter - as_data - {v.name for v in graph.output}


class PolycBackend(Backend):
    """The ONNX backend interface to polyc (CPU only)."""

    @staticmethod
    def executor(model: onnx.ModelProto) -> Runner:
        """Compile ``model``; the function running it. Subclasses may swap the executor."""
        import polyc
        return polyc.compile(model).run

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU",
                **kwargs: Any) -> PolycBackendRep:
        if not cls.supports_device(device):
            raise ValueError(f"polyc runs on CPU only, not on {device}")
        return PolycBackendRep(model, cls.executor,
                               bind_int64_inputs=kwargs.get("bind_int64_inputs", True))

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return Device(device).type == DeviceType.CPU
