"""The kernel in a C syntax tree: its function, the statements of its SCoP (between
``#pragma scop`` and ``#pragma endscop``, or the whole body of a named function), the
variables it may use, and the values a call in the same file passes to its int
parameters (PolyBench's ``main`` calls ``kernel_gemm(ni, nj, nk, ...)`` after ``int
ni = NI;``): the defaults of the SCoP's parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pycparser import c_ast, c_generator

from polyc.errors import CSourceError

# C type names -> polyc dtypes (char and short compute as int, as in C)
C_TYPES = {
    "double": "float64", "float": "float32", "long double": "float64",
    "char": "int8", "signed char": "int8", "unsigned char": "uint8",
    "short": "int16", "unsigned short": "uint16",
    "int": "int32", "signed": "int32", "unsigned": "uint32", "unsigned int": "uint32",
    "long": "int64", "long long": "int64", "unsigned long": "uint64",
    "unsigned long long": "uint64", "_Bool": "bool",
}


def as_c(node: c_ast.Node) -> str:
    """A syntax tree printed back as C, for messages and emitted code."""
    return c_generator.CGenerator().visit(node)


def where(node: c_ast.Node | None) -> str:
    """``file:line`` of a node, for messages."""
    coord = getattr(node, "coord", None)
    return f"{coord.file}:{coord.line}" if coord is not None else "?"


@dataclass
class Variable:
    """A variable the SCoP may use: ``shape`` () for a scalar; ``extents`` are ints, or
    C expressions (an int parameter, C99's ``double A[n][m]``) as syntax trees."""

    name: str
    dtype: str
    extents: tuple = ()
    parameter: int | None = None  # its position among the function's parameters
    decl: c_ast.Decl | None = None
    global_: bool = False  # declared at file scope

    @property
    def is_array(self) -> bool:
        return bool(self.extents)


@dataclass
class Kernel:
    function: c_ast.FuncDef
    items: list[c_ast.Node]
    variables: dict[str, Variable]
    call_values: dict[str, int] = field(default_factory=dict)
    file: str = ""
    typedefs: dict[str, str] = field(default_factory=dict)
    tree: c_ast.FileAST | None = None  # the whole preprocessed file

    @property
    def name(self) -> str:
        return self.function.decl.name

    @property
    def parameters(self) -> list[Variable]:
        """The function's parameters, in order."""
        return sorted((v for v in self.variables.values() if v.parameter is not None),
                      key=lambda v: v.parameter)


def find_kernel(tree: c_ast.FileAST, name: str, function: str | None = None) -> Kernel:
    """The kernel of a parsed file ``name``: the function ``function``, else the one
    function with a ``#pragma scop``."""
    functions = [ext for ext in tree.ext if isinstance(ext, c_ast.FuncDef)]
    if function is not None:
        chosen = [f for f in functions if f.decl.name == function]
        if not chosen:
            raise CSourceError(f"{name}: no function {function!r}; it defines "
                               f"{', '.join(f.decl.name for f in functions) or 'none'}")
        found = chosen[0]
    else:
        marked = [f for f in functions if _scop_block(f.body) is not None]
        if not marked:
            raise CSourceError(f"{name}: no '#pragma scop' in any function: mark the loops "
                               "to compile with #pragma scop / #pragma endscop, or name "
                               "their function")
        if len(marked) > 1:
            raise CSourceError(f"{name}: several functions have a '#pragma scop' "
                               f"({', '.join(f.decl.name for f in marked)}): name one")
        found = marked[0]
    items = _scop_items(found)
    types = typedefs(tree)
    variables = {**_globals(tree, types), **_locals(found, types)}
    return Kernel(found, items, variables, _call_values(tree, found), name, types, tree)


def _scop_block(body: c_ast.Compound) -> c_ast.Compound | None:
    """The block that holds the ``#pragma scop`` (searched through nested blocks)."""
    for item in body.block_items or ():
        if isinstance(item, c_ast.Pragma) and item.string.strip() == "scop":
            return body
        if isinstance(item, c_ast.Compound):
            inner = _scop_block(item)
            if inner is not None:
                return inner
    return None


def scop_span(function: c_ast.FuncDef) -> tuple[c_ast.Compound, int, int]:
    """The block holding the SCoP and the range ``[start, end)`` of its items that the
    SCoP takes, pragmas included (a function without pragmas: its items from the
    first that is not a declaration)."""
    block = _scop_block(function.body)
    if block is None:
        items = function.body.block_items or []
        start = next((k for k, i in enumerate(items) if not isinstance(i, c_ast.Decl)),
                     len(items))
        return function.body, start, len(items)
    items = block.block_items
    start = next(k for k, i in enumerate(items)
                 if isinstance(i, c_ast.Pragma) and i.string.strip() == "scop")
    end = next(k for k in range(start + 1, len(items))
               if isinstance(items[k], c_ast.Pragma) and items[k].string.strip() == "endscop")
    return block, start, end + 1


def _scop_items(function: c_ast.FuncDef) -> list[c_ast.Node]:
    block = _scop_block(function.body)
    if block is None:  # a named function without pragmas: its statements but declarations
        return [i for i in function.body.block_items or () if not isinstance(i, c_ast.Decl)]
    items = block.block_items
    start = next(k for k, i in enumerate(items)
                 if isinstance(i, c_ast.Pragma) and i.string.strip() == "scop")
    for k in range(start + 1, len(items)):
        if isinstance(items[k], c_ast.Pragma) and items[k].string.strip() == "endscop":
            return items[start + 1:k]
    raise CSourceError(f"{where(items[start])}: '#pragma scop' has no '#pragma endscop' "
                       "after it in the same block")


def c_type(node: c_ast.Node, typedefs: dict[str, str] | None = None) -> str | None:
    """The dtype of a declaration's base type (through array declarators and the
    ``typedefs`` of numeric types), or None."""
    while isinstance(node, (c_ast.ArrayDecl, c_ast.TypeDecl)):
        node = node.type
    if isinstance(node, c_ast.IdentifierType):
        if len(node.names) == 1 and typedefs and node.names[0] in typedefs:
            return typedefs[node.names[0]]
        names = [n for n in node.names if n not in ("signed",)] or ["int"]
        if names[-1] == "int" and len(names) > 1:
            names = names[:-1]
        return C_TYPES.get(" ".join(names), C_TYPES.get(" ".join(node.names)))
    return None


def typedefs(tree: c_ast.FileAST) -> dict[str, str]:
    """The file's typedefs of numeric types (``typedef char base;``), as dtypes."""
    found: dict[str, str] = {}
    for ext in tree.ext:
        if isinstance(ext, c_ast.Typedef) and isinstance(ext.type, c_ast.TypeDecl):
            dtype = c_type(ext.type, found)
            if dtype is not None:
                found[ext.name] = dtype
    return found


def _variable(decl: c_ast.Decl, position: int | None, types: dict[str, str]
              ) -> Variable | None:
    extents = []
    node = decl.type
    while isinstance(node, c_ast.ArrayDecl):
        extents.append(node.dim)
        node = node.type
    dtype = c_type(node, types)
    if dtype is None or not isinstance(node, c_ast.TypeDecl):
        return Variable(decl.name, "unsupported", tuple(extents), position, decl) \
            if decl.name else None
    return Variable(decl.name, dtype, tuple(extents), position, decl)


def _globals(tree: c_ast.FileAST, types: dict[str, str]) -> dict[str, Variable]:
    found = {}
    for ext in tree.ext:
        if isinstance(ext, c_ast.Decl) and not isinstance(ext.type, c_ast.FuncDecl):
            variable = _variable(ext, None, types)
            if variable is not None:
                variable.global_ = True
                found[variable.name] = variable
    return found


def _locals(function: c_ast.FuncDef, types: dict[str, str]) -> dict[str, Variable]:
    found = {}
    params = function.decl.type.args.params if function.decl.type.args else []
    for k, decl in enumerate(params):
        if isinstance(decl, c_ast.Decl):
            variable = _variable(decl, k, types)
            if variable is not None:
                found[variable.name] = variable

    def visit(block):
        for item in block.block_items or ():
            if isinstance(item, c_ast.Decl):
                variable = _variable(item, None, types)
                if variable is not None:
                    found[variable.name] = variable
            elif isinstance(item, c_ast.Compound):
                visit(item)

    visit(function.body)
    return found


def constant_int(node: c_ast.Node | None, values: dict[str, int] | None = None) -> int | None:
    """The value of an integer constant expression (``1000 + 0``), or None; IDs take
    ``values``."""
    if isinstance(node, c_ast.Constant) and node.type in ("int", "long", "unsigned int",
                                                          "long int", "unsigned long int",
                                                          "long long int", "char"):
        return int_literal(node.value)
    if isinstance(node, c_ast.ID) and values and node.name in values:
        return values[node.name]
    if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+"):
        value = constant_int(node.expr, values)
        return None if value is None else -value if node.op == "-" else value
    if isinstance(node, c_ast.Cast):
        return constant_int(node.expr, values)
    if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*", "/", "%"):
        a, b = constant_int(node.left, values), constant_int(node.right, values)
        if a is None or b is None or (node.op in "/%" and b == 0):
            return None
        if node.op == "/":
            return abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # C truncates
        if node.op == "%":
            return a - b * (abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1))
        return {"+": a + b, "-": a - b, "*": a * b}[node.op]
    return None


