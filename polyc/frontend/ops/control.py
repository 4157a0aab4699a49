"""Control flow: If, Scan and Loop.

``If`` with a condition known when compiling lowers the branch it takes in place; with
a condition computed at run time both branches run and a Map selects each output (the
branches must give outputs of one shape: polyc's shapes are static).

``Scan`` and ``Loop`` (with a constant trip count and no early exit) lower their body
once, as if for one step, then lift its ops into a core Recurrence over the steps:

- a body tensor of shape S becomes a tensor of shape ``(T, *S)`` (its value at every
  step), each op a step over ``(t, ..)`` writing slot ``t``; a Reshape or Transpose of
  such a tensor a view of the lifted one;
- a state (a Scan's state variables, a Loop's loop-carried values) lives in an array
  of ``T + 1`` slots: the initial value in slot 0, the value after step ``t`` in slot
  ``t + 1``, read at slot ``t``;
- a scan input is read at the step's slice (a copy per step when it is scanned along
  another axis than the first, or in reverse), a Loop's iteration number is the step;
- body ops that read nothing that changes from step to step run once, before the
  loop (loop-invariant code motion for free);
- the scan outputs are copied per step into arrays of their own, then laid out along
  their axis (and direction) by a Map after the loop; the last states likewise.

So the dependences between steps are exact, and the scheduler and tiling treat the
body's products as they treat an LSTM's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from polyc.frontend.core import (
    Call,
    Const,
    Ix,
    Lookup,
    Map,
    Read,
    Recurrence,
    Step,
    TensorInfo,
    View,
    identity_index,
)
from polyc.frontend.ops.indexing import first_element, normalize_axis
from polyc.frontend.ops.registry import onnx_op


@onnx_op("If", 1, 11, 13, 16, 19, 21, 23, 24, 25)
def If(ctx, cond, *, then_branch, else_branch):
    """If: the branch the constant ``cond`` takes, lowered in place; a run-time ``cond``:
    both branches, then ``select(cond, then, else)`` per output."""
    value = ctx.constant_value(cond)
    if value is not None:
        if value.size != 1:
            raise ctx.shape_error(f"cond has {value.size} elements; it must have one")
        return tuple(ctx.lower_body(then_branch if bool(value.reshape(-1)[0]) else
                                    else_branch, {}))
    if len(cond.shape) > 1 or cond.dtype != "bool" or (cond.shape and cond.shape[0] != 1):
        raise ctx.shape_error(f"cond {cond} must be one bool")
    taken = ctx.lower_body(then_branch, {})
    other = ctx.lower_body(else_branch, {})
    if len(taken) != len(other):
        raise ctx.shape_error(f"the branches give {len(taken)} and {len(other)} outputs")
    results = []
    for k, (a, b) in enumerate(zip(taken, other)):
        if a.shape != b.shape or a.dtype != b.dtype:
            raise ctx.unsupported(f"output {k} is {a} in then_branch and {b} in "
                                  "else_branch; with a condition computed at run time "
                                  "polyc needs one shape and dtype")
        index = identity_index(len(a.shape))
        results.append(ctx.map(a.shape, Call("select", (first_element(cond), Read(a.name, index),
                                                         Read(b.name, index))), label="if"))
    return tuple(results)


@onnx_op("Scan", 9, 11, 16, 19, 21, 23, 24, 25)
def Scan(ctx, *inputs, body, num_scan_inputs, scan_input_axes=None,
         scan_input_directions=None, scan_output_axes=None, scan_output_directions=None):
    """Scan: the body run over slices of the scan inputs, carrying the states (module
    docstring)."""
    m = int(num_scan_inputs)
    n = len(inputs) - m
    if m < 1 or n < 0:
        raise ctx.shape_error(f"num_scan_inputs={m} with {len(inputs)} inputs")
    states, scanned = inputs[:n], inputs[n:]
    try:
        in_axes = [normalize_axis(a, len(x.shape)) for a, x in
                   zip(scan_input_axes or [0] * m, scanned)]
    except ValueError as e:
        raise ctx.shape_error(f"scan_input_axes: {e}") from None
    in_reverse = list(scan_input_directions or [0] * m)
    lengths = {x.shape[a] for x, a in zip(scanned, in_axes)}
    if len(lengths) != 1 or not isinstance(next(iter(lengths)), int):
        raise ctx.shape_error(f"the scan inputs' lengths {sorted(map(str, lengths))} must "
                              "be one number")
    steps = lengths.pop()
    if steps < 1:
        raise ctx.unsupported("a Scan of no steps")
    loop = _Lifting(ctx, steps)
    bindings = {}
    names = [value.name for value in body.input]
    for name, state in zip(names, states):
        bindings[name] = loop.state(state)
    for name, x, axis, reverse in zip(names[n:], scanned, in_axes, in_reverse):
        bindings[name] = loop.sliced(x, axis, bool(reverse))
    outputs = loop.run(body, bindings)
    k = len(outputs) - n
    out_axes = list(scan_output_axes or [0] * k)
    out_reverse = list(scan_output_directions or [0] * k)
    return loop.finish(outputs[:n], outputs[n:], out_axes, out_reverse)


@onnx_op("Scan", 8)
def Scan_8(ctx, sequence_lens, *inputs, body, num_scan_inputs, directions=None):
    """Scan-8: every state and scan input has a batch dim first (scan inputs scanned
    along dim 1); the body runs over each batch element's slices: one Scan (as version 9)
    per element, the outputs stacked along the batch. ``sequence_lens`` absent or a
    constant of full lengths (shorter sequences are refused)."""
    if not inputs or any(len(x.shape) < 1 for x in inputs):
        raise ctx.shape_error("every state and scan input needs a batch dim")
    batch = inputs[0].shape[0]
    if not isinstance(batch, int) or any(x.shape[0] != batch for x in inputs):
        raise ctx.shape_error(f"the inputs' batch dims {[x.shape[0] for x in inputs]} "
                              "must be one number")
    m = int(num_scan_inputs)
    if sequence_lens is not None:
        lengths = ctx.constant_value(sequence_lens)
        full = inputs[-1].shape[1] if m and len(inputs[-1].shape) > 1 else None
        if lengths is None or (lengths != full).any():
            raise ctx.unsupported("sequence_lens other than a constant of the full length "
                                  f"{full} (shorter sequences have outputs of other shapes)")
    per_batch = []
    for b in range(batch):
        parts = [ctx.map(x.shape[1:], Read(x.name, (Ix.constant(b),)
                                           + identity_index(len(x.shape) - 1)),
                         label="scan_batch") for x in inputs]
        outputs = Scan(ctx, *parts, body=body if b == 0 else _renamed_body(body, f"__{b}"),
                       num_scan_inputs=m, scan_input_directions=directions)
        per_batch.append(outputs if isinstance(outputs, tuple) else (outputs,))
    return tuple(_stacked(ctx, [outputs[k] for outputs in per_batch])
                 for k in range(len(per_batch[0])))


def _renamed_body(body, suffix: str):
    """A copy of the subgraph ``body`` whose own values (inputs, node outputs) end in
    ``suffix``, so that lowering it again names new tensors; names from outside kept."""
    import onnx

    copy = onnx.GraphProto()
    copy.CopyFrom(body)
    own = {v.name for v in copy.input} | {o for n in copy.node for o in n.output if o}
    rename = lambda name: name + suffix if name in own else name  # noqa: E731
    for value in [*copy.input, *copy.output, *copy.value_info]:
        value.name = rename(value.name)
    for n in copy.node:
        n.input[:] = [rename(i) for i in n.input]
        n.output[:] = [rename(o) for o in n.output]
    return copy


def _stacked(ctx, parts: list[TensorInfo]) -> TensorInfo:
    """``parts`` (of one shape) stacked along a new first dim: one Map selecting by it."""
    shape = (len(parts),) + parts[0].shape
    index = tuple(Ix.var(1 + k) for k in range(len(parts[0].shape)))
    value = Read(parts[-1].name, index)
    for b in reversed(range(len(parts) - 1)):
        chosen = Call("eq", (Read(ctx.positions(len(parts)).name, (Ix.var(0),)),
                             Const(b, "int64")))
        value = Call("select", (chosen, Read(parts[b].name, index), value))
    return ctx.map(shape, value, label="scan_batch_stack")


@onnx_op("Loop", 1, 11, 13, 16, 19, 21, 23, 24, 25)
def Loop(ctx, M=None, cond=None, *states, body):
    """Loop with a constant trip count ``M`` and a condition that stays true (absent, or
    the body passes its input on, or outputs a constant true): a Scan over ``M`` steps
    whose iteration number is the step (module docstring)."""
    trip = None if M is None else ctx.constant_value(M)
    if trip is None or trip.size != 1:
        raise ctx.unsupported("the trip count M must be a constant (a Loop whose length "
                              "is known only at run time has no static shape)")
    steps = int(trip.reshape(-1)[0])
    start = None if cond is None else ctx.constant_value(cond)
    if cond is not None and (start is None or not bool(start.reshape(-1)[0])):
        raise ctx.unsupported("cond must be absent or a constant true")
    if steps < 1:
        raise ctx.unsupported("a Loop of no iterations")
    loop = _Lifting(ctx, steps)
    names = [value.name for value in body.input]
    iteration = ctx.placeholder((), "int64", "iteration")
    go_on = ctx.placeholder((), "bool", "cond")
    loop.constants[iteration.name] = Read(ctx.positions(steps).name, (Ix.var(0),))
    loop.constants[go_on.name] = Const(True, "bool")
    bindings = {names[0]: iteration, names[1]: go_on}
    for name, state in zip(names[2:], states):
        bindings[name] = loop.state(state)
    outputs = loop.run(body, bindings)
    if not loop.always_true(outputs[0], go_on):
        raise ctx.unsupported("the body's condition output may turn false (an early exit "
                              "gives a length known only at run time)")
    n = len(states)
    scanned = outputs[1 + n:]
    return loop.finish(outputs[1:1 + n], scanned, [0] * len(scanned), [0] * len(scanned))


@dataclass
class _Slots:
    """Where a body tensor's per-step values live: ``array`` with a leading time dim of
    ``slots`` entries, the step's value at slot ``t`` (``t`` = loop variable 0)."""

    array: str
    slots: int


