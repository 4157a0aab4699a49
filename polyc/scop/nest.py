"""Writing loop nests directly: a SCoP from Python, without ONNX.

    nest = LoopNest("jacobi1d", params=["T", "N"])
    A, B = nest.array("A", ("N",)), nest.array("B", ("N",))
    dom = "{ [t, i] : 0 <= t < T and 1 <= i < N - 1 }"
    nest.statement("S1", dom, write=B["i"], expr=(A["i - 1"] + A["i"] + A["i + 1"]) * 0.33333,
                   schedule="{ [t, i] -> [t, 0, i] }")
    nest.statement("S2", dom, write=A["i"], expr=B["i"], schedule="{ [t, i] -> [t, 1, i] }")
    out = nest.compile(params={"T": 10, "N": 100}).run({"A": a})   # every array's final value

Domains are isl sets over the nest's parameters, written without the parameter
declaration; the API names the tuple after the statement. Indices are affine text
over the statement's iterators and the parameters. The original program order
(``Scop.order``) is the statements in textual order, each its own loop nest over its
domain's dims, unless every statement gives a ``schedule`` map (Pluto-style
``[t, 0, i]`` vectors), which then orders all instances. The SCoP stays parametric;
parameter values are bound only when compiling.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import islpy as isl

from polyc.errors import NestError, NotAffineError, checked_options
from polyc.frontend.core import CASTS, FLOATS, NUMERIC, Call, Const, DtypeError, result_dtype
from polyc.islutil import (
    identity_schedule,
    lower_bounds,
    read_with_params,
    schedule_from_maps,
    sequence,
    set_space,
    union_of,
)
from polyc.scop.dependences import live_in_arrays
from polyc.scop.model import Access, Array, Load, Scop, Statement
from polyc.scop.nest_expr import Expr, NestArray, Ref, as_node, fn

__all__ = ["LoopNest", "Expr", "NestArray", "fn"]

_NAME = re.compile(r"[A-Za-z_]\w*\Z")
_AFFINE_TEXT = re.compile(r"[\w\s+\-*/(),]*\Z")  # no braces, colons or brackets
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
_INDEX_FUNCTIONS = {"floor", "ceil", "mod", "min", "max"}
_SET_KEYWORDS = _INDEX_FUNCTIONS | {"and", "or", "not", "exists", "implies", "true", "false"}


class LoopNest:
    """Statements over arrays with symbolic parameters; ``scop()`` and ``compile()``.

    ``context`` (isl text such as ``"{ : N >= 4 }"``) constrains the parameters; by
    default each parameter is at least 1.
    """

    fn = fn

    def __init__(self, name: str, params: Iterable[str] = (), *, context: str | None = None):
        self.name = _checked_name(name, "nest")
        self.params = tuple(_checked_name(p, "parameter") for p in params)
        if len(set(self.params)) != len(self.params):
            raise NestError(f"nest {name}: parameter declared twice in {list(self.params)}")
        self.ctx = isl.Context()
        self.context = lower_bounds(self.ctx, self.params)
        if context is not None:
            self.context = self._read(isl.Set, context, f"the context of nest {name}")
        self.arrays: dict[str, NestArray] = {}
        self._statements: list[tuple[Statement, isl.Map | None]] = []

    def array(self, name: str, shape: Sequence[int | str], dtype: str = "float32", *,
              scratch: bool = False) -> NestArray:
        """Declare an array of ``dtype`` (a numeric type of :data:`polyc.frontend.core.DTYPES`);
        extents are ints or affine text over the parameters; shape ``()`` is a scalar.
        A ``scratch`` array's value after the nest is not wanted (a C function's local
        variable): unless the nest reads its initial value it is a temporary, neither
        given nor returned, which polyc may expand (:mod:`polyc.scop.expand`)."""
        self._check_new_name(name, "array")
        if isinstance(shape, (str, int)):
            raise NestError(f"the shape of {name} must be a tuple, e.g. ({shape!r},)")
        if dtype not in NUMERIC:
            raise NestError(f"array {name}: dtype {dtype!r} is not one of {', '.join(NUMERIC)}")
        array = NestArray(self, name, tuple(self._extent(name, e) for e in shape), dtype)
        array.scratch = bool(scratch)
        self.arrays[name] = array
        return array

    def statement(self, name: str, domain: str, *, write: Expr, expr,
                  schedule: str | None = None) -> None:
        """``write = expr`` for every point of ``domain``; ``schedule`` (optional) maps
        the domain to its time in the original order, e.g. ``{ [t, i] -> [t, 0, i] }``."""
        self._check_new_name(name, "statement")
        dom = self._domain(name, domain)
        target = write.node if isinstance(write, Expr) else None
        if not isinstance(target, Ref):
            raise NestError(f"{name}: write= must be an array element like B['i'], "
                            f"got {write}")
        reads: list[Access] = []
        dtype = target.array.dtype
        body = self._lower(name, dom, as_node(expr), reads)
        types = [self.arrays[r.array].dtype for r in reads]
        try:
            body = _numbers_typed(name, body, types, dtype)
            found = _body_dtype(body, types)
        except DtypeError as error:
            raise NestError(f"{name}: {error}") from None
        if found != dtype:
            raise NestError(f"{name}: the expression is {found}, the array {target.array.name} "
                            f"it writes {dtype} (convert with fn.cast_{dtype})")
        statement = Statement(name, dom, self._access(name, dom, target), tuple(reads), body,
                              0, node=name)  # one op: the nest is one fusion group
        order = None if schedule is None else self._schedule(name, dom, schedule)
        self._statements.append((statement, order))

    def scop(self) -> Scop:
        """The parametric SCoP: statements in textual order, ``order`` the original one."""
        if not self._statements:
            raise NestError(f"nest {self.name} has no statements")
        statements = tuple(s for s, _ in self._statements)
        scop = Scop(ctx=self.ctx, arrays=(), statements=statements, order=self._order(),
                    constants={}, params=self.params, context=self.context)
        live_in = live_in_arrays(scop)
        arrays = tuple(Array(a.name, a.name, a.shape, "inout" if a.name in live_in else
                             "temp" if a.scratch else "result", a.dtype)
                       for a in self.arrays.values())
        return Scop(ctx=self.ctx, arrays=arrays, statements=statements, order=scop.order,
                    constants={}, params=self.params, context=self.context)

    @checked_options
    def compile(self, *, params: Mapping[str, int] | None = None,
                symbolic: Sequence[str] | None = None, scheduler: str = "pluto",
                fuse: str = "smart", check: bool = True, fast_math: bool = True,
                tile: bool = True, tile_size=None, blocking=None,
                threads: int | None = None, profile: bool = False,
                autoselect: str | None = None, split: bool = True, expand: bool = True,
                without=(), tile2: bool | int = False):
        """Native code for the nest at these parameter values: a
        :class:`polyc.pipeline.CompiledModel` whose ``run({array: value})`` returns every
        array's final value (given arrays are copied, omitted ``result`` arrays start at 0).
        Parameters in ``symbolic`` get no value: the code takes any, read from the
        shapes of the given arrays (an array extent that is the parameter).
        The nest is one fusion group: ``fuse`` (none / smart / max, or Pluto's nofuse /
        smartfuse / maxfuse) is the policy the scheduler cuts it by; ``threads`` and
        ``profile`` as for :func:`polyc.compile`; ``autoselect="measure"`` keeps the
        fastest of several schedules (:mod:`polyc.autoselect`); ``split=False`` keeps
        statements whole (:mod:`polyc.scop.split`), ``expand=False`` scratch scalars
        scalar (:mod:`polyc.scop.expand`); ``without`` names strategies to leave
        out (:mod:`polyc.strategies`); ``tile2`` second-level tiles
        (:mod:`polyc.tiling.levels`)."""
        from polyc.pipeline import compile_scop
        return compile_scop(self.scop(), params=params, symbolic=symbolic,
                            scheduler=scheduler, fuse=fuse,
                            check=check, fast_math=fast_math, tile=tile, tile_size=tile_size,
                            blocking=blocking, threads=threads, profile=profile,
                            autoselect=autoselect, split=split, expand=expand,
                            without=without, tile2=tile2)

    # -- checking and building the isl objects --------------------------------------

    def _check_new_name(self, name: str, what: str) -> None:
        _checked_name(name, what)
        taken = set(self.params) | set(self.arrays) | {s.name for s, _ in self._statements}
        if name in taken:
            raise NestError(f"nest {self.name}: the {what} name {name!r} is already used")

    def _read(self, kind, text: str, what: str):
        """Parse isl text written without the parameter declaration."""
        if not isinstance(text, str) or not text.strip().startswith("{"):
            raise NestError(f"{what} must be isl text like '{{ [i] : 0 <= i < N }}' "
                            f"(the nest declares the parameters), got {text!r}")
        try:
            return read_with_params(kind, self.ctx, self.params, text)
        except isl.Error:
            pass
        tuple_names = set(_IDENTIFIER.findall(" ".join(re.findall(r"\[([^\]]*)\]", text))))
        unknown = sorted(set(_IDENTIFIER.findall(text)) - _SET_KEYWORDS - tuple_names
                         - set(self.params))
        if unknown:
            raise NestError(f"{what}: unknown name {', '.join(unknown)} in {text!r}; "
                            f"the parameters are {', '.join(self.params) or 'none'}")
        raise NestError(f"isl cannot read {what}: {text!r} (a syntax error, or a "
                        "non-affine constraint?)")

    def _extent(self, array: str, extent) -> int | str:
        if isinstance(extent, int) and not isinstance(extent, bool):
            if extent < 0:
                raise NestError(f"array {array} has a negative extent {extent}")
            return extent
        self._affine(f"extent {extent!r} of array {array}", extent, (), f"{{ [({extent})] }}")
        return extent.strip()

    def _affine(self, what: str, text, iterators: Sequence[str], literal: str) -> isl.PwAff:
        """Parse ``literal``, built around the user's ``text`` after checking its names."""
        if not isinstance(text, str) or not _AFFINE_TEXT.match(text) or not text.strip():
            raise NestError(f"{what} must be affine text over "
                            f"{', '.join(tuple(iterators) + self.params) or 'ints'}")
        known = set(iterators) | set(self.params) | _INDEX_FUNCTIONS
        unknown = [n for n in _IDENTIFIER.findall(text) if n not in known]
        if unknown:
            raise NestError(f"{what}: unknown name {unknown[0]!r}; iterators "
                            f"{', '.join(iterators) or 'none'}, parameters "
                            f"{', '.join(self.params) or 'none'}")
        try:
            return read_with_params(isl.PwAff, self.ctx, self.params, literal)
        except isl.Error:
            raise NotAffineError(f"{what} is not affine in "
                                 f"{', '.join(tuple(iterators) + self.params)}") from None

    def _domain(self, name: str, text: str) -> isl.Set:
        domain = self._read(isl.Set, text, f"the domain of {name}")
        dims = [domain.get_dim_name(isl.dim_type.set, k)
                for k in range(domain.dim(isl.dim_type.set))]
        if None in dims or len(set(dims)) != len(dims):
            raise NestError(f"{name}: name every iterator of the domain once, got {text!r}")
        return domain.set_tuple_name(name)

    def _access(self, name: str, domain: isl.Set, ref: Ref) -> Access:
        array = ref.array
        if self.arrays.get(array.name) is not array:
            raise NestError(f"{name}: unknown array {array.name!r} (declared in nest "
                            f"{array.nest.name!r}); this nest has "
                            f"{', '.join(self.arrays) or 'no arrays'}")
        iterators = [domain.get_dim_name(isl.dim_type.set, k)
                     for k in range(domain.dim(isl.dim_type.set))]
        head = f"{{ {name}[{', '.join(iterators)}] -> "
        affs = isl.PwAffList.alloc(self.ctx, 0)
        for text in ref.index:
            what = f"{name}: index {text!r} of {array.name}"
            aff = self._affine(what, text, iterators, f"{head}[({text})] }}")
            if not domain.is_subset(isl.Map.from_pw_aff(aff).domain()):
                raise NotAffineError(f"{what} is not an integer affine function of "
                                     f"{', '.join(iterators)}")
            affs = affs.add(aff)
        target = set_space(self.ctx, array.name, [f"d{k}" for k in range(len(array.shape))])
        target = target.align_params(domain.get_space())
        space = domain.get_space().map_from_domain_and_range(target)
        relation = isl.Map.from_multi_pw_aff(isl.MultiPwAff.from_pw_aff_list(space, affs))
        return Access(array.name, relation.intersect_domain(domain))

    def _lower(self, name: str, domain: isl.Set, node, reads: list[Access]):
        """Each Ref becomes the Load of a new read access (left to right)."""
        if isinstance(node, Ref):
            reads.append(self._access(name, domain, node))
            return Load(len(reads) - 1)
        if isinstance(node, Call):
            return Call(node.fn, tuple(self._lower(name, domain, a, reads) for a in node.args))
        if isinstance(node, Const):
            return node
        raise NestError(f"{name}: not a statement expression: {node!r}")

    def _schedule(self, name: str, domain: isl.Set, text: str) -> isl.Map:
        relation = self._read(isl.Map, text, f"the schedule of {name}")
        n_in = domain.dim(isl.dim_type.set)
        if relation.dim(isl.dim_type.in_) != n_in:
            raise NestError(f"{name}: the schedule {text!r} must map the {n_in} iterators "
                            f"of the domain {domain}")
        relation = relation.set_tuple_name(isl.dim_type.in_, name).intersect_domain(domain)
        if not relation.is_single_valued() or not domain.is_subset(relation.domain()):
            raise NotAffineError(f"{name}: the schedule {text!r} must give every instance "
                                 "exactly one time")
        return relation

    def _order(self) -> isl.Schedule:
        orders = [order for _, order in self._statements]
        if all(order is None for order in orders):
            return sequence([identity_schedule(s.domain) for s, _ in self._statements])
        missing = [s.name for s, order in self._statements if order is None]
        if missing:
            raise NestError(f"nest {self.name}: give a schedule to every statement or to "
                            f"none; {', '.join(missing)} has none")
        domain = union_of(self.ctx, (statement.domain for statement, _ in self._statements))
        schedule = schedule_from_maps(domain, orders)
        times = schedule.get_map().intersect_params(self.context)
        if not times.is_injective():
            raise NestError(f"nest {self.name}: the schedules give two instances the same "
                            f"time: {times}")
        return schedule


