"""The Pluto ILP in isl: Farkas-linearised validity and bounding constraints.

Decision variables (one flat integer set space), in the order lexmin minimises them:
``u_1..u_p, w`` (the bound ``u.n + w`` on every dependence distance), then for each
statement ``c_m .. c_1`` (iterator coefficients, innermost first, so lexmin prefers
the original outer loops) and its shift ``c_0``.

For a dependence polyhedron ``P`` from ``S`` to ``T`` and the distance
``phi_T(t) - phi_S(s)``: validity says ``distance >= 0`` on ``P`` and bounding says
``u.n + w - distance >= 0`` on ``P``. ``P.coefficients()`` is the set of all affine
forms non-negative on ``P`` (Farkas); the forms are written as affine functions of the
decision variables and pulled back, giving constraints on the variables.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import lcm

import islpy as isl

from polyc.islutil import items

COEFFICIENT_BOUND = 4   # iterator coefficients lie in [0, 4]
SHIFT_BOUND = 32        # shifts lie in [0, 32]


@dataclass(frozen=True)
class Layout:
    """Where each statement's coefficients sit among the decision variables."""

    params: tuple[str, ...]
    dims: dict  # statement -> number of iterators

    @property
    def statements(self) -> list[str]:
        return list(self.dims)

    def offset(self, statement: str) -> int:
        position = len(self.params) + 1
        for name, dim in self.dims.items():
            if name == statement:
                return position
            position += dim + 1
        raise KeyError(statement)

    def coefficient(self, statement: str, iterator: int) -> int:
        """Variable index of the coefficient of iterator ``iterator`` (0 = outermost)."""
        return self.offset(statement) + self.dims[statement] - 1 - iterator

    def shift(self, statement: str) -> int:
        return self.offset(statement) + self.dims[statement]

    @property
    def size(self) -> int:
        return len(self.params) + 1 + sum(d + 1 for d in self.dims.values())

    def space(self, ctx: isl.Context) -> isl.Space:
        if "_space" not in self.__dict__:  # frozen: cache by hand
            object.__setattr__(self, "_space", self._make_space(ctx))
        return self.__dict__["_space"]

    def _make_space(self, ctx: isl.Context) -> isl.Space:
        names = [f"u{k}" for k in range(len(self.params))] + ["w"]
        for statement, dim in self.dims.items():
            names += [f"{statement}_c{dim - k}" for k in range(dim)] + [f"{statement}_c0"]
        return isl.Space.create_from_names(ctx, set=names)


def _zero(space: isl.Space) -> isl.Aff:
    return isl.Aff.zero_on_domain(isl.LocalSpace.from_space(space))


def _var(space: isl.Space, index: int, coef: int = 1) -> isl.Aff:
    return _zero(space).set_coefficient_val(isl.dim_type.in_, index, coef)


def farkas_constraints(coefficients: isl.BasicSet, layout: Layout, src: str, dst: str,
                       *, bounding: bool, ctx: isl.Context, minimum: int = 0) -> isl.BasicSet:
    """Decision vectors for which the distance form (or its bound) is >= 0 on the dependence
    (the distance >= ``minimum``, for validity).

    ``coefficients`` is ``P.wrap().coefficients().flatten()`` with dims
    ``[cst, params.., src coefs.., dst coefs.., local coefs..]``; the coefficients of
    local variables (lifted divs) are 0.
    """
    space = layout.space(ctx)
    sign = -1 if bounding else 1  # bounding: u.n + w - distance
    constant = _zero(space)
    if src != dst:
        constant = constant.add(_var(space, layout.shift(dst), sign))
        constant = constant.add(_var(space, layout.shift(src), -sign))
    if bounding:
        constant = constant.add(_var(space, len(layout.params)))
    elif minimum:
        constant = constant.add_constant_val(-minimum)
    affs = [constant]
    affs += [_var(space, k) if bounding else _zero(space) for k in range(len(layout.params))]
    affs += [_var(space, layout.coefficient(src, d), -sign) for d in range(layout.dims[src])]
    affs += [_var(space, layout.coefficient(dst, d), sign) for d in range(layout.dims[dst])]
    target = coefficients.get_space()
    affs += [_zero(space)] * (target.dim(isl.dim_type.set) - len(affs))
    aff_list = isl.AffList.alloc(ctx, 0)
    for aff in affs:
        aff_list = aff_list.add(aff)
    pullback = isl.MultiAff.from_aff_list(space.map_from_domain_and_range(target), aff_list)
    return coefficients.preimage_multi_aff(pullback)


def integer_set(rational: isl.BasicSet) -> isl.BasicSet:
    """The same constraints on an integer set (``coefficients()`` yields a rational one,
    whose lexmin would return rational points)."""
    result = isl.BasicSet.universe(rational.get_space())
    for constraint in items(rational.get_constraint_list()):
        result = result.add_constraint(constraint)
    return result


