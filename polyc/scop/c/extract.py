"""A kernel's SCoP statements -> a :class:`polyc.scop.nest.LoopNest`.

The subset read, as Pluto's polycc and clan read it: ``for`` loops whose iterator
starts at an affine expression and steps by a constant, bounded by affine conditions;
``if`` with affine conditions (and ``else``); assignments (``=``, ``+=``, ``-=``,
``*=``, ``/=``, ``++``, ``--``) to array elements or scalar variables, of expressions
over array elements, scalars, numbers and math functions (:mod:`polyc.scop.c.values`).
Each assignment becomes a statement whose domain is its loops' iterators under the
conditions around it, and whose original time is the 2d+1 vector of its position in
each block and its loops' iterators (negated for a loop that counts down). Anything
else is an error naming its line.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import islpy as isl
from pycparser import c_ast

from polyc.errors import CSourceError
from polyc.frontend.core import INTEGER, Call, Const
from polyc.islutil import read_with_params
from polyc.scop.c.affine import Affine
from polyc.scop.c.kernel import Kernel, Variable, as_c, constant_int, where
from polyc.scop.c.values import Values, common, convert
from polyc.scop.nest import LoopNest
from polyc.scop.nest_expr import Expr, Ref

_UPDATES = {"+=": "add", "-=": "sub", "*=": "mul", "/=": "div"}


@dataclass(frozen=True)
class Use:
    """An array element (``index``: affine texts) or a scalar (``index`` ()), before
    the nest's arrays exist."""

    name: str
    index: tuple[str, ...]


@dataclass(frozen=True)
class ParamValue:
    """The value of an int parameter in a statement's expression: a number once the
    parameters have values."""

    name: str


@dataclass
class CStatement:
    name: str
    iterators: tuple[str, ...]
    constraints: tuple[str, ...]
    times: tuple[str, ...]  # the 2d+1 vector, before padding
    write: Use
    value: object  # core expression over Use leaves
    text: str  # the C assignment, for messages and emitted C
    node: c_ast.Node
    dividends: tuple[tuple[str, c_ast.Node], ...] = ()

    def macro_text(self) -> str:
        """The C text with each iterator parenthesised (``C[(i)][(j)]``): the body of a
        macro whose arguments are expressions."""
        node = copy.deepcopy(self.node)
        for child in _ids(node):
            if child.name in self.iterators:
                child.name = f"({child.name})"
        return as_c(node)

    @property
    def domain(self) -> str:
        space = f"[{', '.join(self.iterators)}]"
        return f"{{ {space} : {' and '.join(self.constraints)} }}" if self.constraints \
            else f"{{ {space} }}"

    @property
    def schedule(self) -> str:
        return f"{{ [{', '.join(self.iterators)}] -> [{', '.join(self.times)}] }}"


@dataclass(frozen=True)
class _Loop:
    iterator: str
    constraints: tuple[str, ...]
    time: str  # the iterator, or its negation


