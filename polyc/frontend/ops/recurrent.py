"""Recurrent layers: LSTM, GRU and RNN, each a core Recurrence over time.

The input projection of every time step comes first, as one contraction out of the
time loop (a GEMM over ``T * batch`` rows, with the biases as its start)::

    XW[d, t, b, g] = bias[d, g] + sum_i X[t, b, i] * W[d, g, i]

Then one loop over the steps keeps, for each direction ``d``, the hidden states
``H[d, 0..T, b, j]`` (and an LSTM's cells ``C``) with a slot per time step, and runs::

    Q[d, t, b, g]  = 0 (GRU with linear_before_reset: its recurrent bias)
    Q[d, t, b, g] += H[d, before(t), b, k] * R[d, g, k]      the recurrent product
    C[d, after(t), b, j], H[d, after(t), b, j] = the cell's gates on XW + Q

so the recurrence is a dependence between time steps that the scheduler sees (every
slot is written once). Forward, the state before time ``t`` is in slot ``t`` and the
state after it in ``t + 1``; in reverse (step ``s`` handles time ``T-1-s``) before is
``t + 1`` and after is ``t``. Y at time ``t`` is then slot ``t + 1 - d`` and the last
state slot ``T - T*d``: affine in ``(t, d)``, one Map per output.

``sequence_lens`` masks (it may be computed at run time): at a time past the end of
batch entry ``b``'s sequence the state is kept and Y is 0, so the last state of the
forward pass is the one at the sequence's end and the reverse pass starts there from
the initial state (onnxruntime's outputs). The versions before 7 (LSTM-1, GRU-1 and
-3, RNN-1) differ only by ``output_sequence``, which says whether Y is wanted; it is
computed when the node names it. ``clip`` bounds every gate's input to
``[-clip, clip]`` before its activation (not the cell state an LSTM's ``h`` reads:
onnxruntime's results).
"""

from __future__ import annotations

from dataclasses import dataclass

from polyc.frontend.core import Const, Ix, Read, Step, TensorInfo
from polyc.frontend.ops.activation import hard_sigmoid, negative_branch, softplus
from polyc.frontend.ops.elementwise import call
from polyc.frontend.ops.registry import onnx_op

# activation name (lower case) -> (uses alpha, uses beta, default alpha, default beta)
_ARGUMENTS = {"affine": (True, True, 1.0, 0.0), "leakyrelu": (True, False, 0.01, 0.0),
              "thresholdedrelu": (True, False, 1.0, 0.0), "scaledtanh": (True, True, 1.0, 1.0),
              "hardsigmoid": (True, True, 0.2, 0.5), "elu": (True, False, 1.0, 0.0)}
_PLAIN = ("relu", "tanh", "sigmoid", "softsign", "softplus")


def _activation(name: str, alpha: float, beta: float, x):
    """The activation ``name`` of ONNX's recurrent ops applied to ``x``."""
    if name in ("relu", "tanh", "sigmoid"):
        return call(name, x)
    return {
        "affine": lambda: call("add", call("mul", alpha, x), beta),
        "leakyrelu": lambda: negative_branch(x, call("mul", alpha, x)),
        "thresholdedrelu": lambda: call("select", call("gt", x, alpha), x, 0.0),
        "scaledtanh": lambda: call("mul", alpha, call("tanh", call("mul", beta, x))),
        "hardsigmoid": lambda: hard_sigmoid(x, alpha, beta),
        "elu": lambda: negative_branch(x, call("mul", alpha, call("sub", call("exp", x), 1.0))),
        "softsign": lambda: call("div", x, call("add", 1.0, call("abs", x))),
        "softplus": lambda: softplus(x),
    }[name]()


