"""The core tensor IR: the small op set every ONNX op lowers to.

Only these records reach the polyhedral layer:

- :class:`Map`     ``out[i0, .., in-1] = expr`` for every index of ``out``'s shape;
- :class:`Reduce`  ``out[..] = init`` then, over a loop box ``extents``,
  ``out[out_index(i)] = combiner(out[out_index(i)], expr(i))``;
- :class:`View`    ``out`` is ``src`` seen with another shape (row-major reshape)
  or axis order (transpose); it has no storage and costs nothing;
- :class:`Recurrence` tensors written by statements (:class:`Step`) inside a loop over
  time, each reading what earlier steps wrote (LSTM, GRU, RNN).

Expressions (:class:`Read`, :class:`Const`, :class:`Call`) are trees over reads of
tensors at affine indices (:class:`Ix`) of the op's loop variables ``i0, i1, ...``;
a :class:`Lookup` reads at an index computed at run time along one axis (a gather).
Every tensor and every expression has a type among :data:`DTYPES` (``expr_dtype``).
All records are frozen; passes build new ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import ml_dtypes
import numpy as np

# The element types of tensors and expression values. bool is one byte in memory
# (numpy bool_); integer arithmetic wraps around on overflow (two's complement), unsigned
# types compare, divide and convert as unsigned. float16, bfloat16 and the float8 types
# are storage types: their values are float32 in registers, rounded to nearest-even
# when stored (a float8 past its largest value: NaN, or infinity for e5m2). The 4- and
# 2-bit integers take one byte per element in memory (ml_dtypes' arrays: the low bits)
# and wrap around at their width.
# the 8- and 4-bit floats (ml_dtypes' names; a byte each in memory): exponent bits,
# mantissa bits, bias, and how they end: "fn" no infinity, one NaN per sign; "ieee"
# infinities and NaNs; "fnuz" one NaN (the sign bit alone), no negative zero; "sat"
# neither infinity nor NaN: past the largest value it saturates, NaN becomes the zero of
# the other sign (ml_dtypes' float4_e2m1fn)
MINIFLOATS = MappingProxyType({"float8_e4m3fn": (4, 3, 7, "fn"),
                               "float8_e4m3fnuz": (4, 3, 8, "fnuz"),
                               "float8_e5m2": (5, 2, 15, "ieee"),
                               "float8_e5m2fnuz": (5, 2, 16, "fnuz"),
                               "float4_e2m1fn": (2, 1, 1, "sat")})
NARROW_FLOATS = ("float16", "bfloat16", *MINIFLOATS)
FLOATS = ("float32", "float64", *NARROW_FLOATS)
SUB_BYTE = ("int4", "int2", "uint4", "uint2")
SIGNED = ("int64", "int32", "int16", "int8", "int4", "int2")
UNSIGNED = ("uint64", "uint32", "uint16", "uint8", "uint4", "uint2")
INTEGER = SIGNED + UNSIGNED
NUMERIC = FLOATS + INTEGER
DTYPES = (*NUMERIC, "bool")

# Scalar functions a body expression may call, with their arity. Their operand and
# result types are in :func:`result_dtype`: comparisons give bool, ``select(c, a, b)``
# takes a bool ``c``, ``cast_<dtype>`` converts any value (see :data:`CASTS`).
FUNCTIONS = MappingProxyType({
    "neg": 1, "abs": 1, "exp": 1, "log": 1, "sqrt": 1, "tanh": 1,
    "sigmoid": 1, "relu": 1, "erf": 1,
    "sin": 1, "cos": 1, "tan": 1, "asin": 1, "acos": 1, "atan": 1, "sinh": 1, "cosh": 1,
    "asinh": 1, "acosh": 1, "atanh": 1,
    "floor": 1, "ceil": 1,
    "round": 1,  # to nearest, ties to even (numpy.round)
    "sign": 1,   # -1, 0 or 1; NaN stays NaN
    "add": 2, "sub": 2, "mul": 2,
    "div": 2,   # integers: truncated towards zero (C, onnxruntime); x / 0 is 0
    "mod": 2,   # the sign of the divisor (Python's %, numpy.mod); integers: x mod 0 is 0
    "fmod": 2,  # the sign of the dividend (C fmod; integers: x fmod 0 is 0)
    "pow": 2,  # numpy.power on float32
    "max": 2,  # NaN-propagating maximum (numpy.maximum); bool: or
    "min": 2,  # NaN-propagating minimum (numpy.minimum); bool: and
    "lt": 2, "le": 2, "gt": 2, "ge": 2, "eq": 2,  # bool; false when a NaN is compared
    "and": 2, "or": 2, "xor": 2, "not": 1,  # on bool; bitwise on integers
    # shifts by y bits (the same integer type); y negative or at least the width: 0,
    # or -1 for shr of a negative signed x (shr is arithmetic on signed types)
    "shl": 2, "shr": 2,
    "select": 3,
    # dot4(a0, a1, a2, a3, w): sum over r of a_r * (byte r of the int32 w, signed), in
    # int32; the a_r are uint8, or int8 read as a_r + 128 (the unsigned operand of the
    # CPU's byte dot product: AVX-512 VNNI's vpdpbusd)
    "dot4": 5,
    **{f"cast_{dtype}": 1 for dtype in DTYPES},
    **{f"bitcast_{dtype}": 1 for dtype in DTYPES},  # the same bits read as dtype
})

# How ``cast_<dtype>`` converts (as onnxruntime built for x86-64 does, where C++ leaves
# it undefined): float -> int32/int64 truncates towards zero, and NaN, infinities and
# values out of the target's range give its minimum (-2**31, -2**63); float -> 8- and
# 16-bit integers converts to int32 so and wraps; float -> uint32 (uint64) converts x
# below 2**31 (2**63) to int32 (int64) so and wraps, and from there x - 2**31 (2**63)
# with the top bit set; integer -> float rounds to nearest; integers to narrower ones
# wrap, to wider ones extend by the source's sign(edness); float64 -> float32 -> float16
# round to nearest; any -> bool is ``x != 0`` (NaN is true); bool -> any is 0 or 1.
CASTS = MappingProxyType({f"cast_{dtype}": dtype for dtype in DTYPES})
BITCASTS = MappingProxyType({f"bitcast_{dtype}": dtype for dtype in DTYPES})
# bits per element (bool: one byte, 0 or 1)
BIT_WIDTHS = MappingProxyType({
    "float64": 64, "int64": 64, "uint64": 64, "float32": 32, "int32": 32, "uint32": 32,
    "float16": 16, "bfloat16": 16, "int16": 16, "uint16": 16, "int8": 8, "uint8": 8,
    "bool": 8, "int4": 4, "uint4": 4, "float4_e2m1fn": 4, "int2": 2, "uint2": 2,
    **{name: 8 for name in MINIFLOATS if name.startswith("float8")}})
# float -> integer: the signed conversion each target goes through (see above)
CAST_VIA = MappingProxyType({"int8": "int32", "int16": "int32", "uint8": "int32",
                             "uint16": "int32", "uint32": "int32", "uint64": "int64",
                             "int32": "int32", "int64": "int64",
                             **{dtype: "int32" for dtype in SUB_BYTE}})

TRIGONOMETRIC = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh")
INVERSE_HYPERBOLIC = ("asinh", "acosh", "atanh")  # libm's, no LLVM intrinsic
_FLOAT_ONLY = frozenset({"exp", "log", "sqrt", "tanh", "sigmoid", "erf", "floor", "ceil",
                         "round", "pow", *TRIGONOMETRIC, *INVERSE_HYPERBOLIC})
_NUMERIC = frozenset({"neg", "abs", "relu", "sign", "add", "sub", "mul", "div", "fmod"})
_COMPARISONS = frozenset({"lt", "le", "gt", "ge"})
_LOGIC = frozenset({"and", "or", "xor", "not"})
_SHIFTS = frozenset({"shl", "shr"})


class DtypeError(TypeError):
    """An expression whose operand types the function does not take."""


def result_dtype(fn: str, operands: tuple[str, ...]) -> str:
    """The type of ``fn(operands..)`` given the operands' types; DtypeError if ill-typed.

    Operands of one function have one type (``select``: after its bool condition).
    """
    if fn in CASTS:
        return CASTS[fn]
    if fn in BITCASTS:
        target = BITCASTS[fn]
        if not {operands[0], target}.isdisjoint(NARROW_FLOATS) or \
                BIT_WIDTHS[operands[0]] != BIT_WIDTHS[target]:
            raise DtypeError(f"bitcast from {operands[0]} to {target}: polyc reinterprets "
                             "types of one width, not the narrow floats (float32 in "
                             "registers)")
        return target
    if fn == "dot4":
        if len(set(operands[:4])) != 1 or operands[0] not in ("uint8", "int8") \
                or operands[4] != "int32":
            raise DtypeError(f"dot4 takes four uint8 or int8 bytes and an int32 word, got "
                             f"{', '.join(operands)}")
        return "int32"
    values = operands[1:] if fn == "select" else operands
    if fn == "select" and operands[0] != "bool":
        raise DtypeError(f"select needs a bool condition, got {operands[0]}")
    if len(set(values)) != 1:
        raise DtypeError(f"{fn} needs its operands to have one dtype, got {', '.join(operands)}")
    dtype = values[0]
    allowed = (FLOATS if fn in _FLOAT_ONLY else NUMERIC if fn in _NUMERIC | _COMPARISONS
               else INTEGER if fn in _SHIFTS else ("bool", *INTEGER) if fn in _LOGIC
               else NUMERIC if fn == "mod" else DTYPES)
    if dtype not in allowed:
        raise DtypeError(f"{fn} does not take {dtype} operands (only {', '.join(allowed)})")
    return "bool" if fn in _COMPARISONS or fn == "eq" else dtype


# Combiners a Reduce may use, with the identity the frontend usually initialises to.
COMBINERS = MappingProxyType({"add": 0.0, "mul": 1.0, "max": float("-inf"),
                              "min": float("inf")})

# What a Read gives at an index outside its tensor (per dim, see Read).
OUTSIDE = ("error", "fill", "edge", "reflect")


def value_range(dtype: str) -> tuple[float, float] | tuple[int, int]:
    """The lowest and highest finite values of a numeric ``dtype`` (floats as float,
    integers as int; bfloat16's from ml_dtypes)."""
    if dtype in FLOATS:
        info = np.finfo(dtype) if dtype in ("float32", "float64", "float16") else \
            ml_dtypes.finfo(dtype)
        return float(info.min), float(info.max)
    info = _iinfo(dtype)
    return int(info.min), int(info.max)


def _iinfo(dtype: str):
    """numpy's iinfo, or ml_dtypes' for the 4- and 2-bit integers."""
    return ml_dtypes.iinfo(dtype) if dtype in SUB_BYTE else np.iinfo(dtype)


def identity(combiner: str, dtype: str = "float32") -> Const:
    """The identity of ``combiner`` on ``dtype`` (max/min on integers: their limits;
    on bool: false/true)."""
    if dtype in FLOATS:
        return Const(COMBINERS[combiner], dtype)
    if dtype == "bool":
        return Const(combiner in ("mul", "min"), "bool")
    info = _iinfo(dtype)
    value = {"add": 0, "mul": 1, "max": int(info.min), "min": int(info.max)}[combiner]
    return Const(value, dtype)


@dataclass(frozen=True)
class Ix:
    """An affine index ``sum(coef * i_var) + const`` over an op's loop variables."""

    terms: tuple[tuple[int, int], ...] = ()  # (loop variable position, coefficient)
    const: int = 0

    @staticmethod
    def var(position: int, coef: int = 1) -> Ix:
        return Ix(((position, coef),))

    @staticmethod
    def constant(value: int) -> Ix:
        return Ix((), value)

    def __str__(self) -> str:
        parts = []
        for var, coef in self.terms:
            parts.append(f"i{var}" if coef == 1 else f"{coef}*i{var}")
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts).replace("+ -", "- ")


