"""The core tensor IR: the small op set every ONNX op lowers to.

Only these records reach the polyhedral layer:

- :class:`Map`     ``out[i0, .., in-1] = expr`` for every index of ``out``'s shape;
- :class:`Reduce`  ``out[..] = init`` then, over a loop box ``extents``,
  ``out[out_index(i)] = combiner(out[out_index(i)], expr(i))``;
- :class:`View`    ``out`` is ``src`` seen with another shape (row-major reshape)
  or axis order (transpose); it has no storage and costs nothing.

Expressions (:class:`Read`, :class:`Const`, :class:`Call`) are trees over reads of
tensors at affine indices (:class:`Ix`) of the op's loop variables ``i0, i1, ...``.
All records are frozen; passes build new ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

# Scalar functions a body expression may call, with their arity.
# Truth values are float32 too: a comparison gives 1.0 or 0.0, and ``select(c, a, b)``
# picks ``a`` where ``c != 0`` (so NaN counts as true, as in C).
FUNCTIONS = MappingProxyType({
    "neg": 1, "abs": 1, "exp": 1, "log": 1, "sqrt": 1, "tanh": 1,
    "sigmoid": 1, "relu": 1, "erf": 1,
    "floor": 1, "ceil": 1,
    "round": 1,  # to nearest, ties to even (numpy.round)
    "sign": 1,   # -1, 0 or 1; NaN stays NaN
    "add": 2, "sub": 2, "mul": 2, "div": 2,
    "pow": 2,  # numpy.power on float32
    "max": 2,  # NaN-propagating maximum (numpy.maximum)
    "min": 2,  # NaN-propagating minimum (numpy.minimum)
    "lt": 2, "le": 2, "gt": 2, "ge": 2, "eq": 2,  # 1.0 where true, else 0.0
    "select": 3,
})

# Combiners a Reduce may use, with the identity the frontend usually initialises to.
COMBINERS = MappingProxyType({"add": 0.0, "mul": 1.0, "max": float("-inf"),
                              "min": float("inf")})

# What a Read gives at an index outside its tensor (per dim, see Read).
OUTSIDE = ("error", "fill", "edge", "reflect")


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
    value: float

    def __str__(self) -> str:
        return repr(float(self.value))


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


Expr = Read | Const | Call


def reads(expr: Expr) -> list[Read]:
    """Every :class:`Read` in ``expr``, left to right."""
    if isinstance(expr, Read):
        return [expr]
    if isinstance(expr, Call):
        return [r for arg in expr.args for r in reads(arg)]
    return []


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

    For a transpose, ``out.shape[k] == src.shape[perm[k]]`` (numpy.transpose).
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


Op = Map | Reduce | View


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}{list(self.shape)}"


@dataclass(frozen=True)
class Graph:
    """A model in core ops: what the frontend hands to the SCoP builder.

    ``tensors`` describes every tensor name used (inputs, outputs, constants,
    intermediates); ``constants`` holds the values of weights (float32 arrays).
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

    def __str__(self) -> str:
        lines = [f"GRAPH {self.name} (opset {self.opset})"]
        lines += [f"  input  {t}" for t in self.inputs]
        lines += [f"  output {t}" for t in self.outputs]
        for name, value in self.constants.items():
            lines.append(f"  const  {name}: {value.dtype}{list(value.shape)}")
        lines += [f"  {op}" for op in self.ops]
        return "\n".join(lines)
