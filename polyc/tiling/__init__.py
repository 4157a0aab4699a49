"""Tiling: the schedule tree of the scheduler, rewritten for locality and vectors.

1. Contractions (:mod:`polyc.tiling.contraction`) get the BLIS-like recipe: their
   ``b`` operand is packed into panels by a new copy statement
   (:mod:`polyc.tiling.packing`) and their band is replaced by cache blocks around a
   register tile of vector accumulators (:mod:`polyc.tiling.microkernel`).
2. Every other permutable band is tiled rectangularly, with the intra-tile order
   chosen for stride-1 innermost access (:mod:`polyc.tiling.rectangular`), with
   ``tile2`` in two levels, L1 tiles inside L2 tiles (:mod:`polyc.tiling.levels`).
3. Bands with bounded reads are split into interior and border
   (:mod:`polyc.tiling.borders`), and a statement running in one iteration of an
   innermost loop runs before it (:mod:`polyc.tiling.hoist`).

Packing adds statements and an array, so tiling returns a new SCoP (with its
dependences recomputed) along with the new schedule.
"""

from __future__ import annotations

import dataclasses

import islpy as isl

from polyc.islutil import row_space, statement_names, union_sets
from polyc.options import checked_tile2
from polyc.scheduler.base import ScheduleResult
from polyc.scop.dependences import compute_dependences
from polyc.scop.model import Scop
from polyc.tiling import levels
from polyc.tiling.borders import split_borders
from polyc.tiling.cache import host_caches
from polyc.tiling.contraction import Contraction, byte_dot, match_contraction
from polyc.tiling.epilogue import Attached, attachable
from polyc.tiling.hoist import hoist_single_iterations
from polyc.tiling.inward import parallel_inward
from polyc.tiling.microkernel import (
    Blocking,
    as_blocking,
    choose_blocking,
    full_tiles,
    isolate_full_tiles,
    recipe_schedule,
)
from polyc.tiling.overrides import Lookup, per_statement, tile_sizes
from polyc.tiling.packing import pack, packable, packs_at_compile_time
from polyc.tiling.rebuild import rebuild
from polyc.tiling.rectangular import tile_bands
from polyc.tiling.reduction import program_order_reductions


def tile(scop: Scop, result: ScheduleResult, *, enabled: bool = True,
         size=None, blocking=None, parallel: bool = False,
         without: tuple[str, ...] = (), tile2: bool | int = False
         ) -> tuple[Scop, ScheduleResult]:
    """``(scop, result)`` with contractions packed and register-tiled and the other
    permutable bands tiled (``size`` per member, or from the host's cache sizes);
    ``blocking`` fixes the contraction sizes; each may also be a mapping from statement
    or ONNX node names to values (:mod:`polyc.tiling.overrides`); ``parallel`` (the
    code will run on several threads) shapes the contraction blocks for them;
    ``enabled=False`` keeps everything as is; ``without`` names strategies to leave
    out (:mod:`polyc.strategies`); ``tile2`` tiles the rectangular bands' tiles again
    (:mod:`polyc.tiling.levels`: True sized from the caches, an int ``r`` that many
    first-level tiles per member; contractions keep their own cache blocks)."""
    tile2 = checked_tile2(tile2)
    sizes = per_statement(size, scop, "tile_size", tile_sizes)
    blockings = per_statement(blocking, scop, "blocking", as_blocking)
    if not enabled:
        return scop, dataclasses.replace(result, decisions=result.decisions + ("tiling: off",))
    contractions = [] if "recipe" in without else _contractions(scop, result.schedule,
                                                                   blockings, parallel)
    sequences = _sequences(result.schedule) if contractions else []
    attached = {c.statement.name: _neighbours(sequences, c, attachable(scop, c))
                for c, _ in contractions}
    skip = set(attached) | {a.statement.name for found in attached.values() for a in found}
    schedule, notes = program_order_reductions(scop, result.schedule, skip)
    schedule, band_notes = tile_bands(scop, schedule, sizes, skip=skip, without=without,
                                      tile2=tile2)
    notes += band_notes
    if tile2:
        notes.append(levels.describe(tile2))
    if "inward" not in without:
        schedule, inward_notes = parallel_inward(scop, schedule)
        notes += inward_notes
    if without:
        notes.append(f"without {', '.join(without)}")
    if contractions:
        scop, schedule, recipe_notes = _apply_recipe(scop, schedule, contractions, attached)
        notes = recipe_notes + notes
    schedule, border_notes = split_borders(scop, schedule)
    notes += border_notes
    schedule, hoist_notes = hoist_single_iterations(scop, schedule)
    notes += hoist_notes
    notes = notes or ["no permutable band of two or more loops"]
    return scop, dataclasses.replace(result, schedule=schedule, decisions=result.decisions
                                     + tuple(f"tiling: {n}" for n in notes))


