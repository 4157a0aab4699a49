"""The isl AST -> an LLVM module, one small emitter per AST node kind.

The module defines ``polyc_kernel`` (internal; every array a pointer parameter) and
the exported entry ``polyc_main(inputs..., outputs..., scratch)``, which places
temporaries in scratch and passes constants (external globals, see
:mod:`polyc.codegen.layout`). The kernel calls one function per top-level nest (a
part, :func:`polyc.codegen.ast.parts`) whose arrays are ``noalias`` parameters: the
kernel's own are not, as temporaries whose lifetimes do not overlap share scratch
(:mod:`polyc.codegen.liveness`), while the arrays one part uses never overlap. Each loop
under a ``parallel`` mark is outlined to a body function of its own, run on threads
by the OpenMP runtime (:mod:`polyc.codegen.parallel`).

Symbolic parameters (dims kept symbolic) are ``i64`` arguments: of the entry after the
scratch pointer, and of every function below it; the offsets of arrays with symbolic
shapes are computed row-major from those values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

import islpy as isl
from llvmlite import ir

from polyc import host
from polyc.codegen import bytedot, folds, jam, parallel, scalars, sums, transpose, vector
from polyc.codegen.ast import LoopProgram, Offset, children, parts, unrolled_iterators
from polyc.codegen.exprs import FAST, I1, I64, int_expr, value_name
from polyc.codegen.layout import ALIGN, SCRATCH_FUNCTION, BufferPlan, constant_symbol
from polyc.codegen.profile import Timers
from polyc.errors import CodegenError
from polyc.frontend.core import INTEGER, Call, Const, result_dtype
from polyc.islutil import strides
from polyc.scop.model import Load, LoadAt, Scop

PTR = ir.PointerType()
LANE_BITS = ir.IntType(vector.LANES)  # a lane mask as one integer
SHORT_LOOP = (16, 32)  # inner loops with this many iterations get loop_hints
UNROLLED_VECTORS = 8  # a vector loop with guarded reads and at most this many vectors
ENTRY = "polyc_main"
# functions whose operand is rounded to an integer: a division under them divides
# exactly (_LoopEmitter._quotient)
# llvm.loop.vectorize.width (one register of the widest type) on the innermost loops
# proven parallel. Off: LLVM's own choice was as fast. PolyBench LARGE on an AVX2 Zen 3,
# the 13 kernels whose machine code the hint changes, 5 interleaved runs, hint vs none:
# from 25% slower (correlation 0.235 vs 0.187 s; gramschmidt 13%, jacobi-2d 9%) to 9%
# faster (covariance 0.195 vs 0.214 s; symm 7%, floyd-warshall 5%), geomean 2.6% slower
WIDTH_HINTS = False
ROUNDED = frozenset({"round", "floor", "ceil", *(f"cast_{dtype}" for dtype in INTEGER)})


def emit_module(scop: Scop, program: LoopProgram | None, plan: BufferPlan, *,
                fast_math: bool = True, threads: int | None = None,
                profile: bool = False, nests: Sequence[Nest] | None = None) -> str:
    """The LLVM IR text of the whole model; ``fast_math=False`` drops the float
    reassociation and contraction flags, so every schedule computes bit-identical sums.
    ``threads`` runs parallel loops on that many threads (None: the OpenMP default;
    1: no parallel regions at all). ``profile`` times each of :func:`polyc.codegen.ast.parts`
    (:mod:`polyc.codegen.profile`). With ``nests`` (made apart by :func:`emit_nests`)
    the kernel calls those, declared, in their order, instead of emitting the parts of
    ``program`` (which symbolic extents still need, when there are some)."""
    module = ir.Module(name="polyc")
    arrays = plan.inputs + plan.outputs + tuple(plan.scratch) + plan.symbolic + plan.constants
    kernel = _kernel(module, scop, program, arrays, threads, profile, fast_math, nests)
    if not fast_math:
        _drop_fast_math(module)
    _entry(module, kernel, scop, program, plan, _constants(module, scop, plan))
    if plan.symbolic:
        _scratch_function(module, scop, program, plan)
    return _text(module)


@dataclass(frozen=True)
class Nest:
    """A top-level nest emitted apart (:func:`emit_nests`): its function's name and the
    memories it takes, in its parameters' order (the symbolic parameters follow)."""

    name: str
    arrays: tuple[str, ...]


def emit_nests(scop: Scop, program: LoopProgram, prefix: str, *, fast_math: bool = True,
               threads: int | None = None) -> tuple[str, list[Nest]]:
    """A module of its own defining each of ``program``'s parts as a function named
    from ``prefix`` (unique across the modules of one kernel), hidden (another module's
    kernel calls them); its text and the nests, in order."""
    module = ir.Module(name=prefix)
    symbolic = scop.symbolic_params
    params = {name: ir.Constant(I64, value) for name, value in (scop.param_values or {}).items()}
    found = []
    for part in parts(program.root):
        fn, arrays = _emit_part(module, part, program, params, symbolic, threads, fast_math,
                                prefix)
        fn.linkage = "hidden"  # (llvmlite prints it where IR takes a visibility)
        found.append(Nest(fn.name, arrays))
    if not fast_math:
        _drop_fast_math(module)
    return _text(module), found


def _text(module: ir.Module) -> str:
    """The module's IR, each access group of a parallel loop
    (:meth:`_LoopEmitter._parallel_group`, a node naming :data:`ACCESS_GROUP` until
    then) made the empty ``distinct`` node LLVM requires (llvmlite prints none)."""
    return re.sub(rf'^(![0-9]+) = !{{\s*!"{ACCESS_GROUP}[0-9]+"\s*}}$', r"\1 = distinct !{}",
                  str(module), flags=re.M)


ACCESS_GROUP = "polyc.access.group."


def _drop_fast_math(module: ir.Module) -> None:
    for fn in module.functions:
        for block in fn.blocks:
            for instr in block.instructions:
                flags = getattr(instr, "flags", None)
                if flags:
                    flags[:] = [f for f in flags if f not in FAST]
                if getattr(instr, "fastmath", None):
                    instr.fastmath = type(instr.fastmath)(())


def _constants(module: ir.Module, scop: Scop, plan: BufferPlan) -> list[ir.GlobalVariable]:
    """Declarations of the constants: read-only, 64-byte aligned, defined outside the
    module and read through the GOT, so that one object file serves MCJIT (which binds
    them to buffers anywhere in memory) and artifacts (whose linker turns the GOT loads
    into direct addresses of the library's hidden constants)."""
    result = []
    for name in plan.constants:
        typ = ir.ArrayType(ir.IntType(8), scop.array(name).nbytes)
        gv = ir.GlobalVariable(module, typ, name=constant_symbol(name))
        gv.global_constant, gv.align = True, ALIGN
        result.append(gv)
    return result