def identity_index(rank: int) -> tuple[Ix, ...]:
    """``(i0, i1, .., i{rank-1})``."""
    return tuple(Ix.var(k) for k in range(rank))


@dataclass(frozen=True)
class Read:
    """``tensor[index]``. Where the index leaves the tensor, ``outside`` says what is read:

    - ``error``   never happens (the SCoP builder checks the index stays inside);
    - ``fill``    the value ``fill`` (constant padding, the halo of a convolution);
    - ``edge``    the nearest element (each index clamped into its dim);
    - ``reflect`` the element mirrored at the border, not repeating it (numpy's
      ``reflect`` mode; an index may leave its dim by at most ``size - 1``).
    """

    tensor: str
    index: tuple[Ix, ...]
    outside: str = "error"
    fill: float = 0.0

    def __post_init__(self):
        if self.outside not in OUTSIDE:
            raise ValueError(f"unknown outside mode {self.outside!r}")

    @property
    def bounded(self) -> bool:
        """Whether the index may leave the tensor."""
        return self.outside != "error"

    def __str__(self) -> str:
        text = f"{self.tensor}[{', '.join(map(str, self.index))}]"
        if self.outside == "fill":
            return f"{text} (outside: {self.fill!r})"
        return f"{text} (outside: {self.outside})" if self.bounded else text


