"""isl AST generation from a schedule tree.

At each statement instance the AST build gives us the schedule -> domain map; every
access's row-major element offset is pulled back through it and turned into an isl
AST expression of the loop iterators, so isl simplifies it (no floor/mod left for
affine accesses). The user node is annotated with an id naming its :class:`Instance`.

An array with a symbolic extent after its first dim has no affine offset (isl cannot
multiply an index by a parameter): its accesses are one AST expression per array dim,
and codegen computes the row-major offset from the run-time extents. (A symbolic first
extent, a batch, does not enter the strides.)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import islpy as isl

from polyc.codegen.vector import UNROLL
from polyc.errors import CodegenError
from polyc.islutil import budget, carried, flat_offset, statement_names, union_maps, united
from polyc.scop.model import Array, Scop, Statement, extent_expr

# isl operations for the AST of one schedule (some minutes at 2-3 million a second;
# the tiled schedules of inception_v2 and EfficientNet need about 1e8 and 6.5e7). Past
# them the pipeline generates the untiled schedule's.
OPERATIONS = 1_000_000_000


def children(node: isl.AstNode) -> Iterator[isl.AstNode]:
    """The AST nodes directly below ``node`` (a loop's body, both branches of an if, a
    block's statements, a mark's node); none below a user node."""
    kinds = isl.ast_node_type
    kind = node.get_type()
    if kind == kinds.for_:
        yield node.for_get_body()
    elif kind == kinds.mark:
        yield node.mark_get_node()
    elif kind == kinds.if_:
        yield node.if_get_then_node()
        if node.if_has_else_node():
            yield node.if_get_else_node()
    elif kind == kinds.block:
        nodes = node.block_get_children()
        yield from (nodes.get_at(k) for k in range(nodes.n_ast_node()))


def parts(root: isl.AstNode) -> list[isl.AstNode]:
    """The top-level nests of the program (the children of a root block), in execution
    order. Code generation emits each as a function of its own (LLVM's optimisation time
    grows faster than linearly with a function's size: a 6-layer encoder took 20 s in one
    function), and buffer planning measures lifetimes in them."""
    if root.get_type() != isl.ast_node_type.block:
        return [root]
    nodes = root.block_get_children()
    return [nodes.get_at(k) for k in range(nodes.n_ast_node())]


Offset = isl.AstExpr | tuple[isl.AstExpr, ...]  # flat element offset, or index per dim


@dataclass(frozen=True)
class Instance:
    """One user node of the AST: a statement and its access offsets as AST expressions
    (an :data:`Offset` per access: a tuple of indices for a symbolic shape)."""

    statement: Statement
    write: Offset
    reads: tuple[Offset, ...]
    guards: tuple[isl.AstExpr | None, ...] = ()  # per read: None when always inside
    # per read with a guard: its offset unclamped (may lie outside the array where the
    # guard fails; vector code loads it masked by the guard), else None
    unclamped: tuple[isl.AstExpr | None, ...] = ()


@dataclass(frozen=True)
class LoopProgram:
    """The AST of a whole schedule plus the instances its user nodes refer to, and the
    arrays (by name: dtype, shape) they access."""

    root: isl.AstNode
    instances: tuple[Instance, ...]
    arrays: Mapping[str, Array] = field(default_factory=dict)
    # symbolic extents that are expressions of parameters (a packed array's panels)
    extents: Mapping[str, isl.AstExpr] = field(default_factory=dict)
    # array -> the array whose memory it uses (written in place, polyc.codegen.inplace)
    storage: Mapping[str, str] = field(default_factory=dict)
    # per for node (annotated ``L<k>``): its statement instances -> their times up to
    # and including its own; and the SCoP's dependences (None: unknown)
    loop_times: tuple[isl.UnionMap, ...] = ()
    dependences: isl.UnionMap | None = None

    def instance(self, node: isl.AstNode) -> Instance:
        return self.instances[int(node.get_annotation().get_name()[1:])]

    def carries_nothing(self, node: isl.AstNode) -> bool:
        """Whether no dependence joins instances in two iterations of the for
        ``node`` within one iteration of the loops around it: its iterations may run
        in any order, or at once (False when that is not known)."""
        annotation = None if self.dependences is None else node.get_annotation()
        name = "" if annotation is None else annotation.get_name()
        if not name.startswith("L"):
            return False
        times = self.loop_times[int(name[1:])]
        pairs = self.dependences.apply_domain(times).apply_range(times)
        return all(carried(relation, relation.dim(isl.dim_type.in_) - 1).is_empty()
                   for relation in union_maps(pairs))

    def memory(self, array: str) -> str:
        """The array whose memory ``array`` uses: itself, or the one it is written into."""
        return self.storage.get(array, array)

    def __str__(self) -> str:
        return self.root.to_C_str()


def build_ast(scop: Scop, schedule: isl.Schedule, storage: Mapping[str, str] | None = None,
              *, operations: int | None = None, hints: bool = False) -> LoopProgram:
    """Generate loops for ``schedule`` with access offsets computed by isl; ``storage``
    is the program's :attr:`LoopProgram.storage`. :class:`OverBudget` past
    ``operations`` isl operations (default :data:`OPERATIONS`).

    Array shapes must be concrete; parameters keep their names in the AST (codegen
    looks their values up in ``scop.param_values``), the build context fixes them.
    With ``hints``, each for node's partial schedule is kept, with the dependences, so
    codegen can tell which innermost loops carry nothing
    (:meth:`LoopProgram.carries_nothing`).
    """
    # (only the statements scheduled: a process generating some groups' nests took
    # 1.3 s for all of densenet121's)
    scheduled = [scop.statement(name) for name in statement_names(schedule.get_domain())]
    offsets = {s.name: _statement_offsets(scop, s) for s in scheduled}
    raws = {s.name: [_unclamped_offset(scop, r) for r in s.reads] for s in scheduled}
    instances: list[Instance] = []
    failures: list[BaseException] = []

    def at_each_domain(node: isl.AstNode, build: isl.AstBuild) -> isl.AstNode:
        try:
            name = node.user_get_expr().op_get_arg(0).id_get_id().get_name()
            schedule_map = isl.Map.from_union_map(build.get_schedule())
            iterators = isl.PwMultiAff.from_map(schedule_map.reverse())
            write, *reads = [_expr(build, off, iterators) for off in offsets[name]]
            statement = scop.statement(name)
            guards = tuple(_guard(build, r.guard, schedule_map) for r in statement.reads)
            unclamped = tuple(None if g is None or raw is None else _expr(build, raw, iterators)
                              for g, raw in zip(guards, raws[name]))
            instances.append(Instance(statement, write, tuple(reads), guards, unclamped))
            return node.set_annotation(isl.Id(f"I{len(instances) - 1}", context=scop.ctx))
        except BaseException as err:  # isl swallows callback exceptions: keep them
            failures.append(err)
            return node

    loop_times: list[isl.UnionMap] = []

    def before_each_for(build: isl.AstBuild) -> isl.Id:
        try:
            loop_times.append(united([isl.UnionMap.from_map(m.flatten_range())
                                      for m in union_maps(build.get_schedule())]))
        except BaseException as err:  # noqa: BLE001 - raised after the build
            failures.append(err)
        return isl.Id(f"L{len(loop_times) - 1}", context=scop.ctx)

    build = isl.AstBuild.from_context(_context(scop))
    build, _keepalive = build.set_at_each_domain(at_each_domain)
    _keepalive_for = None
    if hints:
        build, _keepalive_for = build.set_before_each_for(before_each_for)
    try:
        with budget(scop.ctx, operations or OPERATIONS, "AST generation"):
            root = build.node_from_schedule(_name_unrolled_loops(schedule))
    except isl.Error as err:
        raise CodegenError(f"isl AST generation failed: {err}") from err
    if failures:
        raise CodegenError(f"AST generation callback failed: {failures[0]!r}") from failures[0]
    deps = None if scop.dependences is None or not hints else scop.dependences.all
    return LoopProgram(root, tuple(instances), {a.name: a for a in scop.arrays},
                       _extent_exprs(scop), dict(storage or {}), tuple(loop_times), deps)


def _name_unrolled_loops(schedule: isl.Schedule) -> isl.Schedule:
    """Each unroll mark (:data:`UNROLL`) renamed ``unroll c<d> c<d+1>``: the iterators
    isl gives the loops of its band's last two members (``c`` and the schedule depth;
    a member of one iteration has no loop)."""
    def visit(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if (node.get_type() != isl.schedule_node_type.mark
                or node.mark_get_id().get_name() != UNROLL):
            return node
        band = node.child(0)
        last = band.get_schedule_depth() + band.band_n_member() - 1
        name = f"{UNROLL} c{last - 1} c{last}"
        return node.delete().insert_mark(isl.Id(name, context=node.get_ctx()))

    return schedule.map_schedule_node_bottom_up(visit)


def unrolled_iterators(mark: str) -> frozenset[str]:
    """The iterators of the loops an unroll mark named by :func:`build_ast` asks codegen
    to unroll (none for another mark)."""
    words = mark.split()
    return frozenset(words[1:]) if words and words[0] == UNROLL else frozenset()


def _extent_exprs(scop: Scop) -> dict[str, isl.AstExpr]:
    """Each array extent that is an expression of parameters, as an AST expression."""
    build = isl.AstBuild.from_context(_context(scop))
    texts = {e for a in scop.arrays for e in a.shape
             if isinstance(e, str) and not e.isidentifier()}
    return {text: build.expr_from_pw_aff(extent_expr(scop, text)) for text in sorted(texts)}


def _context(scop: Scop) -> isl.Set:
    """What the AST build may assume of the parameters (their values, once bound)."""
    if scop.context is None:
        return isl.Set.universe(isl.Space.params_alloc(scop.ctx, 0))
    return scop.context


def _statement_offsets(scop: Scop, statement: Statement
                       ) -> list[isl.PwAff | tuple[isl.PwAff, ...]]:
    """Element offsets of the write, then of each read, as functions of the instance:
    for an array of symbolic shape, its index along each dim."""
    result = []
    for access in (statement.write,) + statement.reads:
        array = scop.array(access.array)
        if not array.flat:
            index = isl.PwMultiAff.from_map(access.loaded)
            domain = access.loaded.domain()
            result.append(tuple(index.get_pw_aff(k).gist(domain).coalesce()
                                for k in range(len(array.shape))))
        else:
            result.append(flat_offset(access.loaded, array.shape))
    return result


def _unclamped_offset(scop: Scop, access) -> isl.PwAff | None:
    """The flat offset of a guarded read extended past its guard (``Access.unclamped``),
    or None (no guard, a symbolic shape, not affine)."""
    array, raw = scop.array(access.array), access.unclamped
    return None if raw is None or not array.flat else flat_offset(raw, array.shape)


def _expr(build: isl.AstBuild, offset, iterators: isl.PwMultiAff) -> Offset:
    """An offset (or per-dim indices) as AST expressions of the loop iterators."""
    if isinstance(offset, tuple):
        return tuple(_expr(build, index, iterators) for index in offset)
    return build.expr_from_pw_aff(offset.pullback_pw_multi_aff(iterators))


def _guard(build: isl.AstBuild, guard: isl.Set | None, schedule_map: isl.Map
           ) -> isl.AstExpr | None:
    """The condition under which a bounded read is inside its array, or None if always."""
    if guard is None:
        return None
    at_instance = schedule_map.intersect_domain(guard).range().gist(schedule_map.range())
    if at_instance.plain_is_universe():
        return None
    return build.expr_from_set(at_instance)
