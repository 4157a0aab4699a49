"""Step 1 of the frontend: read, check and shape-infer an ONNX model.

``load_model`` turns a path, bytes or ``onnx.ModelProto`` into an :class:`OnnxGraph`:
the checked, shape-inferred node list with the model's weights as numpy arrays and
static graph inputs of the dtypes polyc computes with (float32, int64, int32, bool).
Everything a later step needs from the protobuf is here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import numpy_helper

from polyc.errors import ModelError, ShapeError, UnsupportedDtypeError
from polyc.frontend.core import TensorInfo
from polyc.frontend.functions import expand_functions
from polyc.frontend.symbolic import Sym, param_name

MIN_OPSET = 6  # older models: each op accepts only the versions it registers
# The element types of graph inputs and outputs (polyc.frontend.core.DTYPES).
_T = onnx.TensorProto
TENSOR_TYPES = (_T.FLOAT, _T.DOUBLE, _T.FLOAT16, _T.BFLOAT16, _T.FLOAT8E4M3FN,
                _T.FLOAT8E4M3FNUZ, _T.FLOAT8E5M2, _T.FLOAT8E5M2FNUZ, _T.FLOAT4E2M1,
                _T.INT64, _T.INT32, _T.INT16, _T.INT8, _T.INT4, _T.INT2,
                _T.UINT64, _T.UINT32, _T.UINT16, _T.UINT8, _T.UINT4, _T.UINT2, _T.BOOL)
SUPPORTED = ("float32, float64, float16, bfloat16, the float8 types e4m3fn, e4m3fnuz, e5m2 "
             "and e5m2fnuz, float4e2m1, int64, int32, int16, int8, int4, int2, uint64, "
             "uint32, uint16, uint8, uint4, uint2 and bool")


@dataclass(frozen=True)
class OnnxGraph:
    """A checked ONNX graph with static inputs, ready for clean-up and lowering.

    ``value_shapes`` holds what shape inference found for each value (``None`` for a
    dim it could not determine); a value of unknown rank is absent.
    """

    name: str
    source: str                   # the file, or "<bytes>" / "<ModelProto>", for messages
    opset: int                    # of the default ONNX domain
    opset_imports: tuple[tuple[str, int], ...]
    nodes: tuple[onnx.NodeProto, ...]
    inputs: tuple[TensorInfo, ...]  # graph inputs that are not initializers, in order
    outputs: tuple[str, ...]        # graph output names, in order
    constants: Mapping[str, np.ndarray]
    value_shapes: Mapping[str, tuple[int | None, ...]]
    model_hash: str
    value_dtypes: Mapping[str, str] = field(default_factory=dict)  # from type inference
    notes: tuple[str, ...] = ()
    # ops the runtime runs on the compiled code's outputs (cleanup.host_ops), as the
    # manifest lists them, and the names a call returns in the model's output order
    host: tuple[dict, ...] = ()
    results: tuple[str, ...] = ()


def load_model(model, *, shapes: Mapping[str, Sequence[int]] | None = None,
               dims: Mapping[str, int] | None = None,
               symbolic: Sequence[str] | None = None) -> OnnxGraph:
    """Read, check and shape-infer ``model``; ``shapes`` fixes the dims of named inputs,
    ``dims`` each named dynamic dim (``{"batch": 8}``) wherever it appears, and the
    dims named in ``symbolic`` stay symbolic (a :class:`Sym` in the input shapes).

    Raises ModelError (unreadable, unparsable, fails onnx.checker, opset out of range),
    ShapeError (dynamic input dims left, with every such input listed; a bad shape or
    dim; failed shape inference) or UnsupportedDtypeError (a graph input or output
    that is not float32, int64, int32 or bool).
    """
    proto, source = _read(model)
    _check(proto, source)
    opset = _default_opset(proto, source)
    proto = _placeholder_dims_unknown(proto)
    if shapes:
        proto = _override_shapes(proto, shapes)
    if dims:
        proto = _bind_dims(proto, dims)
    symbolic = _symbolic_dims(proto, symbolic or (), dims or {})
    _require_static_inputs(proto, source, symbolic)
    model_hash = hashlib.sha256(proto.SerializeToString(deterministic=True)).hexdigest()
    proto = _infer_shapes(proto, source)
    proto, expanded = expand_functions(proto, opset, lambda p: _infer_shapes(p, source))
    graph = proto.graph
    constants = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    inputs = tuple(_static_input(v, symbolic) for v in graph.input if v.name not in constants)
    names = [value.name for value in graph.output]
    for value in graph.output:
        if names.count(value.name) > 1:
            raise ModelError(f"{source}: graph output '{value.name}' is listed "
                             f"{names.count(value.name)} times; each output needs a name "
                             "of its own")
        _check_output_dtype(value)
    return OnnxGraph(
        name=graph.name or Path(source).stem,
        source=source,
        opset=opset,
        opset_imports=tuple((o.domain, o.version) for o in proto.opset_import),
        nodes=tuple(_named(node, index) for index, node in enumerate(graph.node)),
        inputs=inputs,
        outputs=tuple(v.name for v in graph.output),
        constants=constants,
        value_shapes=value_shapes_of(graph),
        model_hash=model_hash,
        value_dtypes=value_dtypes_of(graph),
        notes=expanded,
    )


def _named(node: onnx.NodeProto, index: int) -> onnx.NodeProto:
    """``node``, named ``<op_type>#<index>`` (its index in the model) if it has no name."""
    if not node.name:
        node.name = f"{node.op_type}#{index}"
    return node


