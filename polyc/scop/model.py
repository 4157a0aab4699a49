"""The SCoP records: arrays, statements with isl domains and accesses, dependences.

``str(scop)`` is the IR: labelled sections ARRAYS, DOMAINS, ACCESSES, BODIES,
DEPENDENCES and SCHEDULE (the original program order in Pluto notation).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Mapping, Union

import islpy as isl
import numpy as np

from polyc.errors import ShapeError
from polyc.frontend.core import NARROW_FLOATS, Call, Const
from polyc.islutil import (
    eval_params,
    maps_by_name,
    offset_strides,
    param_expr,
    union_maps,
    union_of,
    united,
)

NOMINAL = 64  # a symbolic parameter's value where tiling chooses sizes


def extent_expr(scop: Scop, extent: str) -> isl.PwAff:
    """A symbolic extent (isl text over the SCoP's parameters) as a PwAff."""
    return param_expr(scop.ctx, scop.params, extent)


def extent_value(scop: Scop, extent: str, values: Mapping[str, int]) -> int:
    """A symbolic extent at the parameter values ``values``."""
    return eval_params(extent_expr(scop, extent), values)


@dataclass(frozen=True)
class Array:
    """A tensor with storage. ``name`` is its isl tuple name; ``tensor`` the ONNX name.

    Kinds: ``input``, ``output`` (written whole), ``constant``, ``temp``, and
    ``positions`` (int64[n] whose element [i] is i: no storage, a read is its index)
    for ONNX models; ``inout`` (its initial value is read: given by the caller, updated in
    place) and ``result`` (only written: zeros unless given) for loop nests. An extent
    may be a string, an affine expression of the SCoP's parameters (``"N + 2"``),
    until :func:`polyc.scop.params.bind_parameters` makes it an int.
    """

    name: str
    tensor: str
    shape: tuple[int | str, ...]
    kind: str
    dtype: str = "float32"

    @property
    def symbolic(self) -> bool:
        return any(isinstance(extent, str) for extent in self.shape)

    @property
    def stored(self) -> bool:
        """Whether the array is memory (all but ``positions``)."""
        return self.kind != "positions"

    @property
    def flat(self) -> bool:
        """Whether every element stride is a constant (``islutil.offset_strides``): a
        symbolic extent only first, or after dims of extent 1 (``[batch, 16]``,
        ``[1, seq, 64]``), leaves the offsets affine."""
        return offset_strides(self.shape) is not None

    @property
    def size(self) -> int:
        if self.symbolic:
            raise ShapeError(f"array {self.name} has the symbolic shape {list(self.shape)}; "
                             "bind the parameters first")
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def storage(self) -> str:
        """The dtype of its elements in memory: its dtype, except that a float16 or
        bfloat16 temporary holds float32 (their values are float32 in registers, rounded
        where a Cast asks for it and where a graph's output or a caller's array holds
        them, as onnxruntime's CPU kernels compute float16 models in float32)."""
        narrow = self.dtype in NARROW_FLOATS
        return "float32" if narrow and self.kind == "temp" else self.dtype

    @property
    def itemsize(self) -> int:
        return np.dtype(self.storage).itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    def __str__(self) -> str:
        alias = "" if self.tensor == self.name else f"  (onnx '{self.tensor}')"
        shape = ", ".join(map(str, self.shape))
        return f"{self.kind:8} {self.name}: {self.dtype}[{shape}]{alias}"


@dataclass(frozen=True)
class Access:
    """``relation`` maps statement instances to the elements of ``array`` they touch.

    A read whose index may leave the array (``Read.outside``) keeps the exact elements
    in ``relation`` (dependences stay exact) and says how code reads them: ``address``
    (single-valued, always inside the array) gives the element loaded, and where an
    instance is outside ``guard`` the loaded value is replaced by ``fill``.

    A read whose index along array dim ``lookup`` is a value computed at run time (a
    :class:`LoadAt`, from ``core.Lookup``) has the whole extent of that dim in
    ``relation`` (dependences are safe: a superset of the elements read) and index 0
    there in ``address``; code adds the run-time index times the dim's stride.
    """

    array: str
    relation: isl.Map
    address: isl.Map | None = None  # None: the relation itself
    guard: isl.Set | None = None    # None: every instance reads a real element
    fill: float = 0.0
    lookup: int | None = None       # the array dim indexed at run time

    @property
    def affine(self) -> isl.Map:
        """The single-valued part that stride analysis reads: the relation, but for a
        lookup its address (index 0 along the looked-up dim)."""
        return self.relation if self.lookup is None else self.address

    @property
    def loaded(self) -> isl.Map:
        """The element each instance loads."""
        return self.relation if self.address is None else self.address

    @property
    def unclamped(self) -> isl.Map | None:
        """A guarded read extended past its guard: the affine hull of the elements it
        reads inside (where the guard fails, indices outside the array), or None (no
        guard, a lookup, nothing read inside, or no single element per instance)."""
        if self.guard is None or self.lookup is not None or self.relation.is_empty():
            return None
        raw = isl.Map.from_basic_map(self.relation.affine_hull())
        return raw if raw.is_single_valued() else None

    def pulled_back(self, to_old: isl.Map) -> Access:
        """This access seen from new instances; ``to_old`` maps each to an old instance."""
        return Access(
            self.array, to_old.apply_range(self.relation),
            None if self.address is None else to_old.apply_range(self.address),
            None if self.guard is None else to_old.intersect_range(self.guard).domain(),
            self.fill, self.lookup)


@dataclass(frozen=True)
class Load:
    """In a statement body: the value read through the statement's ``reads[k]``."""

    k: int

    def __str__(self) -> str:
        return f"R{self.k}"


@dataclass(frozen=True)
class LoadAt:
    """In a statement body: the value read through ``reads[k]`` (an access with a
    ``lookup`` dim) at the element whose index along that dim is the value of ``at``,
    an integer body expression; a negative value counts from the end, and the result
    is clamped into the dim (see ``core.Lookup``)."""

    k: int
    at: Body

    def __str__(self) -> str:
        return f"R{self.k}<{self.at}>"


Body = Union[Load, LoadAt, Const, Call]


@dataclass(frozen=True)
class Statement:
    """``write = body(reads)`` for every point of ``domain``."""

    name: str
    domain: isl.Set
    write: Access
    reads: tuple[Access, ...]
    body: Body
    op_index: int  # position of the core op it came from
    node: str = ""  # the ONNX node, for messages
    inlined: tuple[str, ...] = ()  # ONNX nodes of producers inlined into it (profiles)
    recurrent: bool = False  # in a Recurrence's time loop, with the other steps of its op
    whole: str = ""  # the statement this is a piece of (polyc.scop.split), if any

    def __str__(self) -> str:
        return f"{self.name}: W = {self.body}"


@dataclass(frozen=True)
class Dependences:
    """Dependences between statement instances: exact (isl dataflow analysis), or
    memory-based when that analysis ran past its budget (``exact`` False)."""

    raw: isl.UnionMap
    war: isl.UnionMap
    waw: isl.UnionMap
    exact: bool = True
    # RAW, WAR and WAW through each written array, when the analysis ran array by array
    # (polyc.scop.dependences: a later analysis of the SCoP reuses those it can)
    by_array: Mapping[str, tuple[isl.UnionMap, isl.UnionMap, isl.UnionMap]] = field(
        default_factory=dict, compare=False, repr=False)
    # RAW, WAR and WAW as the analysis gave them, before isl merged their pieces: more
    # polyhedra but simpler ones, whose Farkas duals Pluto computes far faster
    # (polyc.scheduler.pluto: heat-3d's merged 7-point reads)
    pieces: isl.UnionMap | None = field(default=None, compare=False, repr=False)

    def kinds(self) -> dict[str, isl.UnionMap]:
        return {"RAW": self.raw, "WAR": self.war, "WAW": self.waw}

    @cached_property
    def all(self) -> isl.UnionMap:
        return self.raw.union(self.war).union(self.waw)

    @cached_property
    def _by_source(self) -> dict[str, list[isl.Map]]:
        return maps_by_name(self.all, isl.dim_type.in_)

    @cached_property
    def _pieces_by_source(self) -> dict[str, list[isl.Map]]:
        return maps_by_name(self.pieces, isl.dim_type.in_) if self.pieces is not None else {}

    def among(self, statements, *, pieces: bool = False) -> isl.UnionMap:
        """The dependences from and to the named statements only (with ``pieces``, as
        :attr:`pieces` has them, when it is known). Looked up by source statement:
        intersecting :attr:`all` with each group's domain had cost time in the
        dependences of the whole program per group (a Concat of 1,500 branches: 16 s
        over 1,716 groups)."""
        names = set(statements)
        index = self._pieces_by_source if pieces and self.pieces is not None \
            else self._by_source
        parts = [isl.UnionMap.from_map(dep) for source in names
                 for dep in index.get(source, ())
                 if dep.get_tuple_name(isl.dim_type.out) in names]
        return united(parts) if parts else isl.UnionMap.empty(self.raw.get_space())

    def __str__(self) -> str:
        lines = []
        for kind, umap in self.kinds().items():
            for dep in union_maps(umap):
                lines.append(f"{kind} {dep}")
        return "\n".join(lines) if lines else "(none)"


@dataclass(frozen=True)
class Scop:
    """A static control part: the whole model (or loop nest) as statements over arrays.

    Domains, accesses and dependences may use the symbolic ``params``, constrained by
    ``context``; ``param_values`` is set only for code generation
    (:func:`polyc.scop.params.bind_parameters`).
    """

    ctx: isl.Context
    arrays: tuple[Array, ...]
    statements: tuple[Statement, ...]
    order: isl.Schedule  # the original program order
    constants: Mapping[str, np.ndarray]  # array name -> value
    dependences: Dependences | None = None
    params: tuple[str, ...] = ()
    context: isl.Set | None = None  # None: no constraint on the parameters
    param_values: Mapping[str, int] | None = None

    @property
    def symbolic_params(self) -> tuple[str, ...]:
        """The parameters left symbolic once the others are bound (all, before)."""
        return tuple(p for p in self.params if p not in (self.param_values or {}))

    @cached_property  # read for every band and access while tiling
    def sizing_context(self) -> isl.Set | None:
        """The parameter values at which tiling and parallel marks choose sizes: the
        context, with each symbolic parameter at :data:`NOMINAL` (if the context
        allows it). The schedules they build stay valid for every value."""
        symbolic = self.symbolic_params
        if not symbolic or self.context is None:
            return self.context
        nominal = self.context
        for name in symbolic:
            k = nominal.find_dim_by_name(isl.dim_type.param, name)
            fixed = nominal.fix_val(isl.dim_type.param, k, isl.Val.int_from_si(self.ctx, NOMINAL))
            nominal = nominal if fixed.is_empty() else fixed
        return nominal

    def sizing_shape(self, name: str) -> tuple[int, ...]:
        """Array ``name``'s shape at the sizing context (strides for tiling decisions)."""
        array = self.array(name)
        if not array.symbolic:
            return array.shape
        point = self.sizing_context.sample_point()
        values = {p: point.get_coordinate_val(isl.dim_type.param, k).to_python()
                  for k, p in enumerate(self.params)}
        return tuple(e if isinstance(e, int) else extent_value(self, e, values)
                     for e in array.shape)

    def array(self, name: str) -> Array:
        return self._arrays_by_name[name]

    def statement(self, name: str) -> Statement:
        return self._statements_by_name[name]

    # computed once per Scop (it is frozen; dataclasses.replace makes a new one): a
    # search or a union per call made scheduling 2,000 statements quadratic
    @cached_property
    def _arrays_by_name(self) -> dict[str, Array]:
        return {a.name: a for a in reversed(self.arrays)}  # (the first of a name wins)

    @cached_property
    def _statements_by_name(self) -> dict[str, Statement]:
        return {s.name: s for s in reversed(self.statements)}

    @cached_property
    def domain(self) -> isl.UnionSet:
        return union_of(self.ctx, (s.domain for s in self.statements))

    def _accesses(self, which: str) -> isl.UnionMap:
        result = isl.UnionMap.empty(isl.Space.params_alloc(self.ctx, 0))
        for statement in self.statements:
            accesses = (statement.write,) if which == "write" else statement.reads
            for access in accesses:
                result = result.union(isl.UnionMap.from_map(access.relation))
        return result

    @property
    def reads(self) -> isl.UnionMap:
        return self._accesses("read")

    @property
    def writes(self) -> isl.UnionMap:
        return self._accesses("write")

    def __str__(self) -> str:
        from polyc.notation import pluto_notation

        lines = []
        if self.params:
            lines += ["PARAMS", f"  {', '.join(self.params)}  context {self.context}"]
        if self.param_values:
            lines.append("  values " + ", ".join(f"{k}={v}" for k, v in self.param_values.items()))
        if self.param_values is not None and self.symbolic_params:
            lines.append("  symbolic " + ", ".join(self.symbolic_params))
        lines += ["ARRAYS"] + [f"  {a}" for a in self.arrays]
        lines.append("DOMAINS")
        lines += [f"  {s.domain}" for s in self.statements]
        lines.append("ACCESSES")
        for s in self.statements:
            lines.append(f"  {s.name}  W {s.write.relation}")
            lines += [f"  {' ' * len(s.name)}  R{k} {r.relation}" for k, r in enumerate(s.reads)]
        lines.append("BODIES")
        lines += [f"  {s}" for s in self.statements]
        if self.dependences is not None:
            lines.append("DEPENDENCES")
            lines += [f"  {line}" for line in str(self.dependences).splitlines()]
        lines.append("SCHEDULE (original order)")
        lines += [f"  {line}" for line in pluto_notation(self.order, self).splitlines()]
        return "\n".join(lines)