@dataclass(frozen=True)
class _Layer:
    """What every recurrent op shares: sizes, directions and options."""

    kind: str
    gates: int  # weight blocks of R and W: 4 (LSTM), 3 (GRU), 1 (RNN)
    steps: int
    batch: int
    hidden: int
    reverse: tuple[bool, ...]  # per direction
    layout: int
    activations: tuple[tuple, ...]  # per direction: (name, alpha, beta) per function
    clip: float | None

    @property
    def directions(self) -> int:
        return len(self.reverse)

    def time(self, d: int) -> Ix:
        """The time step's index at step ``i0`` in direction ``d``."""
        return Ix(((0, -1),), self.steps - 1) if self.reverse[d] else Ix.var(0)

    def before(self, d: int) -> Ix:
        """The state slot read at step ``i0``."""
        return Ix(((0, -1),), self.steps) if self.reverse[d] else Ix.var(0)

    def after(self, d: int) -> Ix:
        """The state slot written at step ``i0``."""
        return Ix(((0, -1),), self.steps - 1) if self.reverse[d] else Ix(((0, 1),), 1)

    def first(self, d: int) -> int:
        """The slot of the initial state."""
        return self.steps if self.reverse[d] else 0

    def apply(self, d: int, k: int, x, *, clipped: bool = True):
        """Activation ``k`` of direction ``d`` on ``x``, clipped first when asked (a
        gate's input; not the cell state an LSTM's ``h`` reads, as onnxruntime)."""
        if self.clip is not None and clipped:
            x = call("max", call("min", x, self.clip), -self.clip)
        name, alpha, beta = self.activations[d][k]
        return _activation(name, alpha, beta, x)


def _layer(ctx, kind: str, gates: int, defaults: tuple[str, ...], X, W, R, attrs) -> _Layer:
    if len(X.shape) != 3 or len(W.shape) != 3 or len(R.shape) != 3:
        raise ctx.shape_error(f"X {list(X.shape)}, W {list(W.shape)} and R "
                              f"{list(R.shape)} must be 3-D")
    layout = int(attrs.get("layout", 0))
    steps, batch = (X.shape[1], X.shape[0]) if layout else X.shape[:2]
    if not isinstance(steps, int):
        raise ctx.shape_error(f"the sequence length {steps} must be known when compiling")
    direction = attrs.get("direction", "forward")
    reverse = {"forward": (False,), "reverse": (True,),
               "bidirectional": (False, True)}.get(direction)
    if reverse is None:
        raise ctx.unsupported(f"direction '{direction}' is not forward, reverse or "
                              "bidirectional")
    hidden = int(attrs.get("hidden_size") or R.shape[-1])
    expected_w = (len(reverse), gates * hidden, X.shape[2])
    expected_r = (len(reverse), gates * hidden, hidden)
    if tuple(W.shape) != expected_w or tuple(R.shape) != expected_r:
        raise ctx.shape_error(f"W {list(W.shape)} and R {list(R.shape)} must be "
                              f"{list(expected_w)} and {list(expected_r)}")
    clip = attrs.get("clip")
    return _Layer(kind, gates, steps, batch, hidden, reverse, layout,
                  _activations(ctx, attrs, defaults, len(reverse)),
                  None if clip is None else float(clip))


def _activations(ctx, attrs, defaults: tuple[str, ...], directions: int) -> tuple[tuple, ...]:
    """Per direction, (name, alpha, beta) of each activation: ``activations`` in
    order (or the defaults), alphas and betas taken in order by those that use them."""
    names = [n.lower() for n in attrs.get("activations") or defaults * directions]
    if len(names) == len(defaults):
        names = names * directions
    if len(names) != len(defaults) * directions:
        raise ctx.unsupported(f"activations must list {len(defaults)} function(s) per "
                              f"direction, got {list(attrs['activations'])}")
    alphas = list(attrs.get("activation_alpha") or ())
    betas = list(attrs.get("activation_beta") or ())
    chosen = []
    for name in names:
        if name not in _ARGUMENTS and name not in _PLAIN:
            raise ctx.unsupported(f"activation '{name}' is not one ONNX defines for "
                                  "recurrent ops")
        uses_alpha, uses_beta, alpha, beta = _ARGUMENTS.get(name, (False, False, 0.0, 0.0))
        if uses_alpha and alphas:
            alpha = float(alphas.pop(0))
        if uses_beta and betas:
            beta = float(betas.pop(0))
        chosen.append((name, alpha, beta))
    per = len(defaults)
    return tuple(tuple(chosen[d * per:(d + 1) * per]) for d in range(directions))


