"""Steering a schedule by hand (a loop nest's or an ONNX model's): :class:`Schedule`,
whose steps make a :class:`polyc.trace.Trace` that saves as JSON and replays.

``Schedule(nest, params=...)`` runs the stages up to the scheduler's (inlining,
dependences, scalar expansion, statement splitting, fusion, the scheduler given) and
holds the SCoP, its dependences and the schedule tree. Each primitive rewrites one
band, named by a statement below it and its depth among the bands above that statement
(``"S1"`` is S1's outermost band, ``("S1", 1)`` the next one down), and checks the
result before keeping it: every dependence still runs forward, every band marked
permutable is, and every parallel loop carries nothing. The primitives: ``interchange``,
``permute``, ``skew``, ``shift``, ``reverse`` (affine rows of one band), ``tile``,
``tile2``, ``diamond``, ``wavefront``, ``isolate`` (tiles), ``fuse``, ``distribute``
(loops shared or not), ``unroll_jam``, ``vectorize`` and ``parallel``. A primitive that
would break a dependence is refused with :class:`~polyc.errors.RefusedError`, which
names the dependence and an instance pair it would run backward (``witness``); the
schedule is left as it was.

jacobi-1d's original loops, as Pluto writes schedules::

    >>> s = Schedule(KERNELS["jacobi-1d"].build(), params={"T": 100, "N": 4000},
    ...              scheduler="original")
    >>> print(s)
    T(S1): (t, 0, i)
    T(S2): (t, 1, i)
    >>> s.tile("S1", 32)    # RefusedError: member 1 runs the RAW dependence S2 -> S1 back
    >>> s.skew("S1", member=2, by=0, factor=2)   # (t, 0, 2*t + i), (t, 1, 2*t + i)
    >>> s.shift("S1", 2, {"S2": 1}).interchange("S1", 1, 2)   # Pluto's (t, 2*t + i, 0/1)
    >>> s.tile("S1", [8, 64])                    # the first two members, tiled

:meth:`Schedule.compile` runs the rest of the pipeline on the schedule as steered
(no automatic tiling unless ``tile=True``); the result runs like any compiled nest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import islpy as isl

from polyc.errors import IllegalScheduleError, PolycError, RefusedError
from polyc.islutil import map_bottom_up, statement_names
from polyc.marks import LANES
from polyc.marks import PARALLEL as PARALLEL_MARK
from polyc.marks import VECTOR as VECTOR_MARK
from polyc.notation import natural, pluto_notation
from polyc.options import MODEL, NEST, START, Options, describe, option_names
from polyc.scheduler import ScheduleResult, transform
from polyc.scheduler.legality import (
    backward_member,
    check_order,
    check_parallel,
    check_permutable,
)
from polyc.scheduler.tree import flag_text
from polyc.scop.params import bind_parameters
from polyc.tiling.levels import sizes_value, tile_options, tiled
from polyc.trace import Trace, compile_option_names, decided, plain, recorded

Band = str | tuple[str, int] | Sequence[Any]


class Schedule:
    """A schedule to steer by hand; see the module's docstring.

    ``nest`` is a :class:`~polyc.scop.nest.LoopNest`, a C kernel
    (:func:`polyc.from_c`, whose parameters default to its file's values), a SCoP or
    an ONNX model (a path, bytes or ``ModelProto``; ``shapes``, ``dims``, ``symbolic``
    and ``winograd`` as for ``polyc.compile``); ``params`` the parameters' values, as
    for ``compile``; ``scheduler``, ``fuse``, ``split`` and ``expand`` the first stages'
    options (``scheduler="original"``: the loops as written; split and expand default
    on for loop nests, off for models, as ``compile`` has them)."""

    def __init__(self, nest, *, _initial: str | None = None, **options):
        from polyc.pipeline import _Stages, schedule_scop
        from polyc.scop.params import check_values
        self._graph = self._source = None
        self._kind = MODEL if _is_model(nest) else NEST
        self._options = Options.of(self._kind, options, names=option_names(self._kind, START))
        if self._kind == MODEL:
            scop = self._model_scop(nest)
            self.start = self._options.chosen(START, MODEL)
            # (the graph's symbolic dims as isl parameter names)
            self._options = replace(self._options, symbolic=self._graph.params or None)
        else:
            params = self._options.params
            if hasattr(nest, "values") and hasattr(nest, "nest"):  # a C kernel
                params = nest.values(params)
            scop = nest.scop(params) if hasattr(nest, "values") else (
                nest.scop() if hasattr(nest, "scop") else nest)
            values = check_values(scop, params, self._options.symbolic or ())
            self._options = replace(self._options, params=values or None)
            self.start = self._options.chosen(START, NEST)
        self.scop, self._groups, result = schedule_scop(scop, self._options, _Stages())
        self.decisions = result.decisions
        if _initial is not None and _initial != str(result.schedule):
            result = replace(result, schedule=isl.Schedule.read_from_str(self.scop.ctx,
                                                                         _initial))
            self.decisions += ("the scheduler's schedule as the trace recorded it (the "
                               "scheduler gives another one now)",)
        self.tree: isl.Schedule = result.schedule
        self._trace = Trace(dict(self.start), str(self.tree))

    def _model_scop(self, model):
        """An ONNX model's SCoP, through the frontend as ``polyc.compile`` runs it."""
        from polyc.frontend import import_model
        from polyc.scop.build import build_scop
        options = self._options
        self._graph = import_model(model, shapes=options.shapes, dims=options.dims,
                                   symbolic=options.symbolic, winograd=options.winograd)
        self._source = model
        return build_scop(self._graph)

    # -- looking -------------------------------------------------------------------

    def __str__(self) -> str:
        return pluto_notation(self.tree)

    def bands(self) -> list[dict[str, Any]]:
        """Every band, top down: its ``id`` (what the primitives take), statements,
        flags as the dependences give them ("p" a member whose loop carries nothing,
        "s" one that carries a dependence; "*" after them: not permutable) and the mark
        right above it (``"parallel"``, or None)."""
        found = []

        def visit(node: isl.ScheduleNode) -> bool:
            if node.get_type() == isl.schedule_node_type.band:
                permutable, coincident = transform.flags(self.scop, node)
                parent = node.parent()
                found.append({"id": transform.band_id(node),
                              "statements": sorted(statement_names(node.get_domain()),
                                                   key=natural),
                              "flags": flag_text(coincident, permutable),
                              "mark": parent.mark_get_id().get_name()
                              if parent.get_type() == isl.schedule_node_type.mark else None})
            return True

        self.tree.get_root().foreach_descendant_top_down(visit)
        return found

    @property
    def trace(self) -> Trace:
        return replace(self._trace, steps=list(self._trace.steps), final=str(self.tree))

    # -- primitives ----------------------------------------------------------------

    def interchange(self, band: Band, first: int, second: int) -> "Schedule":
        """Swap two members of ``band``: ``(t, i, j)`` -> ``(t, j, i)`` for
        ``interchange("S1", 1, 2)``."""
        return self._rewrite("interchange", band, dict(first=first, second=second),
                             lambda node: transform.interchange(node, first, second))

    def permute(self, band: Band, order: Sequence[int]) -> "Schedule":
        """Reorder ``band``'s members: new member k is old member ``order[k]``;
        ``permute("S1", [2, 0, 1])`` makes ``(t, i, j)`` ``(j, t, i)``."""
        order = list(order)
        return self._rewrite("permute", band, dict(order=order),
                             lambda node: transform.permute(node, order))

    def skew(self, band: Band, member: int, by: int, factor: int = 1) -> "Schedule":
        """Add ``factor`` times member ``by`` to ``member``: ``skew("S1", 1, 0, 2)``
        makes ``(t, i)`` ``(t, 2*t + i)``."""
        return self._rewrite("skew", band, dict(member=member, by=by, factor=factor),
                             lambda node: transform.skew(node, member, by, factor))

    def shift(self, band: Band, member: int, amounts: Mapping[str, int]) -> "Schedule":
        """Add a constant per statement to ``member``: ``shift("S1", 1, {"S2": 1})``
        makes S2's ``(t, i)`` ``(t, i + 1)``."""
        amounts = dict(amounts)
        return self._rewrite("shift", band, dict(member=member, amounts=amounts),
                             lambda node: transform.shift(node, member, amounts))

    def reverse(self, band: Band, member: int) -> "Schedule":
        """Run ``member``'s loop backward: ``(t, i)`` -> ``(t, -i)``."""
        return self._rewrite("reverse", band, dict(member=member),
                             lambda node: transform.reverse(node, member))

    def tile(self, band: Band, sizes: int | Sequence[int]) -> "Schedule":
        """Tile ``band`` rectangularly, ``sizes`` per member (one int: every member;
        fewer sizes than members: the first members, split off the band first), into a
        band of tile loops over a band of point loops (each from 0 in its tile):
        ``tile("S1", 32)`` on ``(i, j)`` gives ``(i/32, j/32, i mod 32, j mod 32)``.
        Refused unless the band is permutable (every dependence it must keep runs
        forward or stays along each member), with the member and the dependence
        that go backward."""
        node = self._band(band, "tile")
        count = node.band_n_member()
        sizes = [sizes] * count if isinstance(sizes, int) else list(sizes)
        _, sizes = self._sizes(node, sizes)
        if len(sizes) < count:  # the members tiled make a band of their own
            node = transform.set_flags(self.scop, node.band_split(len(sizes)))
            count = len(sizes)
        if count > 1 and not node.band_get_permutable():
            witness = backward_member(self.scop.dependences, node, self.scop.context)
            if witness is not None:
                member, kind, dep = witness
                raise RefusedError(
                    f"tile {_name(band)} refused: the band is not permutable: its member "
                    f"{member} runs the {kind} dependence {_ends(dep)} backward, e.g. "
                    f"{dep.sample()}", witness=dep)
            node = node.band_set_permutable(1)
        return self._keep("tile", band, dict(sizes=sizes), tiled(node, sizes).get_schedule())

    def tile2(self, band: Band, sizes: int | Sequence[int],
              outer: int | Sequence[int]) -> "Schedule":
        """Two levels of tiles: ``band`` tiled by ``sizes`` (:meth:`tile`), then its
        band of tile loops tiled again, ``outer`` tiles of the first level per tile of
        the second (for L2 around L1): ``tile2("S1", 32, 4)`` on ``(i, j)`` gives
        ``(i/128, j/128, i/32 mod 4, j/32 mod 4, i mod 32, j mod 32)``. Recorded in the
        trace as its two tilings. (The automatic tiling does the same to its rectangular
        bands with ``tile2``: :mod:`polyc.tiling.levels`.) Refused as :meth:`tile` is;
        a refused second tiling leaves the first undone too."""
        tree, steps = self.tree, len(self._trace.steps)
        try:
            self.tile(band, sizes)
            return self.tile(band, outer)
        except PolycError:
            self.tree = tree
            del self._trace.steps[steps:]
            raise

    def diamond(self, band: Band, sizes: int | Sequence[int]) -> "Schedule":
        """Diamond tiles (Bandishti et al., SC'12; Pluto's ``--diamond-tile``) of a
        stencil band ``(t, phi_1, ..)``: tiled along a first row that allows concurrent
        start (``2*t - i`` next to ``2*t + i`` for jacobi-1d), which the scheduler
        looks for among the band's dependences, the point loops keeping the band's own
        rows: ``(c/s0, phi_1/s1, .., t, phi_1, ..)``. Refused for a band that is not a
        stencil's (a time loop outermost, the others skewed by it) or has no such row."""
        from polyc.tiling.stencil import describe_row, diamond_row, diamond_tile, stencil_band
        node = self._band(band, "diamond")
        values, _ = self._sizes(node, sizes, whole=True)
        stencil = stencil_band(self.scop, node)
        if stencil is None:
            raise RefusedError(f"diamond {_name(band)} refused: not a stencil band (a time "
                               "loop outermost and the other members skewed by it, every "
                               "row affine in the iterators)")
        first = diamond_row(self.scop, stencil)
        if first is None:
            raise RefusedError(f"diamond {_name(band)} refused: no first row with concurrent "
                               "start is valid on the band's dependences")
        tiled = diamond_tile(self.scop, node, first, values)
        self._keep("diamond", band, dict(sizes=sizes), tiled.get_schedule())
        self.decisions += (f"diamond {_name(band)}: first tile row "
                           f"{describe_row(self.scop, first)}",)
        return self

    def wavefront(self, band: Band) -> "Schedule":
        """Run a band's first two loops as a wavefront, ``(T0, T1, ..)`` ->
        ``(T0 + T1, T1, ..)``: a skew of member 0 by member 1 that makes ``T1``
        parallel when the band is permutable (for a band of tile loops, the tiles of a
        wavefront run at once)."""
        node = self._band(band)
        if node.band_n_member() < 2:
            raise PolycError("a wavefront needs a band of two or more members")
        return self._rewrite("wavefront", band, {},
                             lambda found: transform.skew(found, 0, 1, 1))

    def isolate(self, band: Band) -> "Schedule":
        """Generate ``band``'s full tiles apart from its partial ones: ``band`` is a
        band of tile loops over a band of point loops (as :meth:`tile` makes them), and
        the tiles whose points all run (for every statement) get isl's ``isolate``
        option, so their point loops have constant bounds (constant trip counts),
        without the ``min`` that the partial tiles at the edges need; those run in
        code of their own. The times are unchanged. ``tile("S1", [8, 16])`` then
        ``isolate("S1")`` on ``(i, j)`` over 37 x 45::

            before: for (c0 = 0; c0 <= 4; c0++) for (c1 = 0; c1 <= 2; c1++)
                      for (c2 = 0; c2 <= min(7, -8*c0 + 36); c2++)
                        for (c3 = 0; c3 <= min(15, -16*c1 + 44); c3++) S1(..)
            after:  for (c0 = 0; c0 <= 3; c0++) {
                      for (c1 = 0; c1 <= 1; c1++)       // the full tiles
                        for (c2 = 0; c2 <= 7; c2++) for (c3 = 0; c3 <= 15; c3++) S1(..)
                      ..the last column of tiles }
                    ..the last row of tiles

        Refused for a band that is not a band of tile loops, or that has no full tile
        at the parameters' values. Isolate last: the primitives that rebuild a band
        refuse the isolated band and the bands above it (isl rebuilds none whose
        subtree the option anchors), :meth:`parallel` drops the option of the band it
        marks (the bands below keep theirs: mark member 0), and ``compile(tile=True)``
        leaves the isolated band as it is."""
        node = self._band(band)
        sizes = transform.point_sizes(node)
        if sizes is None:
            raise RefusedError(f"isolate {_name(band)} refused: not a band of tile loops "
                               "(its child must be a band of as many point loops, each "
                               "from 0 to its tile size less one, as tile makes them)")
        tiles = transform.full_tiles(node, sizes)
        context = bind_parameters(self.scop, self._options.params,
                                  self._options.symbolic or ()).context
        if (tiles if context is None else tiles.intersect_params(context)).is_empty():
            raise RefusedError(f"isolate {_name(band)} refused: no tile of sizes {sizes} is "
                               "full")
        isolated = node.band_set_ast_build_options(transform.isolate_option(node, tiles))
        return self._keep("isolate", band, {}, isolated.get_schedule())

    def distribute(self, band: Band, at: int, order: Sequence[str] = ()) -> "Schedule":
        """Distribute the band's loops from member ``at`` on over its statements: a row
        constant per statement goes before member ``at`` (``order`` first, in that
        order, the rest in program order), so those loops run for one statement after
        the other. ``distribute("S1", 1)`` on mvt's fused ``(i, j)``: S1 ``(i, 0, j)``,
        S2 ``(i, 1, j)``. Refused where a dependence would run backward."""
        order = list(order)
        return self._rewrite("distribute", band, dict(at=at, order=order),
                             lambda node: transform.distribute(node, at, order))

    def fuse(self, band: Band, depth: int | None = None, through: str | None = None
             ) -> "Schedule":
        """Fuse ``band`` with its siblings: the first ``depth`` loops (default: as many
        as each has) of every band right below the same sequence become one band above
        it, the sequence ordering the statements inside each iteration. On the original
        loops of the ``fusion`` kernel, ``fuse("S1")``: ``(0, i, j)``, ``(1, i, j)``,
        ``(2, i)`` -> ``(i, 0, j)``, ``(i, 1, j)``, ``(i, 2)``. With ``through`` (a
        statement), only the siblings from ``band``'s to that statement's are fused,
        the others keep their loops: ``fuse("S1", through="S2")`` gives ``(0, i, j,
        0)``, ``(0, i, j, 1)``, ``(1, i, 0, 0)``. Refused where a dependence would run
        backward."""
        node = self._band(band, "fuse")
        fused = transform.fuse_siblings(self.scop, node, depth, through)
        args = dict(depth=depth) if through is None else dict(depth=depth, through=through)
        return self._keep("fuse", band, args, fused.get_schedule())

    def unroll_jam(self, band: Band, member: int, factor: int) -> "Schedule":
        """Unroll ``member``'s loop by ``factor`` and jam the copies into the innermost
        loop: the member is strip-mined, its strip moved innermost and unrolled in the
        generated code (isl's unroll), so ``factor`` iterations of it share each pass
        of the loops inside. ``unroll_jam("S2", 0, 4)`` on matmul's ``(i, j, k)``:
        ``(floor(i/4), j, k, i mod 4)``. Refused when moving the strip inward runs a
        dependence backward."""
        node = self._band(band, "unroll_jam")
        changed = transform.replace(self.scop, node, transform.strip(node, member, factor))
        last = changed.band_n_member() - 1
        changed = changed.band_member_set_ast_loop_type(last, isl.ast_loop_type.unroll)
        return self._keep("unroll_jam", band, dict(member=member, factor=factor),
                          changed.get_schedule())

    def vectorize(self, band: Band, member: int) -> "Schedule":
        """Run ``member``'s loop in vector lanes: strip-mined by polyc's vector width
        (:data:`polyc.marks.LANES`), the strip moved innermost into a band of its own
        under a ``vector`` mark, which code generation turns into vector statements
        where the strip's accesses have stride 0 or 1 (else it stays a scalar loop).
        ``vectorize("S2", 1)`` on matmul's ``(i, j, k)``: ``(i, floor(j/16), k,
        j mod 16)``. Refused when the strip carries a dependence (its lanes would run
        dependent instances at once) or moving it inward runs one backward."""
        node = self._band(band, "vectorize")
        changed = transform.replace(self.scop, node, transform.strip(node, member, LANES))
        strip = changed.band_n_member() - 1
        self._refuse_carried(changed, strip, f"vectorize {_name(band)} (member={member}) "
                             "refused: its lanes would carry")
        marked = changed.band_split(strip).child(0).insert_mark(isl.Id(VECTOR_MARK))
        return self._keep("vectorize", band, dict(member=member), marked.get_schedule())

    def parallel(self, band: Band, member: int = 0) -> "Schedule":
        """Run ``member``'s loop on threads: the band is split so that the member is a
        band of its own under a ``parallel`` mark (its loop's iterations are dealt out
        to the threads). Refused when the loop carries a dependence (two dependent
        instances in different iterations, the loops outside it equal), with one.
        The marked loop stays one loop: an isolate option on its band is dropped (the
        bands below keep theirs). A schedule marked by hand gets no automatic parallel
        marks."""
        node = self._band(band)
        count = node.band_n_member()
        if isinstance(member, bool) or not isinstance(member, int) or not 0 <= member < count:
            raise PolycError(f"the band has members 0..{count - 1}, got {member!r}")
        self._refuse_carried(node, member, f"parallel {_name(band)} (member={member}) "
                             "refused: its loop carries")
        if member:
            node = transform.set_flags(self.scop, node.band_split(member)).child(0)
        if node.band_n_member() > 1:
            node = node.band_split(1)
        if not node.band_get_ast_build_options().is_empty():  # one loop, not isolate's parts
            node = node.band_set_ast_build_options(isl.UnionSet.empty(
                isl.Space.params_alloc(node.get_ctx(), 0)))
        node = node.insert_mark(isl.Id(PARALLEL_MARK))
        return self._keep("parallel", band, dict(member=member), node.get_schedule())

    # -- compiling -----------------------------------------------------------------

    def compile(self, **options):
        """Native code for the schedule as steered (a :class:`~polyc.pipeline.
        CompiledModel`, whose ``run`` returns every array's final value). The options
        are those of the stages after the scheduler's (:class:`polyc.options.Options`),
        as for ``compile`` but that ``tile`` defaults off here (``tile=True`` runs
        polyc's automatic tiling on the steered schedule too) and ``threads`` (None:
        OpenMP's default; 1: serial code, the parallel marks ignored):

"""
        from polyc.pipeline import CompiledModel, _Stages, lower_schedule, native_code
        names = compile_option_names(self._kind)
        chosen = Options.of(self._kind, {"tile": False, **options}, names=names)
        options = replace(self._options, **{n: getattr(chosen, n) for n in names})
        self._trace.compile = recorded(options, self._kind)
        notes = tuple(f"steered: {line.strip()}" for line in str(self.trace).splitlines()[1:]
                      if not line.strip().startswith((".compile(", "#")))
        result = ScheduleResult(self._options.scheduler, self._flagged(),
                                self.decisions + notes)
        compilation = lower_schedule(self.scop, self._groups, result, options, _Stages())
        self._trace.decided = decided(compilation.schedule.decisions)
        if self._graph is None:
            return CompiledModel(native_code(compilation), compilation).loaded()
        shown = replace(options, symbolic=self.start["symbolic"] or None)
        compilation = replace(compilation, graph=self._graph, options=shown)
        source = self._source if not _is_proto(self._source) else None
        return CompiledModel(native_code(compilation), compilation, source=source).loaded()

    compile.__doc__ += describe(NEST, compile_option_names(NEST), tile=False)

    # -- the machinery -------------------------------------------------------------

    def _flagged(self) -> isl.Schedule:
        """The tree with every band's permutable and coincident flags as the
        dependences make them (what :meth:`bands` shows), which the tiling and parallel
        stages go by: a scheduler such as ``original`` sets none, and isl's tiling
        copies a band's own to its tile and point loops."""
        return map_bottom_up(self.tree, lambda node: transform.set_flags(self.scop, node)
                             if node.get_type() == isl.schedule_node_type.band else node)

    def _band(self, band: Band, rewrite: str | None = None) -> isl.ScheduleNode:
        """The band named ``band``; for ``rewrite`` (a primitive that rebuilds it),
        :class:`PolycError` when it or a band below it is isolated (isl rebuilds no
        band whose subtree its ``isolate`` option ties to the loops outside)."""
        if isinstance(band, str):
            node = transform.find_band(self.tree, band)
        elif isinstance(band, (tuple, list)) and len(band) == 2 and isinstance(band[0], str) \
                and isinstance(band[1], int) and not isinstance(band[1], bool):
            node = transform.find_band(self.tree, band[0], band[1])
        else:
            raise PolycError(f"name a band by a statement below it (\"S1\") or a statement "
                             f"and the band's depth ((\"S1\", 1)), got {band!r}")
        if rewrite is not None and node.is_subtree_anchored():
            raise PolycError(f"{rewrite} {_name(band)}: the band or one below it is isolated "
                             "(isolate); steer it before isolating")
        return node

    def _sizes(self, node: isl.ScheduleNode, sizes, *, whole: bool = False
               ) -> tuple[isl.MultiVal, list[int]]:
        """Tile sizes for the first members of ``node`` (all of them when ``whole``;
        one int: every member) as isl takes them, and as a list; isl's tiling options
        set as polyc's tiling sets them (tile loops count tiles, point loops from 0)."""
        count = node.band_n_member()
        sizes = [sizes] * count if isinstance(sizes, int) else list(sizes)
        if not 0 < len(sizes) <= count or (whole and len(sizes) != count) or any(
                isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
            raise PolycError(f"tile sizes must be {count if whole else f'up to {count}'} "
                             f"positive ints (one per member of the band, from the first), "
                             f"got {sizes!r}")
        tile_options(self.scop.ctx)
        members = node.band_split(len(sizes)) if len(sizes) < count else node
        return sizes_value(members, sizes), sizes

    def _refuse_carried(self, node: isl.ScheduleNode, member: int, what: str) -> None:
        """:class:`RefusedError` (``what`` then the dependence) when ``member``'s loop
        of ``node`` carries a dependence."""
        carried = transform.carried(self.scop, node, member)
        if carried is not None:
            kind, dep = carried
            raise RefusedError(f"{what} the {kind} dependence {_ends(dep)}, e.g. "
                               f"{dep.sample()}", witness=dep)

    def _rewrite(self, op: str, band: Band, args: dict, rows) -> "Schedule":
        node = self._band(band, op)
        changed = transform.replace(self.scop, node, rows(node))
        return self._keep(op, band, args, changed.get_schedule())

    def _keep(self, op: str, band: Band, args: dict, tree: isl.Schedule) -> "Schedule":
        """``tree`` as the schedule if every dependence runs forward in it and every
        band marked permutable is; else :class:`RefusedError`."""
        try:
            check_order(self.scop.dependences, tree.get_map())
            check_permutable(self.scop, tree)
            check_parallel(self.scop, tree)
        except IllegalScheduleError as error:
            raise RefusedError(f"{op} {_name(band)} {_describe(args)} refused: {error}",
                               witness=getattr(error, "witness", None)) from None
        self.tree = tree
        self._trace.steps.append({"op": op, "band": plain(band), **plain(args)})
        return self


def _is_model(nest) -> bool:
    """An ONNX model: a path to an .onnx file, its bytes, or a ModelProto."""
    if isinstance(nest, (str, Path)):
        return str(nest).lower().endswith(".onnx")
    return isinstance(nest, bytes) or _is_proto(nest)


def _is_proto(nest) -> bool:
    return type(nest).__name__ == "ModelProto"


PRIMITIVES = ("interchange", "permute", "skew", "shift", "reverse", "tile", "diamond",
              "wavefront", "isolate", "fuse", "distribute", "unroll_jam", "vectorize",
              "parallel")


def _name(band: Band) -> str:
    return f"band {band!r}" if isinstance(band, str) else f"band {tuple(band)!r}"


def _describe(args: dict) -> str:
    return "(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"


def _ends(dep: isl.Map) -> str:
    return f"{dep.get_tuple_name(isl.dim_type.in_)} -> {dep.get_tuple_name(isl.dim_type.out)}"