def _numbers_typed(name: str, body, types: Sequence[str], dtype: str):
    """``body`` with each number (a float32 Const, as Python numbers become) of the
    type of the other operands of its operation, else ``dtype`` (the written array's)."""
    if not isinstance(body, Call):
        return _number(name, body, dtype) if _is_number(body) else body
    args = [_numbers_typed(name, a, types, dtype) if not _is_number(a) else a
            for a in body.args]
    values = range(1 if body.fn == "select" else 0, len(args))
    others = {_body_dtype(args[k], types) for k in values if not _is_number(args[k])}
    target = others.pop() if len(others) == 1 and body.fn not in CASTS else dtype
    return Call(body.fn, tuple(_number(name, a, target) if _is_number(a) else a
                               for a in args))


def _is_number(node) -> bool:
    return isinstance(node, Const) and node.dtype == "float32"


def _number(name: str, const: Const, dtype: str) -> Const:
    if dtype not in FLOATS and float(const.value) != int(const.value):
        raise NestError(f"{name}: the number {const.value} in a {dtype} expression")
    return Const.of(const.value, dtype)


def _body_dtype(body, types: Sequence[str]) -> str:
    """The type of a statement body whose ``Load(k)`` reads an array of ``types[k]``."""
    if isinstance(body, Load):
        return types[body.k]
    if isinstance(body, Const):
        return body.dtype
    return result_dtype(body.fn, tuple(_body_dtype(a, types) for a in body.args))


def _checked_name(name, what: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise NestError(f"the {what} name {name!r} must be an identifier")
    return name