def _projection(ctx, layer: _Layer, X, W, B, recurrent_bias: bool) -> TensorInfo:
    """XW[d, t, b, g] = Wb[d, g] (+ Rb[d, g]) + sum_i X[t, b, i] * W[d, g, i]."""
    width = layer.gates * layer.hidden
    shape = (layer.directions, layer.steps, layer.batch, width)
    flat = not layer.layout and all(isinstance(n, int) for n in shape)
    g_var = 2 if flat else 3
    init = Const(0.0)
    if B is not None:
        init = Read(B.name, (Ix.var(0), Ix.var(g_var)))
        if recurrent_bias:
            init = call("add", init, Read(B.name, (Ix.var(0), Ix(((g_var, 1),), width))))
    if flat:
        return _flat_projection(ctx, layer, X, W, init, shape)
    d, t, b, g, i = (Ix.var(k) for k in range(5))
    x = Read(X.name, (b, t, i) if layer.layout else (t, b, i))
    return ctx.reduce(out_shape=shape, init=init, extents=shape + (X.shape[2],),
                      out_index=(d, t, b, g), combiner="add",
                      expr=call("mul", x, Read(W.name, (d, g, i))), label="input_projection")


def _flat_projection(ctx, layer: _Layer, X, W, init, shape) -> TensorInfo:
    """The projection with time and batch as one row dim (X seen as [T*B, I], the
    result as [D, T*B, G] seen as [D, T, B, G]): the register tiles take rows of
    several steps, not the batch alone (an LSTM of batch 2 had 2-row tiles; its second
    layer, 32 steps x 256 inputs -> 512, 0.95 -> 0.69 ms of a 1.08 ms call)."""
    rows = layer.steps * layer.batch
    flat = ctx.view(X, (rows, X.shape[2]), label="projection_rows")
    d, r, g, i = (Ix.var(k) for k in range(4))
    out = (layer.directions, rows, shape[3])
    xw = ctx.reduce(out_shape=out, init=init, extents=out + (X.shape[2],),
                    out_index=(d, r, g), combiner="add",
                    expr=call("mul", Read(flat.name, (r, i)), Read(W.name, (d, g, i))),
                    label="input_projection")
    return ctx.view(xw, shape, label="input_projection_steps")


def _checked_bias(ctx, layer: _Layer, B):
    if B is not None and tuple(B.shape) != (layer.directions, 2 * layer.gates * layer.hidden):
        raise ctx.shape_error(f"B {list(B.shape)} must be "
                              f"[{layer.directions}, {2 * layer.gates * layer.hidden}]")
    return B