def _read(model) -> tuple[onnx.ModelProto, str]:
    """The parsed model and a name for it in messages."""
    if isinstance(model, onnx.ModelProto):
        return model, "<ModelProto>"
    if isinstance(model, (bytes, bytearray)):
        return _parse(bytes(model), "<bytes>"), "<bytes>"
    if not isinstance(model, (str, Path)):
        raise ModelError(f"cannot read a model from a {type(model).__name__}; "
                         "pass a path, bytes or an onnx.ModelProto")
    source = str(model)
    try:
        data = Path(source).read_bytes()
    except OSError as e:
        raise ModelError(f"cannot read model file {source}: {e.strerror or e}") from None
    proto = _parse(data, source)
    try:
        onnx.load_external_data_for_model(proto, str(Path(source).parent))
    except (OSError, ValueError, onnx.checker.ValidationError) as e:
        raise ModelError(f"cannot read external data of {source}: {e}") from None
    return proto, source


def _parse(data: bytes, source: str) -> onnx.ModelProto:
    try:
        proto = onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise ModelError(f"{source} is not an ONNX model (protobuf parse failed: {e})") \
            from None
    if not proto.HasField("graph"):
        raise ModelError(f"{source} is not an ONNX model (it has no graph)")
    return proto


def _check(proto: onnx.ModelProto, source: str) -> None:
    try:
        onnx.checker.check_model(proto)
    except (onnx.checker.ValidationError, ValueError) as e:
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"{source} fails onnx.checker: {first_line}") from None


