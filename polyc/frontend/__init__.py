"""The frontend: an ONNX model in, a core-op :class:`~polyc.frontend.core.Graph` out.

:func:`import_model` lists the steps in order: load (read, check, infer shapes),
clean-up (dead nodes, constant and shape folding, Identity/Dropout removal,
batch-norm folding, reshape/transpose chains; :mod:`polyc.frontend.cleanup`), lower
(one function per ONNX op, see ``polyc.frontend.ops``). :func:`evaluate` runs a Graph
with numpy, as a reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from polyc.frontend.cleanup import cleanup
from polyc.frontend.core import Graph
from polyc.frontend.evaluate import evaluate
from polyc.frontend.load import load_model
from polyc.frontend.lower import check_graph, lower
from polyc.frontend.ops import winograd as winograd_choice


def import_model(model, *, shapes: Mapping[str, Sequence[int]] | None = None,
                 dims: Mapping[str, int] | None = None,
                 symbolic: Sequence[str] | None = None,
                 winograd: str = winograd_choice.DEFAULT,
                 memory_limit: int | None = None) -> Graph:
    """The core Graph of an ONNX model (a path, bytes or ``onnx.ModelProto``).

    ``shapes`` maps input names to static shapes, overriding dynamic dims; ``dims``
    gives named dynamic dims a value wherever they appear; the dims named in
    ``symbolic`` stay symbolic (``Graph.params``); ``winograd`` is how 3x3 convs that
    qualify run (:mod:`polyc.frontend.ops.winograd`); ``memory_limit`` bounds the
    constants an op builds (:mod:`polyc.limits`).
    """
    graph = load_model(model, shapes=shapes, dims=dims, symbolic=symbolic)
    graph = cleanup(graph)
    return lower(graph, winograd=winograd, memory_limit=memory_limit)


__all__ = ["Graph", "check_graph", "evaluate", "import_model"]
