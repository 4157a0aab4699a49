"""The automatic pipeline's strategies (inlining and tiling's), each one a switch:
``without=("diamond",)`` (the ``without`` option of ``compile``, ``build`` and
``Schedule.compile``; ``--without`` on the command line) turns the named ones off,
so each one's effect can be measured alone (``polyc tune`` and the README's
reproductions do). A bottom module (only
polyc.errors): the command line names the strategies without importing isl.
"""

from __future__ import annotations

from collections.abc import Iterable

from polyc.errors import PolycError

STRATEGIES = {
    "inline": "elementwise producers folded into their consumers before scheduling "
              "(polyc.fusion.inline); off: every temporary is stored and read back",
    "recipe": "contractions get the BLIS-like recipe: packed panels, cache blocks and a "
              "register tile (polyc.tiling.contraction); off: tiled like any band",
    "diamond": "stencil bands whose scheduler found a concurrent-start row get diamond "
               "tiles (polyc.tiling.stencil); off: parallelograms",
    "wavefront": "a tiled band with no parallel member runs its tiles as a wavefront "
                 "(tile loops T0 + T1, T1 parallel)",
    "distribute": "a stencil tile's innermost point loop is split into one loop per "
                  "statement where a dependence between them runs along it",
    "reorder": "a parallel member goes innermost in a tile where the stride-1 member "
               "carries a recurrence (polyc.tiling.rectangular)",
    "inward": "a parallel loop around loops with a recurrence moves inside them in "
              "blocks of 64 (polyc.tiling.inward)",
}


def checked(without: Iterable[str] | str | None) -> tuple[str, ...]:
    """``without`` as a sorted tuple of strategy names; a :class:`PolycError` naming
    an unknown one and the choices."""
    if not without:
        return ()
    names = (without,) if isinstance(without, str) else tuple(without)
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        raise PolycError(f"unknown strategy {unknown[0]!r} in without=; the "
                         f"strategies are {', '.join(STRATEGIES)}")
    return tuple(sorted(set(names)))
