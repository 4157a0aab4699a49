"""Binding a parametric SCoP's parameters to values, for code generation only.

Domains, accesses, dependences and schedules stay parametric. Binding fixes the
context to the values (so the isl AST build knows them), makes every array extent an
int, records ``param_values`` (codegen turns parameter ids into these constants) and
checks that every access stays inside its array.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import islpy as isl
import numpy as np

from polyc.errors import NestError, ShapeError
from polyc.islutil import box, eval_params, fixed_params, read_with_params
from polyc.scop.model import Array, Scop


def check_values(scop: Scop, values: Mapping[str, int] | None) -> dict[str, int]:
    """``values`` as ``{param: int}`` in the SCoP's parameter order; ``NestError`` when a
    value is missing, unknown, not an int, or outside the SCoP's context."""
    values = dict(values or {})
    declared = ", ".join(scop.params) or "none"
    missing = [p for p in scop.params if p not in values]
    if missing:
        raise NestError(f"no value for parameter {', '.join(missing)}: pass params={{...}} "
                        f"with a value for each of {declared}")
    unknown = [p for p in values if p not in scop.params]
    if unknown:
        raise NestError(f"unknown parameter {', '.join(unknown)}; the parameters are {declared}")
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise NestError(f"parameter {name} must be an int, got {value!r}")
    values = {p: int(values[p]) for p in scop.params}
    fixed = fixed_params(scop.ctx, scop.params, values)
    if scop.context is not None and fixed.intersect(scop.context).is_empty():
        raise NestError(f"parameter values {_show(values)} are outside the context "
                        f"{scop.context}")
    return values


def bind_parameters(scop: Scop, values: Mapping[str, int] | None) -> Scop:
    """The SCoP with concrete array shapes, its context fixed to ``values`` and
    ``param_values`` set. A SCoP without parameters (ONNX) comes back unchanged."""
    if not scop.params and not values:
        return scop
    values = check_values(scop, values)
    fixed = fixed_params(scop.ctx, scop.params, values)
    context = fixed if scop.context is None else scop.context.intersect(fixed)
    arrays = tuple(_bind_array(scop, array, values) for array in scop.arrays)
    bound = dataclasses.replace(scop, arrays=arrays, context=context, param_values=values)
    _check_bounds(bound, fixed)
    return bound


def _bind_array(scop: Scop, array: Array, values: dict[str, int]) -> Array:
    if not array.symbolic:
        return array
    shape = tuple(_extent(scop, extent, values) for extent in array.shape)
    negative = [extent for extent, value in zip(array.shape, shape) if value < 0]
    if negative:
        raise ShapeError(f"array {array.name} has a negative extent {negative[0]} at "
                         f"{_show(values)}")
    return dataclasses.replace(array, shape=shape)


def _extent(scop: Scop, extent: int | str, values: dict[str, int]) -> int:
    if isinstance(extent, int):
        return extent
    expr = read_with_params(isl.PwAff, scop.ctx, scop.params, f"{{ [({extent})] }}")
    return eval_params(expr, values)


def _check_bounds(scop: Scop, fixed: isl.Set) -> None:
    """``ShapeError`` naming the first access that leaves its array's box."""
    for statement in scop.statements:
        accesses = [("writes", statement.write)] + [("reads", r) for r in statement.reads]
        for verb, access in accesses:
            array = scop.array(access.array)
            inside = box(scop.ctx, array.name, array.shape, prefix="d")
            touched = access.relation.intersect_params(fixed).range()
            outside = touched.subtract(inside)
            if not outside.is_empty():
                raise ShapeError(f"{statement.name} {verb} {array.name} outside its shape "
                                 f"{list(array.shape)} at {_show(scop.param_values)}, "
                                 f"e.g. {outside.sample_point()}; access "
                                 f"{access.relation}")


def _show(values: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())
