"""Fusion groups: which statements a scheduler may interleave.

Groups run one after the other in program order; inside a group the scheduler
decides the loop structure. Policies:

- ``none``  every core op (a Map, or a Reduce's init + update) is its own group;
- ``smart`` an elementwise Map joins the group of the op that produced its input
  when it runs over that op's output shape (bias, activation epilogues; not after a
  window with padding, whose border cells run apart from its interior), and a
  row-wise op joins row-wise producers it reads from row by row (softmax: max, exp,
  sum and divide fuse at the row loop); contractions never join row-wise groups; a
  Recurrence (an LSTM's time loop) is a group of its own;
- ``max``   one group, but for contractions: in an ONNX model each of smart's groups
  that holds a contraction (a MatMul, Gemm, convolution: its init and update, and the
  epilogues smart gives it) stays a group of its own, which the scheduler treats as
  under smart, and the groups between them are merged into one (:func:`_max_runs`);
  a loop nest (one op) stays one group, which Pluto's maxfuse schedules as written.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polyc.errors import PolycError
from polyc.islutil import flat_offset
from polyc.scop.model import Scop, Statement

POLICIES = ("none", "smart", "max")
ALIASES = {"nofuse": "none", "smartfuse": "smart", "maxfuse": "max"}  # Pluto's names


@dataclass(frozen=True)
class FusionGroups:
    policy: str
    groups: tuple[tuple[str, ...], ...]  # statement names, program order
    inlined: tuple[str, ...] = ()  # notes of polyc.fusion.inline, before grouping
    apart: tuple[int, ...] = ()  # max: the groups kept apart around a contraction
    notes: tuple[str, ...] = ()  # why, one per group kept apart

    def policy_of(self, k: int) -> str:
        """The policy the scheduler applies inside group ``k``: smart for a group that
        max keeps apart around a contraction (:func:`_max_runs`), else the policy."""
        return "smart" if k in self.apart else self.policy

    def __str__(self) -> str:
        return "\n".join([*self.inlined, *self.notes,
                          *(f"G{k}: {', '.join(g)}" for k, g in enumerate(self.groups))])


def fuse(scop: Scop, *, policy: str = "smart", inlined: tuple[str, ...] = ()) -> FusionGroups:
    """Partition the statements of ``scop`` into consecutive fusion groups; ``inlined``
    records what :func:`polyc.fusion.inline.inline_temporaries` did before."""
    policy = canonical_policy(policy)
    by_op: dict[int, list[Statement]] = {}
    for statement in scop.statements:
        by_op.setdefault(statement.op_index, []).append(statement)
    ops = list(by_op.values())
    apart: tuple[int, ...] = ()
    if policy == "max" and len(ops) > 1:
        runs, apart = _max_runs(scop, ops)
    elif policy == "max":  # a loop nest (one op): Pluto's maxfuse on it as written
        runs = ops
    elif policy == "none":
        runs = ops
    else:
        runs = _smart_runs(scop, ops)
    return FusionGroups(policy, tuple(tuple(s.name for s in run) for run in runs), inlined,
                        apart, tuple(_apart_note(k, runs[k]) for k in apart))


def canonical_policy(policy: str) -> str:
    """``none``/``smart``/``max``, also accepting Pluto's ``nofuse``/``smartfuse``/``maxfuse``."""
    policy = ALIASES.get(policy, policy)
    if policy not in POLICIES:
        names = ", ".join(POLICIES + tuple(ALIASES))
        raise PolycError(f"unknown fusion policy {policy!r}; choose one of {names}")
    return policy


def _smart_runs(scop: Scop, ops: list[list[Statement]]) -> list[list[Statement]]:
    runs: list[list[Statement]] = []
    for op in ops:
        if runs and not _recurrent(op) and not _recurrent(runs[-1]) and (
                _is_epilogue(scop, op, runs[-1][-1]) or _shares_rows(op, runs[-1])):
            runs[-1].extend(op)
        else:
            runs.append(list(op))
    return runs


def _max_runs(scop: Scop, ops: list[list[Statement]]
              ) -> tuple[list[list[Statement]], tuple[int, ...]]:
    """max's groups and the indices of those kept apart: smart's groups
    (:func:`_smart_runs`) without a contraction merged while they follow one another;
    one with a contraction (its init and update, the epilogues smart gives it) stays a
    group of its own, scheduled as under smart. The register-tile recipe
    (:mod:`polyc.tiling.contraction`) needs a band holding the contraction alone. In
    one group, Pluto's maxfuse fuses a conv's init, update and Relu in one band, and on
    a small CNN (three 3x3 convs, a max pool, a Gemm; 1x3x32x32) the first chunk's ILP
    (16 statements, 88 variables) ran past LARGE_ILP_SECONDS into isl's scheduler,
    which fused the convs with their paddings: no conv kept its recipe, schedule 6.0 s
    and run 1.86 ms against smart's 0.6 s and 0.57 ms; kept apart, 0.5 s and 0.61 ms
    (benchmarks/fuse_policies.py, an AVX2 EPYC, one thread)."""
    runs: list[list[Statement]] = []
    apart: list[int] = []
    for run in _smart_runs(scop, ops):
        if any(_is_contraction(s) for s in run):
            apart.append(len(runs))
            runs.append(run)
        elif runs and len(runs) - 1 not in apart:
            runs[-1].extend(run)
        else:
            runs.append(run)
    return runs, tuple(apart)


