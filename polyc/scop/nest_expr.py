"""Statement expressions of :mod:`polyc.scop.nest`: array references and arithmetic.

``A["i - 1"] + A["i"] * 0.5`` builds a tree of core nodes (:class:`Call`,
:class:`Const`) over :class:`Ref` leaves; ``fn.exp(x)``, ``fn.max(x, y)``... call the
core functions of :data:`polyc.frontend.core.FUNCTIONS`. The nest lowers each ``Ref``
to an access relation and a ``Load`` (see :mod:`polyc.scop.model`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from polyc.errors import NestError
from polyc.frontend.core import FUNCTIONS, Call, Const


@dataclass(frozen=True)
class Ref:
    """``array[index...]``; each index is affine text over iterators and parameters."""

    array: NestArray = field(compare=False)
    index: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.array.name}[{', '.join(self.index)}]"


class Expr:
    """A statement expression; combine with ``+ - * /``, unary ``-``, ``abs`` and floats."""

    __slots__ = ("node",)

    def __init__(self, node):
        self.node = node

    def __add__(self, other):
        return _call("add", self, other)

    def __radd__(self, other):
        return _call("add", other, self)

    def __sub__(self, other):
        return _call("sub", self, other)

    def __rsub__(self, other):
        return _call("sub", other, self)

    def __mul__(self, other):
        return _call("mul", self, other)

    def __rmul__(self, other):
        return _call("mul", other, self)

    def __truediv__(self, other):
        return _call("div", self, other)

    def __rtruediv__(self, other):
        return _call("div", other, self)

    def __neg__(self):
        return _call("neg", self)

    def __abs__(self):
        return _call("abs", self)

    def __bool__(self):
        raise NestError("a statement expression has no truth value: use fn.max/fn.min, "
                        "not comparisons")

    def __str__(self) -> str:
        return str(self.node)


def as_node(value):
    """The core node of an expression operand: an ``Expr``'s node, or a ``Const``."""
    if isinstance(value, Expr):
        return value.node
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Const(float(value))
    raise NestError(f"cannot use {value!r} ({type(value).__name__}) in a statement "
                    "expression: use array references, numbers and nest.fn functions")


def _call(name: str, *args) -> Expr:
    return Expr(Call(name, tuple(as_node(arg) for arg in args)))


class Functions:
    """``fn.exp(x)``, ``fn.max(x, y)``, ...: the core functions, by name."""

    def __getattr__(self, name: str):
        if name not in FUNCTIONS:
            raise AttributeError(f"no function {name!r}; available: {', '.join(FUNCTIONS)}")
        arity = FUNCTIONS[name]

        def call(*args) -> Expr:
            if len(args) != arity:
                raise NestError(f"fn.{name} takes {arity} argument(s), got {len(args)}")
            return _call(name, *args)

        call.__name__ = name
        return call

    def __dir__(self):
        return list(FUNCTIONS)


fn = Functions()


class NestArray:
    """An array declared by :meth:`LoopNest.array`; ``A["i", "j + 1"]`` references it."""

    def __init__(self, nest, name: str, shape: tuple[int | str, ...], dtype: str = "float32"):
        self.nest, self.name, self.shape, self.dtype = nest, name, shape, dtype
        self.scratch = False  # its value after the nest is not wanted (LoopNest.array)

    def __getitem__(self, index) -> Expr:
        indices = index if isinstance(index, tuple) else (index,)
        texts = tuple(_index_text(self.name, ix) for ix in indices)
        if len(texts) != len(self.shape):
            raise NestError(f"array {self.name} has {len(self.shape)} dimension(s) but is "
                            f"indexed with {len(texts)}: {self.name}[{', '.join(texts)}]")
        return Expr(Ref(self, texts))

    def __repr__(self) -> str:
        return f"<array {self.name}: {self.dtype}[{', '.join(map(str, self.shape))}]>"


def _index_text(array: str, index) -> str:
    if isinstance(index, int) and not isinstance(index, bool):
        return str(index)
    if isinstance(index, str) and index.strip():
        return index.strip()
    raise NestError(f"index {index!r} of {array} must be affine text like 'i - 1' or an int")