def _entry(module, kernel, scop: Scop, program: LoopProgram, plan: BufferPlan,
           globals_: list) -> None:
    n_pointers = len(plan.inputs) + len(plan.outputs) + 1
    types = [PTR] * n_pointers + [I64] * len(plan.params)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), types), name=ENTRY)
    for arg in fn.args[:n_pointers]:
        arg.add_attribute("noalias")
    for arg, name in zip(fn.args[n_pointers:], plan.params):
        arg.name = value_name(name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    *pointers, scratch = fn.args[:n_pointers]
    values = dict(zip(plan.params, fn.args[n_pointers:]))
    offsets = [ir.Constant(I64, off) for off in plan.scratch.values()]
    offsets += _symbolic_offsets(b, scop, program, plan, values)[:-1]
    temps = [b.gep(scratch, [off], inbounds=True, source_etype=ir.IntType(8)) for off in offsets]
    b.call(kernel, pointers + temps + list(globals_) + list(values.values()))
    b.ret_void()


def _symbolic_offsets(b: ir.IRBuilder, scop: Scop, program: LoopProgram, plan: BufferPlan,
                      values: Mapping[str, ir.Value]) -> list[ir.Value]:
    """The scratch offsets of the temporaries of symbolic size, then the end of the last."""
    offset = ir.Constant(I64, plan.scratch_bytes)
    result = [offset]
    lookup = values.__getitem__
    for name in plan.symbolic:
        array = scop.array(name)
        size = ir.Constant(I64, array.itemsize)
        for extent in array.shape:
            size = b.mul(size, _extent_value(b, program, extent, lookup))
        rounded = b.and_(b.add(size, ir.Constant(I64, ALIGN - 1)), ir.Constant(I64, -ALIGN))
        offset = b.add(offset, rounded)
        result.append(offset)
    return result


def _scratch_function(module, scop: Scop, program: LoopProgram, plan: BufferPlan) -> None:
    """The exported ``int64_t polyc_scratch_bytes(int64_t params...)``."""
    fn = ir.Function(module, ir.FunctionType(I64, [I64] * len(plan.params)),
                     name=SCRATCH_FUNCTION)
    for arg, name in zip(fn.args, plan.params):
        arg.name = value_name(name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(_symbolic_offsets(b, scop, program, plan, dict(zip(plan.params, fn.args)))[-1])


def _extent_value(b: ir.IRBuilder, program: LoopProgram, extent: int | str, lookup
                  ) -> ir.Value:
    """An array extent as an i64: a constant, ``lookup(name)`` of a symbolic parameter,
    or an expression of them (``program.extents``)."""
    if isinstance(extent, int):
        return ir.Constant(I64, extent)
    if extent.isidentifier():
        return lookup(extent)
    return int_expr(b, program.extents[extent], lookup)


def _kernel(module, scop: Scop, program: LoopProgram | None, arrays: tuple[str, ...],
            threads: int | None, profile: bool, fast_math: bool,
            nests: Sequence[Nest] | None) -> ir.Function:
    symbolic = scop.symbolic_params
    types = [PTR] * len(arrays) + [I64] * len(symbolic)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), types), name="polyc_kernel")
    fn.linkage = "internal"
    for arg, name in zip(fn.args, arrays + symbolic):  # not noalias: temporaries with
        arg.name = value_name(name)  # disjoint lifetimes share scratch
    pointers = dict(zip(arrays, fn.args))
    params = {name: ir.Constant(I64, value) for name, value in (scop.param_values or {}).items()}
    params.update(zip(symbolic, fn.args[len(arrays):]))
    emitter = _LoopEmitter(fn, pointers, program, params, threads=threads,
                           reassociate=fast_math)
    if nests is not None:
        for nest in nests:
            types = [PTR] * len(nest.arrays) + [I64] * len(symbolic)
            declared = ir.Function(module, ir.FunctionType(ir.VoidType(), types), name=nest.name)
            emitter.builder.call(declared, [pointers[a] for a in nest.arrays]
                                 + [params[p] for p in symbolic])
        emitter.builder.ret_void()
        return fn
    nodes = parts(program.root)
    timers = Timers(module, len(nodes), emitter.entry_alloca) if profile else None
    for k, part in enumerate(nodes):
        part_fn, arrays_of = _emit_part(module, part, program, params, symbolic, threads,
                                        fast_math)
        args = [pointers[a] for a in arrays_of] + [params[p] for p in symbolic]
        if timers is None:
            emitter.builder.call(part_fn, args)
        else:
            timers.call(emitter.builder, k, part_fn, args)
    emitter.builder.ret_void()
    return fn


def _emit_part(module: ir.Module, node: isl.AstNode, program: LoopProgram,
               kernel_params: Mapping[str, ir.Value], symbolic: tuple[str, ...],
               threads: int | None, reassociate: bool, prefix: str = "polyc_kernel"
               ) -> tuple[ir.Function, tuple[str, ...]]:
    """``node`` as ``void <prefix>.partN(ptr noalias arrays.., i64 symbolic..)`` and the
    memories it takes."""
    arrays = parallel.arrays_in(node, program)
    fn = parallel.noalias_function(module, f"{prefix}.part", arrays, symbolic)
    params = dict(kernel_params)
    params.update(zip(symbolic, fn.args[len(arrays):]))
    emitter = _LoopEmitter(fn, dict(zip(arrays, fn.args)), program, params, threads=threads,
                           reassociate=reassociate)
    emitter.node(node)
    emitter.builder.ret_void()
    return fn, arrays


def loop_hints(module: ir.Module, *, vectorize: bool = True,
               parallel: ir.MDValue | None = None, unroll: bool = False,
               width: int | None = None) -> ir.MDValue:
    """A fresh ``llvm.loop`` id for an innermost loop: no unrolling by LLVM's loop
    unroller, which fully unrolls short loops before the vectorizer sees them and then
    vectorizes the copies badly (the vectorizer still interleaves); with ``vectorize``
    False, no vectorizing but unrolling as LLVM likes (a loop of vector statements).
    ``parallel`` (an access group) adds ``llvm.loop.parallel_accesses`` of it, and then
    the unroller is left alone when ``unroll``. llvmlite has no ``distinct`` nodes: the
    id refers to itself, and a node naming a counter keeps ids apart (a node: LLVM reads
    every operand of a loop id after the first as one, and aborted on a bare string
    once a loop had ``parallel_accesses``). ``width`` adds
    ``llvm.loop.vectorize.width``: the lanes LLVM's vectorizer is to use."""
    hints = []
    if not vectorize:
        hints.append(module.add_metadata([ir.MetaDataString(module, "llvm.loop.vectorize.enable"),
                                          ir.Constant(I1, 0)]))
    elif not unroll:
        hints.append(module.add_metadata([ir.MetaDataString(module,
                                                            "llvm.loop.unroll.disable")]))
    if parallel is not None:
        hints.append(module.add_metadata([ir.MetaDataString(module,
                                                            "llvm.loop.parallel_accesses"),
                                          parallel]))
    if width is not None and vectorize:
        hints.append(module.add_metadata([ir.MetaDataString(module,
                                                            "llvm.loop.vectorize.width"),
                                          ir.Constant(ir.IntType(32), width)]))
    return _loop_id(module, *hints)