def _contractions(scop: Scop, schedule: isl.Schedule, blockings: Lookup, parallel: bool
                  ) -> list[tuple[Contraction, Blocking]]:
    """The bands that get the recipe: contractions with a full register tile at least."""
    found: list[tuple[Contraction, Blocking]] = []

    def visit(node: isl.ScheduleNode) -> bool:
        if node.get_type() == isl.schedule_node_type.band:
            c = match_contraction(scop, node)
            if c is not None and (c.inner or packable(scop, c)):
                block = blockings({c.statement.name}) or choose_blocking(
                    c, host_caches(), parallel=parallel)
                if c.size("i") >= block.mr and c.size("j") >= block.nr and (
                        not c.inner or c.b_contiguous
                        or packs_at_compile_time(scop, c)):
                    found.append((c, block))
        return True

    schedule.get_root().foreach_descendant_top_down(visit)
    return found


def _apply_recipe(scop: Scop, schedule: isl.Schedule,
                  contractions: list[tuple[Contraction, Blocking]],
                  attached: dict[str, list[Attached]]):
    packs, before = {}, scop.dependences
    for c, block in contractions:
        scop, packed = pack(scop, c, block.nr)
        packs[c.statement.name] = (packed, block)
    changed = {name for packed, _ in packs.values() for name in (packed.source, packed.array)}
    scop = compute_dependences(scop, since=before, changed=changed)  # new: the copies

    def replace(band: isl.ScheduleNode):
        names = statement_names(band.get_domain())
        if len(names) == 1 and names <= packs.keys():
            name = names.pop()
            return recipe_schedule(*packs[name], attached[name])
        return None

    copies = {packed.copy.name: packed for packed, _ in packs.values() if packed.copy}

    def extend(row: isl.UnionPwAff, added: isl.UnionSet) -> isl.UnionPwAff:
        for part in union_sets(added):
            packed = copies[part.get_tuple_name()]
            to_statement = isl.PwMultiAff.from_map(packed.to_statement)
            source = row.extract_pw_aff(row_space(packed.contraction.statement.domain))
            row = row.union_add(isl.UnionPwAff.from_pw_aff(
                source.pullback_pw_multi_aff(to_statement)))
        return row

    moved = {a.statement.name for found in attached.values() for a in found}
    schedule = rebuild(schedule, replace, extend, moved)
    full, bytes_ = {}, set()
    for name, (packed, block) in packs.items():
        tiles = full_tiles(packed.contraction, block, attached[name])
        full.update(tiles)
        if byte_dot(packed.contraction.statement.body):
            bytes_ |= set(tiles)
    schedule = isolate_full_tiles(schedule, full, frozenset(bytes_))
    notes = [f"contraction {name}: {_packed_by(packed)}, {block}"
             f"{_attached_note(attached[name])}" for name, (packed, block) in packs.items()]
    return scop, schedule, notes


def _sequences(schedule: isl.Schedule) -> list[list[set[str]]]:
    """The statements of each child of each sequence node, top down."""
    found: list[list[set[str]]] = []

    def visit(node: isl.ScheduleNode) -> bool:
        if node.get_type() == isl.schedule_node_type.sequence:
            found.append([statement_names(node.child(k).filter_get_filter())
                          for k in range(node.n_children())])
        return True

    schedule.get_root().foreach_descendant_top_down(visit)
    return found


def _neighbours(sequences: list[list[set[str]]], c: Contraction, candidates: list[Attached]
                ) -> list[Attached]:
    """The candidates that are the children of the sequence right before (a prologue)
    or right after (an epilogue) the contraction's own child (``sequences``: the
    statements of each sequence's children, :func:`_sequences`): moving them into its
    register tiles then passes no other statement."""
    name = c.statement.name
    for children in sequences:
        if {name} in children:
            at = children.index({name})
            return [a for a in candidates
                    if 0 <= (side := at - 1 if a.prologue else at + 1) < len(children)
                    and children[side] == {a.statement.name}]
    return []


def _packed_by(packed) -> str:
    if packed.in_place and packed.contraction.inner:
        return f"{packed.source} read in place (reductions in the tile: " \
            f"{len(packed.contraction.reductions)} loops)"
    if packed.in_place:
        return f"{packed.source} read in place (few rows)"
    by = f"by {packed.copy.name}" if packed.copy else "at compile time"
    return f"{packed.source} packed into {packed.array} {by}"


def _attached_note(attached: list[Attached]) -> str:
    parts = [f"{'prologue' if a.prologue else 'epilogue'} {a.statement.name}"
             for a in attached]
    return f", {' and '.join(parts)} in its register tiles" if parts else ""