class Extraction:
    """Walks the SCoP's statements (:meth:`run`), then builds the nest (:meth:`nest`)."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.written = set().union(*(_written(item) for item in kernel.items))
        # (anywhere in the function: a local set there is not its initial value)
        self.written_in_function = _written(kernel.function.body)
        # (read or written outside the SCoP: a local that is not is scratch to polyc)
        inside = {id(item) for item in kernel.items}
        self.outside = {node.name for node in _ids(kernel.function.body, skip=inside)}
        self.params: set[str] = set()
        self.used: dict[str, Variable] = {}
        self.statements: list[CStatement] = []

    def run(self) -> Extraction:
        self._block(self.kernel.items, (), (), (), 0)
        written = {s.write.name for s in self.statements}
        for name in sorted(self.params & written):
            first = next(s for s in self.statements if s.write.name == name)
            raise CSourceError(f"{where(first.node)}: {first.text} writes {name}, which loop "
                               "bounds or subscripts use: it must stay constant in the SCoP")
        if not self.statements:
            raise CSourceError(f"{self.kernel.file}: the SCoP of {self.kernel.name} has no "
                               "assignment")
        return self

    # -- the walk ------------------------------------------------------------------

    def _block(self, items, loops: tuple[_Loop, ...], conds: tuple[str, ...],
               prefix: tuple[str, ...], position: int) -> int:
        for item in items:
            position = self._item(item, loops, conds, prefix, position)
        return position

    def _item(self, item, loops, conds, prefix, position: int) -> int:
        """Walks ``item`` as the ``position``-th child of its block; the next position."""
        if isinstance(item, c_ast.Compound):
            return self._block(item.block_items or (), loops, conds, prefix, position)
        if isinstance(item, c_ast.For):
            loop = self._loop(item, loops)
            body = item.stmt.block_items or () if isinstance(item.stmt, c_ast.Compound) \
                else (item.stmt,)
            self._block(body, (*loops, loop), conds, (*prefix, str(position), loop.time), 0)
            return position + 1
        if isinstance(item, c_ast.If):
            condition = self._affine(loops).condition(item.cond)
            position = self._item(item.iftrue, loops, (*conds, condition), prefix, position)
            if item.iffalse is not None:
                position = self._item(item.iffalse, loops, (*conds, f"not ({condition})"),
                                      prefix, position)
            return position
        if isinstance(item, c_ast.Assignment) and isinstance(item.rvalue, c_ast.Assignment):
            # a = b = value: b = value, then a = b
            position = self._item(item.rvalue, loops, conds, prefix, position)
            then = c_ast.Assignment(item.op, item.lvalue, item.rvalue.lvalue, item.coord)
            return self._item(then, loops, conds, prefix, position)
        if isinstance(item, (c_ast.Assignment, c_ast.UnaryOp)):
            self._statement(item, loops, conds, (*prefix, str(position)))
            return position + 1
        if isinstance(item, (c_ast.EmptyStatement, c_ast.Pragma)):
            return position
        raise CSourceError(f"{where(item)}: {_kind(item)} is outside the SCoP subset polyc "
                           "reads: for loops with affine bounds, if with affine conditions, "
                           "and assignments to array elements and scalar variables")

    def _affine(self, loops) -> Affine:
        return Affine([loop.iterator for loop in loops], self._parameter)

    def _parameter(self, name: str, node: c_ast.Node) -> None:
        variable = self.kernel.variables.get(name)
        if variable is None:
            raise CSourceError(f"{where(node)}: {name} is not declared")
        if variable.is_array or variable.dtype not in INTEGER:
            raise CSourceError(f"{where(node)}: {name} ({_described(variable)}) is used in a "
                               "loop bound or subscript: only loop iterators and int "
                               "parameters are")
        self.params.add(name)

    def _loop(self, node: c_ast.For, outer: tuple[_Loop, ...]) -> _Loop:
        iterator, start = _start(node)
        names = [loop.iterator for loop in outer]
        if iterator in names:
            raise CSourceError(f"{where(node)}: the loop reuses the iterator {iterator} of a "
                               "loop around it")
        variable = self.kernel.variables.get(iterator)
        inline = isinstance(node.init, c_ast.DeclList)
        if not inline and (variable is None or variable.is_array
                           or variable.dtype not in INTEGER):
            raise CSourceError(f"{where(node)}: the loop iterator {iterator} must be an int "
                               "variable")
        step = _step(node, iterator)
        if node.cond is None:
            raise CSourceError(f"{where(node)}: the loop over {iterator} has no condition")
        _no_writes(node.stmt, iterator)
        affine = Affine([*names, iterator], self._parameter)
        first = self._affine(outer).expr(start)
        bound = affine.condition(node.cond)
        constraints = [f"{iterator} >= {first}" if step > 0 else f"{iterator} <= {first}",
                       bound]
        if abs(step) > 1:
            constraints.append(f"({iterator} - {first}) mod {abs(step)} = 0")
        return _Loop(iterator, tuple(constraints), iterator if step > 0 else f"-{iterator}")

    def _statement(self, node, loops, conds, times) -> None:
        iterators = tuple(loop.iterator for loop in loops)
        affine = Affine(list(iterators), self._parameter)
        values = Values(lambda ref: self._reference(ref, affine), self.kernel.typedefs)
        if isinstance(node, c_ast.UnaryOp):
            if node.op not in ("p++", "++", "p--", "--"):
                raise CSourceError(f"{where(node)}: {as_c(node)} is not an assignment")
            target_node, op, operand = node.expr, "+=" if "++" in node.op else "-=", None
        else:
            target_node, op, operand = node.lvalue, node.op, node.rvalue
        target, dtype = self._reference(target_node, affine)
        if operand is None:
            value, found = Const(1, "int32"), "int32"
        else:
            value, found = values.value(operand)
        if op != "=":
            if op not in _UPDATES:
                raise CSourceError(f"{where(node)}: the assignment {op} in {as_c(node)} is not "
                                   "supported (=, +=, -=, *=, /=)")
            update = c_ast.BinaryOp(op[0], target_node, c_ast.Constant("int", "0"))
            value, found = _updated(values, update, value, found)
        constraints = tuple(c for loop in loops for c in loop.constraints) + conds
        name = self._name()
        self.statements.append(CStatement(name, iterators, constraints, times, target,
                                          convert(value, found, dtype), as_c(node), node,
                                          tuple(affine.dividends)))

    def _name(self) -> str:
        k = len(self.statements)
        name = f"S{k}"
        while name in self.kernel.variables:
            name += "_"
        return name

    def _reference(self, node: c_ast.Node, affine: Affine) -> tuple[Use, str]:
        """The :class:`Use` and type of an array element or scalar variable."""
        subscripts = []
        base = node
        while isinstance(base, c_ast.ArrayRef):
            subscripts.insert(0, base.subscript)
            base = base.name
        if not isinstance(base, c_ast.ID):
            raise CSourceError(f"{where(node)}: {as_c(node)} is not an array element or a "
                               "variable")
        name = base.name
        variable = self.kernel.variables.get(name)
        if variable is None:
            raise CSourceError(f"{where(node)}: {name} is not declared")
        if name in affine.iterators:
            raise CSourceError(f"{where(node)}: the value of the loop iterator {name} in a "
                               "statement's expression is not supported")
        if not subscripts and not variable.is_array and variable.dtype in INTEGER \
                and name not in self.written:
            self._parameter(name, node)  # an int the SCoP reads only: a parameter's value
            return ParamValue(name), "int32"
        if variable.dtype == "unsupported":
            raise CSourceError(f"{where(node)}: {name} is a pointer or of a type polyc does "
                               "not compile (arrays need their extents: double A[N][M])")
        if not subscripts and variable.parameter is None and variable.decl is not None \
                and variable.decl.init is not None and not variable.global_ \
                and name not in self.written_in_function:
            values = Values(lambda ref: self._reference(ref, affine), self.kernel.typedefs)
            value, dtype = values.value(variable.decl.init)  # set once before the SCoP
            if isinstance(value, Const):
                return convert(value, dtype, variable.dtype), variable.dtype
        if len(subscripts) != len(variable.extents):
            raise CSourceError(f"{where(node)}: {as_c(node)} has {len(subscripts)} subscript(s), "
                               f"{name} has {len(variable.extents)} dimension(s)")
        self.used[name] = variable
        index = tuple(affine.expr(s) for s in subscripts)
        return Use(name, index), variable.dtype

    # -- the nest ------------------------------------------------------------------

    def nest(self, values: dict[str, int] | None = None) -> LoopNest:
        """The nest; ``values`` (the parameters') are needed when a statement's
        expression reads a parameter, which becomes a number."""
        shapes = {name: self._shape(v) for name, v in self.used.items()}
        params = sorted(self.params | {e for shape in shapes.values() for e in shape
                                       if isinstance(e, str)})
        nest = LoopNest(self.kernel.name, params)
        arrays = {name: nest.array(name, shapes[name], v.dtype, scratch=self._scratch(v))
                  for name, v in self.used.items()}
        for s in self.statements:
            self._check_dividends(nest, s)
            nest.statement(s.name, s.domain, write=Expr(_ref(arrays, s.write)),
                           expr=Expr(_refs(arrays, s.value, values, s)), schedule=s.schedule)
        return nest

    def _scratch(self, variable: Variable) -> bool:
        """Whether the variable is a scalar local to the function that nothing outside
        the SCoP reads or writes: its value after the SCoP is not wanted."""
        return not variable.is_array and variable.parameter is None \
            and not variable.global_ and variable.decl is not None \
            and "static" not in variable.decl.storage and variable.name not in self.outside

    @property
    def reads_parameters(self) -> bool:
        return any(_param_values(s.value) for s in self.statements)

    def _shape(self, variable: Variable) -> tuple[int | str, ...]:
        shape = []
        for extent in variable.extents:
            value = constant_int(extent)
            if value is not None:
                shape.append(value)
            elif isinstance(extent, c_ast.ID):
                self._parameter(extent.name, extent)
                shape.append(extent.name)
            else:
                raise CSourceError(f"{where(variable.decl)}: an extent of {variable.name} is "
                                   f"{'missing' if extent is None else as_c(extent)}: polyc "
                                   "needs constants or int parameters")
        return tuple(shape)

    def _check_dividends(self, nest: LoopNest, s: CStatement) -> None:
        """C's / and % agree with isl's floor and mod on non-negative dividends only."""
        for dividend, node in s.dividends:
            space = f"[{', '.join(s.iterators)}]"
            where_negative = " and ".join((*s.constraints, f"{dividend} < 0"))
            negative = read_with_params(isl.Set, nest.ctx, nest.params,
                                        f"{{ {space} : {where_negative} }}")
            if not negative.intersect_params(nest.context).is_empty():
                raise CSourceError(f"{where(node)}: {as_c(node)} divides a value that can be "
                                   "negative: C truncates it towards zero, polyc reads "
                                   "subscripts and bounds as affine with floor division")


def _updated(values: Values, update: c_ast.BinaryOp, value, found: str):
    """``target op value`` for an update ``target op= value``."""
    current, current_type = values.value(update.left)
    dtype = common(current_type, found)
    fn = _UPDATES[update.op + "="]
    return Call(fn, (convert(current, current_type, dtype), convert(value, found, dtype))), dtype


def _start(node: c_ast.For) -> tuple[str, c_ast.Node]:
    init = node.init
    if isinstance(init, c_ast.DeclList) and len(init.decls) == 1 and init.decls[0].init:
        return init.decls[0].name, init.decls[0].init
    if isinstance(init, c_ast.Assignment) and init.op == "=" and isinstance(init.lvalue, c_ast.ID):
        return init.lvalue.name, init.rvalue
    raise CSourceError(f"{where(node)}: the loop's start {as_c(init) if init else '(none)'} is "
                       "not 'iterator = expression'")


def _step(node: c_ast.For, iterator: str) -> int:
    step = node.next
    is_it = lambda e: isinstance(e, c_ast.ID) and e.name == iterator  # noqa: E731
    if isinstance(step, c_ast.UnaryOp) and is_it(step.expr) and step.op in ("p++", "++",
                                                                            "p--", "--"):
        return 1 if "++" in step.op else -1
    if isinstance(step, c_ast.Assignment) and is_it(step.lvalue):
        value = constant_int(step.rvalue)
        if step.op in ("+=", "-=") and value:
            return value if step.op == "+=" else -value
        if step.op == "=" and isinstance(step.rvalue, c_ast.BinaryOp) \
                and step.rvalue.op in ("+", "-") and is_it(step.rvalue.left):
            value = constant_int(step.rvalue.right)
            if value:
                return value if step.rvalue.op == "+" else -value
    raise CSourceError(f"{where(node)}: the loop over {iterator} steps by "
                       f"{as_c(step) if step else '(nothing)'}: polyc reads constant steps "
                       f"({iterator}++, {iterator} += 2, {iterator}--)")


def _no_writes(node: c_ast.Node, iterator: str) -> None:
    """Raise when ``node`` assigns the loop's iterator."""
    if isinstance(node, c_ast.Assignment) and isinstance(node.lvalue, c_ast.ID) \
            and node.lvalue.name == iterator:
        raise CSourceError(f"{where(node)}: the loop body assigns its iterator {iterator}")
    if isinstance(node, c_ast.UnaryOp) and node.op in ("p++", "++", "p--", "--") \
            and isinstance(node.expr, c_ast.ID) and node.expr.name == iterator:
        raise CSourceError(f"{where(node)}: the loop body steps its iterator {iterator}")
    for _, child in node.children():
        _no_writes(child, iterator)


def _ids(node: c_ast.Node, skip: frozenset[int] | set[int] = frozenset()):
    """The identifiers below ``node``, but below the nodes whose ``id()`` is in
    ``skip``."""
    if id(node) in skip:
        return
    if isinstance(node, c_ast.ID):
        yield node
    for _, child in node.children():
        yield from _ids(child, skip)


def _written(node: c_ast.Node) -> set[str]:
    """The variables the assignments below ``node`` write."""
    found = set()
    target = node.lvalue if isinstance(node, c_ast.Assignment) else \
        node.expr if isinstance(node, c_ast.UnaryOp) and node.op in ("p++", "++", "p--", "--") \
        else None
    while isinstance(target, c_ast.ArrayRef):
        target = target.name
    if isinstance(target, c_ast.ID):
        found.add(target.name)
    for _, child in node.children():
        found |= _written(child)
    return found


def _ref(arrays, use: Use) -> Ref:
    return Ref(arrays[use.name], use.index)


def _refs(arrays, value, values: dict[str, int] | None, statement: CStatement):
    """``value`` with Refs of the nest's arrays for its Uses, and numbers for its
    ParamValues."""
    if isinstance(value, Use):
        return _ref(arrays, value)
    if isinstance(value, ParamValue):
        if values is None or value.name not in values:
            raise CSourceError(f"{where(statement.node)}: {statement.text} reads the parameter "
                               f"{value.name}: its value is needed (params={{...}})")
        return Const(int(values[value.name]), "int32")
    if isinstance(value, Call):
        return Call(value.fn, tuple(_refs(arrays, a, values, statement) for a in value.args))
    return value


def _param_values(value) -> bool:
    if isinstance(value, ParamValue):
        return True
    return isinstance(value, Call) and any(_param_values(a) for a in value.args)


def _described(variable: Variable) -> str:
    return f"an array of {variable.dtype}" if variable.is_array else variable.dtype


def _kind(node: c_ast.Node) -> str:
    kinds = {c_ast.While: "a while loop", c_ast.DoWhile: "a do-while loop",
             c_ast.FuncCall: "a function call", c_ast.Return: "a return",
             c_ast.Break: "a break", c_ast.Continue: "a continue", c_ast.Goto: "a goto",
             c_ast.Decl: "a declaration", c_ast.Switch: "a switch"}
    return kinds.get(type(node), f"'{as_c(node)}'")

