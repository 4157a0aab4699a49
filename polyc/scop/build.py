"""Core ops -> statements with isl iteration domains and access relations.

- ``Map`` ``out[i] = f(..)``            -> one statement over the box of ``out``;
- ``Reduce``                            -> an init statement over the output box and
  an update statement ``out[o(i)] = combine(out[o(i)], f(..))`` over the loop box;
- ``View``                              -> no statement: reads of the view are
  composed with the view's (quasi-)affine index map onto the array that has storage;
- ``Recurrence``                        -> a statement per step, the body steps under
  one time loop in the original order (``recurrent`` statements).

A ``Lookup`` (an index computed at run time) becomes a ``LoadAt`` whose access reads
the whole indexed dim: dependences stay exact in the other dims and safe in that one.
"""

from __future__ import annotations

import re

import islpy as isl

from polyc.errors import UnsupportedDtypeError
from polyc.frontend.core import (
    Call,
    Const,
    DtypeError,
    Graph,
    Ix,
    Lookup,
    Map,
    Read,
    Recurrence,
    Reduce,
    View,
    expr_dtype,
    identity_index,
)
from polyc.islutil import (
    box,
    identity_schedule,
    index_map,
    lower_bounds,
    outside_map,
    reshape_map,
    sequence,
    set_space,
    spread_dim,
    time_loop,
    transpose_map,
)
from polyc.scop.model import Access, Array, Load, LoadAt, Scop, Statement


def build_scop(graph: Graph, *, ctx: isl.Context | None = None) -> Scop:
    """The SCoP of a core graph: one or two statements per Map/Reduce, in program order."""
    builder = _Builder(ctx or isl.Context(), graph)
    for position, op in enumerate(graph.ops):
        builder.add(position, op)
    statements = tuple(builder.statements)
    order = sequence(builder.order)
    constants = {builder.arrays[t].name: v for t, v in graph.constants.items()
                 if t in builder.arrays}
    params = graph.params
    return Scop(ctx=builder.ctx, arrays=tuple(builder.arrays.values()),
                statements=statements, order=order, constants=constants, params=params,
                context=lower_bounds(builder.ctx, params) if params else None)


def _extents(shape) -> tuple[int | str, ...]:
    """A shape with each symbolic dim as its parameter's name."""
    return tuple(d if isinstance(d, int) else str(d) for d in shape)


def _isl_name(tensor: str, taken: set[str]) -> str:
    """A readable, unique isl tuple name for an ONNX tensor name."""
    name = re.sub(r"\W+", "_", tensor).strip("_") or "t"
    if not name[0].isalpha():
        name = "t_" + name
    candidate, k = name, 1
    while candidate in taken:
        candidate, k = f"{name}_{k}", k + 1
    taken.add(candidate)
    return candidate


