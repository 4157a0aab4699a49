"""Binding a parametric SCoP's parameters to values, for code generation only.

Domains, accesses, dependences and schedules stay parametric. Binding fixes the
context to the values (so the isl AST build knows them), makes every array extent an
int, records ``param_values`` (codegen turns parameter ids into these constants) and
checks that every access stays inside its array.

Parameters named ``symbolic`` are not bound: they stay parameters of the generated
code (arguments of its entry function, read from the input shapes at run time). An
array extent may then name one of them (``"batch"``) but not an expression of them:
the runtime reads each value from an input's shape.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import islpy as isl
import numpy as np

from polyc.errors import NestError, ShapeError
from polyc.islutil import (
    box,
    eval_params,
    fixed_params,
    lower_bounds,
    params_space,
)
from polyc.scop.model import Array, Scop, extent_expr


def check_values(scop: Scop, values: Mapping[str, int] | None,
                 symbolic: Sequence[str] = ()) -> dict[str, int]:
    """``values`` as ``{param: int}`` in the SCoP's parameter order; ``NestError`` when a
    value is missing (for a parameter not in ``symbolic``), unknown, not an int, or
    outside the SCoP's context."""
    values = dict(values or {})
    declared = ", ".join(scop.params) or "none"
    unknown = [p for p in [*values, *symbolic] if p not in scop.params]
    if unknown:
        raise NestError(f"unknown parameter {', '.join(unknown)}; the parameters are {declared}")
    both = [p for p in symbolic if p in values]
    if both:
        raise NestError(f"parameter {', '.join(both)} is given a value and kept symbolic")
    missing = [p for p in scop.params if p not in values and p not in symbolic]
    if missing:
        raise NestError(f"no value for parameter {', '.join(missing)}: pass params={{...}} "
                        f"with a value for each of {declared}")
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise NestError(f"parameter {name} must be an int, got {value!r}")
    bound = [p for p in scop.params if p in values]
    values = {p: int(values[p]) for p in bound}
    fixed = fixed_params(scop.ctx, bound, values)
    if scop.context is not None and fixed.intersect(scop.context).is_empty():
        raise NestError(f"parameter values {_show(values)} are outside the context "
                        f"{scop.context}")
    return values


def bind_parameters(scop: Scop, values: Mapping[str, int] | None,
                    symbolic: Sequence[str] = ()) -> Scop:
    """The SCoP with concrete array shapes, its context fixed to ``values`` and
    ``param_values`` set; the ``symbolic`` parameters stay free (at least 1). A SCoP
    without parameters comes back unchanged."""
    if not scop.params and not values and not symbolic:
        return scop
    values = check_values(scop, values, symbolic)
    fixed = fixed_params(scop.ctx, list(values), values).intersect(
        lower_bounds(scop.ctx, symbolic)).align_params(params_space(scop.ctx, scop.params))
    context = fixed if scop.context is None else scop.context.intersect(fixed)
    arrays = tuple(_bind_array(scop, array, values) for array in scop.arrays)
    bound = dataclasses.replace(scop, arrays=arrays, context=context, param_values=values)
    _check_bounds(bound, context)
    return bound


def _bind_array(scop: Scop, array: Array, values: dict[str, int]) -> Array:
    if not array.symbolic:
        return array
    shape = tuple(_extent(scop, array, extent, values) for extent in array.shape)
    negative = [extent for extent, value in zip(array.shape, shape)
                if isinstance(value, int) and value < 0]
    if negative:
        raise ShapeError(f"array {array.name} has a negative extent {negative[0]} at "
                         f"{_show(values)}")
    return dataclasses.replace(array, shape=shape)


def _extent(scop: Scop, array: Array, extent: int | str, values: dict[str, int]
            ) -> int | str:
    """The extent's value, or (when it involves a symbolic parameter) the parameter's
    name, or for a temporary the expression itself."""
    if isinstance(extent, int):
        return extent
    expr = extent_expr(scop, extent)
    free = [p for p in scop.params if p not in values
            and expr.involves_dims(isl.dim_type.param, scop.params.index(p), 1)]
    if not free:
        return eval_params(expr, values)
    if extent.strip() in scop.params or array.kind == "temp":
        return extent.strip()  # a temporary's size is computed by the code
    raise ShapeError(f"array {array.name} has the extent '{extent}' of the symbolic "
                     f"parameter {', '.join(free)}; a symbolic extent must be a parameter "
                     "itself (the runtime reads its value from an input shape)")


def _check_bounds(scop: Scop, context: isl.Set) -> None:
    """``ShapeError`` naming the first access that leaves its array's box (for some
    values of the symbolic parameters)."""
    for statement in scop.statements:
        accesses = [("writes", statement.write)] + [("reads", r) for r in statement.reads]
        for verb, access in accesses:
            array = scop.array(access.array)
            inside = box(scop.ctx, array.name, array.shape, prefix="d")
            touched = access.relation.intersect_params(context).range()
            outside = touched.subtract(inside)
            if not outside.is_empty():
                raise ShapeError(f"{statement.name} {verb} {array.name} outside its shape "
                                 f"{list(array.shape)} at {_show(scop.param_values)}, "
                                 f"e.g. {outside.sample_point()}; access "
                                 f"{access.relation}")


def _show(values: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())