class _Cell:
    """The steps of one recurrent op: its state tensors and where its steps read them."""

    def __init__(self, ctx, layer: _Layer, X, lens):
        self.ctx, self.layer, self.dtype = ctx, layer, X.dtype
        self.start: list[Step] = []
        self.body: list[Step] = []
        self.outs: list[TensorInfo] = []
        self.mask_of = self._mask(lens)
        self.zero = Const(0.0, X.dtype)

    def state(self, label: str, width: int, slots: int) -> TensorInfo:
        layer = self.layer
        info = TensorInfo(self.ctx.fresh(label), (layer.directions, slots, layer.batch, width),
                          self.dtype)
        self.outs.append(info)
        return info

    def initial(self, state: TensorInfo, value, label: str) -> None:
        """The initial state (``value`` [directions, batch, hidden] or zero) into its slot."""
        layer = self.layer
        b, j = Ix.var(0), Ix.var(1)
        for d in range(layer.directions):
            index = (Ix.constant(d), b) if layer.layout == 0 else (b, Ix.constant(d))
            expr = self.zero if value is None else Read(value.name, index + (j,))
            self.start.append(Step(state.name, (layer.batch, layer.hidden),
                                   (Ix.constant(d), Ix.constant(layer.first(d)), b, j),
                                   expr, label=f"{label}0"))

    def product(self, d: int, out: TensorInfo, offset: int, width: int, state, R, r_offset,
                init, label: str) -> None:
        """``out[d, t, b, offset + g] = init(g)`` then ``+= sum_k state[..] R[d, r_offset +
        g, k]``, where ``state(k)`` is the read of the state's element k."""
        layer = self.layer
        t, b, g, k = layer.time(d), Ix.var(1), Ix.var(2), Ix.var(3)
        column = Ix(((2, 1),), offset)
        index = (Ix.constant(d), t, b, column)
        self.body.append(Step(out.name, (layer.steps, layer.batch, width), index,
                              init(g), label=f"{label}_init"))
        weight = Read(R.name, (Ix.constant(d), Ix(((2, 1),), r_offset), k))
        self.body.append(Step(out.name, (layer.steps, layer.batch, width, layer.hidden),
                              index, call("mul", state(k), weight), "add", label))

    def update(self, d: int, state: TensorInfo, new, label: str) -> None:
        """``state`` after step i0 = ``new`` (kept as before past a sequence's end)."""
        layer = self.layer
        index = (Ix.constant(d), layer.after(d), Ix.var(1), Ix.var(2))
        mask = self.mask_of(d)
        if mask is not None:
            new = call("select", mask, new, self.read(state, d, layer.before(d)))
        self.body.append(Step(state.name, (layer.steps, layer.batch, layer.hidden), index,
                              new, label=label))

    def read(self, state: TensorInfo, d: int, slot: Ix, j: Ix | None = None) -> Read:
        return Read(state.name, (Ix.constant(d), slot, Ix.var(1), Ix.var(2) if j is None else j))

    def gate(self, d: int, tensor: TensorInfo, k: int, j: Ix | None = None) -> Read:
        """Gate ``k``'s column for hidden unit j of ``tensor`` (XW or Q) at step i0."""
        j = Ix.var(2) if j is None else j
        column = Ix(j.terms, j.const + k * self.layer.hidden)
        return Read(tensor.name, (Ix.constant(d), self.layer.time(d), Ix.var(1), column))

    def _mask(self, lens):
        """Per direction, the bool expression "time i0 is inside b's sequence", or a
        function giving None when every sequence has the full length."""
        layer = self.layer
        if lens is None:
            return lambda d: None
        if tuple(lens.shape) != (layer.batch,):
            raise self.ctx.shape_error(f"sequence_lens {list(lens.shape)} must be "
                                       f"[{layer.batch}]")
        value = self.ctx.constant_value(lens)
        if value is not None and (value == layer.steps).all():
            return lambda d: None
        return lambda d: self._within(lens, layer.time(d), Ix.var(1))

    def _within(self, lens, t: Ix, b: Ix):
        """Whether time ``t`` lies inside batch entry ``b``'s sequence (bool)."""
        return call("lt", Read(self.ctx.positions(self.layer.steps).name, (t,)),
                    call("cast_int64", Read(lens.name, (b,))))

    def emit(self) -> tuple[TensorInfo, ...]:
        return self.ctx.recurrence(self.outs, start=self.start, steps=self.layer.steps,
                                   body=self.body, label=self.layer.kind.lower())

    def outputs(self, lens, *states: TensorInfo) -> tuple[TensorInfo, ...]:
        """Y (every time step of the hidden state ``states[0]``) and the last slot of
        each state (Y_h, Y_c), in the layout asked for."""
        layer, ctx = self.layer, self.ctx
        steps, batch, hidden, n = layer.steps, layer.batch, layer.hidden, layer.directions
        # Y[t, d, b, j] = H[d, t + 1 - d, b, j] (reverse alone: slot t)
        shift = 0 if layer.reverse == (True,) else 1
        t, d, b, j = (Ix.var(k) for k in range(4)) if layer.layout == 0 else \
            (Ix.var(1), Ix.var(2), Ix.var(0), Ix.var(3))
        slot = Ix(((t.terms[0][0], 1), (d.terms[0][0], -1)), 1) if shift else t
        y = Read(states[0].name, (d, slot, b, j))
        if lens is not None:
            y = call("select", self._within(lens, t, b), y, Const(0.0))
        y_shape = (steps, n, batch, hidden) if layer.layout == 0 else (batch, steps, n, hidden)
        results = [ctx.map(y_shape, y, label="y")]
        d, b, j = (Ix.var(k) for k in range(3)) if layer.layout == 0 else \
            (Ix.var(1), Ix.var(0), Ix.var(2))
        # the last state: forward in slot T, reverse in slot 0
        last = Ix(((d.terms[0][0], -steps),), steps) if n == 2 else \
            Ix.constant(0 if layer.reverse[0] else steps)
        last_shape = (n, batch, hidden) if layer.layout == 0 else (batch, n, hidden)
        for state in states:
            results.append(ctx.map(last_shape, Read(state.name, (d, last, b, j)),
                                   label="last_state"))
        return tuple(results)