class _Builder:
    def __init__(self, ctx: isl.Context, graph: Graph):
        self.ctx, self.graph = ctx, graph
        self.arrays: dict[str, Array] = {}  # tensor -> Array, storage only
        self.views: dict[str, tuple[str, isl.Map]] = {}  # tensor -> (base tensor, map)
        self.statements: list[Statement] = []
        self.order: list[isl.Schedule] = []  # the original order, op by op
        self._names: set[str] = set()
        self._declare_arrays()

    def _declare_arrays(self) -> None:
        graph = self.graph
        kinds = {t.name: "input" for t in graph.inputs}
        kinds.update({name: "constant" for name in graph.constants})
        kinds.update({name: "positions" for name in graph.positions})
        kinds.update({t.name: "output" for t in graph.outputs})
        for op in graph.ops:
            if not isinstance(op, View):
                for out in op.outs if isinstance(op, Recurrence) else (op.out,):
                    kinds.setdefault(out, "temp")
        for tensor, kind in kinds.items():
            info = graph.tensors[tensor]
            name = _isl_name(tensor, self._names)
            self.arrays[tensor] = Array(name, tensor, _extents(info.shape), kind, info.dtype)

    def _space(self, tensor: str) -> isl.Space:
        if tensor in self.arrays:
            array = self.arrays[tensor]
            return set_space(self.ctx, array.name, [f"d{k}" for k in range(len(array.shape))])
        rank = len(self.graph.tensors[tensor].shape)
        name = _isl_name(tensor, set(self._names))
        return set_space(self.ctx, name, [f"d{k}" for k in range(rank)])

    def _statement_name(self, label: str) -> str:
        suffix = re.sub(r"\W+", "_", label)
        return f"S{len(self.statements)}_{suffix}"

    def add(self, position: int, op) -> None:
        if isinstance(op, View):
            self._add_view(op)
        elif isinstance(op, Map):
            index = identity_index(len(op.shape))
            self._add_statement(position, op.node, op.out, op.label, op.shape, index,
                                op.expr)
        elif isinstance(op, Reduce):
            self._add_reduce(position, op)
        elif isinstance(op, Recurrence):
            self._add_recurrence(position, op)
        else:
            raise TypeError(f"not a core op: {op!r}")

    def _add_view(self, op: View) -> None:
        src_space = self._space(op.src)
        view_space = self._space(op.out)
        if op.kind == "transpose":
            view_map = transpose_map(view_space, src_space, op.perm)
        else:
            view_map = reshape_map(self.ctx, view_space,
                                   _extents(self.graph.tensors[op.out].shape), src_space,
                                   _extents(self.graph.tensors[op.src].shape))
        if op.src in self.views:  # a view of a view: compose down to the storage
            base, inner = self.views[op.src]
            view_map = view_map.apply_range(inner)
            op_src = base
        else:
            op_src = op.src
        self.views[op.out] = (op_src, view_map)

    def _add_reduce(self, position: int, op: Reduce) -> None:
        self._add_statement(position, op.node, op.out, f"{op.label}_init", op.out_shape,
                            identity_index(len(op.out_shape)), op.init)
        accumulator = Read(op.out, op.out_index)
        body = Call(op.combiner, (accumulator, op.expr))
        self._add_statement(position, op.node, op.out, f"{op.label}_update", op.extents,
                            op.out_index, body)

    def _add_recurrence(self, position: int, op: Recurrence) -> None:
        """The start steps in order, then the body steps under one loop over ``t`` (each
        in the order of its other dims)."""
        for view in op.views:
            self._add_view(view)
        for step in op.start:
            self._add_step(position, op, step, recurrent=False)
        body = [self._add_step(position, op, step, recurrent=True) for step in op.body]
        self.order.append(time_loop([s.domain for s in body]))

    def _add_step(self, position: int, op: Recurrence, step, *, recurrent: bool) -> Statement:
        expr = step.expr
        if step.combiner is not None:
            expr = Call(step.combiner, (Read(step.out, step.out_index), expr))
        return self._add_statement(position, op.node, step.out, f"{op.label}_{step.label}",
                                   step.extents, step.out_index, expr, recurrent=recurrent)

    def _add_statement(self, position, node, out, label, extents, out_index, expr, *,
                       recurrent: bool = False) -> Statement:
        name = self._statement_name(label)
        domain = box(self.ctx, name, _extents(extents))
        write = self._access(domain, out, out_index)
        reads: list[Access] = []
        body = self._lower_body(expr, domain, reads)
        self._check_dtype(name, out, expr)
        statement = Statement(name, domain, write, tuple(reads), body, position, node,
                              recurrent=recurrent)
        self.statements.append(statement)
        if not recurrent:  # a recurrence orders its body under its time loop
            self.order.append(identity_schedule(domain))
        return statement

    def _access(self, domain: isl.Set, tensor: str, index, read: Read | None = None
                ) -> Access:
        """The access of ``tensor[index]`` (through its view, if it is one). For a
        bounded ``read``, indices leaving the tensor are handled in the tensor's own
        index space, before the view map."""
        if tensor in self.views:
            base, view_map = self.views[tensor]
            space = view_map.get_space().domain()
        else:
            base, view_map = tensor, None
            space = self._space(tensor)
        relation = index_map(domain, space, index)
        address = guard = None
        if read is not None and read.bounded:
            shape = _extents(self.graph.tensors[tensor].shape)
            name = space.get_tuple_name(isl.dim_type.set)
            inside = relation.intersect_range(box(self.ctx, name, shape, prefix="d"))
            mode = "edge" if read.outside == "fill" else read.outside
            address = relation.apply_range(outside_map(space, shape, mode))
            if read.outside == "fill":
                relation, guard = inside, inside.domain()
            else:
                relation = address
        if view_map is not None:
            relation = relation.apply_range(view_map)
            address = None if address is None else address.apply_range(view_map)
        return Access(self.arrays[base].name, relation, address, guard,
                      read.fill if read is not None else 0.0)

    def _lower_body(self, expr, domain: isl.Set, reads: list[Access]):
        """Replace each Read by a Load of a new access (one access per Read)."""
        if isinstance(expr, Read):
            reads.append(self._access(domain, expr.tensor, expr.index, expr))
            return Load(len(reads) - 1)
        if isinstance(expr, Lookup):
            reads.append(self._lookup_access(domain, expr))
            k = len(reads) - 1
            return LoadAt(k, self._lower_body(expr.at, domain, reads))
        if isinstance(expr, Call):
            return Call(expr.fn, tuple(self._lower_body(a, domain, reads) for a in expr.args))
        if isinstance(expr, Const):
            return expr
        raise TypeError(f"not a core expression: {expr!r}")

    def _check_dtype(self, statement: str, tensor: str, expr) -> None:
        """The value ``expr`` has the dtype of the tensor it is stored in."""
        tensors = self.graph.tensors
        try:
            dtype = expr_dtype(expr, lambda name: tensors[name].dtype)
        except DtypeError as error:
            raise UnsupportedDtypeError(f"statement {statement}: {error}") from None
        if dtype != tensors[tensor].dtype:
            raise UnsupportedDtypeError(
                f"statement {statement} stores a {dtype} value in '{tensor}' of dtype "
                f"{tensors[tensor].dtype}")

    def _lookup_access(self, domain: isl.Set, lookup: Lookup) -> Access:
        """The access of ``lookup``: index 0 along its axis in ``address``, the whole
        axis in ``relation``."""
        if lookup.tensor in self.views:
            raise ValueError(f"a Lookup reads the view '{lookup.tensor}' (no storage)")
        index = list(lookup.index)
        index[lookup.axis] = Ix.constant(0)
        address = index_map(domain, self._space(lookup.tensor), index)
        extent = _extents(self.graph.tensors[lookup.tensor].shape)[lookup.axis]
        return Access(self.arrays[lookup.tensor].name,
                      spread_dim(address, lookup.axis, extent), address,
                      lookup=lookup.axis)