def unroll_hint(module: ir.Module) -> ir.MDValue:
    """A fresh ``llvm.loop`` id asking LLVM to unroll the loop fully."""
    return _loop_id(module, module.add_metadata(
        [ir.MetaDataString(module, "llvm.loop.unroll.full")]))


def _loop_id(module: ir.Module, *hints: ir.MDValue) -> ir.MDValue:
    count = len(module.metadata)
    loop_id = module.add_metadata([*hints, module.add_metadata(
        [ir.MetaDataString(module, f"polyc.loop.{count}")])])
    loop_id.operands = (loop_id, *loop_id.operands)
    return loop_id


def _accumulated_dot4(expr: Call) -> tuple[object, Call] | None:
    """``(acc, dot)`` for a body ``acc + dot4(..)`` (either order), else None."""
    if expr.fn != "add":
        return None
    for acc, dot in (expr.args, expr.args[::-1]):
        if isinstance(dot, Call) and dot.fn == "dot4":
            return acc, dot
    return None


def _lane_by_lane(instance, iterator: str) -> bool:
    """Whether a statement instance must run scalar even under a vector mark: lookups
    (an address per element) load lane by lane, and so do bounded reads but those whose
    guard is a lane-wise condition on ``iterator`` and whose unclamped offset is known
    (loaded masked by the guard)."""
    if any(r.lookup is not None for r in instance.statement.reads):
        return True
    return any(guard is not None and (instance.unclamped[k] is None
                                      or not vector.lane_wise(guard, iterator))
               for k, guard in enumerate(instance.guards))


def _most_iterations(init: isl.AstExpr, last: isl.AstExpr) -> int | None:
    """The most times ``for (c = init; c <= last; c++)`` runs when ``last`` is a min
    with a term a constant from ``init`` (a tile's rows ``6 * c5 .. min(11, 6 * c5 + 5)``),
    else None."""
    if last.get_type() != isl.ast_expr_type.op or \
            last.op_get_type() != isl.ast_expr_op_type.min:
        return None
    spans = [vector.difference(last.op_get_arg(k), init) for k in range(last.op_get_n_arg())]
    known = [span for span in spans if span is not None]
    return min(known) + 1 if known and min(known) >= 0 else None


def _users(node: isl.AstNode) -> Iterator[isl.AstNode]:
    """The user nodes (statement instances) below ``node``."""
    if node.get_type() == isl.ast_node_type.user:
        yield node
    for child in children(node):
        yield from _users(child)


def _contains_loop(node: isl.AstNode) -> bool:
    """Whether ``node`` is a loop or has one below it."""
    return node.get_type() == isl.ast_node_type.for_ or any(
        _contains_loop(child) for child in children(node))