def _recurrent_op(ctx, kind: str, gates: int, defaults: tuple[str, ...], args: dict):
    """The layer, the checked bias and the cell of an op called with ``args`` (its
    inputs and attributes by name)."""
    X = args["X"]
    layer = _layer(ctx, kind, gates, defaults, X, args["W"], args["R"], args)
    return layer, _checked_bias(ctx, layer, args["B"]), _Cell(ctx, layer, X,
                                                              args["sequence_lens"])


@onnx_op("RNN", 1, 7, 14, 22)
def RNN(ctx, X, W, R, B=None, sequence_lens=None, initial_h=None, *, activation_alpha=(),
        activation_beta=(), activations=(), clip=None, direction="forward", hidden_size=None,
        layout=0, output_sequence=0):
    """RNN: H_t = f(X_t W^T + H_(t-1) R^T + Wb + Rb) (module docstring)."""
    layer, B, cell = _recurrent_op(ctx, "RNN", 1, ("tanh",), locals())
    xw = _projection(ctx, layer, X, W, B, recurrent_bias=True)
    q = cell.state("rnn_q", layer.hidden, layer.steps)
    h = cell.state("rnn_h", layer.hidden, layer.steps + 1)
    cell.initial(h, initial_h, "h")
    for d in range(layer.directions):
        cell.product(d, q, 0, layer.hidden, lambda k, d=d: cell.read(h, d, layer.before(d), k),
                     R, 0, lambda g: cell.zero, "recurrent")
        new = layer.apply(d, 0, call("add", cell.gate(d, xw, 0), cell.gate(d, q, 0)))
        cell.update(d, h, new, "h")
    cell.emit()
    return cell.outputs(sequence_lens, h)


@onnx_op("GRU", 1, 3, 7, 14, 22)
def GRU(ctx, X, W, R, B=None, sequence_lens=None, initial_h=None, *, activation_alpha=(),
        activation_beta=(), activations=(), clip=None, direction="forward", hidden_size=None,
        layout=0, linear_before_reset=0, output_sequence=0):
    """GRU (gates z, r, h): z = f(..), r = f(..), h' = g(X Wh + (r * H) Rh + Rbh + Wbh)
    or with ``linear_before_reset`` g(X Wh + r * (H Rh + Rbh) + Wbh);
    H_t = (1 - z) * h' + z * H_(t-1)."""
    layer, B, cell = _recurrent_op(ctx, "GRU", 3, ("sigmoid", "tanh"), locals())
    hidden = layer.hidden
    xw = _projection(ctx, layer, X, W, B, recurrent_bias=not linear_before_reset)
    q = cell.state("gru_q", 3 * hidden, layer.steps)
    h = cell.state("gru_h", hidden, layer.steps + 1)
    reset = None if linear_before_reset else cell.state("gru_rh", hidden, layer.steps)
    cell.initial(h, initial_h, "h")
    for d in range(layer.directions):
        def previous(k, d=d):
            return cell.read(h, d, layer.before(d), k)

        def pre(k, d=d):
            return call("add", cell.gate(d, xw, k), cell.gate(d, q, k))

        if linear_before_reset:
            def bias(g, d=d):
                return Read(B.name, (Ix.constant(d), Ix(((2, 1),), 3 * hidden))) \
                    if B is not None else cell.zero
            cell.product(d, q, 0, 3 * hidden, previous, R, 0, bias, "recurrent")
            r = layer.apply(d, 0, pre(1))
            candidate = layer.apply(d, 1, call("add", cell.gate(d, xw, 2),
                                               call("mul", r, cell.gate(d, q, 2))))
        else:
            cell.product(d, q, 0, 2 * hidden, previous, R, 0, lambda g: cell.zero,
                         "recurrent_zr")
            r = layer.apply(d, 0, pre(1))
            time = (Ix.constant(d), layer.time(d), Ix.var(1), Ix.var(2))
            cell.body.append(Step(reset.name, (layer.steps, layer.batch, hidden), time,
                                  call("mul", r, previous(Ix.var(2))), label="reset"))

            def reset_state(k, d=d):
                return Read(reset.name, (Ix.constant(d), layer.time(d), Ix.var(1), k))
            cell.product(d, q, 2 * hidden, hidden, reset_state, R, 2 * hidden,
                         lambda g: cell.zero, "recurrent_h")
            candidate = layer.apply(d, 1, pre(2))
        z = layer.apply(d, 0, pre(0))
        new = call("add", call("mul", call("sub", 1.0, z), candidate),
                   call("mul", z, previous(Ix.var(2))))
        cell.update(d, h, new, "h")
    cell.emit()
    return cell.outputs(sequence_lens, h)