def _default_opset(proto: onnx.ModelProto, source: str) -> int:
    """The opset of the default ONNX domain, which must be one polyc supports."""
    versions = [o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")]
    newest = onnx.defs.onnx_opset_version()
    if not versions:
        raise ModelError(f"{source} imports no opset of the default ONNX domain")
    if not MIN_OPSET <= versions[0] <= newest:
        raise ModelError(f"{source} uses opset {versions[0]} of the default ONNX domain; "
                         f"polyc supports opsets {MIN_OPSET} to {newest}")
    return versions[0]


def _override_shapes(proto: onnx.ModelProto, shapes: Mapping[str, Sequence[int]]):
    """A copy of ``proto`` whose named graph inputs have the given static shapes."""
    proto = onnx.ModelProto.FromString(proto.SerializeToString())
    by_name = {v.name: v for v in _graph_inputs(proto)}
    for name, dims in shapes.items():
        value = by_name.get(name)
        if value is None:
            raise ShapeError(f"shapes names '{name}', which is not a graph input "
                             f"(inputs: {', '.join(by_name) or 'none'})")
        dims = tuple(int(d) for d in dims)
        if any(d < 0 for d in dims):
            raise ShapeError(f"shape {list(dims)} given for input '{name}' has a negative dim")
        shape = value.type.tensor_type.shape
        declared = len(shape.dim)
        if value.type.tensor_type.HasField("shape") and declared != len(dims):
            raise ShapeError(f"input '{name}' has rank {declared}, "
                             f"but shapes gives {list(dims)} (rank {len(dims)})")
        value.type.tensor_type.shape.Clear()
        for d in dims:
            value.type.tensor_type.shape.dim.add().dim_value = d
    return proto


def _graph_inputs(proto: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The graph inputs that are not initializers."""
    initializers = {init.name for init in proto.graph.initializer}
    return [v for v in proto.graph.input if v.name not in initializers]


def _dynamic(dim) -> bool:
    """Whether a declared input dim is dynamic: a name, nothing, or a negative value
    (exporters such as PaddlePaddle write -1 for a dynamic dim; 0 is a real extent)."""
    return not dim.HasField("dim_value") or dim.dim_value < 0


def _placeholder_dims_unknown(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` with the dims written as -1 or 0 in its intermediate and output value
    infos made unknown, for shape inference to fill in rather than contradict (a real
    empty dim comes back as 0)."""
    values = [*proto.graph.value_info, *proto.graph.output]
    placeholders = [d for v in values if v.type.HasField("tensor_type")
                    for d in v.type.tensor_type.shape.dim
                    if d.HasField("dim_value") and d.dim_value <= 0]
    if not placeholders:
        return proto
    proto = onnx.ModelProto.FromString(proto.SerializeToString())
    for value in (*proto.graph.value_info, *proto.graph.output):
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_value") and dim.dim_value <= 0:
                dim.Clear()
    return proto


def dynamic_dims(proto: onnx.ModelProto) -> list[str]:
    """The names of the graph inputs' dynamic dims, in order of first appearance."""
    names: list[str] = []
    for value in _graph_inputs(proto):
        for dim in value.type.tensor_type.shape.dim:
            if _dynamic(dim) and dim.dim_param and dim.dim_param not in names:
                names.append(dim.dim_param)
    return names


def _bind_dims(proto: onnx.ModelProto, dims: Mapping[str, int]) -> onnx.ModelProto:
    """A copy of ``proto`` where each named dim of ``dims`` has its value, in the graph
    inputs, outputs and value infos alike."""
    known = dynamic_dims(proto)
    for name, size in dims.items():
        if name not in known:
            raise ShapeError(f"dims names '{name}', which no graph input has as a dynamic "
                             f"dim (dynamic dims: {', '.join(known) or 'none'})")
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise ShapeError(f"dim '{name}' must be a positive int, got {size!r}")
    proto = onnx.ModelProto.FromString(proto.SerializeToString())
    graph = proto.graph
    for value in [*graph.input, *graph.output, *graph.value_info]:
        if not value.type.HasField("tensor_type"):
            continue
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param in dims:
                dim.dim_value = int(dims[dim.dim_param])  # clears dim_param (a oneof)
    return proto


def _symbolic_dims(proto: onnx.ModelProto, names: Sequence[str], dims: Mapping[str, int]
                   ) -> dict[str, Sym]:
    """``{dim name: Sym}`` of the dims kept symbolic; ShapeError for a name that no
    input has as a dynamic dim, or one also given a value."""
    known = dynamic_dims(proto)
    result = {}
    for name in names:
        if name in dims:
            raise ShapeError(f"dim '{name}' is both given a value (dims) and kept symbolic")
        if name not in known:
            raise ShapeError(f"symbolic names '{name}', which no graph input has as a "
                             f"dynamic dim (dynamic dims: {', '.join(known) or 'none'})")
        result[name] = Sym(param_name(name), name)
    taken = [sym.name for sym in result.values()]
    if len(set(taken)) != len(taken):
        raise ShapeError(f"symbolic dims {', '.join(result)} give the same parameter names "
                         f"{', '.join(taken)}")
    return result


def _require_static_inputs(proto: onnx.ModelProto, source: str,
                           symbolic: Mapping[str, Sym]) -> None:
    """Raise one ShapeError listing every graph input with a dynamic (or no) shape,
    its declared shape and the options that fix it (dims kept ``symbolic`` are fine)."""
    lines, shape_example, named = [], None, dynamic_dims(proto)
    for value in _graph_inputs(proto):
        ttype = value.type.tensor_type
        if not value.type.HasField("tensor_type"):
            continue  # its dtype error comes later
        if not ttype.HasField("shape"):
            lines.append(f"  input '{value.name}': no shape declared")
            shape_example = shape_example or value.name
            continue
        dynamic = [dim for dim in ttype.shape.dim
                   if _dynamic(dim) and dim.dim_param not in symbolic]
        if not dynamic:
            continue
        shown = ", ".join(d.dim_param or "?" if _dynamic(d) else str(d.dim_value)
                          for d in ttype.shape.dim)
        names = ", ".join(d.dim_param or "unnamed" for d in dynamic)
        lines.append(f"  input '{value.name}': {dtype_name(ttype.elem_type)}[{shown}] "
                     f"(dynamic: {names})")
        if any(not d.dim_param for d in dynamic):
            shape_example = shape_example or value.name
    if not lines:
        return
    options = []
    if named:
        values = ", ".join(f"'{n}': N" for n in named)
        options.append(f"each named dim with --dim {named[0]}=N (Python: dims={{{values}}})")
        options.append(f"keep a named dim symbolic (one artifact for every value) with "
                       f"--symbolic {named[0]} (Python: symbolic=['{named[0]}'])")
    example = shape_example or _graph_inputs(proto)[0].name
    options.append(f"a whole input shape with --shape {example}=D0,D1,... "
                   f"(Python: shapes={{'{example}': (D0, D1, ...)}})")
    raise ShapeError(f"{source} has inputs with dynamic dims; polyc compiles static "
                     "shapes, so give\n  " + "\n  or ".join(options) + ":\n"
                     + "\n".join(lines))


def _infer_shapes(proto: onnx.ModelProto, source: str) -> onnx.ModelProto:
    """Shapes of every value; onnx's data propagation (shape computations such as
    Shape -> Gather -> Reshape) runs only when plain inference leaves a shape unknown:
    it costs seconds on large 1-D tensors (5 s for a chain of ops on 4M floats)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=True)
        if all(_static(v) for v in list(inferred.graph.value_info) + list(inferred.graph.output)):
            return inferred
        return onnx.shape_inference.infer_shapes(proto, strict_mode=True, data_prop=True)
    except (onnx.shape_inference.InferenceError, RuntimeError) as e:
        message = " ".join(str(e).split())
        raise ShapeError(f"shape inference failed for {source}: {message}") from None


def _static(value: onnx.ValueInfoProto) -> bool:
    tensor = value.type.tensor_type
    return tensor.HasField("shape") and all(d.HasField("dim_value") for d in tensor.shape.dim)


def dtype_name(elem_type: int) -> str:
    """A readable name of an ONNX element type: float32, int64, float64, string, ..."""
    name = onnx.TensorProto.DataType.Name(elem_type).lower()
    if name.startswith("float8"):  # ml_dtypes' (numpy's) name: float8_e4m3fn
        return name.replace("float8", "float8_", 1)
    if name == "float4e2m1":
        return "float4_e2m1fn"
    return {"float": "float32", "double": "float64"}.get(name, name)


def _tensor_type(value: onnx.ValueInfoProto, role: str):
    if not value.type.HasField("tensor_type"):
        kind = value.type.WhichOneof("value") or "unknown"
        raise UnsupportedDtypeError(f"graph {role} '{value.name}' is of {kind} type; "
                                    f"polyc compiles {SUPPORTED} tensors only")
    return value.type.tensor_type


def _static_input(value: onnx.ValueInfoProto, symbolic: Mapping[str, Sym]) -> TensorInfo:
    """The input as a static TensorInfo, or the error saying what is missing.

    Integer inputs pass here also where a node needs a constant (a Reshape shape,
    Reduce axes): lowering then says which node.
    """
    ttype = _tensor_type(value, "input")
    if ttype.elem_type not in TENSOR_TYPES:
        raise UnsupportedDtypeError(
            f"graph input '{value.name}' has dtype {dtype_name(ttype.elem_type)}; "
            f"polyc compiles {SUPPORTED} only")
    dims = [symbolic[dim.dim_param] if _dynamic(dim) and dim.dim_param in symbolic
            else dim.dim_value for dim in ttype.shape.dim]  # else static: checked before
    return TensorInfo(value.name, tuple(dims), dtype_name(ttype.elem_type))


def _check_output_dtype(value: onnx.ValueInfoProto) -> None:
    ttype = _tensor_type(value, "output")
    if ttype.elem_type not in (*TENSOR_TYPES, onnx.TensorProto.UNDEFINED):
        raise UnsupportedDtypeError(
            f"graph output '{value.name}' has dtype {dtype_name(ttype.elem_type)}; "
            f"polyc compiles {SUPPORTED} only")


def value_dtypes_of(graph: onnx.GraphProto) -> dict[str, str]:
    """The element type that inference found for each value (where it found one)."""
    dtypes = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
            dtypes[value.name] = dtype_name(value.type.tensor_type.elem_type)
    return dtypes


def value_shapes_of(graph: onnx.GraphProto) -> dict[str, tuple[int | None, ...]]:
    """Shapes that inference found: value name -> dims (``None`` where unknown)."""
    shapes = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        ttype = value.type.tensor_type if value.type.HasField("tensor_type") else None
        if ttype is None or not ttype.HasField("shape"):
            continue
        shapes[value.name] = tuple(d.dim_value if d.HasField("dim_value") else None
                                   for d in ttype.shape.dim)
    return shapes