@dataclass(frozen=True)
class Const:
    """A constant ``value`` of ``dtype`` (float32 by default)."""

    value: float | int | bool
    dtype: str = "float32"

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise ValueError(f"unknown dtype {self.dtype!r}")

    @staticmethod
    def of(value, dtype: str) -> Const:
        """``value`` (a number or numpy scalar) converted to ``dtype``."""
        convert = float if dtype in FLOATS else bool if dtype == "bool" else int
        return Const(convert(value), dtype)

    def __str__(self) -> str:
        if self.dtype == "float32":
            return repr(float(self.value))
        if self.dtype in FLOATS:
            return f"{self.dtype}({float(self.value)!r})"
        return f"{self.dtype}({self.value})"


@dataclass(frozen=True)
class Lookup:
    """``tensor[index]`` with the index along ``axis`` given at run time: the value of
    the integer expression ``at`` (a gather). ``index[axis]`` is unused.

    A negative value counts from the end (``v + size``, as ONNX Gather); a value still
    outside ``[0, size)`` is clamped into it, so a bad index reads a wrong element of
    the tensor, never memory outside it. ``tensor`` must have storage (not a View).
    """

    tensor: str
    index: tuple[Ix, ...]
    axis: int
    at: Expr

    def __str__(self) -> str:
        parts = [str(ix) for ix in self.index]
        parts[self.axis] = f"<{self.at}>"
        return f"{self.tensor}[{', '.join(parts)}]"