@onnx_op("LSTM", 1, 7, 14, 22)
def LSTM(ctx, X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, *,
         activation_alpha=(), activation_beta=(), activations=(), clip=None,
         direction="forward", hidden_size=None, layout=0, input_forget=0, output_sequence=0):
    """LSTM (gates i, o, f, c; peepholes P for i, o, f): i = f(.. + Pi*C_(t-1)),
    f = f(.. + Pf*C_(t-1)) (or 1 - i with ``input_forget``), c = g(..),
    C_t = f*C_(t-1) + i*c, o = f(.. + Po*C_t), H_t = o*h(C_t)."""
    layer, B, cell = _recurrent_op(ctx, "LSTM", 4, ("sigmoid", "tanh", "tanh"), locals())
    hidden = layer.hidden
    if P is not None and tuple(P.shape) != (layer.directions, 3 * hidden):
        raise ctx.shape_error(f"P {list(P.shape)} must be [{layer.directions}, {3 * hidden}]")
    xw = _projection(ctx, layer, X, W, B, recurrent_bias=True)
    q = cell.state("lstm_q", 4 * hidden, layer.steps)
    h = cell.state("lstm_h", hidden, layer.steps + 1)
    c = cell.state("lstm_c", hidden, layer.steps + 1)
    cell.initial(h, initial_h, "h")
    cell.initial(c, initial_c, "c")
    for d in range(layer.directions):
        def pre(k, d=d):
            return call("add", cell.gate(d, xw, k), cell.gate(d, q, k))

        def peephole(x, k, cells, d=d):
            if P is None:
                return x
            weight = Read(P.name, (Ix.constant(d), Ix(((2, 1),), k * hidden)))
            return call("add", x, call("mul", weight, cells))

        cell.product(d, q, 0, 4 * hidden, lambda k, d=d: cell.read(h, d, layer.before(d), k),
                     R, 0, lambda g: cell.zero, "recurrent")
        c_before = cell.read(c, d, layer.before(d))
        i = layer.apply(d, 0, peephole(pre(0), 0, c_before))
        f = call("sub", 1.0, i) if input_forget else \
            layer.apply(d, 0, peephole(pre(2), 2, c_before))
        candidate = layer.apply(d, 1, pre(3))
        cell.update(d, c, call("add", call("mul", f, c_before), call("mul", i, candidate)), "c")
        c_after = cell.read(c, d, layer.after(d))
        o = layer.apply(d, 0, peephole(pre(1), 1, c_after))
        cell.update(d, h, call("mul", o, layer.apply(d, 2, c_after, clipped=False)), "h")
    cell.emit()
    return cell.outputs(sequence_lens, h, c)
