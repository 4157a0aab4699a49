"""Growing a random ONNX graph op by op (:func:`generate`), each op run by onnxruntime
as it is added so every value is known: guards keep the reference well conditioned
(see :mod:`polyc.fuzz.graphs`)."""

from __future__ import annotations

import random

import numpy as np

from polyc.fuzz import Config
from polyc.fuzz.graph_case import (
    MAX_ELEMENTS,
    ONNX_TYPES,
    GraphCase,
    Leaf,
    Literal,
    Node,
    leaf_values,
    model,
    run_onnxruntime,
)

# -- generating ----------------------------------------------------------------------------

class _Skip(Exception):
    """The op drawn does not fit the values there are; draw another."""


# ops that round nothing: their output is exact when their float inputs are
EXACT_OPS = frozenset({
    "Relu", "Abs", "Neg", "Max", "Min", "Clip", "MaxPool", "ReduceMax", "Reshape",
    "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Concat", "Slice", "Gather", "Expand",
    "Where", "Cast", "Less", "Greater", "Equal", "LessOrEqual", "GreaterOrEqual", "And",
    "Or", "Xor", "Not"})


class _Builder:
    """A graph being grown: its leaves and nodes, and onnxruntime's value of each."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.seed = seed
        self.leaves: list[Leaf] = []
        self.nodes: list[Node] = []
        self.values: dict[str, np.ndarray] = {}
        self.exact: set[str] = set()

    def leaf(self, shape, dtype="float32", low=-2.0, high=2.0, signed=False,
             weight=None) -> str:
        """A new graph input or weight (at random when ``weight`` is None)."""
        if weight is None:
            weight = self.rng.random() < 0.6
        count = sum(1 for x in self.leaves if x.weight == weight)
        leaf = Leaf(f"{'w' if weight else 'x'}{count}", tuple(int(d) for d in shape), dtype,
                    float(low), float(high), signed, weight)
        self.leaves.append(leaf)
        self.values[leaf.name] = leaf_values(leaf, self.seed)
        self.exact.add(leaf.name)
        return leaf.name

    def emit(self, op: str, inputs, **attrs) -> str:
        """Append a node, run it with onnxruntime and keep its value; :class:`_Skip` when
        onnxruntime refuses it or the value is too large or empty."""
        node = Node(op, tuple(inputs), f"t{len(self.nodes)}",
                    tuple(sorted((k, _plain(v)) for k, v in attrs.items())))
        names = [x for x in node.inputs if isinstance(x, str) and x]
        single = GraphCase(tuple(Leaf(n, self.values[n].shape, _dtype(self.values[n]))
                                 for n in dict.fromkeys(names)), (node,), (node.output,),
                           Config(), 0)
        try:
            proto = model(single)
            value = run_onnxruntime(proto, {n: self.values[n] for n in names})[node.output]
        except Exception as e:  # onnx's or onnxruntime's refusal: a generator limit
            raise _Skip(f"{op}: {e}") from None
        inferred = [d.dim_value for d in proto.graph.output[0].type.tensor_type.shape.dim]
        if list(value.shape) != inferred:  # onnx and onnxruntime disagree (ceil_mode)
            raise _Skip(f"{op}: onnxruntime gives {value.shape}, onnx infers {inferred}")
        if value.size == 0 or value.size > MAX_ELEMENTS:
            raise _Skip(f"{op}: {value.size} elements")
        self.nodes.append(node)
        self.values[node.output] = value
        if op in EXACT_OPS and all(n in self.exact for n in names):
            self.exact.add(node.output)
        return node.output

    def pick(self, dtypes=("float32",), exact=False, rank=(1, 2, 3, 4),
             scalar=False) -> str | None:
        """An existing value of one of ``dtypes`` and ``rank`` (rank 0 too with
        ``scalar``), the newest or one at random; None if there is none."""
        ranks = (0, *rank) if scalar else rank
        found = [n for n, v in self.values.items()
                 if _dtype(v) in dtypes and (not exact or n in self.exact) and v.ndim in ranks]
        if not found:
            return None
        produced = [n for n in found if n.startswith("t")]
        if produced and self.rng.random() < 0.6:
            return produced[-1]
        return self.rng.choice(found)

    def partner(self, name: str, dtypes=("float32",), exact=False, fresh=None, **leaf) -> str:
        """A second operand broadcasting with ``name``: an existing value whose shape
        broadcasts with it, or a new leaf of a shape that does (``fresh`` forces one)."""
        shape = self.values[name].shape
        if fresh is None:
            fresh = self.rng.random() < 0.5
        if not fresh:
            found = [n for n, v in self.values.items() if n != name and _dtype(v) in dtypes
                     and (not exact or n in self.exact) and _broadcasts(v.shape, shape)]
            if found:
                return self.rng.choice(found)
        return self.leaf(self.broadcast_shape(shape), dtypes[0], **leaf)

    def broadcast_shape(self, shape) -> tuple[int, ...]:
        """A shape broadcasting with ``shape``: some leading dims dropped, some dims 1,
        or a leading dim added or a 1 stretched."""
        rng = self.rng
        shape = list(shape)
        if shape and rng.random() < 0.3:
            shape = shape[rng.randint(0, len(shape)):]
        shape = [1 if rng.random() < 0.25 else d for d in shape]
        if rng.random() < 0.15:
            shape = [d if d != 1 else rng.randint(1, 4) for d in shape]
        if rng.random() < 0.1 and len(shape) < 4:
            shape = [rng.randint(2, 3)] + shape
        return tuple(shape)

    def magnitude(self, name: str) -> float:
        value = self.values[name]
        return float(np.abs(value).max()) if value.dtype != np.bool_ else 1.0

    def bounded(self, name: str, limit: float) -> str:
        """``name``, or ``Clip(name, -b, b)`` when its values exceed ``limit``."""
        if self.magnitude(name) <= limit:
            return name
        bound = self.rng.uniform(1.0, min(limit, 6.0))
        return self.emit("Clip", [name, _scalar(-bound), _scalar(bound)])

    def positive(self, name: str) -> str:
        """``name``, or ``Abs(name) + c`` (c in [0.5, 1.5]) unless its values are >= 0.1."""
        if self.values[name].min() >= 0.1:
            return name
        absolute = self.emit("Abs", [name])
        return self.emit("Add", [absolute, self.partner(absolute, fresh=True, low=0.5,
                                                        high=1.5, weight=True)])

    def rollback(self, leaves: int, nodes: int) -> None:
        """Forget the leaves and nodes added after there were ``leaves`` and ``nodes``."""
        for item in self.leaves[leaves:] + self.nodes[nodes:]:
            name = item.name if isinstance(item, Leaf) else item.output
            self.values.pop(name)
            self.exact.discard(name)
        del self.leaves[leaves:], self.nodes[nodes:]

    def case(self, config: Config) -> GraphCase:
        """The graph built so far: every unread value is an output, and some read ones."""
        read = {x for node in self.nodes for x in node.inputs if isinstance(x, str)}
        outputs = [n.output for n in self.nodes
                   if n.output not in read or self.rng.random() < 0.15]
        return GraphCase(tuple(self.leaves), tuple(self.nodes), tuple(outputs), config,
                         self.seed)


def _plain(value):
    """An attribute value as plain Python (tuples for lists), so a case has a repr."""
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def _dtype(value: np.ndarray) -> str:
    return value.dtype.name


def _scalar(value: float, dtype: str = "float32") -> Literal:
    return Literal(dtype, (), (float(value) if dtype == "float32" else int(value),))


def _ints(values) -> Literal:
    values = tuple(int(v) for v in values)
    return Literal("int64", (len(values),), values)


def _broadcasts(a, b) -> bool:
    """Whether shapes ``a`` and ``b`` broadcast to ``b`` (numpy rules)."""
    if len(a) > len(b):
        return False
    return all(x in (1, y) for x, y in zip(a[::-1], b[::-1], strict=False))


# -- the ops: each builder emits one op (after guards) or raises _Skip -----------------------

def _need(name):
    if name is None:
        raise _Skip("no operand")
    return name


def _unary(b: _Builder) -> None:
    """An activation or math function of a float value (guarded where it needs to be)."""
    op = b.rng.choice(["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "LeakyRelu", "HardSwish",
                       "Exp", "Log", "Sqrt", "Clip"])
    x = _need(b.pick(scalar=True))
    if op == "Exp":
        x = b.bounded(x, 8.0)
    elif op in ("Log", "Sqrt"):
        x = b.positive(x)
    if op == "LeakyRelu":
        b.emit(op, [x], alpha=b.rng.choice([0.01, 0.2, 1.5]))
    elif op == "Clip":
        low, high = _scalar(b.rng.uniform(-1.5, 0.0)), _scalar(b.rng.uniform(0.0, 1.5))
        bounds = b.rng.choice([[low, high], [low], ["", high], []])
        b.emit(op, [x, *bounds])
    else:
        b.emit(op, [x])


def _int_unary(b: _Builder) -> None:
    """Abs, Neg or Clip of an int64 value."""
    x = _need(b.pick(("int64",), scalar=True))
    op = b.rng.choice(["Abs", "Neg", "Clip"])
    bounds = [_scalar(b.rng.randint(-3, 0), "int64"), _scalar(b.rng.randint(0, 3), "int64")]
    b.emit(op, [x, *bounds] if op == "Clip" else [x])


def _binary(b: _Builder) -> None:
    """Add, Sub, Mul, Div, Max or Min, numpy broadcasting, float32 or int64."""
    dtype = "int64" if b.rng.random() < 0.2 and b.pick(("int64",)) else "float32"
    op = b.rng.choice(["Add", "Sub", "Mul", "Div", "Max", "Min"])
    x = _need(b.pick((dtype,), scalar=True))
    if op == "Div":  # a fresh divisor, far from zero
        low, high = (1, 4) if dtype == "int64" else (0.5, 2.0)
        y = b.partner(x, (dtype,), fresh=True, low=low, high=high, signed=True)
    else:
        y = b.partner(x, (dtype,), low=-8 if dtype == "int64" else -2.0,
                      high=8 if dtype == "int64" else 2.0)
    if op == "Mul" and b.magnitude(x) * b.magnitude(y) > (2.0 ** 30 if dtype == "int64"
                                                         else 1e4):
        raise _Skip("product too large")
    operands = [x, y]
    if op in ("Max", "Min") and b.rng.random() < 0.3:
        operands.append(b.partner(x, (dtype,)))
    b.emit(op, operands)


def _compare(b: _Builder) -> None:
    """A comparison of exact values (float32 or int64), giving bool."""
    x = _need(b.pick(("float32", "int64"), exact=True, scalar=True))
    dtype = _dtype(b.values[x])
    y = b.partner(x, (dtype,), exact=True, low=-8 if dtype == "int64" else -2.0,
                  high=8 if dtype == "int64" else 2.0)
    op = b.rng.choice(["Less", "Greater", "Equal", "LessOrEqual", "GreaterOrEqual"])
    b.emit(op, [x, y])


def _logic(b: _Builder) -> None:
    """And, Or, Xor or Not of bool values."""
    x = _need(b.pick(("bool",), scalar=True))
    op = b.rng.choice(["And", "Or", "Xor", "Not"])
    b.emit(op, [x] if op == "Not" else [x, b.partner(x, ("bool",))])


def _where(b: _Builder) -> None:
    """Where(bool condition, X, Y) with three-way broadcasting."""
    condition = _need(b.pick(("bool",), scalar=True))
    dtype = "int64" if b.rng.random() < 0.2 and b.pick(("int64",)) else "float32"
    x = b.partner(condition, (dtype,), low=-8 if dtype == "int64" else -2.0,
                  high=8 if dtype == "int64" else 2.0)
    y = b.partner(condition, (dtype,), low=-8 if dtype == "int64" else -2.0,
                  high=8 if dtype == "int64" else 2.0)
    b.emit("Where", [condition, x, y])


CASTS = {"float32": ("int64", "bool"), "int64": ("float32", "bool"),
         "bool": ("float32", "int64")}


def _cast(b: _Builder) -> None:
    """Cast among float32 (exact values only: truncation would amplify rounding), int64
    and bool."""
    x = _need(b.pick(("float32", "int64", "bool"), exact=True, scalar=True))
    target = b.rng.choice(CASTS[_dtype(b.values[x])])
    b.emit("Cast", [x], to=ONNX_TYPES[target])


def _matmul(b: _Builder) -> None:
    """MatMul of a float value and a weight (either side), batched or a vector."""
    rng = b.rng
    x = b.bounded(_need(b.pick()), 50.0)
    shape = b.values[x].shape
    n = rng.randint(1, 9)
    if rng.random() < 0.3 and len(shape) >= 2:  # weight @ x
        w = b.leaf((rng.randint(1, 6), shape[-2]), low=-1.0, high=1.0)
        b.emit("MatMul", [w, x])
        return
    k = shape[-1]
    batch = () if len(shape) < 3 or rng.random() < 0.6 else b.broadcast_shape(shape[:-2])
    w_shape = (k,) if rng.random() < 0.15 else (*batch, k, n)
    b.emit("MatMul", [x, b.leaf(w_shape, low=-1.0, high=1.0)])


def _gemm(b: _Builder) -> None:
    """Gemm of a 2-D float value (a Flatten first otherwise), transposes, alpha, beta, C."""
    rng = b.rng
    x = b.bounded(_need(b.pick()), 50.0)
    if b.values[x].ndim != 2:
        x = b.emit("Flatten", [x], axis=rng.randint(0, b.values[x].ndim))
    trans_a, trans_b = rng.randint(0, 1), rng.randint(0, 1)
    m, k = b.values[x].shape[::-1] if trans_a else b.values[x].shape
    n = rng.randint(1, 9)
    w = b.leaf((n, k) if trans_b else (k, n), low=-1.0, high=1.0)
    inputs = [x, w]
    c_shape = rng.choice([None, (n,), (1, n), (m, n), (m, 1), ()])
    if c_shape is not None:
        inputs.append(b.leaf(c_shape))
    attrs = {"transA": trans_a, "transB": trans_b}
    if rng.random() < 0.4:
        attrs.update(alpha=rng.choice([0.5, -1.5]), beta=rng.choice([0.5, 2.0]))
    b.emit("Gemm", inputs, **attrs)


def _window_attrs(rng: random.Random, spatial, kernel_max=3, dilations=True) -> dict:
    """Kernel, strides, pads (smaller than the kernel) and dilations of a window whose
    output has at least one element per dim."""
    dims = [_window_dim(rng, size, kernel_max, dilations) for size in spatial]
    attrs = {"kernel_shape": [d[0] for d in dims],
             "strides": [rng.choice([1, 1, 2, 3]) for _ in dims],
             "pads": [d[2] for d in dims] + [d[3] for d in dims]}
    if dilations:
        attrs["dilations"] = [d[1] for d in dims]
    return attrs


def _window_dim(rng: random.Random, size: int, kernel_max: int, dilations: bool):
    """(kernel, dilation, pad before, pad after) of one dim of ``size`` elements."""
    for _ in range(10):
        k = rng.randint(1, kernel_max)
        d = rng.choice([1, 1, 2]) if dilations else 1
        p0, p1 = rng.randint(0, k - 1), rng.randint(0, k - 1)
        if size + p0 + p1 >= d * (k - 1) + 1:
            return k, d, p0, p1
    return 1, 1, 0, 0


def _spatial_input(b: _Builder) -> str:
    """A float value of rank 3 or 4 (N, C, spatial..)."""
    return b.bounded(_need(b.pick(rank=(3, 4))), 100.0)


def _conv(b: _Builder) -> None:
    """Conv: groups (1, a divisor of C, depthwise), strides, pads or auto_pad,
    dilations, optional bias."""
    rng = b.rng
    x = _spatial_input(b)
    shape = b.values[x].shape
    channels = shape[1]
    group = rng.choice([1, 1, channels] + [g for g in range(2, channels) if channels % g == 0])
    out = group * rng.randint(1, 3 if group > 1 else 8)
    attrs = _window_attrs(rng, shape[2:])
    kernel = attrs.pop("kernel_shape")
    if rng.random() < 0.2:
        del attrs["pads"]
        attrs["auto_pad"] = rng.choice(["SAME_UPPER", "SAME_LOWER", "VALID"])
        if attrs["auto_pad"] != "VALID":
            attrs["dilations"] = [1] * len(kernel)
    w = b.leaf((out, channels // group, *kernel), low=-1.0, high=1.0, weight=True)
    inputs = [x, w] + ([b.leaf((out,), weight=True)] if rng.random() < 0.5 else [])
    b.emit("Conv", inputs, group=group, **attrs)


def _pool(b: _Builder) -> None:
    """MaxPool (dilations) or AveragePool (count_include_pad), ceil_mode; or a global
    average pool."""
    rng = b.rng
    x = _spatial_input(b)
    op = rng.choice(["MaxPool", "AveragePool", "GlobalAveragePool"])
    if op == "GlobalAveragePool":
        b.emit(op, [x])
        return
    attrs = _window_attrs(rng, b.values[x].shape[2:], dilations=op == "MaxPool")
    attrs["ceil_mode"] = int(rng.random() < 0.3)
    if op == "AveragePool":
        attrs["count_include_pad"] = rng.randint(0, 1)
    b.emit(op, [x], **attrs)


def _axes(rng: random.Random, rank: int, count: int | None = None) -> list[int]:
    """Distinct axes of a tensor of ``rank``, some written negative."""
    count = rng.randint(1, rank) if count is None else count
    return [a - rank if rng.random() < 0.3 else a
            for a in sorted(rng.sample(range(rank), count))]


def _reduce(b: _Builder) -> None:
    """ReduceSum (axes input), ReduceMean or ReduceMax (axes attribute), keepdims; the
    integer sum and max too."""
    rng = b.rng
    op = rng.choice(["ReduceSum", "ReduceMean", "ReduceMax"])
    dtypes = ("float32",) if op == "ReduceMean" else ("float32", "int64")
    x = _need(b.pick(dtypes))
    rank = b.values[x].ndim
    axes = None if rng.random() < 0.15 else _axes(rng, rank)
    attrs = {"keepdims": rng.randint(0, 1)}
    if op == "ReduceSum":
        b.emit(op, [x] + ([] if axes is None else [_ints(axes)]), **attrs)
    else:
        b.emit(op, [x], **attrs, **({} if axes is None else {"axes": axes}))


def _softmax(b: _Builder) -> None:
    """Softmax along a random axis (of values in [-30, 30])."""
    x = b.bounded(_need(b.pick()), 30.0)
    rank = b.values[x].ndim
    b.emit("Softmax", [x], axis=b.rng.randint(-rank, rank - 1))


def _layer_norm(b: _Builder) -> None:
    """LayerNormalization from a random axis on, with scale and optional bias, of rows
    whose standard deviation is at least 0.1 (else rounding noise is normalised up)."""
    rng = b.rng
    x = _need(b.pick())
    value = b.values[x]
    axis = rng.randint(-value.ndim, value.ndim - 1)
    rows = value.reshape(int(np.prod(value.shape[:axis % value.ndim])), -1)
    if rows.std(axis=1).min() < 0.1:
        raise _Skip("nearly constant rows")
    normalised = value.shape[axis % value.ndim:]
    inputs = [x, b.leaf(normalised, weight=True)]
    if rng.random() < 0.5:
        inputs.append(b.leaf(normalised, weight=True))
    b.emit("LayerNormalization", inputs, axis=axis, epsilon=rng.choice([1e-5, 1e-3]))


def _any_value(b: _Builder) -> str:
    """A value of any dtype (mostly float32)."""
    dtypes = ("float32", "int64", "bool") if b.rng.random() < 0.3 else ("float32",)
    return _need(b.pick(dtypes) or b.pick())


def _reshape(b: _Builder) -> None:
    """Reshape to a random factorisation of the size, with a -1 or a 0 sometimes."""
    rng = b.rng
    x = _any_value(b)
    shape = b.values[x].shape
    target = _factorisation(rng, int(np.prod(shape)), rng.randint(1, 4))
    if rng.random() < 0.3:
        target[rng.randrange(len(target))] = -1
    elif rng.random() < 0.3:
        same = [i for i, d in enumerate(target) if i < len(shape) and shape[i] == d]
        if same:
            target[rng.choice(same)] = 0
    b.emit("Reshape", [x, _ints(target)])


def _factorisation(rng: random.Random, size: int, rank: int) -> list[int]:
    """``rank`` dims whose product is ``size``."""
    dims = [1] * rank
    factor = 2
    while size > 1:
        while size % factor:
            factor += 1
        dims[rng.randrange(rank)] *= factor
        size //= factor
    return dims


def _transpose(b: _Builder) -> None:
    """Transpose by a random permutation (sometimes the default, reversed)."""
    x = _any_value(b)
    perm = list(range(b.values[x].ndim))
    b.rng.shuffle(perm)
    if b.rng.random() < 0.15:
        b.emit("Transpose", [x])
    else:
        b.emit("Transpose", [x], perm=perm)


def _flatten(b: _Builder) -> None:
    x = _any_value(b)
    rank = b.values[x].ndim
    b.emit("Flatten", [x], axis=b.rng.randint(-rank, rank))


def _squeeze(b: _Builder) -> None:
    """Squeeze some size-1 dims (or all of them, no axes input)."""
    x = _any_value(b)
    shape = b.values[x].shape
    ones = [i for i, d in enumerate(shape) if d == 1]
    if not ones or len(ones) == len(shape):
        raise _Skip("no size-1 dim to squeeze")
    if b.rng.random() < 0.3:
        b.emit("Squeeze", [x])
    else:
        axes = b.rng.sample(ones, b.rng.randint(1, len(ones)))
        b.emit("Squeeze", [x, _ints(a - len(shape) if b.rng.random() < 0.3 else a
                                    for a in axes)])


def _unsqueeze(b: _Builder) -> None:
    x = _any_value(b)
    rank = b.values[x].ndim
    if rank >= 4:
        raise _Skip("rank 4 already")
    count = b.rng.randint(1, 4 - rank)
    b.emit("Unsqueeze", [x, _ints(_axes(b.rng, rank + count, count))])


def _concat(b: _Builder) -> None:
    """Concat of 2 or 3 values of one dtype along an axis (new leaves or existing values
    of matching shape)."""
    rng = b.rng
    x = _any_value(b)
    shape, dtype = b.values[x].shape, _dtype(b.values[x])
    axis = rng.randrange(len(shape))
    parts = [x]
    for _ in range(rng.randint(1, 2)):
        matching = [n for n, v in b.values.items() if _dtype(v) == dtype and v.ndim == len(shape)
                    and all(v.shape[i] == d for i, d in enumerate(shape) if i != axis)]
        if matching and rng.random() < 0.5:
            parts.append(rng.choice(matching))
        else:
            other = list(shape)
            other[axis] = rng.randint(1, 5)
            parts.append(b.leaf(other, dtype, **_range(dtype)))
    b.emit("Concat", parts, axis=axis - len(shape) if rng.random() < 0.3 else axis)


def _range(dtype: str) -> dict:
    """Leaf value bounds of a dtype."""
    return {"low": -8, "high": 8} if dtype == "int64" else {}


def _slice(b: _Builder) -> None:
    """Slice 1 or 2 axes: starts and ends (negative, past the end), steps (negative)."""
    rng = b.rng
    x = _any_value(b)
    shape = b.values[x].shape
    axes = _axes(rng, len(shape), rng.randint(1, min(2, len(shape))))
    starts, ends, steps = [], [], []
    for axis in axes:
        size = shape[axis]
        step = rng.choice([1, 1, 2, -1, -2])
        start, end = sorted(rng.sample(range(size + 1), 2)) if size > 1 else (0, 1)
        if step < 0:
            start, end = end - 1, start - 1 if start > 0 else -size - 1
        if rng.random() < 0.3:
            start -= size if 0 <= start < size else 0
        if rng.random() < 0.2:
            end = (2 ** 62 if step > 0 else -(2 ** 62))
        starts.append(start), ends.append(end), steps.append(step)
    inputs = [x, _ints(starts), _ints(ends), _ints(axes)]
    if steps != [1] * len(steps) or rng.random() < 0.5:
        inputs.append(_ints(steps))
    b.emit("Slice", inputs)


def _gather(b: _Builder) -> None:
    """Gather along an axis by int64 indices (negative ones too), a weight or an input."""
    rng = b.rng
    x = _any_value(b)
    shape = b.values[x].shape
    axis = rng.randrange(len(shape))
    indices_shape = tuple(rng.randint(1, 4) for _ in range(rng.randint(0, 2)))
    indices = b.leaf(indices_shape, "int64", -shape[axis], shape[axis] - 1)
    b.emit("Gather", [x, indices], axis=axis)


def _expand(b: _Builder) -> None:
    """Expand: size-1 dims stretched, a leading dim added sometimes."""
    rng = b.rng
    x = _any_value(b)
    target = [rng.randint(1, 4) if d == 1 else rng.choice([d, d, 1])
              for d in b.values[x].shape]
    if rng.random() < 0.3 and len(target) < 4:
        target.insert(0, rng.randint(1, 3))
    b.emit("Expand", [x, _ints(target)])


# (builder, weight): how often each kind of op is drawn
BUILDERS = (
    (_unary, 12), (_int_unary, 1), (_binary, 12), (_compare, 4), (_logic, 2), (_where, 3),
    (_cast, 4), (_matmul, 4), (_gemm, 2), (_conv, 8), (_pool, 6), (_reduce, 4),
    (_softmax, 2), (_layer_norm, 2), (_reshape, 3), (_transpose, 3), (_flatten, 1),
    (_squeeze, 1), (_unsqueeze, 2), (_concat, 3), (_slice, 3), (_gather, 2), (_expand, 2),
)


def _first_input(b: _Builder) -> None:
    """The first graph input: float32, rank 1 to 4 (rank 4 most often, for convs), dims
    1 to 9 and now and then one up to 40."""
    rng = b.rng
    rank = rng.choice([1, 2, 3, 4, 4, 4])
    shape = [rng.randint(1, 9) for _ in range(rank)]
    if rank == 4:
        shape[0] = rng.choice([1, 1, 2])
    if rng.random() < 0.15:
        shape[rng.randrange(rank)] = rng.randint(10, 40)
    b.leaf(shape, weight=False)


def generate(seed: int) -> GraphCase:
    """A graph of 1 to 12 ops, a function of ``seed``: ops drawn by :data:`BUILDERS`'s
    weights, each run by onnxruntime as it is added (an op onnxruntime refuses or that
    does not fit is drawn again)."""
    b = _Builder(seed)
    config = Config.draw(b.rng)
    _first_input(b)
    target = b.rng.randint(1, 12)
    builders, weights = zip(*BUILDERS, strict=True)
    for _ in range(20 * target):
        if len(b.nodes) >= target:
            break
        builder = b.rng.choices(builders, weights)[0]
        leaves, nodes = len(b.leaves), len(b.nodes)
        try:
            builder(b)
        except _Skip:
            b.rollback(leaves, nodes)
    return b.case(config)