@dataclass(frozen=True)
class Call:
    fn: str
    args: tuple[Expr, ...]

    def __post_init__(self):
        arity = FUNCTIONS.get(self.fn)
        if arity is None:
            raise ValueError(f"unknown core function {self.fn!r}")
        if arity != len(self.args):
            raise ValueError(f"{self.fn} takes {arity} arguments, got {len(self.args)}")

    def __str__(self) -> str:
        return f"{self.fn}({', '.join(map(str, self.args))})"


Expr = Read | Const | Call | Lookup


def reads(expr: Expr) -> list[Read | Lookup]:
    """Every :class:`Read` and :class:`Lookup` in ``expr``, left to right (a Lookup
    before the reads of its ``at``)."""
    if isinstance(expr, Read):
        return [expr]
    if isinstance(expr, Lookup):
        return [expr, *reads(expr.at)]
    if isinstance(expr, Call):
        return [r for arg in expr.args for r in reads(arg)]
    return []


def expr_dtype(expr: Expr, tensor_dtype) -> str:
    """The type of ``expr``; ``tensor_dtype(name)`` gives a tensor's. DtypeError when a
    function gets operands it does not take, or a Lookup an index that is no integer."""
    if isinstance(expr, (Read, Lookup)):
        if isinstance(expr, Lookup) and expr_dtype(expr.at, tensor_dtype) not in INTEGER:
            raise DtypeError(f"the index of {expr} must be an integer")
        return tensor_dtype(expr.tensor)
    if isinstance(expr, Const):
        return expr.dtype
    return result_dtype(expr.fn, tuple(expr_dtype(a, tensor_dtype) for a in expr.args))


def typed_literals(expr: Expr, tensor_dtype) -> Expr:
    """``expr`` with its float32 constants retyped where they meet one other float type:
    a number an op's lowering writes (``alpha * x``, ``x < -inf``) is a literal that
    takes the float type of the data it is combined with (float64, float16)."""
    if isinstance(expr, Lookup):
        return Lookup(expr.tensor, expr.index, expr.axis, typed_literals(expr.at, tensor_dtype))
    if not isinstance(expr, Call):
        return expr
    args = tuple(typed_literals(a, tensor_dtype) for a in expr.args)
    if expr.fn not in CASTS:
        values = range(1 if expr.fn == "select" else 0, len(args))  # not select's condition
        literal = [k in values and isinstance(a, Const) and a.dtype == "float32"
                   for k, a in enumerate(args)]
        others = {expr_dtype(args[k], tensor_dtype) for k in values if not literal[k]}
        float_type = others.pop() if len(others) == 1 else None
        if any(literal) and float_type in FLOATS and float_type != "float32":
            args = tuple(Const(a.value, float_type) if lit else a
                         for a, lit in zip(args, literal))
    return Call(expr.fn, args)