class _LoopEmitter:
    """Walks the isl AST; loop iterators live in entry-block allocas (mem2reg lifts them);
    ``params`` gives the i64 value of each parameter id: the constant of a bound one,
    the function's argument for a symbolic one. In an outlined loop body,
    ``outer`` gives the values of the enclosing loops' iterators (its parameters), and
    parallel marks are emitted serially."""

    def __init__(self, fn: ir.Function, pointers: dict, program: LoopProgram,
                 params: Mapping[str, ir.Value], *, threads: int | None = None,
                 outer: Mapping[str, ir.Value] | None = None, reassociate: bool = True):
        self.fn, self.pointers, self.program, self.params = fn, pointers, program, params
        self.entry = fn.append_basic_block("entry")
        self.builder = ir.IRBuilder(fn.append_basic_block("body"))
        self.iterators: dict[str, ir.AllocaInstr] = {}
        self.entry_builder = ir.IRBuilder(self.entry)
        self._entry_jump = self.entry_builder.branch(self.builder.block)
        self.vector = False  # inside a vector mark
        self.register_tile = False  # inside a register tile: LLVM unrolls as it likes
        self.unrolled: frozenset[str] = frozenset()  # iterators of loops to unroll here
        self.known: dict[str, vector.Linear] = {}  # unrolled iterators in this copy
        self.threads = threads
        self.reassociate = reassociate  # long sums may be summed in another order
        self.outer = dict(outer or {})
        self.serial = outer is not None or threads == 1  # parallel marks run serially
        self.scope: list[str] = []  # iterators of the loops around the current node
        # while rows run together (polyc.codegen.jam): the row iterator, its value at the
        # first row and the current row's shift, added to offsets as a constant
        self.row_shift: tuple[str, ir.Value, int] | None = None

    def node(self, node: isl.AstNode) -> None:
        kinds = isl.ast_node_type
        emit = {kinds.for_: self.for_, kinds.if_: self.if_, kinds.block: self.block,
                kinds.user: self.user, kinds.mark: self.mark}[node.get_type()]
        emit(node)

    def int_value(self, expr: isl.AstExpr) -> ir.Value:
        return int_expr(self.builder, expr, self.iterator_value)

    def iterator_value(self, name: str) -> ir.Value:
        if name in self.iterators:
            return self.builder.load(self.iterators[name], typ=I64)
        if name in self.outer:
            return self.outer[name]
        if name in self.params:
            return self.params[name]
        raise CodegenError(f"the isl AST uses {name!r}, neither a loop iterator nor a bound "
                           "parameter")

    def _iterator_slot(self, name: str) -> ir.AllocaInstr:
        if name not in self.iterators:
            self.iterators[name] = self.entry_alloca(I64, name)
        return self.iterators[name]

    def entry_alloca(self, typ: ir.Type, name: str = "") -> ir.AllocaInstr:
        self.entry_builder.position_before(self._entry_jump)
        return self.entry_builder.alloca(typ, name=value_name(name))

    def for_(self, node: isl.AstNode) -> None:
        if self._unrolled_trips(node):
            self.unrolled_loop(node)
            return
        if self.vector:
            lanes = vector.lanes(node, self._offsets, self.known)
            if lanes is not None and _lane_by_lane(self.program.instance(lanes.user),
                                                   lanes.iterator):
                lanes = None
            if lanes is not None and lanes.width != vector.LANES and any(
                    self.program.instance(lanes.user).guards):  # (masks of LANES lanes)
                lanes = replace(lanes, full=False, width=vector.LANES)
        else:
            lanes = self.loop_lanes(node)
        if lanes is not None and self.vector:
            self.vector_user(lanes)
            return
        if lanes is not None:
            self.vector_loop(lanes)
            return
        fold = None if self.vector or self.register_tile else folds.fold_loop(self, node)
        if fold is not None:
            folds.emit(self, fold)
            return
        rows = None if self.vector or self.register_tile else jam.window_rows(self, node)
        if rows is not None:
            jam.jammed_rows(self, node, *rows)
            return
        self.loop(node, self.int_value(node.for_get_init()))

    def _unrolled_trips(self, node: isl.AstNode) -> int | None:
        """The trip count of a loop that an unroll mark names when it is a constant (a
        full register tile's rows or vectors of a row), or at most one (a bound
        ``min(N, first + c)``: those copies are guarded), else None."""
        if not self.unrolled or self.vector or node.get_type() != isl.ast_node_type.for_:
            return None
        loop = vector.unit_loop(node)
        if loop is None or loop[0] not in self.unrolled:
            return None
        return vector.iterations(loop[1], loop[2]) or _most_iterations(loop[1], loop[2])

    def unrolled_loop(self, node: isl.AstNode) -> None:
        """The body of a loop of constant trip count once per iteration, its iterator a
        constant offset from the first value in each copy; of a trip count only bounded,
        as many copies as the bound, each run if its value is within the loop's."""
        b = self.builder
        name, init, last = vector.unit_loop(node)
        slot = self._iterator_slot(name)
        first, form = self.int_value(init), vector.linear(init, self.known)
        exact = vector.iterations(init, last) is not None
        bound = None if exact else self.int_value(last)
        self.scope.append(name)
        for k in range(self._unrolled_trips(node)):
            value = b.add(first, ir.Constant(I64, k)) if k else first
            b.store(value, slot)
            if form is not None:
                self.known[name] = {**form, "": form.get("", 0) + k}
            if exact:
                self.node(node.for_get_body())
            else:
                with b.if_then(b.icmp_signed("<=", value, bound)):
                    self.node(node.for_get_body())
        self.known.pop(name, None)
        self.scope.pop()

    def vector_loop(self, lanes: vector.Lanes, rows: jam.Rows | None = None) -> None:
        """The whole loop ``init..bound``, :data:`vector.LANES` iterations at a time, the
        last ones (fewer than LANES) masked; with ``rows``, each vector for several rows
        (:func:`jam.jammed_vectors`)."""
        latch = self.lane_chunks(lanes.iterator, lanes.init, lanes.bound,
                                 lambda mask: self._vector_rows(lanes, mask, rows), "v")
        if self._unrolled_vector_loop(lanes):
            latch.set_metadata("llvm.loop", unroll_hint(self.fn.module))

    def lane_chunks(self, iterator: str, init: isl.AstExpr, bound: isl.AstExpr,
                    body: Callable[[ir.Value | None], None], kind: str) -> ir.Instruction:
        """``body(None)`` for each :data:`vector.LANES` iterations of ``iterator`` from
        ``init`` to ``bound`` (inclusive), then ``body(mask)`` once for the fewer left,
        if any; the whole chunks' latch branch, for loop metadata."""
        b = self.builder
        slot = self._iterator_slot(iterator)
        b.store(self.int_value(init), slot)
        last = self.int_value(bound)
        latch = self.chunks(slot, vector.LANES, last, lambda: body(None), kind)
        trips = vector.iterations(init, bound)
        if trips is not None and trips % vector.LANES == 0:
            return latch  # whole vectors only
        start = b.load(slot, typ=I64)
        with b.if_then(b.icmp_signed("<=", start, last)):
            body(vector.lane_mask(b, start, last))
        return latch

    def chunks(self, slot: ir.AllocaInstr, size: int, last: ir.Value, body: Callable[[], None],
               kind: str, step: int = 1) -> ir.Instruction:
        """``while (slot + (size - 1) * step <= last) { body(); slot += size * step; }``,
        the iterator in ``slot`` (from its current value; left at the first value not
        run); the latch branch, for loop metadata. ``kind`` names the blocks."""
        b = self.builder
        header = self.fn.append_basic_block(f"{slot.name}.{kind}header")
        inside = self.fn.append_basic_block(f"{slot.name}.{kind}body")
        rest = self.fn.append_basic_block(f"{slot.name}.{kind}rest")
        b.branch(header)
        b.position_at_end(header)
        chunk_last = b.add(b.load(slot, typ=I64), ir.Constant(I64, (size - 1) * step))
        b.cbranch(b.icmp_signed("<=", chunk_last, last), inside, rest)
        b.position_at_end(inside)
        body()
        b.store(b.add(b.load(slot, typ=I64), ir.Constant(I64, size * step)), slot)
        latch = b.branch(header)
        b.position_at_end(rest)
        return latch

    def _vector_rows(self, lanes: vector.Lanes, mask, rows: jam.Rows | None) -> None:
        """One vector instance of ``lanes.user``, or with ``rows`` one per row."""
        if rows is None:
            self._vector_body(lanes, mask)
        else:
            jam.jammed_vectors(self, lanes, mask, rows)

    def _unrolled_vector_loop(self, lanes: vector.Lanes) -> bool:
        """Whether the whole vectors of a loop of a statement with guarded reads (a
        window's border, masked lane by lane) are few enough, a known number, to unroll:
        the masks of the unrolled vectors are constants. LLVM unrolled such a loop by
        itself when the body was small; a 3x3 depthwise conv + SiLU over 32 channels at
        112x112 (7 vectors a row) kept its loop and computed 10 mask instructions per
        vector (0.272 ms, 0.122 with Relu)."""
        guarded = any(g is not None for g in self.program.instance(lanes.user).guards)
        span = vector.difference(lanes.bound, lanes.init)
        if self._accumulates(lanes.user):
            return span is not None and span < vector.ACCUMULATOR_VECTORS * vector.LANES
        return guarded and span is not None and span < UNROLLED_VECTORS * vector.LANES

    def loop_lanes(self, node: isl.AstNode) -> vector.Lanes | None:
        """The lanes of a ``for`` node that runs as a whole vector loop, or None."""
        if node.get_type() != isl.ast_node_type.for_ or not self._whole_loop_vectors(node):
            return None
        lanes = vector.loop_lanes(node, self._offsets, self._arrays)
        if lanes is None or _lane_by_lane(self.program.instance(lanes.user), lanes.iterator):
            return None
        return lanes

    def _whole_loop_vectors(self, node: isl.AstNode) -> bool:
        """Whether to try :func:`vector.loop_lanes` on an innermost loop: not when it
        runs fewer than LANES iterations (all lanes masked), nor for a statement that
        updates what it reads (an accumulation, run again by an outer loop): masked
        stores then masked loads of the same elements defeat store forwarding and keep
        LLVM from holding them in registers (a 3x3 conv's product over 4 pixels took
        2.06 ms so, 0.07 ms left to LLVM), unless it runs a few whole vectors
        (:data:`vector.ACCUMULATOR_VECTORS`), unrolled: no masks, and LLVM keeps the
        sums in registers across the loops around it."""
        body = node.for_get_body()
        if body.get_type() != isl.ast_node_type.user:
            return False
        instance = self.program.instance(body)
        trips = vector.trip_count(node)
        if trips is not None and trips < vector.LANES and not any(instance.guards):
            return False  # (guarded loads: masked lanes beat a guard per element)
        if not self._accumulates(body):
            return True
        return trips is not None and trips % vector.LANES == 0 \
            and trips <= vector.ACCUMULATOR_VECTORS * vector.LANES

    def _accumulates(self, user: isl.AstNode) -> bool:
        """Whether the statement of ``user`` reads the array it writes."""
        statement = self.program.instance(user).statement
        return any(r.array == statement.write.array for r in statement.reads)

    def _arrays(self, user: isl.AstNode) -> list[str]:
        """The memories of a user node's accesses, write first (an array written in
        place is its source's memory)."""
        statement = self.program.instance(user).statement
        memory = self.program.memory
        return [memory(statement.write.array), *(memory(r.array) for r in statement.reads)]

    def loop(self, node: isl.AstNode, init: ir.Value, last: ir.Value | None = None) -> None:
        """The ``for`` node from ``init``; up to ``last`` (inclusive) instead of its own
        condition when given."""
        b = self.builder
        name = node.for_get_iterator().id_get_id().get_name()
        slot = self._iterator_slot(name)
        b.store(init, slot)
        header = self.fn.append_basic_block(f"{slot.name}.header")
        body = self.fn.append_basic_block(f"{slot.name}.body")
        exit_ = self.fn.append_basic_block(f"{slot.name}.exit")
        b.branch(header)
        b.position_at_end(header)
        cond = (self.int_value(node.for_get_cond()) if last is None
                else b.icmp_signed("<=", b.load(slot, typ=I64), last))
        b.cbranch(cond, body, exit_)
        b.position_at_end(body)
        self.scope.append(name)
        self.node(node.for_get_body())
        self.scope.pop()
        step = b.add(b.load(slot, typ=I64), self.int_value(node.for_get_inc()))
        b.store(step, slot)
        latch = b.branch(header)
        group = self._parallel_group(node, body)
        if group is not None:
            latch.set_metadata("llvm.loop", loop_hints(
                self.fn.module, parallel=group, unroll=not self._short_inner_loop(node),
                width=self._register_lanes(node) if WIDTH_HINTS else None))
        elif self._short_inner_loop(node):
            latch.set_metadata("llvm.loop", loop_hints(self.fn.module))
        elif self.register_tile and self._accumulations(node.for_get_body()):
            # a register tile's unrolled updates (the k loops): in a partial tile of
            # single-lane updates LLVM had vectorized such a loop with a gather and a
            # scatter per k step, in a parallel loop's body (a 1x1 conv over 7x7 pixels
            # took 0.30 ms, 0.20 ms so); full tiles are vector code already. Other
            # loops of a tile, such as a sigmoid epilogue's, gain from the vectorizer
            latch.set_metadata("llvm.loop", loop_hints(self.fn.module, vectorize=False))
        b.position_at_end(exit_)

    def _parallel_group(self, node: isl.AstNode, body: ir.Block) -> ir.MDValue | None:
        """For an innermost loop whose iterations carry no dependence
        (:meth:`LoopProgram.carries_nothing`), over arrays of their own memory (none a
        temporary, none written in place of another): its memory accesses (in
        ``body`` and the blocks made after it) put in an access group, which is returned for the
        loop's ``llvm.loop.parallel_accesses``: LLVM's vectorizer then needs no
        run-time check that the arrays' elements do not overlap. Else None."""
        if self.register_tile or self.vector or _contains_loop(node.for_get_body()):
            return None
        shared = set(self.program.storage) | set(self.program.storage.values())
        for user in _users(node.for_get_body()):
            statement = self.program.instance(user).statement
            for access in (statement.write, *statement.reads):
                array = self.program.arrays.get(access.array)
                if array is None or array.kind == "temp" or access.array in shared:
                    return None
        if not self.program.carries_nothing(node):
            return None
        module = self.fn.module  # (a group of its own: a node naming it until printed)
        group = module.add_metadata(
            [ir.MetaDataString(module, f"{ACCESS_GROUP}{len(module.metadata)}")])
        blocks = self.fn.blocks
        for block in blocks[blocks.index(body):]:  # (all made since: the loop's)
            for instruction in block.instructions:
                pointer = instruction.operands[0] if isinstance(instruction, ir.LoadInstr) \
                    else instruction.operands[1] if isinstance(instruction, ir.StoreInstr) \
                    else None
                if pointer is not None and not isinstance(pointer, ir.AllocaInstr):
                    instruction.set_metadata("llvm.access.group", group)
        return group

    def _register_lanes(self, node: isl.AstNode) -> int:
        """The lanes of one of this host's vector registers in the widest type the loop
        ``node``'s statements compute in (4 doubles with AVX2, 16 floats with AVX-512)."""
        widest = max(scalars.alignment(scalars.register_type(self._dtype(access.array)))
                     for user in _users(node.for_get_body())
                     for access in (self.program.instance(user).statement.write,
                                    *self.program.instance(user).statement.reads))
        return max(1, host.vector_bits() // (8 * max(1, widest)))

    def _accumulations(self, node: isl.AstNode) -> bool:
        """Whether ``node`` (under marks) is statement instances that each update the
        element they read (a contraction's updates, unrolled), with no loop."""
        while node.get_type() == isl.ast_node_type.mark or self._unrolled_trips(node):
            node = node.mark_get_node() if node.get_type() == isl.ast_node_type.mark \
                else node.for_get_body()
        if node.get_type() == isl.ast_node_type.block:
            return all(self._accumulations(child) for child in children(node))
        if node.get_type() != isl.ast_node_type.user:
            return False
        statement = self.program.instance(node).statement
        return any(r.array == statement.write.array for r in statement.reads)

    def _short_inner_loop(self, node: isl.AstNode) -> bool:
        """An innermost loop (outside register tiles) with a SHORT_LOOP trip count."""
        if self.register_tile or _contains_loop(node.for_get_body()):
            return False
        trips = vector.trip_count(node)
        return trips is not None and SHORT_LOOP[0] <= trips <= SHORT_LOOP[1]

    def if_(self, node: isl.AstNode) -> None:
        b = self.builder
        cond = self.int_value(node.if_get_cond())
        if node.if_has_else_node():
            with b.if_else(cond) as (then, otherwise):
                with then:
                    self.node(node.if_get_then_node())
                with otherwise:
                    self.node(node.if_get_else_node())
        else:
            with b.if_then(cond):
                self.node(node.if_get_then_node())

    def block(self, node: isl.AstNode) -> None:
        children = node.block_get_children()
        for k in range(children.n_ast_node()):
            self.node(children.get_at(k))

    def mark(self, node: isl.AstNode) -> None:
        name, child = node.mark_get_id().get_name(), node.mark_get_node()
        bounds = parallel.loop_bounds(child) if name == parallel.MARK else None
        if bounds is not None and not self.serial:
            self.parallel_loop(child, bounds)
            return
        if name == transpose.MARK and self.transpose_block(child):
            return
        outer = self.vector, self.register_tile, self.unrolled
        self.vector = self.vector or name == vector.MARK
        self.register_tile = self.register_tile or name == vector.REGISTER_TILE
        self.unrolled = self.unrolled | unrolled_iterators(name)
        self.node(child)
        self.vector, self.register_tile, self.unrolled = outer

    def parallel_loop(self, node: isl.AstNode, bounds: parallel.Bounds) -> None:
        """The ``for`` node as a body function of its own, run on the threads."""
        arrays = parallel.arrays_in(node, self.program)
        symbolic = [p for p in self.params if not isinstance(self.params[p], ir.Constant)
                    and p not in self.outer]
        outer = [*self.outer, *self.scope, *symbolic]
        body = parallel.body_function(self.fn.module, f"{self.fn.name}.loop{bounds.iterator}",
                                      arrays, outer, bounds.iterator)
        n = len(arrays)
        emitter = _LoopEmitter(body, dict(zip(arrays, body.args[:n])), self.program,
                               self.params, threads=self.threads, reassociate=self.reassociate,
                               outer=dict(zip(outer, body.args[n:])))
        lo, hi = parallel.within(emitter.builder, *body.args[-2:],
                                 emitter.int_value(bounds.init), emitter.int_value(bounds.last))
        emitter.loop(node, lo, hi)
        emitter.builder.ret_void()
        values = [self.pointers[a] for a in arrays] + [self.iterator_value(i) for i in outer]
        parallel.call(self.builder, self.entry_alloca, body, values,
                      self.int_value(bounds.init), self.int_value(bounds.last), bounds.step,
                      self.threads)

    def _offsets(self, user: isl.AstNode) -> list[isl.AstExpr]:
        """The access offsets of a user node as vector code uses them (write first): a
        guarded read's unclamped offset."""
        instance = self.program.instance(user)
        return [instance.write, *(instance.unclamped[k] if instance.guards
                                  and instance.unclamped[k] is not None else offset
                                  for k, offset in enumerate(instance.reads))]

    def vector_user(self, lanes: vector.Lanes) -> None:
        """One vector instance of a statement for the lanes ``init..bound``."""
        b = self.builder
        slot = self._iterator_slot(lanes.iterator)
        init = self.int_value(lanes.init)
        b.store(init, slot)  # the offsets, evaluated at the first lane
        if lanes.full:
            self._vector_body(lanes, None)
            return
        bound = self.int_value(lanes.bound)
        with b.if_then(b.icmp_signed("<=", init, bound)):
            self._vector_body(lanes, vector.lane_mask(b, init, bound))

    def _vector_body(self, lanes: vector.Lanes, mask,
                     given: Mapping[int, ir.Value] | None = None) -> None:
        """One vector instance of ``lanes.user``; ``given[k]`` is the value of read ``k``
        in memory type, loaded already."""
        b = self.builder
        instance = self.program.instance(lanes.user)
        statement = instance.statement

        def load(k: int, at=None) -> tuple[ir.Value, str]:
            if given and k in given:
                dtype = self._dtype(statement.reads[k].array)
                return scalars.from_memory(b, given[k], dtype), dtype
            return self.vector_load(lanes, k, mask)

        value, dtype = self._body(statement.body, load, lanes.width)
        address = self._address(statement.write.array, instance.write)
        vector.store(b, scalars.to_memory(b, value, dtype,
                                          self._memory_type(statement.write.array)),
                     address, mask)

    def vector_load(self, lanes: vector.Lanes, k: int, mask) -> tuple[ir.Value, str]:
        """The value of read ``k`` of the vector statement ``lanes`` and its dtype."""
        b = self.builder
        instance = self.program.instance(lanes.user)
        array = instance.statement.reads[k].array
        element, dtype = self._memory_type(array), self._dtype(array)
        guard = instance.guards[k] if instance.guards else None
        if guard is not None:  # lanes outside the array: masked off, the fill
            return self._guarded_load(lanes, k, mask), dtype
        width = lanes.width
        if not self.program.arrays[array].stored:  # positions: the lanes' indices
            first = vector.splat(b, self._element(array, instance.reads[k]), width)
            return (b.add(first, vector.lane_numbers(width)) if lanes.strides[1 + k]
                    else first), dtype
        address = self._address(array, instance.reads[k])
        if lanes.strides[1 + k]:
            value = vector.load(b, address, mask, element, width=width)
            return scalars.from_memory(b, value, dtype), dtype
        value = b.load(address, typ=element, align=scalars.alignment(element))
        return vector.splat(b, scalars.from_memory(b, value, dtype), width), dtype

    def transpose_block(self, node: isl.AstNode) -> bool:
        """The block ``node`` under a transpose mark as vectors transposed in registers
        (:mod:`polyc.codegen.transpose`), or False when it does not fit: bounded
        reads and lookups load lane by lane."""
        block = transpose.block(node, self._offsets)
        instance = None if block is None else self.program.instance(block.user)
        if instance is None or any(g is not None for g in instance.guards) or any(
                r.lookup is not None for r in instance.statement.reads):
            return False
        b = self.builder
        row_slot = self._iterator_slot(block.rows.iterator)
        lane_slot = self._iterator_slot(block.lanes.iterator)
        first_row, last_row = self.int_value(block.rows.init), self.int_value(block.rows.bound)
        first_lane = self.int_value(block.lanes.init)
        last_lane = self.int_value(block.lanes.bound)
        full = all(vector.difference(loop.bound, loop.init) == vector.LANES - 1
                   for loop in (block.rows, block.lanes))
        row_mask = None if full else vector.lane_mask(b, first_row, last_row)
        lane_mask = None if full else vector.lane_mask(b, first_lane, last_lane)
        columns = {}
        b.store(first_row, row_slot)
        for k, transposed in enumerate(block.transposed):
            if not transposed:
                continue
            array = instance.statement.reads[k].array
            loaded = []
            for j in range(vector.LANES):
                lane = b.add(first_lane, ir.Constant(I64, j))
                b.store(lane, lane_slot)
                mask = row_mask if full else b.and_(
                    row_mask, vector.splat(b, b.icmp_signed("<=", lane, last_lane)))
                loaded.append(vector.load(b, self._address(array, instance.reads[k]), mask,
                                          self._memory_type(array)))
            columns[k] = transpose.transpose(b, loaded)
        b.store(first_lane, lane_slot)
        lanes = vector.Lanes(block.lanes.iterator, block.lanes.init, block.lanes.bound, full,
                             block.user, (1, *(abs(d) for d in block.direct)))
        for i in range(vector.LANES):
            row = b.add(first_row, ir.Constant(I64, i))
            b.store(row, row_slot)
            given = {k: column[i] for k, column in columns.items()}
            if full:
                self._vector_body(lanes, None, given)
            else:
                with b.if_then(b.icmp_signed("<=", row, last_row)):
                    self._vector_body(lanes, lane_mask, given)
        return True

    def _guarded_load(self, lanes: vector.Lanes, k: int, mask) -> ir.Value:
        """Read ``k`` (with a guard) of the vector statement ``lanes``: loaded where the
        guard holds (and ``mask``), its fill elsewhere. A guard that holds for all lanes
        or none (a channels-last tap: lanes are channels) loads at the clamped offset,
        inside the array: a masked load whose lanes lie in a page not yet touched (before
        the first temporary of scratch) takes a microcode assist at every call (a 5x5
        depthwise conv 30x slower). Otherwise at the unclamped offset of the first lane."""
        b = self.builder
        instance = self.program.instance(lanes.user)
        access = instance.statement.reads[k]
        element, dtype = self._memory_type(access.array), self._dtype(access.array)
        first = b.load(self._iterator_slot(lanes.iterator), typ=I64)
        inside = vector.lane_condition(b, instance.guards[k], self.int_value, lanes.iterator,
                                       first)
        if mask is not None:
            inside = b.and_(inside, mask)
        if vector.uses(instance.guards[k], lanes.iterator):
            # not inbounds: the first lane's element may lie before the array
            address = b.gep(self._pointer(access.array),
                            [self._element(access.array, instance.unclamped[k])],
                            source_etype=element)
        else:  # all lanes inside or none: the clamped offset is the same where inside
            address = self._address(access.array, instance.reads[k])
        fill = scalars.constant(scalars.register_type(dtype, vector.LANES), dtype,
                                access.fill)
        if lanes.strides[1 + k]:
            return scalars.from_memory(b, vector.load(b, address, inside, element,
                                                      scalars.to_memory(b, fill, dtype, element)),
                                       dtype)
        # one element for every lane: loaded at the first lane's clamped offset, always
        # inside, unless the guard varies along the lanes: the first lane may then be
        # outside and its clamped element another one (a 1x1 window with padding and
        # stride 2 reads one pixel of x per row); where some lane is inside, the
        # unclamped offset is that element
        offset = self._element(access.array, instance.reads[k])
        if vector.uses(instance.guards[k], lanes.iterator):
            some = b.icmp_unsigned("!=", b.bitcast(inside, LANE_BITS), ir.Constant(LANE_BITS, 0))
            offset = b.select(some, self._element(access.array, instance.unclamped[k]), offset)
        scalar = b.load(b.gep(self._pointer(access.array), [offset], inbounds=True,
                              source_etype=element),
                        typ=element, align=scalars.alignment(element))
        return b.select(inside, vector.splat(b, scalars.from_memory(b, scalar, dtype)), fill)

    def user(self, node: isl.AstNode) -> None:
        instance = self.program.instance(node)
        statement = instance.statement
        addresses = [self._address(a.array, off) if a.lookup is None
                     and self.program.arrays[a.array].stored else None
                     for a, off in zip(statement.reads, instance.reads)]

        def load(k: int, at=None) -> tuple[ir.Value, str]:
            access = statement.reads[k]
            if not self.program.arrays[access.array].stored:
                return self._element(access.array, instance.reads[k]), "int64"
            address = addresses[k] if at is None else self._lookup_address(
                access, instance.reads[k], at)
            element, dtype = self._memory_type(access.array), self._dtype(access.array)
            loaded = self.builder.load(address, typ=element, align=scalars.alignment(element))
            value = scalars.from_memory(self.builder, loaded, dtype)
            guard = instance.guards[k] if instance.guards else None
            if guard is None:
                return value, dtype
            inside = self.int_value(guard)
            if inside.type != I1:  # isl may print a condition as an integer
                inside = self.builder.icmp_signed("!=", inside, ir.Constant(inside.type, 0))
            fill = scalars.constant(value.type, dtype, access.fill)
            return self.builder.select(inside, value, fill), dtype

        value, dtype = self._body(statement.body, load, None)
        element = self._memory_type(statement.write.array)
        self.builder.store(scalars.to_memory(self.builder, value, dtype, element),
                           self._address(statement.write.array, instance.write),
                           align=scalars.alignment(element))

    def _dtype(self, array: str) -> str:
        return self.program.arrays[array].dtype

    def _memory_type(self, array: str) -> ir.Type:
        return scalars.MEMORY[self.program.arrays[array].storage]

    def _address(self, array: str, offset: Offset) -> ir.Value:
        return self.builder.gep(self._pointer(array), [self._element(array, offset)],
                                inbounds=True, source_etype=self._memory_type(array))

    def _pointer(self, array: str) -> ir.Value:
        """The base of ``array``: its memory's (a function takes one pointer for the
        arrays that share memory, :func:`parallel.arrays_in`)."""
        return self.pointers[self.program.memory(array)]

    def _element(self, array: str, offset: Offset) -> ir.Value:
        """The element offset: isl's, or row-major from the indices of a symbolic shape.
        While rows run together (``row_shift``), an offset linear in the row iterator is
        the first row's plus a constant: equal addresses of two rows are then one value
        to LLVM."""
        b = self.builder
        if not isinstance(offset, tuple):
            form = None if self.row_shift is None else vector.linear(offset)
            if not form or not form.get(self.row_shift[0]):
                return self.int_value(offset)
            name, first, delta = self.row_shift
            value = int_expr(b, offset, lambda n: first if n == name else self.iterator_value(n))
            return b.add(value, ir.Constant(I64, form[name] * delta))
        shape = self.program.arrays[array].shape
        element = self.int_value(offset[0])
        for index, extent in zip(offset[1:], shape[1:]):
            element = b.add(b.mul(element, self._extent(extent)), self.int_value(index))
        return element

    def _extent(self, extent: int | str) -> ir.Value:
        return _extent_value(self.builder, self.program, extent, self.iterator_value)

    def _stride(self, shape, dim: int) -> ir.Value:
        """The element stride of ``dim``: a constant, times the later symbolic extents."""
        later = shape[dim + 1:]
        step = ir.Constant(I64, strides([1] + [e for e in later if isinstance(e, int)])[0])
        for extent in later:
            if isinstance(extent, str):
                step = self.builder.mul(step, self._extent(extent))
        return step

    def _lookup_address(self, access, offset: Offset, at: ir.Value) -> ir.Value:
        """The element of a lookup read: ``offset`` (index 0 along the looked-up dim)
        plus the index ``at`` (wrapped and clamped into the dim) times the dim's stride."""
        b = self.builder
        shape = self.program.arrays[access.array].shape
        extent = shape[access.lookup]
        index = scalars.index_within(b, at, extent if isinstance(extent, int)
                                     else self._extent(extent))
        element = b.add(self._element(access.array, offset),
                        b.mul(index, self._stride(shape, access.lookup)))
        return b.gep(self._pointer(access.array), [element], inbounds=True,
                     source_etype=self._memory_type(access.array))

    def _body(self, expr, load, lanes: int | None, memo: dict | None = None
              ) -> tuple[ir.Value, str]:
        """The value of a statement body and its dtype; ``load(k)`` (``load(k, at)`` for a
        LoadAt) gives the value of read ``k`` and its dtype; ``lanes`` is None for scalar
        code. Equal subtrees are emitted once (``memo``; a body has no control flow):
        an inlined producer read twice (SiLU's ``c * sigmoid(c)``) is one subtree."""
        if isinstance(expr, Const):  # not memoized: Const(0.0) == Const(-0.0)
            typ = scalars.register_type(expr.dtype, lanes)
            return scalars.constant(typ, expr.dtype, expr.value), expr.dtype
        memo = {} if memo is None else memo
        if expr in memo:
            return memo[expr]
        if isinstance(expr, Load):
            result = load(expr.k)
        elif isinstance(expr, LoadAt):
            at, _ = self._body(expr.at, load, lanes, memo)
            result = load(expr.k, at)
        elif isinstance(expr, Call) and (expr.fn == "dot4" or _accumulated_dot4(expr)):
            result = self._dot4(expr, load, lanes, memo)
        elif isinstance(expr, Call) and self.reassociate \
                and len(terms := sums.terms(expr)) >= sums.LONG_SUM:
            result = self._interleaved_sum([self._body(t, load, lanes, memo) for t in terms])
        elif isinstance(expr, Call):
            args = [self._quotient(arg, load, lanes, memo) if expr.fn in ROUNDED
                    and isinstance(arg, Call) and arg.fn == "div"
                    else self._body(arg, load, lanes, memo) for arg in expr.args]
            dtypes = tuple(dtype for _, dtype in args)
            value = scalars.call(self.builder, expr.fn, [v for v, _ in args], dtypes)
            result = value, result_dtype(expr.fn, dtypes)
        else:
            raise TypeError(f"not a statement body: {expr!r}")
        memo[expr] = result
        return result

    def _dot4(self, expr: Call, load, lanes, memo) -> tuple[ir.Value, str]:
        """core's ``dot4``, or ``acc + dot4(..)`` as one byte dot product into ``acc``
        (:mod:`polyc.codegen.bytedot`)."""
        acc, dot = (None, expr) if expr.fn == "dot4" else _accumulated_dot4(expr)
        quads = [self._body(a, load, lanes, memo) for a in dot.args[:4]]
        word, _ = self._body(dot.args[4], load, lanes, memo)
        total = ir.Constant(word.type, None) if acc is None else \
            self._body(acc, load, lanes, memo)[0]
        value = bytedot.dot4(self.builder, total, [v for v, _ in quads], word,
                             quads[0][1] == "int8")
        return value, "int32"

    def _quotient(self, expr: Call, load, lanes, memo) -> tuple[ir.Value, str]:
        """A division whose result is rounded to an integer next: rounded once, not a
        product with the reciprocal (``arcp``), which may put a half step on the other
        side (x / scale in a quantization)."""
        (x, dtype), (y, _) = (self._body(a, load, lanes, memo) for a in expr.args)
        value = scalars.call(self.builder, "div", [x, y], (dtype, dtype))
        if "arcp" in getattr(value, "flags", ()):
            value.flags.remove("arcp")
        return value, dtype

    def _interleaved_sum(self, terms: list[tuple[ir.Value, str]]) -> tuple[ir.Value, str]:
        """The sum of ``terms`` (values and dtypes) as SUM_CHAINS interleaved partial
        sums, then added pairwise (:mod:`polyc.codegen.sums`)."""
        chains = []
        for chain in range(sums.SUM_CHAINS):
            part = terms[chain::sums.SUM_CHAINS]
            total = part[0]
            for term in part[1:]:
                total = self.add(total, term)
            chains.append(total)
        return self.pairwise(chains)

    def pairwise(self, partial: list[tuple[ir.Value, str]]) -> tuple[ir.Value, str]:
        """Partial sums (values and dtypes) added pairwise."""
        while len(partial) > 1:
            partial = [self.add(*partial[k:k + 2]) if k + 1 < len(partial) else partial[k]
                       for k in range(0, len(partial), 2)]
        return partial[0]

    def add(self, x: tuple[ir.Value, str], y: tuple[ir.Value, str]) -> tuple[ir.Value, str]:
        """``x + y`` of values and dtypes, without ``reassoc`` (LLVM would make one chain
        of partial sums again)."""
        value = scalars.call(self.builder, "add", [x[0], y[0]], (x[1], y[1]))
        if "reassoc" in getattr(value, "flags", ()):
            value.flags.remove("reassoc")
        return value, result_dtype("add", (x[1], y[1]))
