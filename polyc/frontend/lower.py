"""Step 3 of the frontend: lower the cleaned ONNX graph to core ops.

Every node is checked against the op table first (so an unsupported op is reported
before anything is lowered); then the nodes are lowered in order, each by its op
function through a :class:`LoweringContext`. A node's result tensors take the ONNX
output names; intermediates get fresh names starting with ``_`` that no ONNX value uses.
Graph outputs are always written by a Map or Reduce: a copy Map is added for an
output that is a View or a constant.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from onnx import numpy_helper

from polyc.errors import ModelError, UnsupportedDtypeError, UnsupportedOpError
from polyc.frontend import channels_last, core, shape_values
from polyc.frontend.core import Call, Graph, Map, Read, Recurrence, Reduce, TensorInfo, View
from polyc.frontend.load import OnnxGraph
from polyc.frontend.ops import NodeContext, lookup
from polyc.frontend.ops import winograd as winograd_choice
from polyc.frontend.ops.registry import attribute_values, node_name
from polyc.frontend.symbolic import Sym, SymbolicDimError, dim


def lower(graph: OnnxGraph, *, winograd: str = winograd_choice.DEFAULT,
          memory_limit: int | None = None) -> Graph:
    """The core-op Graph of ``graph`` (static inputs, clean-up done); ``winograd`` as
    :func:`polyc.frontend.import_model` takes it."""
    check_supported(graph)
    ctx = LoweringContext(graph, winograd=winograd, memory_limit=memory_limit)
    for index, node in enumerate(graph.nodes):
        ctx.lower_node(index, node)
    return ctx.finish()


def check_supported(graph: OnnxGraph) -> None:
    """Raise one UnsupportedOpError naming every node whose op, version, inputs or
    attributes have no lowering."""
    check_nodes(graph.nodes, graph.opset)


def check_nodes(nodes, opset: int) -> None:
    """:func:`check_supported` for ``nodes`` (a graph's, or a subgraph's) at ``opset``."""
    problems = []
    for index, node in enumerate(nodes):
        try:
            lookup(node, opset, node_name(node, index)).check_node(node, opset)
        except UnsupportedOpError as error:
            problems.append(error)
    if problems:
        raise UnsupportedOpError.combine(problems)


class LoweringContext:
    """What an op function sees while it lowers one node.

    It knows every tensor's shape and dtype and every constant's value, hands out fresh
    names, and records the core ops the op functions emit (``map``, ``reduce``,
    ``view``). It is the one mutable object of the frontend and lives for one ``lower``.
    """

    def __init__(self, graph: OnnxGraph, *, winograd: str = winograd_choice.DEFAULT,
                 memory_limit: int | None = None):
        self.opset = graph.opset
        self.winograd = winograd  # how 3x3 convs that qualify run (ops/winograd.py)
        self.memory_limit = memory_limit  # bytes (polyc.limits; None: the machine's)
        self._graph = graph
        self._env: dict[str, TensorInfo] = {}      # ONNX value name -> core tensor
        self._tensors: dict[str, TensorInfo] = {}  # core tensor name -> info
        self._constants: dict[str, np.ndarray] = {}
        self._positions: set[str] = set()
        self._shape_values: dict[str, np.ndarray] = {}  # tensor -> ints and Syms
        self._ops: list[core.Op] = []
        self._producer: dict[str, int] = {}        # tensor -> index in _ops
        # a 4-D tensor stored channels-last (a View) -> its storage [N, H, W, C]
        self._channels_last: dict[str, TensorInfo] = {}
        self._nchw_copies: dict[str, TensorInfo] = {}  # ... -> its NCHW copy, once made
        self._taken = _onnx_names(graph)
        self._graph_inputs = {t.name for t in graph.inputs}
        self._count = 0
        self.n_outputs = 0  # of the node being lowered, optional outputs included
        self._node = NodeContext("", "", graph.opset)
        self._node_start = 0
        for info in graph.inputs:
            self._define(info.name, info)
        for name, value in graph.constants.items():
            core_name = self.fresh("const") if name in graph.outputs else name
            self._constants[core_name] = value
            self._define(name, TensorInfo(core_name, tuple(value.shape), value.dtype.name))

    # -- what op functions call -------------------------------------------------------

    def fresh(self, label: str) -> str:
        """A new tensor name (``_<label><n>``) that no ONNX value or other tensor uses."""
        while True:
            name = f"_{label}{self._count}"
            self._count += 1
            if name not in self._taken:
                self._taken.add(name)
                return name

    def unsupported(self, detail: str):
        """The UnsupportedOpError for the current node."""
        return self._node.unsupported(detail)

    def shape_error(self, detail: str):
        """The ShapeError for the current node."""
        return self._node.shape_error(detail)

    def dtype_error(self, detail: str):
        """The UnsupportedDtypeError for the current node (``detail`` follows its name)."""
        return self._node.dtype_error(detail)

    def constant(self, value: np.ndarray, label: str) -> TensorInfo:
        """A new constant tensor holding ``value`` (of a dtype in ``core.DTYPES``)."""
        name = self.fresh(label)
        self._constants[name] = value
        info = TensorInfo(name, tuple(value.shape), value.dtype.name)
        self._tensors[name] = info
        return info

    def positions(self, n: int) -> TensorInfo:
        """A new int64[n] tensor whose element [i] is i, read as the loop iterator's
        value (:attr:`core.Graph.positions`): no table of n elements is made."""
        name = self.fresh("positions")
        self._positions.add(name)
        info = TensorInfo(name, (n,), "int64")
        self._tensors[name] = info
        return info

    def int_values(self, tensor: TensorInfo, role: str) -> tuple[int, ...]:
        """The values of a shape-like input, which must be an integer constant (or a
        shape value: its entries may be symbolic dims)."""
        if tensor.name in self._shape_values:
            return tuple(v if isinstance(v, Sym) else int(v)
                         for v in self._shape_values[tensor.name].reshape(-1))
        value = self._constants.get(tensor.name)
        if value is None:
            source = "a graph input" if tensor.name in self._graph_inputs \
                else "computed by the graph"
            raise self.unsupported(f"input '{role}' must be a constant (an initializer or "
                                   f"Constant node), but '{tensor.name}' is {source}")
        if value.dtype.kind not in "iu":
            raise self.unsupported(f"input '{role}' ('{tensor.name}') must be an integer "
                                   f"tensor, got {value.dtype.name}")
        return tuple(int(v) for v in value.reshape(-1))

    def constant_value(self, tensor: TensorInfo | None):
        """The value of ``tensor`` when it is a constant, else None (also for None)."""
        return None if tensor is None else self._constants.get(tensor.name)

    def is_graph_input(self, tensor: TensorInfo) -> bool:
        return tensor.name in self._graph_inputs

    def stored(self, tensor: TensorInfo) -> TensorInfo:
        """``tensor`` itself when it has storage (an input, constant, Map or Reduce),
        else (a View) a copy of it: what a :class:`core.Lookup` may read."""
        producer = self._producer.get(tensor.name)
        if producer is None or not isinstance(self._ops[producer], View):
            return tensor
        if tensor.name in self._channels_last:
            return self.channels_first(tensor)
        return self.map(tensor.shape, Read(tensor.name, core.identity_index(len(tensor.shape))),
                        label="copy")

    def channels_last(self, tensor: TensorInfo) -> TensorInfo | None:
        """The [N, H, W, C] storage of ``tensor`` when it is stored channels-last
        (:mod:`polyc.frontend.channels_last`), else None."""
        return self._channels_last.get(tensor.name)

    def as_channels_last(self, stored: TensorInfo, *, label: str,
                         channels: int | None = None) -> TensorInfo:
        """The [N, C, H, W] View of ``stored`` [N, H, W, C], known as channels-last;
        of its first ``channels`` channels only when given."""
        shape = channels_last.nchw(stored.shape)
        if channels is not None:
            shape = (shape[0], channels) + shape[2:]
        view = self.view(stored, shape, kind="transpose", perm=channels_last.TO_NCHW,
                         label=label)
        self._channels_last[view.name] = stored
        return view

    def stored_channels_last(self, tensor: TensorInfo, *, label: str) -> TensorInfo:
        """The [N, H, W, C] storage of ``tensor``: its own when it is stored channels-last,
        else a copy (a Map labelled ``label``)."""
        stored = self.channels_last(tensor)
        if stored is not None:
            return stored
        index = tuple(core.Ix.var(d) for d in channels_last.TO_NCHW)
        return self.map(channels_last.nhwc(tensor.shape), Read(tensor.name, index), label=label)

    def channels_first(self, tensor: TensorInfo) -> TensorInfo:
        """``tensor`` in NCHW order: itself, or for a channels-last one a copy (one per
        tensor)."""
        if tensor.name not in self._channels_last:
            return tensor
        copy = self._nchw_copies.get(tensor.name)
        if copy is None:
            read = Read(tensor.name, core.identity_index(4))
            copy = self._emit(Map(self.fresh("nchw"), tensor.shape, read, node=self._node.name,
                                  label="nchw"), tensor.shape)
            self._nchw_copies[tensor.name] = copy
        return copy

    def _follows_channels_last(self, shape, expr: core.Expr) -> bool:
        """Whether loops over ``shape`` computing ``expr`` are best in ``(n, h, w, c)``
        order (:func:`channels_last.follows`)."""
        return channels_last.follows(shape, expr, self._channels_last.__contains__,
                                     lambda t: self._tensors[t].shape)

    def map(self, shape, expr: core.Expr, *, label: str) -> TensorInfo:
        """Emit ``out[i] = expr`` over ``shape``; the new tensor ``out``."""
        shape = tuple(dim(d) for d in shape)
        if self._follows_channels_last(shape, expr):
            stored = channels_last.nhwc(shape)
            op = Map(self.fresh(label), stored, channels_last.to_channels_last(expr),
                     node=self._node.name, label=label)
            return self.as_channels_last(self._emit(op, stored), label=label)
        out = self.fresh(label)
        return self._emit(Map(out, shape, expr, node=self._node.name, label=label), shape)

    def reduce(self, *, out_shape, init: core.Expr, extents, out_index, combiner: str,
               expr: core.Expr, label: str) -> TensorInfo:
        """Emit a Reduce (see :class:`core.Reduce`); the new tensor it writes.

        Over an empty box (a zero extent) the body never runs: a Map of ``init``.
        """
        out_shape = tuple(dim(d) for d in out_shape)
        if 0 in extents:
            return self.map(out_shape, init, label=label)
        if self._follows_channels_last(tuple(extents), expr):
            # loops in (n, h, w, c) order: the reads move along the stored channels
            extents = channels_last.nhwc(extents)
            expr = channels_last.to_channels_last(expr)
            out_index = tuple(channels_last.renamed(ix) for ix in out_index)
        extents = tuple(dim(e) for e in extents)
        if not out_shape and combiner in ("max", "min") and len(extents) > 1 \
                and isinstance(extents[-1], int) and extents[-1] >= SPLIT_LANES:
            # one value per position of the innermost dim first: those run in vector
            # lanes (a chain through one scalar does not), then the few left
            inner = len(extents) - 1
            partial = Reduce(self.fresh(f"{label}_lanes"), extents[-1:], init, extents,
                             (core.Ix.var(inner),), combiner, expr, node=self._node.name,
                             label=f"{label}_lanes")
            self._emit(partial, extents[-1:])
            expr = Read(partial.out, (core.Ix.var(0),))
            extents, out_index = extents[-1:], ()
        op = Reduce(self.fresh(label), out_shape, init, extents,
                    tuple(out_index), combiner, expr, node=self._node.name, label=label)
        return self._emit(op, out_shape)

    def recurrence(self, outs, *, start, steps: int, body, label: str, views=()
                   ) -> tuple[TensorInfo, ...]:
        """Emit a Recurrence (see :class:`core.Recurrence`) writing the new tensors
        ``outs`` (TensorInfos named with :meth:`fresh`, which its steps read) and
        making ``views`` (pairs of a View and the TensorInfo it makes); the outs."""
        outs = tuple(dataclasses.replace(t, shape=tuple(dim(d) for d in t.shape))
                     for t in outs)
        for info in outs + tuple(info for _, info in views):
            self._tensors[info.name] = info
        op = Recurrence(tuple(t.name for t in outs), tuple(t.shape for t in outs),
                        tuple(start), steps, tuple(body), node=self._node.name, label=label,
                        views=tuple(view for view, _ in views))
        op = self._checked(op)
        self._result_dtype(op)  # every step stores its tensor's dtype
        self.put_op(op)
        return outs

    def view(self, src: TensorInfo, shape, *, kind: str = "reshape", perm=(),
             label: str) -> TensorInfo:
        """Emit a View of ``src`` with ``shape`` (reshape) or axis order ``perm``."""
        shape = tuple(dim(d) for d in shape)
        stored = self._channels_last.get(src.name) if kind == "reshape" else None
        if stored is not None and shape != src.shape:
            if not channels_last.splits_channels(src.shape, shape):
                src = self.channels_first(src)  # its index would need a division
            stored = None
        op = View(self.fresh(label), src.name, kind, tuple(perm), node=self._node.name,
                  label=label)
        view = self._emit(op, shape)
        if stored is not None:  # the same shape: still channels-last
            self._channels_last[view.name] = stored
        return view

    def lower_body(self, body, bindings: dict[str, TensorInfo]) -> list[TensorInfo]:
        """Lower the nodes of the subgraph ``body`` (an If branch, a Scan or Loop body)
        here, after the current node's ops: its inputs bound to the tensors
        ``bindings`` (by input name), its initializers constants, the values of the
        enclosing graphs visible (ONNX names are unique across a model's graphs). The
        tensors of its outputs."""
        saved = (self._node, self.n_outputs, self._node_start)
        check_nodes(body.node, self.opset)
        for name, info in bindings.items():
            self._env[name] = info
        for init in body.initializer:
            value = numpy_helper.to_array(init)
            core_name = self.fresh("const")
            self._constants[core_name] = value
            self._define(init.name, TensorInfo(core_name, tuple(value.shape), value.dtype.name))
        try:
            for index, node in enumerate(body.node):
                self.lower_node(index, node)
            return [self._input(value.name) for value in body.output]
        finally:
            self._node, self.n_outputs, self._node_start = saved

    def placeholder(self, shape, dtype: str, label: str) -> TensorInfo:
        """A new tensor no op writes: a body input that a Scan or Loop replaces by
        reads of its own arrays when it lifts the body's ops into a Recurrence."""
        info = TensorInfo(self.fresh(label), tuple(shape), dtype)
        self._tensors[info.name] = info
        return info

    def take_ops(self, start: int) -> list[core.Op]:
        """Remove and return the ops emitted since ``len(ops)`` was ``start``."""
        taken = self._ops[start:]
        del self._ops[start:]
        for op in taken:
            for name in core.written(op):
                self._producer.pop(name, None)
        return taken

    def put_op(self, op: core.Op) -> None:
        """Emit ``op`` (taken with :meth:`take_ops`, or a View a lifting builds) as it
        is; its tensors must be described already."""
        for name in core.written(op):
            self._producer[name] = len(self._ops)
        self._ops.append(op)

    def describe(self, info: TensorInfo) -> None:
        """Set (or change, for a lifted body tensor) a tensor's shape and dtype."""
        self._tensors[info.name] = info

    def tensor(self, name: str) -> TensorInfo:
        return self._tensors[name]

    def op_count(self) -> int:
        """How many ops were emitted so far (see :meth:`take_ops`)."""
        return len(self._ops)

    # -- the walk ---------------------------------------------------------------------

    def lower_node(self, index: int, node) -> None:
        """Lower one ONNX node with its op function and bind its outputs."""
        name = node_name(node, index)
        opdef = lookup(node, self.opset, name)
        self._node = NodeContext(node.op_type, name, self.opset)
        self.n_outputs = len(node.output)
        self._node_start = len(self._ops)
        inputs = [self._input(i) if i else None for i in node.input]
        try:
            if self._shape_computation(node, inputs):
                return
            result = opdef.fn(self, *inputs, **attribute_values(node))
        except SymbolicDimError as error:
            fix = error.sym.source
            raise self.shape_error(f"{error}; fix it with --dim {fix}=N (Python: "
                                   f"dims={{'{fix}': N}})") from None
        results = result if isinstance(result, tuple) else (result,)
        outputs = list(node.output)
        if len([o for o in outputs if o]) > len(results):
            raise self.unsupported(f"only {len(results)} output(s) supported, "
                                   f"the node has {len(outputs)}")
        for onnx_name, tensor in zip(outputs, results):
            if onnx_name and isinstance(tensor, np.ndarray):  # a Constant in a subgraph
                self._define(onnx_name, self.constant(tensor, "const"))
            elif onnx_name:
                self._bind(onnx_name, tensor)

    def _shape_computation(self, node, inputs: list[TensorInfo | None]) -> bool:
        """Evaluate ``node`` on shape values (:mod:`polyc.frontend.shape_values`) when it
        computes one: a Shape of a tensor with a symbolic dim, or an op of
        ``shape_values.OPS`` reading shape values and constants only."""
        attrs = attribute_values(node)
        if node.op_type == "Shape" and any(isinstance(d, Sym) for d in inputs[0].shape):
            value = shape_values.shape_of(inputs[0].shape, attrs.get("start", 0),
                                          attrs.get("end"))
        elif node.op_type in shape_values.OPS and any(
                t is not None and t.name in self._shape_values for t in inputs):
            values = [None if t is None else self._shape_values.get(t.name,
                                                                   self._constants.get(t.name))
                      for t in inputs]
            if any(v is None for v, t in zip(values, inputs) if t is not None):
                return False  # reads a tensor computed at run time
            value = shape_values.evaluate(node.op_type, values, attrs)
            if value is None:
                return False
        else:
            return False
        if len(node.output) != 1 or node.output[0] in self._graph.outputs:
            return False
        name = self.fresh("shape")
        info = TensorInfo(name, tuple(value.shape), "int64")
        self._shape_values[name] = value  # the chain goes on through it
        if not shape_values.symbolic(value):
            self._constants[name] = value.astype(np.int64)
        self._tensors[name] = info
        self._env[node.output[0]] = info
        return True

    def finish(self) -> Graph:
        """The Graph, after writing every graph output that no Map or Reduce wrote."""
        self._node = NodeContext("Output", "<graph outputs>", self.opset)
        for name in self._graph.outputs:
            self._write_output(name)
        for info in self._graph.inputs:
            if info.dtype not in core.DTYPES:
                raise UnsupportedDtypeError(f"graph input '{info.name}' has dtype "
                                            f"{info.dtype}; polyc compiles {_DTYPE_LIST}")
        self._ops = _without_unread_ops(self._ops, set(self._graph.outputs))
        used = {t for op in self._ops for t in (*core.written(op), *op.inputs)}
        names = [t.name for t in self._graph.inputs] + [n for n in self._tensors if n in used]
        return Graph(
            name=self._graph.name,
            inputs=self._graph.inputs,
            outputs=tuple(self._tensors[o] for o in self._graph.outputs),
            tensors={n: self._tensors[n] for n in dict.fromkeys(names)},
            constants={n: v for n, v in self._constants.items() if n in used},
            ops=tuple(self._ops),
            opset=self.opset,
            model_hash=self._graph.model_hash,
            notes=self._graph.notes,
            positions=frozenset(self._positions & used),
            host=self._graph.host,
            results=self._graph.results,
        )

    # -- internals --------------------------------------------------------------------

    def _define(self, onnx_name: str, info: TensorInfo) -> None:
        self._env[onnx_name] = info
        self._tensors[info.name] = info

    def _input(self, onnx_name: str) -> TensorInfo:
        info = self._env.get(onnx_name)
        if info is None:
            raise ModelError(f"{self._node.op_type} node '{self._node.name}' reads "
                             f"'{onnx_name}', which is neither a graph input, a constant, "
                             "nor an output of an earlier node")
        return info

    def _emit(self, op: core.Op, shape: tuple[int, ...]) -> TensorInfo:
        op = self._checked(op)
        info = TensorInfo(op.out, shape, self._result_dtype(op))
        self._tensors[op.out] = info
        self.put_op(op)
        return info

    def _checked(self, op: core.Op) -> core.Op:
        """``op`` once the data it reads has a compiled dtype, its literals typed."""
        for name in op.inputs:
            self._check_data(name)
        return self._typed_literals(op)

    def _check_data(self, name: str) -> None:
        dtype = self._tensors[name].dtype
        if dtype not in core.DTYPES:
            raise UnsupportedDtypeError(
                f"{self._node.op_type} node '{self._node.name}' (opset {self.opset}) reads "
                f"tensor '{name}' of dtype {dtype}; polyc compiles {_DTYPE_LIST} data only")

    def _typed_literals(self, op: core.Op) -> core.Op:
        """``op`` with its expressions' float literals in its data's float type
        (:func:`core.typed_literals`); as it is when they do not type-check (the error
        then comes from :meth:`_result_dtype`)."""
        if isinstance(op, View):
            return op
        dtype_of = lambda name: self._tensors[name].dtype  # noqa: E731
        try:
            if isinstance(op, Map):
                return dataclasses.replace(op, expr=core.typed_literals(op.expr, dtype_of))
            if isinstance(op, Recurrence):
                start, body = (tuple(dataclasses.replace(
                    s, expr=core.typed_literals(s.expr, dtype_of)) for s in steps)
                    for steps in (op.start, op.body))
                return dataclasses.replace(op, start=start, body=body)
            expr = core.typed_literals(op.expr, dtype_of)
            init = core.typed_literal(core.typed_literals(op.init, dtype_of),
                                      core.expr_dtype(expr, dtype_of))
            return dataclasses.replace(op, init=init, expr=expr)
        except core.DtypeError:
            return op

    def _result_dtype(self, op: core.Op) -> str:
        """The dtype of what ``op`` writes; UnsupportedDtypeError naming the node when
        its expressions are ill-typed (an op given operands of a type it cannot take)."""
        if isinstance(op, View):
            return self._tensors[op.src].dtype
        dtype_of = lambda name: self._tensors[name].dtype  # noqa: E731
        try:
            if isinstance(op, Map):
                return core.expr_dtype(op.expr, dtype_of)
            if isinstance(op, Recurrence):
                _check_steps(op, dtype_of)
                return ""
            init = core.expr_dtype(op.init, dtype_of)
            return core.result_dtype(op.combiner, (init, core.expr_dtype(op.expr, dtype_of)))
        except core.DtypeError as error:
            inputs = ", ".join(f"'{t}' ({dtype_of(t)})" for t in op.inputs) or "no tensor"
            raise self.dtype_error(f"reading {inputs}: {error}") from None

    def _bind(self, onnx_name: str, tensor: TensorInfo) -> None:
        """Give the node's result ``tensor`` the ONNX name ``onnx_name``."""
        self._check_inferred_shape(onnx_name, tensor.shape)
        self._check_inferred_dtype(onnx_name, tensor.dtype)
        if self._producer.get(tensor.name, -1) < self._node_start:
            tensor = self.view(tensor, tensor.shape, label="identity")
        producer = self._ops[self._producer[tensor.name]]
        if onnx_name in self._graph.outputs and (
                isinstance(producer, (View, Recurrence))
                or isinstance(producer, Reduce) and tensor.dtype in core.NARROW_FLOATS):
            # a float16/bfloat16 output holds them rounded: a sum into it would round
            # at every step
            self._copy(tensor, onnx_name)
        else:
            self._rename(tensor.name, onnx_name)
        self._env[onnx_name] = self._tensors[onnx_name]

    def _copy(self, src: TensorInfo, out: str) -> None:
        """Emit the Map ``out[i] = src[i]`` (label "copy")."""
        read = Read(src.name, core.identity_index(len(src.shape)))
        self._emit(Map(out, src.shape, read, node=self._node.name, label="copy"), src.shape)

    def _rename(self, old: str, new: str) -> None:
        """Rename tensor ``old`` (made by the current node) to ``new`` in this node's ops."""
        for k in range(self._node_start, len(self._ops)):
            self._ops[k] = _renamed(self._ops[k], old, new)
        self._tensors[new] = dataclasses.replace(self._tensors.pop(old), name=new)
        self._producer[new] = self._producer.pop(old)
        for layouts in (self._channels_last, self._nchw_copies):
            if old in layouts:
                layouts[new] = layouts.pop(old)
            for key, info in layouts.items():
                if info.name == old:
                    layouts[key] = self._tensors[new]

    def _write_output(self, name: str) -> None:
        if name in self._producer:
            return
        if any(t.name == name for t in self._graph.inputs):
            raise ModelError(f"graph output '{name}' is also a graph input; polyc needs "
                             "every output to be computed by the graph")
        self._copy(self._input(name), name)

    def _check_inferred_dtype(self, onnx_name: str, dtype: str) -> None:
        inferred = self._graph.value_dtypes.get(onnx_name)
        if inferred is not None and inferred != dtype:
            raise UnsupportedDtypeError(
                f"{self._node.op_type} node '{self._node.name}' (opset {self.opset}): output "
                f"'{onnx_name}' lowered with dtype {dtype}, but ONNX type inference gives "
                f"{inferred}")

    def _check_inferred_shape(self, onnx_name: str, shape: tuple[int, ...]) -> None:
        inferred = self._graph.value_shapes.get(onnx_name)
        if inferred is None:
            return
        agrees = len(inferred) == len(shape) and all(
            d is None or d == s for d, s in zip(inferred, shape))
        if not agrees:
            dims = [d if d is not None else "?" for d in inferred]
            raise self.shape_error(f"output '{onnx_name}' lowered with shape {list(shape)}, "
                                   f"but ONNX shape inference gives {dims}")


_DTYPE_LIST = ", ".join(core.DTYPES)
# A max or min of a whole tensor to one value whose innermost dim has at least this
# many elements reduces in two steps (LoweringContext.reduce): DynamicQuantizeLinear's
# ReduceMin and ReduceMax over [1, 32, 48, 48], 1 thread, 10.8 us each as one chain
# through a scalar, 2.0 us in two steps.
SPLIT_LANES = 16


def _without_unread_ops(ops: list[core.Op], outputs: set[str]) -> list[core.Op]:
    """The ops whose result reaches a graph output (others arise e.g. when a Reduce over
    an empty box, lowered as a Map of its init, no longer reads its operand)."""
    live, kept = set(outputs), []
    for op in reversed(ops):
        if live.intersection(core.written(op)):
            kept.append(op)
            live.update(op.inputs)
    return kept[::-1]


def _onnx_names(graph: OnnxGraph) -> set[str]:
    names = {t.name for t in graph.inputs} | set(graph.outputs) | set(graph.constants)
    for node in graph.nodes:
        names.update(node.input)
        names.update(node.output)
    return names


def _renamed_expr(expr: core.Expr, old: str, new: str) -> core.Expr:
    if isinstance(expr, Read):
        return dataclasses.replace(expr, tensor=new) if expr.tensor == old else expr
    if isinstance(expr, core.Lookup):
        tensor = new if expr.tensor == old else expr.tensor
        return dataclasses.replace(expr, tensor=tensor, at=_renamed_expr(expr.at, old, new))
    if isinstance(expr, Call):
        return Call(expr.fn, tuple(_renamed_expr(a, old, new) for a in expr.args))
    return expr


def _check_steps(op: Recurrence, dtype_of) -> None:
    """DtypeError unless every step of ``op`` stores a value of its tensor's dtype."""
    for step in op.start + op.body:
        dtype = dtype_of(step.out)
        value = core.expr_dtype(step.expr, dtype_of)
        if step.combiner is not None:
            value = core.result_dtype(step.combiner, (dtype, value))
        if value != dtype:
            raise core.DtypeError(f"step {step.label} stores a {value} value in "
                                  f"'{step.out}' of dtype {dtype}")


def _renamed(op: core.Op, old: str, new: str) -> core.Op:
    """``op`` with tensor ``old`` called ``new`` wherever it is written or read."""
    out = None if isinstance(op, Recurrence) else new if op.out == old else op.out
    if isinstance(op, View):
        return dataclasses.replace(op, out=out, src=new if op.src == old else op.src)
    if isinstance(op, Map):
        return dataclasses.replace(op, out=out, expr=_renamed_expr(op.expr, old, new))
    if isinstance(op, Recurrence):
        start, body = (tuple(dataclasses.replace(
            s, out=new if s.out == old else s.out, expr=_renamed_expr(s.expr, old, new))
            for s in steps) for steps in (op.start, op.body))
        outs = tuple(new if name == old else name for name in op.outs)
        views = tuple(_renamed(view, old, new) for view in op.views)
        return dataclasses.replace(op, outs=outs, start=start, body=body, views=views)
    return dataclasses.replace(op, out=out, init=_renamed_expr(op.init, old, new),
                               expr=_renamed_expr(op.expr, old, new))


def check_graph(graph: Graph) -> None:
    """Assert the invariants later stages rely on (ValueError naming the culprit).

    Every tensor used is described in ``tensors``; each is written by exactly one op,
    after which it is read; graph outputs are written by a Map or Reduce; constants have
    their tensor's dtype, one of ``core.DTYPES``; positions are int64 vectors.
    """
    written = {t.name for t in graph.inputs} | set(graph.constants) | graph.positions
    for op in graph.ops:
        outs = core.written(op)
        missing = [t for t in op.inputs if t not in written]
        if missing:
            raise ValueError(f"op writing {list(outs)} reads {missing} before they are "
                             "written")
        twice = [t for t in outs if t in written]
        if twice:
            raise ValueError(f"tensor '{twice[0]}' is written twice")
        written.update(outs)
    unknown = written - set(graph.tensors)
    if unknown:
        raise ValueError(f"tensors {sorted(unknown)} are not described in Graph.tensors")
    writers = {out: op for op in graph.ops for out in core.written(op)}
    for out in graph.outputs:
        if not isinstance(writers.get(out.name), (Map, Reduce)):
            raise ValueError(  # noqa: TRY004 - a broken invariant, not a wrong argument type
                f"graph output '{out.name}' is not written by a Map or Reduce")
    for name, value in graph.constants.items():
        if value.dtype.name not in core.DTYPES or value.dtype.name != graph.tensors[name].dtype:
            raise ValueError(f"constant '{name}' has dtype {value.dtype}, not its tensor's "
                             f"{graph.tensors[name].dtype}")
    for name in graph.positions:
        if graph.tensors[name].dtype != "int64" or len(graph.tensors[name].shape) != 1:
            raise ValueError(f"positions '{name}' are not an int64 vector")

