"""The AST and LLVM IR of a schedule's top-level nests, generated on several processes.

After fusion the schedule is a sequence of groups whose code isl generates one by one:
the groups are dealt out to forked processes (:mod:`polyc.workers`, largest first),
each of which builds the AST of its groups alone (the schedule restricted to their
instances) and emits each top-level nest as a function of a module of its own
(:func:`polyc.codegen.llvm.emit_nests`). This process gets back the modules' text and,
per nest, its function and the memories it takes: enough for the buffer plan and the
kernel, which calls the nests in the schedule's order. The whole program's AST is built
here only if something asks for it (``Compilation.program``).

Programs with symbolic sizes, profiled builds and schedules that are not a sequence of
at least :data:`MIN_GROUPS` groups a process are generated in one piece.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import islpy as isl

from polyc import workers
from polyc.codegen.ast import build_ast, parts
from polyc.codegen.llvm import Nest, emit_nests
from polyc.codegen.parallel import users
from polyc.islutil import statement_names
from polyc.scop.model import Scop

# groups per process at least (a fork, a module and its parse cost some milliseconds;
# resnet18's 51 groups: AST and IR 1.7 s in one process)
MIN_GROUPS = 16
# Processes per core: they run at once, so the cores stay busy while one share takes
# longer than another (densenet121's two halves, equal in size, took 5.2 and 7.1 s of
# LLVM O3 and object: 7.9 s on 2 cores; in four shares 7.1 s)
SHARES_PER_JOB = 2


@dataclass(frozen=True)
class Apart:
    """Nests generated apart: the modules' LLVM IR and the nests in execution order."""

    modules: tuple[str, ...]
    nests: tuple[Nest, ...]

    @property
    def part_arrays(self) -> list[tuple[str, ...]]:
        return [nest.arrays for nest in self.nests]


def groups_of(schedule: isl.Schedule) -> list[isl.UnionSet] | None:
    """The instances of each child of the schedule's root sequence, or None when the
    root's child is not a sequence."""
    node = schedule.get_root().child(0)
    if node.get_type() != isl.schedule_node_type.sequence:
        return None
    return [node.child(k).filter_get_filter() for k in range(node.n_children())]


def _jobs(scop: Scop, groups: Sequence[isl.UnionSet] | None) -> int:
    """The processes to generate the nests on (SHARES_PER_JOB per core the work may
    use); below 2, generate them in one piece."""
    jobs = workers.jobs()
    if scop.symbolic_params or jobs < 2:
        return 1
    return min(jobs * SHARES_PER_JOB, len(groups or ()) // MIN_GROUPS)


def apart_possible(scop: Scop, schedule: isl.Schedule) -> bool:
    """Whether :func:`generate_apart` would use several processes."""
    return _jobs(scop, groups_of(schedule)) >= 2


def generate_apart(scop: Scop, schedule: isl.Schedule, storage: Mapping[str, str], *,
                   fast_math: bool, threads: int | None) -> Apart | None:
    """The nests of ``schedule`` generated on several processes, or None when the
    program is generated in one piece (see the module's docstring)."""
    groups = groups_of(schedule)
    jobs = _jobs(scop, groups)
    if jobs < 2:
        return None
    shares = _deal(groups, jobs)
    calls = [_share_call(scop, schedule, storage, groups, share, k, fast_math, threads)
             for k, share in enumerate(shares)]
    found: list[tuple[int, int, Nest]] = []
    modules = []
    for text, nests in workers.run_all(calls, "code generation"):
        modules.append(text)
        found += nests
    found.sort(key=lambda item: item[:2])
    return Apart(tuple(modules), tuple(nest for _, _, nest in found))


def _deal(groups: Sequence[isl.UnionSet], jobs: int) -> list[list[int]]:
    """The groups' indices dealt out to ``jobs`` shares, largest first (by statements)."""
    return [sorted(share) for share in
            workers.deal([len(statement_names(g)) for g in groups], jobs)]


def _share_call(scop: Scop, schedule: isl.Schedule, storage: Mapping[str, str],
                groups: Sequence[isl.UnionSet], share: list[int], k: int, fast_math: bool,
                threads: int | None):
    """The work of one process: its groups' AST and module; each nest comes back with
    its group and its place among that group's nests."""
    def run():
        instances = groups[share[0]]
        for g in share[1:]:
            instances = instances.union(groups[g])
        program = build_ast(scop, schedule.intersect_domain(instances), storage)
        text, nests = emit_nests(scop, program, f"polyc_kernel.s{k}", fast_math=fast_math,
                                 threads=threads)
        group_of = {name: g for g in share for name in statement_names(groups[g])}
        seen: dict[int, int] = {}
        placed = []
        for part, nest in zip(parts(program.root), nests):
            first = next(users(part), None)
            g = group_of[program.instance(first).statement.name] if first is not None \
                else share[0]
            seen[g] = seen.get(g, -1) + 1
            placed.append((g, seen[g], nest))
        return text, placed
    return run