def bounds(layout: Layout, ctx: isl.Context, *, signed: bool = False) -> isl.BasicSet:
    """u, w >= 0; coefficients in [0, COEFFICIENT_BOUND] (``signed``: in
    [-COEFFICIENT_BOUND, COEFFICIENT_BOUND]); shifts in [0, SHIFT_BOUND]."""
    space = layout.space(ctx)
    result = isl.BasicSet.universe(space)
    upper = {layout.shift(s): SHIFT_BOUND for s in layout.statements}
    lower: dict[int, int] = {}
    for s in layout.statements:
        for d in range(layout.dims[s]):
            upper[layout.coefficient(s, d)] = COEFFICIENT_BOUND
            if signed:
                lower[layout.coefficient(s, d)] = -COEFFICIENT_BOUND
    for index in range(layout.size):
        result = result.add_constraint(_inequality(space, {index: 1}, -lower.get(index, 0)))
        if index in upper:
            result = result.add_constraint(_inequality(space, {index: -1}, upper[index]))
    return result


def cone_complement(layout: Layout, statement: str, face: list[int], other: list[int],
                    ctx: isl.Context) -> isl.BasicSet:
    """The statement's coefficients are ``l0 * face - l1 * other`` for some integers
    ``l0, l1 >= 1``: ``face = (c + l1 * other) / l0`` then lies strictly inside the cone
    of the new row ``c`` and ``other`` (diamond tiling's concurrent start)."""
    space = layout.space(ctx)
    extended = space.add_dims(isl.dim_type.set, 2)  # l0, l1 after the layout's variables
    l0, l1 = layout.size, layout.size + 1
    result = isl.BasicSet.universe(extended)
    result = result.add_constraint(_inequality(extended, {l0: 1}, -1))
    result = result.add_constraint(_inequality(extended, {l1: 1}, -1))
    for d in range(layout.dims[statement]):
        coefs = {layout.coefficient(statement, d): 1, l0: -face[d], l1: other[d]}
        result = result.add_constraint(_equality(extended, coefs))
    return result.project_out(isl.dim_type.set, l0, 2)


def independence(layout: Layout, statement: str, complement: list[list[Fraction]],
                 ctx: isl.Context) -> isl.BasicSet:
    """The new row of ``statement`` is not in the span of its rows so far (Pluto's
    orthogonal-complement form: each complement row r gives r.c >= 0, their sum >= 1)."""
    space = layout.space(ctx)
    result = isl.BasicSet.universe(space)
    total: dict[int, int] = {}
    for row in complement:
        ints = _integral(row)
        if all(v <= 0 for v in ints):
            ints = [-v for v in ints]
        coefs = {layout.coefficient(statement, d): v for d, v in enumerate(ints) if v}
        result = result.add_constraint(_inequality(space, coefs, 0))
        for index, v in coefs.items():
            total[index] = total.get(index, 0) + v
    return result.add_constraint(_inequality(space, total, -1))


def independence_any(layout: Layout, statement: str, complement: list[list[Fraction]],
                     ctx: isl.Context) -> isl.Set:
    """The exact form of linear independence, a union: some complement row r has
    ``r.c >= 1`` or ``r.c <= -1``. Used when Pluto's one-sided form has no solution."""
    space = layout.space(ctx)
    result = isl.Set.empty(space)
    for row in complement:
        ints = _integral(row)
        for sign in (1, -1):
            coefs = {layout.coefficient(statement, d): sign * v for d, v in enumerate(ints) if v}
            side = isl.BasicSet.universe(space).add_constraint(_inequality(space, coefs, -1))
            result = result.union(isl.Set.from_basic_set(side))
    return result


def _integral(row: list[Fraction]) -> list[int]:
    """The rational vector scaled to integers by the lcm of its denominators."""
    scale = lcm(*(f.denominator for f in row))
    return [int(f * scale) for f in row]


def _equality(space: isl.Space, coefs: dict[int, int]) -> isl.Constraint:
    """``sum(coefs[k] * x_k) = 0``."""
    constraint = isl.Constraint.equality_alloc(space)
    for index, value in coefs.items():
        if value:
            constraint = constraint.set_coefficient_val(isl.dim_type.set, index, value)
    return constraint


def _inequality(space: isl.Space, coefs: dict[int, int], constant: int) -> isl.Constraint:
    constraint = isl.Constraint.inequality_alloc(space).set_constant_val(constant)
    for index, value in coefs.items():
        constraint = constraint.set_coefficient_val(isl.dim_type.set, index, value)
    return constraint


def solution(point: isl.Point, layout: Layout) -> list[int]:
    return [point.get_coordinate_val(isl.dim_type.set, k).to_python()
            for k in range(layout.size)]
