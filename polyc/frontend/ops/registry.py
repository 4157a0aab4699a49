"""The op table: ONNX (op name, since-version) -> the function that lowers it.

An op function is named after the ONNX op and has the signature
``Op(ctx, *inputs, **attributes)``: the lowering context, the op's inputs in ONNX
order (a :class:`~polyc.frontend.core.TensorInfo`, or ``None`` for an omitted optional
input; a variadic input, as Concat's, is a ``*inputs`` parameter) and its attributes
as keyword-only arguments with the ONNX defaults. It returns the output tensor (or a
tuple of them) that it emitted through ``ctx``.

A model of opset ``k`` uses, for each op, the schema ONNX defines with the highest
since-version <= ``k``; that since-version must be a key of the table, so a newer ONNX
version of an op with changed semantics is rejected rather than lowered as an old one.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import onnx
from onnx import numpy_helper

from polyc.errors import ShapeError, UnsupportedDtypeError, UnsupportedOpError

DEFAULT_DOMAINS = ("", "ai.onnx")


@dataclass(frozen=True)
class OpDef:
    """One registered lowering: the function and what it accepts."""

    op_type: str
    since_version: int
    fn: Callable
    n_inputs: int | None      # positional inputs after ``ctx`` (None: any number)
    attributes: frozenset     # keyword-only attribute names

    def check_node(self, node: onnx.NodeProto, opset: int) -> None:
        """Raise :class:`UnsupportedOpError` for inputs or attributes ``fn`` cannot take."""
        if self.n_inputs is not None and len(node.input) > self.n_inputs:
            raise UnsupportedOpError(
                node.op_type, node_name(node), opset,
                f"{len(node.input)} inputs given, at most {self.n_inputs} supported")
        unknown = sorted(a.name for a in node.attribute if a.name not in self.attributes)
        if unknown:
            raise UnsupportedOpError(
                node.op_type, node_name(node), opset,
                f"attribute(s) {', '.join(unknown)} not supported")


OPS: dict[tuple[str, int], OpDef] = {}


# onnxruntime's contrib ops that its quantizer writes (QOperator format), domain
# com.microsoft, version 1: op name -> lowering
CONTRIB_DOMAIN = "com.microsoft"
CONTRIB: dict[str, OpDef] = {}


def onnx_op(op_type: str, *since_versions: int):
    """Register the decorated function for ``op_type`` at each of ``since_versions``."""

    def register(fn: Callable) -> Callable:
        for version in since_versions:
            key = (op_type, version)
            if key in OPS:
                raise ValueError(f"{op_type}-{version} registered twice")
            OPS[key] = _definition(op_type, version, fn)
        return fn

    return register


def contrib_op(op_type: str):
    """Register the decorated function for ``op_type`` of :data:`CONTRIB_DOMAIN`."""

    def register(fn: Callable) -> Callable:
        if op_type in CONTRIB:
            raise ValueError(f"{CONTRIB_DOMAIN}.{op_type} registered twice")
        CONTRIB[op_type] = _definition(op_type, 1, fn)
        return fn

    return register


def _definition(op_type: str, version: int, fn: Callable) -> OpDef:
    params = list(inspect.signature(fn).parameters.values())[1:]  # drop ctx
    positional = [p for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
    keywords = frozenset(p.name for p in params if p.kind == p.KEYWORD_ONLY)
    variadic = any(p.kind == p.VAR_POSITIONAL for p in params)
    return OpDef(op_type, version, fn, None if variadic else len(positional), keywords)


def node_name(node: onnx.NodeProto, index: int | None = None) -> str:
    """The node's name, or ``<op_type>#<index>`` for an unnamed node."""
    if node.name:
        return node.name
    return f"{node.op_type}#{index}" if index is not None else node.op_type


def lookup(node: onnx.NodeProto, opset: int, name: str) -> OpDef:
    """The lowering of ``node`` at ``opset``; :class:`UnsupportedOpError` when there is none."""
    if node.domain == CONTRIB_DOMAIN and node.op_type in CONTRIB:
        return CONTRIB[node.op_type]
    if node.domain == CONTRIB_DOMAIN:
        raise UnsupportedOpError(node.op_type, name, opset,
                                 f"of domain '{CONTRIB_DOMAIN}' polyc lowers only "
                                 f"{', '.join(sorted(CONTRIB))}")
    if node.domain not in DEFAULT_DOMAINS:
        raise UnsupportedOpError(node.op_type, name, opset,
                                 f"domain '{node.domain}' is not supported")
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
    except onnx.defs.SchemaError:
        raise UnsupportedOpError(node.op_type, name, opset,
                                 "not an ONNX op at this opset") from None
    opdef = OPS.get((node.op_type, schema.since_version))
    if opdef is not None:
        return opdef
    known = sorted(v for (op, v) in OPS if op == node.op_type)
    if not known:
        raise UnsupportedOpError(node.op_type, name, opset, "no lowering for this op")
    raise UnsupportedOpError(
        node.op_type, name, opset,
        f"version {schema.since_version} of the op is not supported "
        f"(supported versions: {', '.join(map(str, known))})")


@dataclass(frozen=True)
class NodeContext:
    """The node being lowered, for messages: errors name op, node and opset."""

    op_type: str
    name: str
    opset: int

    def unsupported(self, detail: str) -> UnsupportedOpError:
        return UnsupportedOpError(self.op_type, self.name, self.opset, detail)

    def shape_error(self, detail: str) -> ShapeError:
        return ShapeError(f"{self.op_type} node '{self.name}' (opset {self.opset}): {detail}")

    def dtype_error(self, detail: str) -> UnsupportedDtypeError:
        return UnsupportedDtypeError(f"{self.op_type} node '{self.name}' (opset {self.opset}) "
                                     f"{detail}")


def attribute_values(node: onnx.NodeProto) -> dict[str, object]:
    """The node's attributes as Python values: int, float, str, tuples, numpy arrays.

    Sparse tensors and graphs stay protobufs (no op polyc lowers takes them).
    """
    values = {}
    for attr in node.attribute:
        value = onnx.helper.get_attribute_value(attr)
        if isinstance(value, onnx.TensorProto):
            value = numpy_helper.to_array(value)
        elif isinstance(value, bytes):
            value = value.decode("utf-8", errors="replace")
        elif isinstance(value, list):
            value = tuple(v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v
                          for v in value)
        values[attr.name] = value
    return values
