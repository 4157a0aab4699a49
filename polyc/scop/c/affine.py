"""C integer expressions -> isl's affine text: array subscripts, loop bounds and ``if``
conditions over the loop iterators and the SCoP's parameters (int variables the SCoP
reads and never writes).

``+``, ``-``, products with a constant, ``/`` and ``%`` by a positive constant, and
``min``/``max`` written as ``a < b ? a : b`` are affine. C's ``/`` and ``%`` truncate
towards zero where isl's ``floor`` and ``mod`` round down; the two agree on a
non-negative dividend, which the domain must then guarantee (:attr:`Affine.dividends`
are checked against it).
"""

from __future__ import annotations

from collections.abc import Callable

from pycparser import c_ast

from polyc.errors import CSourceError
from polyc.scop.c.kernel import as_c, constant_int, where

_COMPARISONS = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "="}


class Affine:
    """Translates C expressions for one statement's context: ``iterators`` in scope;
    ``parameter(name, node)`` accepts an int variable as a parameter (raising when it
    is none) and records it."""

    def __init__(self, iterators: list[str], parameter: Callable[[str, c_ast.Node], None]):
        self.iterators = iterators
        self.parameter = parameter
        self.dividends: list[tuple[str, c_ast.Node]] = []  # (text, node) that must be >= 0

    def expr(self, node: c_ast.Node) -> str:
        value = constant_int(node)
        if value is not None:
            return str(value)
        if isinstance(node, c_ast.ID):
            if node.name not in self.iterators:
                self.parameter(node.name, node)
            return node.name
        if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+"):
            inner = self.expr(node.expr)
            return f"(-{inner})" if node.op == "-" else inner
        if isinstance(node, c_ast.Cast):
            return self.expr(node.expr)
        if isinstance(node, c_ast.BinaryOp):
            return self._binary(node)
        if isinstance(node, c_ast.TernaryOp):
            return self._min_max(node)
        raise CSourceError(f"{where(node)}: {as_c(node)} is not an affine expression of the loop "
                           f"iterators ({', '.join(self.iterators) or 'none'}) and int "
                           "parameters")

    def _binary(self, node: c_ast.BinaryOp) -> str:
        if node.op in ("+", "-"):
            return f"({self.expr(node.left)} {node.op} {self.expr(node.right)})"
        if node.op == "*":
            left, right = constant_int(node.left), constant_int(node.right)
            if left is None and right is None:
                raise CSourceError(f"{where(node)}: {as_c(node)} multiplies two variables: "
                                   "not affine")
            return f"({self.expr(node.left)} * {self.expr(node.right)})"
        if node.op in ("/", "%"):
            divisor = constant_int(node.right)
            if divisor is None or divisor <= 0:
                raise CSourceError(f"{where(node)}: {as_c(node)} divides by "
                                   f"{as_c(node.right)}: affine only by a positive constant")
            dividend = self.expr(node.left)
            self.dividends.append((dividend, node))
            return f"floor({dividend} / {divisor})" if node.op == "/" \
                else f"({dividend} mod {divisor})"
        raise CSourceError(f"{where(node)}: the operator {node.op} in {as_c(node)} is not affine")

    def _min_max(self, node: c_ast.TernaryOp) -> str:
        """``a < b ? a : b`` (min) and its variants, as isl's min and max."""
        cond = node.cond
        if isinstance(cond, c_ast.BinaryOp) and cond.op in ("<", "<=", ">", ">="):
            a, b = as_c(cond.left), as_c(cond.right)
            then, other = as_c(node.iftrue), as_c(node.iffalse)
            smaller_first = cond.op in ("<", "<=")
            if (then, other) == (a, b):
                fn = "min" if smaller_first else "max"
            elif (then, other) == (b, a):
                fn = "max" if smaller_first else "min"
            else:
                fn = None
            if fn is not None:
                return f"{fn}({self.expr(cond.left)}, {self.expr(cond.right)})"
        raise CSourceError(f"{where(node)}: the conditional expression {as_c(node)} is not affine "
                           "(only min and max, a < b ? a : b, are)")

    def condition(self, node: c_ast.Node) -> str:
        """An isl constraint for a C condition: comparisons, ``&&``, ``||``, ``!``."""
        if isinstance(node, c_ast.BinaryOp):
            if node.op in _COMPARISONS:
                return f"{self.expr(node.left)} {_COMPARISONS[node.op]} {self.expr(node.right)}"
            if node.op == "!=":
                a, b = self.expr(node.left), self.expr(node.right)
                return f"({a} < {b} or {a} > {b})"
            if node.op in ("&&", "||"):
                word = "and" if node.op == "&&" else "or"
                return f"({self.condition(node.left)} {word} {self.condition(node.right)})"
        if isinstance(node, c_ast.UnaryOp) and node.op == "!":
            return f"not ({self.condition(node.expr)})"
        value = constant_int(node)
        if value is not None:
            return "true" if value else "false"
        raise CSourceError(f"{where(node)}: the condition {as_c(node)} is not affine (a "
                           "comparison of affine expressions of the loop iterators and int "
                           "parameters, with &&, || and !)")