def _apart_note(k: int, run: list[Statement]) -> str:
    """Why max keeps group ``k`` apart (for the groups' notes)."""
    names = ", ".join(s.name for s in run if _is_contraction(s))
    return (f"max: G{k} kept apart, scheduled as under smart: contraction {names} "
            f"(the register-tile recipe needs a band of its own)")


def _recurrent(statements: list[Statement]) -> bool:
    """A Recurrence's statements: a group of their own (the time loop around them)."""
    return any(s.recurrent for s in statements)


def _is_epilogue(scop: Scop, op: list[Statement], producer: Statement) -> bool:
    """An elementwise statement over the producer's output that reads that output: it
    writes a box of the same shape, or reads every element the producer writes once
    per instance, at the row-major offset it writes (through a reshaping view: a
    convolution writes (n, m, pixels), its Relu (n, m, h, w); not a transposed read,
    which the scheduler would fuse into the product's loops, costing its recipe)."""
    if len(op) != 1 or any(r.address is not None for r in producer.reads):
        return False  # a window with padding: its border cells run apart (tiling.borders)
    (statement,) = op
    written = statement.write.relation.range().reset_tuple_id()
    produced = producer.write.relation.range().reset_tuple_id()
    same_box = written.get_space() == produced.get_space() and written.is_equal(produced)
    reads = [r.relation for r in statement.reads if r.array == producer.write.array]
    if not reads or not all(r.is_equal(reads[0]) for r in reads):
        return False  # a window over the output (a depthwise conv): not elementwise
    if any(r.lookup is not None for r in statement.reads if r.array == producer.write.array):
        return False  # a gather at run-time indices: no element per instance
    if same_box:
        return True
    return (reads[0].is_injective() and reads[0].domain().is_equal(statement.domain)
            and reads[0].range().is_equal(producer.write.relation.range())
            and _same_offsets(scop, statement.write, reads[0], producer.write.array))


def _same_offsets(scop: Scop, write, read: isl.Map, read_array: str) -> bool:
    """Whether each instance reads the element at the row-major offset it writes."""
    shapes = [scop.array(write.array).shape, scop.array(read_array).shape]
    if any(isinstance(e, str) for shape in shapes for e in shape):
        return False
    return flat_offset(write.relation, shapes[0]).is_equal(flat_offset(read, shapes[1]))


def _shares_rows(op: list[Statement], run: list[Statement]) -> bool:
    """A row-wise op after row-wise producers (softmax, normalisations): it reads what
    the run wrote, and every such value flows within one index of the outermost loop
    (the writer's loop 0 is the element's index 0, which is the reader's loop 0). The
    scheduler can then fuse the group at the row loop, so each row's intermediates stay
    in cache. Contractions stay apart: their recipe needs a band of their own."""
    if any(_is_contraction(s) for s in run + op):
        return False
    writers = {s.write.array: s for s in run}
    flows = [(writers[r.array], r) for s in op for r in s.reads if r.array in writers]
    return bool(flows) and not _windowed(op, writers) and all(
        _first_index_is_loop_0(w.write.relation) and _first_index_is_loop_0(r.relation)
        and _rows(w.write.relation) for w, r in flows)


def _windowed(op: list[Statement], writers) -> bool:
    """Whether a statement of ``op`` reads an array of the run at several offsets (a
    window: pooling, a depthwise conv). Fused with its producer it would be shifted
    against it, and its padding could no longer run apart from its interior."""
    for statement in op:
        reads: dict[str, list[isl.Map]] = {}
        for r in statement.reads:
            if r.array in writers:
                reads.setdefault(r.array, []).append(r.relation)
        if any(not all(m.is_equal(maps[0]) for m in maps) for maps in reads.values()):
            return True
    return False


def _rows(write: isl.Map) -> bool:
    """More than one row: the first index of the written elements takes several values
    (not a batch of 1, whose single "row" is the whole tensor)."""
    first = write.range().project_out(isl.dim_type.set, 1, write.range().dim(isl.dim_type.set) - 1)
    return not first.is_singleton() if first.is_bounded() else True


def _is_contraction(statement: Statement) -> bool:
    """A reduction update multiplying two arrays (a MatMul, Gemm, convolution)."""
    return len(statement.reads) > 2 and statement.reads[0].array == statement.write.array \
        and sum(r.array != statement.write.array for r in statement.reads) >= 2


def _first_index_is_loop_0(access: isl.Map) -> bool:
    space = access.get_space()
    if space.dim(isl.dim_type.in_) == 0 or space.dim(isl.dim_type.out) == 0:
        return False
    same = (isl.Constraint.equality_alloc(isl.LocalSpace.from_space(space))
            .set_coefficient_val(isl.dim_type.in_, 0, 1)
            .set_coefficient_val(isl.dim_type.out, 0, -1))
    return access.is_subset(isl.Map.universe(space).add_constraint(same))
