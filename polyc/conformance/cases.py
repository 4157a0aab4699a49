"""The cases of the onnx package's backend test suite, and what polyc lowers of them.

Node cases are built in memory by ``onnx.backend.test.loader`` (model and data sets);
the other kinds are directories with ``model.onnx`` and ``test_data_set_*/input_*.pb``,
``output_*.pb``, read here as onnx's own runner reads them.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

import onnx
from onnx import numpy_helper
from onnx.backend.test.case.test_case import TestCase
from onnx.backend.test.loader import load_model_tests

from polyc.errors import UnsupportedOpError
from polyc.frontend.functions import defined_by_function
from polyc.frontend.load import MIN_OPSET
from polyc.frontend.ops import lookup
from polyc.frontend.ops.registry import DEFAULT_DOMAINS

KINDS = ("node", "simple", "pytorch-converted", "pytorch-operator")


def load_cases(kinds: Iterable[str] = KINDS, match: str | None = None) -> list[TestCase]:
    """The suite's cases of ``kinds`` whose name matches the regular expression ``match``,
    sorted by kind (in ``kinds`` order) and name."""
    pattern = re.compile(match) if match else None
    cases = []
    for kind in kinds:
        with warnings.catch_warnings():  # the node-case generators overflow on purpose
            warnings.simplefilter("ignore", RuntimeWarning)
            tests = load_model_tests(kind=kind)
        found = [c for c in tests if not pattern or pattern.search(c.name)]
        cases.extend(sorted(found, key=lambda c: c.name))
    return cases


def case_model(case: TestCase) -> onnx.ModelProto:
    """The case's model: built in memory (node cases) or read from its directory."""
    if case.model is not None:
        return case.model
    return onnx.load(str(Path(case.model_dir) / "model.onnx"))


def case_data(case: TestCase, model: onnx.ModelProto) -> list[tuple[list, list]]:
    """(inputs, expected outputs) of every data set, as onnx's runner reads them:
    tensors as arrays, sequences as lists, optionals as None or their value."""
    if case.data_sets is not None:
        return [([_array(x) for x in inputs], [_array(y) for y in outputs])
                for inputs, outputs in case.data_sets]
    data = []
    for folder in sorted(Path(case.model_dir).glob("test_data_set*")):
        inputs = _protos(folder, "input", model.graph.input)
        outputs = _protos(folder, "output", model.graph.output)
        data.append((inputs, outputs))
    return data


def _array(value):
    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else value


def _protos(folder: Path, role: str, values: Sequence[onnx.ValueInfoProto]) -> list:
    """The ``{role}_<i>.pb`` files of a data set, read with the type of the i-th value."""
    count = len(list(folder.glob(f"{role}_*.pb")))
    return [_read_proto(folder / f"{role}_{i}.pb", values[i].type) for i in range(count)]


def _read_proto(path: Path, value_type: onnx.TypeProto):
    data = path.read_bytes()
    if value_type.HasField("sequence_type"):
        return numpy_helper.to_list(onnx.SequenceProto.FromString(data))
    if value_type.HasField("optional_type"):
        return numpy_helper.to_optional(onnx.OptionalProto.FromString(data))
    return numpy_helper.to_array(onnx.TensorProto.FromString(data))


def unlowered_ops(model: onnx.ModelProto) -> set[str]:
    """The op types of ``model``'s nodes that have no lowering in polyc's op table
    (``polyc.frontend.ops.OPS``) at the model's opset, as ONNX's schemas version them,
    nor an ONNX function body polyc expands (:mod:`polyc.frontend.functions`); every op
    when the opset is outside the range polyc reads."""
    ops = {node.op_type for node in model.graph.node}
    opsets = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not opsets or not MIN_OPSET <= opsets[0] <= onnx.defs.onnx_opset_version():
        return ops
    missing = set()
    for node in model.graph.node:
        try:
            lookup(node, opsets[0], node.op_type)
        except UnsupportedOpError:
            if node.domain not in DEFAULT_DOMAINS or \
                    not defined_by_function(node.op_type, opsets[0]):
                missing.add(node.op_type)
    return missing