def typed_literal(init: Expr, dtype: str) -> Expr:
    """A float32 constant ``init`` in the float type ``dtype`` (a Reduce's start over
    float64 or float16 data), else ``init``."""
    if isinstance(init, Const) and init.dtype == "float32" and dtype in FLOATS:
        return Const(init.value, dtype)
    return init


@dataclass(frozen=True)
class Map:
    """``out[i0, .., i{n-1}] = expr`` over ``shape`` (the shape of ``out``)."""

    out: str
    shape: tuple[int, ...]
    expr: Expr
    node: str = ""   # the ONNX node it came from, for messages
    label: str = "map"  # short name used in statement names (``S3_relu``)

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.tensor for r in reads(self.expr)))

    def __str__(self) -> str:
        idx = ", ".join(f"i{k}" for k in range(len(self.shape)))
        return f"{self.out}[{idx}] = {self.expr}    # {self.label} over {list(self.shape)}"


@dataclass(frozen=True)
class Reduce:
    """A reduction in two parts.

    ``out[i0, .., i{m-1}] = init`` over ``out_shape`` (``init`` indexes by those
    variables), then for every ``i`` in the box ``extents``:
    ``out[out_index(i)] = combiner(out[out_index(i)], expr(i))``.
    """

    out: str
    out_shape: tuple[int, ...]
    init: Expr
    extents: tuple[int, ...]
    out_index: tuple[Ix, ...]
    combiner: str
    expr: Expr
    node: str = ""
    label: str = "reduce"

    def __post_init__(self):
        if self.combiner not in COMBINERS:
            raise ValueError(f"unknown combiner {self.combiner!r}")
        if len(self.out_index) != len(self.out_shape):
            raise ValueError("out_index must index every dimension of out_shape")

    @property
    def inputs(self) -> tuple[str, ...]:
        names = [r.tensor for r in reads(self.init) + reads(self.expr)]
        return tuple(dict.fromkeys(names))

    def __str__(self) -> str:
        out_idx = ", ".join(map(str, self.out_index))
        init_idx = ", ".join(f"i{k}" for k in range(len(self.out_shape)))
        return (f"{self.out}[{init_idx}] = {self.init}; "
                f"{self.out}[{out_idx}] {self.combiner}= {self.expr}"
                f"    # {self.label} over {list(self.extents)}")


@dataclass(frozen=True)
class View:
    """``out`` is ``src`` seen through a reshape (row-major) or a transpose ``perm``.

    For a transpose, ``out.shape[k] == src.shape[perm[k]]`` (numpy.transpose), or
    smaller: the view then keeps indices from 0 up to its shape (a direct conv's
    output channels beyond the ONNX ones, :mod:`polyc.frontend.ops.conv`).
    """

    out: str
    src: str
    kind: str  # "reshape" | "transpose"
    perm: tuple[int, ...] = ()
    node: str = ""
    label: str = "view"

    def __post_init__(self):
        if self.kind not in ("reshape", "transpose"):
            raise ValueError(f"unknown view kind {self.kind!r}")

    @property
    def inputs(self) -> tuple[str, ...]:
        return (self.src,)

    def __str__(self) -> str:
        how = f"transpose{list(self.perm)}" if self.kind == "transpose" else "reshape"
        return f"{self.out} = {how}({self.src})"


@dataclass(frozen=True)
class Step:
    """One statement of a :class:`Recurrence`: ``out[out_index(i)] = expr(i)`` for every
    ``i`` of the box ``extents`` (with a ``combiner``:
    ``out[out_index(i)] = combiner(out[out_index(i)], expr(i))``)."""

    out: str
    extents: tuple[int, ...]
    out_index: tuple[Ix, ...]
    expr: Expr
    combiner: str | None = None
    label: str = "step"

    def __post_init__(self):
        if self.combiner is not None and self.combiner not in COMBINERS:
            raise ValueError(f"unknown combiner {self.combiner!r}")

    def __str__(self) -> str:
        index = ", ".join(map(str, self.out_index))
        assign = "=" if self.combiner is None else f"{self.combiner}="
        return (f"{self.out}[{index}] {assign} {self.expr}    "
                f"# {self.label} over {list(self.extents)}")


