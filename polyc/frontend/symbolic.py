"""Symbolic dims in the frontend: a :class:`Sym` stands for a dim kept symbolic.

A shape entry is an ``int`` or a ``Sym`` (``polyc.compile(model, symbolic=["batch"])``).
A ``Sym`` passes through ops that only carry the dim along (elementwise ops, the rows
of a MatMul, the batch of a Conv, reductions); anything that needs its value
(arithmetic, ``int()``, ordering) raises :class:`SymbolicDimError`, which lowering
turns into a ``ShapeError`` naming the node. Adding 0 and multiplying by 1 are the
identity, so products over a shape with a lone symbolic dim work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from polyc.errors import ShapeError


class SymbolicDimError(ShapeError):
    """An op needed the value of a symbolic dim."""

    def __init__(self, sym: Sym):
        super().__init__(f"needs the value of symbolic dim '{sym.name}'")
        self.sym = sym


@dataclass(frozen=True)
class Sym:
    name: str  # the isl parameter
    onnx_name: str = field(default="", compare=False)  # as the model names it, for messages

    @property
    def source(self) -> str:
        """The name a user passes to ``dims=`` / ``--dim``."""
        return self.onnx_name or self.name

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return self.name

    def _need(self, *_):
        raise SymbolicDimError(self)

    def __add__(self, other):
        return self if _is(other, 0) else self._need()

    def __mul__(self, other):
        return self if _is(other, 1) else self._need()

    __radd__, __rmul__ = __add__, __mul__
    __sub__ = __rsub__ = __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = _need
    __mod__ = __rmod__ = __neg__ = __pow__ = __rpow__ = _need
    __int__ = __index__ = __float__ = _need
    __lt__ = __le__ = __gt__ = __ge__ = _need


def _is(value, number: int) -> bool:
    return not isinstance(value, Sym) and type(value) is not bool and value == number


def is_symbolic(dim) -> bool:
    return isinstance(dim, Sym)


def dim(value):
    """A shape entry as an int, or the Sym it is."""
    return value if isinstance(value, Sym) else int(value)


def param_name(dim_param: str) -> str:
    """An isl parameter name for an ONNX dim name (``DynamicDimension.0`` ->
    ``DynamicDimension_0``)."""
    name = re.sub(r"\W", "_", dim_param)
    return name if re.match(r"[A-Za-z_]", name) else f"d_{name}"
