"""C statement expressions -> typed core expressions over array references.

Each C operator becomes a core function (:data:`polyc.frontend.core.FUNCTIONS`) on
operands converted as C converts them (the usual arithmetic conversions: a double
operand makes the operation double, else a float one float, else int, long...), and
an assignment converts its value to the type of what it writes. C's ``/`` and ``%`` on
integers truncate towards zero, as the core ``div`` and ``fmod`` do.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from pycparser import c_ast

from polyc.errors import CSourceError
from polyc.frontend.core import FLOATS, Call, Const
from polyc.scop.c.kernel import as_c, c_type, int_literal, where

# operand types, narrowest first: an operation takes the wider of its two (C's usual
# arithmetic conversions, with char, short and bool promoted to int)
_RANK = ("int32", "uint32", "int64", "uint64", "float32", "float64")
_ARITHMETIC = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "fmod"}
_COMPARE = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq"}
# C library functions: (core function, the type the C function computes in)
_LIBRARY = {
    **{name: (name, "float64") for name in ("sqrt", "exp", "log", "sin", "cos", "tan",
                                              "tanh", "floor", "ceil")},
    **{f"{name}f": (name, "float32") for name in ("sqrt", "exp", "log", "sin", "cos", "tan",
                                                    "tanh", "floor", "ceil")},
    "pow": ("pow", "float64"), "powf": ("pow", "float32"),
    "fabs": ("abs", "float64"), "fabsf": ("abs", "float32"), "abs": ("abs", "int32"),
    "fmod": ("fmod", "float64"), "fmodf": ("fmod", "float32"),
}


class Values:
    """Lowers the expressions of one statement: ``reference(node)`` gives the
    reference (a :class:`polyc.scop.nest_expr.Ref`) and type of an array element or
    scalar variable, raising for what is not one."""

    def __init__(self, reference: Callable[[c_ast.Node], tuple[object, str]],
                 typedefs: dict[str, str] | None = None):
        self.reference = reference
        self.typedefs = typedefs or {}

    def value(self, node: c_ast.Node) -> tuple[object, str]:
        """``(core expression, dtype)`` of a C expression."""
        if isinstance(node, c_ast.Constant):
            return _constant(node)
        if isinstance(node, (c_ast.ID, c_ast.ArrayRef)):
            return self.reference(node)
        if isinstance(node, c_ast.UnaryOp):
            return self._unary(node)
        if isinstance(node, c_ast.BinaryOp):
            return self._binary(node)
        if isinstance(node, c_ast.TernaryOp):
            cond = self.boolean(node.cond)
            (a, ta), (b, tb) = self.value(node.iftrue), self.value(node.iffalse)
            dtype = common(ta, tb)
            return Call("select", (cond, convert(a, ta, dtype), convert(b, tb, dtype))), dtype
        if isinstance(node, c_ast.Cast):
            dtype = c_type(node.to_type.type, self.typedefs)
            if dtype is None:
                raise CSourceError(f"{where(node)}: cannot convert to {as_c(node.to_type)}")
            value, found = self.value(node.expr)
            return convert(value, found, dtype), dtype
        if isinstance(node, c_ast.FuncCall):
            return self._call(node)
        raise CSourceError(f"{where(node)}: {as_c(node)} is not an expression polyc compiles "
                           "(numbers, array elements, scalar variables, arithmetic, "
                           "comparisons, ?: and math functions)")

    def boolean(self, node: c_ast.Node):
        """A C condition on data as a bool core expression."""
        if isinstance(node, c_ast.BinaryOp) and node.op in ("&&", "||"):
            word = "and" if node.op == "&&" else "or"
            return Call(word, (self.boolean(node.left), self.boolean(node.right)))
        if isinstance(node, c_ast.UnaryOp) and node.op == "!":
            return Call("not", (self.boolean(node.expr),))
        if isinstance(node, c_ast.BinaryOp) and (node.op in _COMPARE or node.op == "!="):
            a, b = self._operands(node)
            if node.op == "!=":
                return Call("not", (Call("eq", (a, b)),))
            return Call(_COMPARE[node.op], (a, b))
        value, dtype = self.value(node)
        if dtype == "bool":
            return value
        return Call("not", (Call("eq", (value, convert(Const(0, "int32"), "int32", dtype))),))

    def _unary(self, node: c_ast.UnaryOp):
        if node.op == "!":
            return _as_int(Call("not", (self.boolean(node.expr),)))
        value, dtype = self.value(node.expr)
        dtype, value = _promoted(dtype), convert(value, dtype, _promoted(dtype))
        if node.op == "-":
            return Call("neg", (value,)), dtype
        if node.op == "+":
            return value, dtype
        raise CSourceError(f"{where(node)}: the operator {node.op} in {as_c(node)} is not "
                           "supported in a statement's expression")

    def _binary(self, node: c_ast.BinaryOp):
        if node.op in ("&&", "||") or node.op in _COMPARE or node.op == "!=":
            return _as_int(self.boolean(node))
        if node.op not in _ARITHMETIC:
            raise CSourceError(f"{where(node)}: the operator {node.op} in {as_c(node)} is not "
                               "supported in a statement's expression")
        (a, ta), (b, tb) = self.value(node.left), self.value(node.right)
        dtype = common(ta, tb)
        if node.op == "%" and dtype in FLOATS:
            raise CSourceError(f"{where(node)}: % on {dtype} values in {as_c(node)}")
        return Call(_ARITHMETIC[node.op], (convert(a, ta, dtype), convert(b, tb, dtype))), dtype

    def _operands(self, node: c_ast.BinaryOp) -> tuple[object, object]:
        """The two operands of a comparison, converted to their common type."""
        (a, ta), (b, tb) = self.value(node.left), self.value(node.right)
        dtype = common(ta, tb)
        return convert(a, ta, dtype), convert(b, tb, dtype)

    def _call(self, node: c_ast.FuncCall):
        name = node.name.name if isinstance(node.name, c_ast.ID) else None
        if name not in _LIBRARY:
            raise CSourceError(f"{where(node)}: the call {as_c(node)}: polyc compiles the math "
                               f"functions {', '.join(sorted(_LIBRARY))} in a SCoP")
        fn, dtype = _LIBRARY[name]
        args = node.args.exprs if node.args else []
        if len(args) != (2 if fn in ("pow", "fmod") else 1):
            raise CSourceError(f"{where(node)}: {name} takes "
                               f"{2 if fn in ('pow', 'fmod') else 1} argument(s)")
        values = [self.value(a) for a in args]
        return Call(fn, tuple(convert(v, t, dtype) for v, t in values)), dtype


def convert(value, found: str, dtype: str):
    """``value`` of type ``found`` as ``dtype`` (a constant converted now)."""
    if found == dtype:
        return value
    if isinstance(value, Const):
        return Const.of(np.array(value.value, dtype=found).astype(dtype).item(),
                        dtype)
    return Call(f"cast_{dtype}", (value,))


def _promoted(dtype: str) -> str:
    return dtype if dtype in _RANK else "int32"


def common(a: str, b: str) -> str:
    """The type C computes an operation on ``a`` and ``b`` values in."""
    a, b = _promoted(a), _promoted(b)
    return max(a, b, key=_RANK.index)


def _as_int(boolean) -> tuple[object, str]:
    """A C comparison's value: an int, 0 or 1."""
    return Call("cast_int32", (boolean,)), "int32"


def _constant(node: c_ast.Constant) -> tuple[Const, str]:
    text = node.value
    if node.type in ("float", "double", "long double"):
        single = text[-1] in "fF"
        value = float(text.rstrip("fFlL"))
        return (Const.of(value, "float32"), "float32") if single else \
            (Const.of(value, "float64"), "float64")
    value = int_literal(text)
    if value is None:
        raise CSourceError(f"{where(node)}: the literal {text} is not supported")
    if node.type == "char":
        return Const(value, "int32"), "int32"
    dtype = "int32" if -2**31 <= value < 2**31 and "l" not in text.lower() else "int64"
    return Const(value, dtype), dtype