def int_literal(text: str) -> int | None:
    """The value of a C integer or character literal (``10``, ``0x1f``, ``017``, ``42UL``,
    ``'a'``), or None."""
    if text.startswith("'"):
        return ord(text[1]) if len(text) == 3 else None
    digits = text.rstrip("uUlL")
    try:
        if len(digits) > 1 and digits.startswith("0") and digits.isdigit():
            return int(digits, 8)
        return int(digits, 0)
    except ValueError:
        return None


def _call_values(tree: c_ast.FileAST, kernel: c_ast.FuncDef) -> dict[str, int]:
    """The int parameters' values at the first call of the kernel in the file whose
    arguments are constants or variables initialised with constants."""
    params = kernel.decl.type.args.params if kernel.decl.type.args else []
    for ext in tree.ext:
        if not isinstance(ext, c_ast.FuncDef) or ext is kernel:
            continue
        known: dict[str, int] = {}
        for call in _calls(ext.body, kernel.decl.name, known):
            values = {}
            for decl, arg in zip(params, call.args.exprs if call.args else ()):
                if isinstance(decl, c_ast.Decl):
                    value = constant_int(arg, known)
                    if value is not None:
                        values[decl.name] = value
            return values
    return {}


def _calls(node: c_ast.Node, name: str, known: dict[str, int]):
    """Calls of ``name`` below ``node`` in order; ``known`` collects on the way the
    int variables declared with a constant value."""
    if isinstance(node, c_ast.Decl) and node.init is not None:
        value = constant_int(node.init, known)
        if value is not None:
            known[node.name] = value
    if isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID) \
            and node.name.name == name:
        yield node
    for _, child in node.children():
        yield from _calls(child, name, known)