@dataclass(frozen=True)
class Recurrence:
    """A loop over time writing the tensors ``outs`` (of ``shapes``): the ``start``
    steps run once, then for ``t`` in ``range(steps)`` every ``body`` step runs in
    order, with its loop variable ``i0`` equal to ``t`` (its ``extents[0]`` is
    ``steps``).

    Steps read the ``outs`` where an earlier step (or an earlier ``t``) wrote them: the
    state of an LSTM has a dim indexed by ``t``, so every instance writes its own
    element and the dependences between time steps are exact. Every element read is
    written first; no step reads what it writes itself at another point of its box.
    Steps may also read ``views`` (reshapes or transposes of an out, or of an earlier
    view: a Scan body's Reshape, with the time dim in front).
    """

    outs: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    start: tuple[Step, ...]
    steps: int
    body: tuple[Step, ...]
    node: str = ""
    label: str = "recurrence"
    views: tuple[View, ...] = ()

    def __post_init__(self):
        if any(not step.extents or step.extents[0] != self.steps for step in self.body):
            raise ValueError("the first extent of every body step must be the steps")
        if any(step.out not in self.outs for step in self.start + self.body):
            raise ValueError("every step must write one of the recurrence's outs")
        seen = set(self.outs)
        for view in self.views:
            if view.src not in seen:
                raise ValueError(f"view '{view.out}' of '{view.src}', not an out or an "
                                 "earlier view of the recurrence")
            seen.add(view.out)

    @property
    def inputs(self) -> tuple[str, ...]:
        own = set(self.outs) | {v.out for v in self.views}
        names = [r.tensor for step in self.start + self.body for r in reads(step.expr)]
        return tuple(dict.fromkeys(n for n in names if n not in own))

    def __str__(self) -> str:
        outs = ", ".join(f"{out}{list(shape)}" for out, shape in zip(self.outs, self.shapes))
        lines = [f"{outs} = {self.label} over {self.steps} steps:"]
        lines += [f"      view  {view}" for view in self.views]
        lines += [f"      start {step}" for step in self.start]
        lines += [f"      step  {step}" for step in self.body]
        return "\n".join(lines)


Op = Map | Reduce | View | Recurrence


def written(op: Op) -> tuple[str, ...]:
    """The tensors ``op`` makes: its ``out``, or a Recurrence's ``outs`` and views."""
    if isinstance(op, Recurrence):
        return op.outs + tuple(v.out for v in op.views)
    return (op.out,)


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # an entry may be a symbolic dim (frontend.symbolic.Sym)
    dtype: str = "float32"  # one of DTYPES

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}{list(self.shape)}"


@dataclass(frozen=True)
class Graph:
    """A model in core ops: what the frontend hands to the SCoP builder.

    ``tensors`` describes every tensor name used (inputs, outputs, constants,
    intermediates), each of a dtype in :data:`DTYPES`; ``constants`` holds the values
    of weights (numpy arrays of those dtypes); ``positions`` names the int64 vectors
    whose element ``[i]`` is ``i`` (an ArgMax's positions along its axis): a read of one
    is the loop iterator's value, never a table in memory.
    Graph outputs are always written by a Map or Reduce (never a View, input or
    constant: the frontend inserts a copy).
    """

    name: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    tensors: Mapping[str, TensorInfo]
    constants: Mapping[str, np.ndarray]
    ops: tuple[Op, ...]
    opset: int
    model_hash: str = ""
    notes: tuple[str, ...] = field(default=())  # what clean-up did, for the report
    positions: frozenset[str] = frozenset()
    host: tuple[dict, ...] = ()  # ops run on the outputs by the runtime (runtime.host)
    results: tuple[str, ...] = ()  # with host ops: what a call returns, in order

    @property
    def params(self) -> tuple[str, ...]:
        """The symbolic dims (``Sym`` entries of the input shapes), in order."""
        names = [str(d) for t in self.inputs for d in t.shape if not isinstance(d, int)]
        return tuple(dict.fromkeys(names))

    def __str__(self) -> str:
        lines = [f"GRAPH {self.name} (opset {self.opset})"]
        if self.params:
            lines[0] += f" symbolic dims {', '.join(self.params)}"
        lines += [f"  input  {t}" for t in self.inputs]
        lines += [f"  output {t}" for t in self.outputs]
        for name, value in self.constants.items():
            lines.append(f"  const  {name}: {value.dtype}{list(value.shape)}")
        lines += [f"  positions {name}: {self.tensors[name]}" for name in sorted(self.positions)]
        lines += [f"  {op}" for op in self.ops]
        return "\n".join(lines)