class _Lifting:
    """One Scan or Loop: its body lowered once, then lifted into a Recurrence."""

    def __init__(self, ctx, steps: int):
        self.ctx, self.steps = ctx, steps
        self.slots: dict[str, _Slots] = {}  # body tensor -> its lifted array
        self.constants: dict[str, object] = {}  # body input -> the expression it is
        self.start: list[Step] = []
        self.first: list[Step] = []  # body steps before the lifted ops (input copies)
        self.states: list[tuple[TensorInfo, TensorInfo]] = []  # (placeholder, array)
        self.arrays: list[TensorInfo] = []  # the Recurrence's own arrays
        self.made: list[str] = []  # lifted body tensors (more of its arrays)
        self.body_ops: list = []

    def state(self, initial: TensorInfo) -> TensorInfo:
        """A state's placeholder; its array of T + 1 slots starts at ``initial``."""
        ctx = self.ctx
        placeholder = ctx.placeholder(initial.shape, initial.dtype, "state")
        array = TensorInfo(ctx.fresh("state_slots"), (self.steps + 1,) + initial.shape,
                           initial.dtype)
        self.arrays.append(array)
        rank = len(initial.shape)
        self.start.append(Step(array.name, initial.shape,
                               (Ix.constant(0),) + identity_index(rank),
                               Read(initial.name, identity_index(rank)), label="initial"))
        self.slots[placeholder.name] = _Slots(array.name, self.steps + 1)
        self.states.append((placeholder, array))
        return placeholder

    def sliced(self, x: TensorInfo, axis: int, reverse: bool) -> TensorInfo:
        """A scan input's placeholder (x without ``axis``), read at step ``t``'s slice."""
        ctx = self.ctx
        shape = x.shape[:axis] + x.shape[axis + 1:]
        placeholder = ctx.placeholder(shape, x.dtype, "slice")
        if axis == 0 and not reverse:
            self.slots[placeholder.name] = _Slots(x.name, self.steps)
            return placeholder
        copy = TensorInfo(ctx.fresh("slices"), (self.steps,) + shape, x.dtype)
        self.arrays.append(copy)
        index = [Ix.var(1 + k) for k in range(len(shape))]
        time = Ix(((0, -1),), self.steps - 1) if reverse else Ix.var(0)
        index.insert(axis, time)
        self.first.append(Step(copy.name, (self.steps,) + shape,
                               identity_index(1 + len(shape)), Read(x.name, tuple(index)),
                               label="slice"))
        self.slots[placeholder.name] = _Slots(copy.name, self.steps)
        return placeholder

    def run(self, body, bindings: dict[str, TensorInfo]) -> list[TensorInfo]:
        """Lower ``body`` and lift its ops; its outputs (body tensors)."""
        ctx = self.ctx
        start = ctx.op_count()
        outputs = ctx.lower_body(body, bindings)
        self.body_ops = ctx.take_ops(start)
        return outputs

    def always_true(self, cond: TensorInfo, cond_input: TensorInfo) -> bool:
        """Whether a Loop body's condition output is its input (or a view of it: an
        Identity) or a constant true."""
        sources = {op.out: op.src for op in self.body_ops if isinstance(op, View)}
        name = cond.name
        while name in sources:
            name = sources[name]
        if name == cond_input.name:
            return True
        value = self.ctx.constant_value(cond)
        return value is not None and value.size == 1 and bool(value.reshape(-1)[0])

    def finish(self, new_states, scan_outputs, axes, reverse):
        """The Recurrence, then the last states and the laid-out scan outputs."""
        ctx, steps = self.ctx, self.steps
        body: list[Step] = list(self.first)
        views: list[tuple[View, TensorInfo]] = []
        for op in self.body_ops:
            if not self._variant(op):
                ctx.put_op(op)  # reads nothing that changes: once, before the loop
                continue
            if isinstance(op, Recurrence):
                raise ctx.unsupported("a recurrent layer (LSTM, GRU, RNN, Scan, Loop) inside "
                                      "a Scan or Loop body")
            body += self._lifted(op, views)
        outputs = []
        for (placeholder, array), new in zip(self.states, new_states):
            rank = len(placeholder.shape)
            body.append(Step(array.name, (steps,) + placeholder.shape,
                             (Ix(((0, 1),), 1),) + _shifted(identity_index(rank)),
                             self._expr(Read(new.name, identity_index(rank))), label="state"))
        copies = []
        for y in scan_outputs:
            rank = len(y.shape)
            copy = TensorInfo(ctx.fresh("scan_out"), (steps,) + y.shape, y.dtype)
            self.arrays.append(copy)
            body.append(Step(copy.name, (steps,) + y.shape, identity_index(rank + 1),
                             self._expr(Read(y.name, identity_index(rank))), label="scan_out"))
            copies.append(copy)
        ctx.recurrence(self.arrays + [ctx.tensor(name) for name in self.made],
                       start=self.start, steps=steps, body=body, label="loop", views=views)
        for placeholder, array in self.states:
            rank = len(placeholder.shape)
            outputs.append(ctx.map(placeholder.shape, Read(array.name, (Ix.constant(steps),)
                                                          + identity_index(rank)),
                                   label="last_state"))
        for copy, axis, back in zip(copies, axes, reverse):
            rank = len(copy.shape)
            axis = normalize_axis(axis, rank)
            inner = copy.shape[1:]
            shape = inner[:axis] + (steps,) + inner[axis:]
            time = Ix(((axis, -1),), steps - 1) if back else Ix.var(axis)
            rest = tuple(Ix.var(k) for k in range(rank) if k != axis)
            outputs.append(ctx.map(shape, Read(copy.name, (time,) + rest), label="scan_output"))
        return tuple(outputs)

    # -- lifting ---------------------------------------------------------------------

    def _variant(self, op) -> bool:
        """Whether ``op`` reads a tensor that changes from step to step."""
        reads = (op.src,) if isinstance(op, View) else op.inputs
        return any(name in self.slots or name in self.constants for name in reads)

    def _lifted(self, op, views) -> list[Step]:
        """The steps of one body op that reads a changing tensor (none for a View: a
        view of the lifted tensor, or of a scan input read in place, before the loop)."""
        ctx, steps = self.ctx, self.steps
        if isinstance(op, View):
            if op.src in self.constants:  # a reshape of a scalar: the same value
                self.constants[op.out] = self.constants[op.src]
                return []
            source = self.slots[op.src]
            info = ctx.tensor(op.out)
            lifted = TensorInfo(op.out, (source.slots,) + info.shape, info.dtype)
            perm = (0, *(p + 1 for p in op.perm)) if op.kind == "transpose" else ()
            view = replace(op, src=source.array, perm=perm)
            ctx.describe(lifted)
            own = {*(a.name for a in self.arrays), *self.made, *(v.out for v, _ in views)}
            if source.array in own:
                views.append((view, lifted))
            else:
                ctx.put_op(view)  # a view of a scan input read in place
            self.slots[op.out] = _Slots(op.out, source.slots)
            return []
        info = ctx.tensor(op.out)
        ctx.describe(TensorInfo(op.out, (steps,) + info.shape, info.dtype))
        self.made.append(op.out)
        self.slots[op.out] = _Slots(op.out, steps)
        at = (Ix.var(0),) + _shifted(identity_index(len(info.shape)))
        if isinstance(op, Map):
            return [Step(op.out, (steps,) + op.shape, at, self._expr(op.expr), label=op.label)]
        return [Step(op.out, (steps,) + op.out_shape, at, self._expr(op.init),
                     label=f"{op.label}_init"),
                Step(op.out, (steps,) + op.extents, (Ix.var(0),) + _shifted(op.out_index),
                     self._expr(op.expr), op.combiner, label=op.label)]

    def _expr(self, expr):
        """``expr`` of a body op seen from step ``t``: loop variables one further on,
        changing tensors read at slot ``t``, a Loop's iteration number and condition as
        their values."""
        if isinstance(expr, Read):
            if expr.tensor in self.constants:
                return self.constants[expr.tensor]
            index = _shifted(expr.index)
            slots = self.slots.get(expr.tensor)
            if slots is None:
                return replace(expr, index=index)
            return replace(expr, tensor=slots.array, index=(Ix.var(0),) + index)
        if isinstance(expr, Lookup):
            index, at = _shifted(expr.index), self._expr(expr.at)
            slots = self.slots.get(expr.tensor)
            if slots is None:
                return Lookup(expr.tensor, index, expr.axis, at)
            return Lookup(slots.array, (Ix.var(0),) + index, expr.axis + 1, at)
        if isinstance(expr, Call):
            return Call(expr.fn, tuple(self._expr(a) for a in expr.args))
        return expr


def _shifted(index) -> tuple[Ix, ...]:
    """Affine indices with every loop variable one position further (a time loop in
    front)."""
    return tuple(Ix(tuple((v + 1, c) for v, c in ix.terms), ix.const) for ix in index)

