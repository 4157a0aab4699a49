"""Einsum: one Reduce over every letter of the equation.

``"bij,bjk->bik"``: the output's letters index the result, the others are summed
over, and the body multiplies each operand read at its letters (a letter twice in one
operand, ``"ii->i"``, reads a diagonal: both indices the same loop). ``...`` stands for
the same leading dims in every operand (broadcast where one has extent 1); without
``->`` the output is the ellipsis, then the letters used once, sorted.
"""

from __future__ import annotations

from collections import Counter

from polyc.frontend.core import Call, Ix, Read, identity
from polyc.frontend.ops.registry import onnx_op

ELLIPSIS = "..."


@onnx_op("Einsum", 12, 28)
def Einsum(ctx, *inputs, equation=None):
    """Einsum: sum of products over the letters not in the output (module docstring)."""
    if equation is None:
        raise ctx.unsupported("Einsum needs the 'equation' attribute")
    terms, output = _parse(ctx, equation.replace(" ", ""), len(inputs))
    extent: dict[str, int] = {}
    letters_of = []
    for term, x in zip(terms, inputs):
        letters = _expand(ctx, term, len(x.shape))
        letters_of.append(letters)
        for letter, size in zip(letters, x.shape):
            if extent.get(letter, 1) not in (1, size) and size != 1:
                raise ctx.shape_error(f"letter '{letter}' has extents {extent[letter]} and "
                                      f"{size} in '{equation}'")
            extent[letter] = max(extent.get(letter, 1), size)
    ellipsis = max((sum(c.isdigit() for c in w) for w in letters_of), default=0)
    out_letters = _expand(ctx, output, ellipsis + len(output) - len(ELLIPSIS)) \
        if ELLIPSIS in output else list(output)
    missing = [c for c in out_letters if c not in extent]
    if missing:
        raise ctx.shape_error(f"output letters {missing} are in no input of '{equation}'")
    order = out_letters + [c for c in extent if c not in out_letters]
    var = {letter: k for k, letter in enumerate(order)}
    product = None
    for x, letters in zip(inputs, letters_of):
        index = tuple(Ix.constant(0) if size == 1 and extent[letter] != 1 else
                      Ix.var(var[letter]) for letter, size in zip(letters, x.shape))
        read = Read(x.name, index)
        product = read if product is None else Call("mul", (product, read))
    out_shape = tuple(extent[c] for c in out_letters)
    start = identity("add", inputs[0].dtype)
    if len(order) == len(out_letters):  # nothing summed: a Map
        return ctx.map(out_shape, product, label="einsum")
    return ctx.reduce(out_shape=out_shape, init=start,
                      extents=tuple(extent[c] for c in order),
                      out_index=tuple(Ix.var(k) for k in range(len(out_letters))),
                      combiner="add", expr=product, label="einsum")


def _parse(ctx, equation: str, n: int) -> tuple[list[str], str]:
    left, arrow, output = equation.partition("->")
    terms = left.split(",")
    if len(terms) != n:
        raise ctx.shape_error(f"'{equation}' has {len(terms)} operands, the node {n} inputs")
    if not arrow:  # implicit output: the ellipsis, then the letters used once, sorted
        counts = Counter(c for t in terms for c in t.replace(ELLIPSIS, ""))
        output = (ELLIPSIS if any(ELLIPSIS in t for t in terms) else "") + \
            "".join(sorted(c for c, k in counts.items() if k == 1))
    for part in (*terms, output):
        if not all(c.isalpha() for c in part.replace(ELLIPSIS, "")):
            raise ctx.shape_error(f"'{equation}' is not an einsum equation polyc reads")
    return terms, output


def _expand(ctx, term: str, rank: int) -> list[str]:
    """The letters of ``term`` for an operand of ``rank`` dims, ``...`` as digit letters
    numbered from the last dim of the ellipsis backwards (so broadcast dims line up)."""
    if ELLIPSIS not in term:
        if len(term) != rank:
            raise ctx.shape_error(f"'{term}' names {len(term)} dims of an operand of rank {rank}")
        return list(term)
    head, _, tail = term.partition(ELLIPSIS)
    count = rank - len(head) - len(tail)
    if count < 0:
        raise ctx.shape_error(f"'{term}' names more dims than the operand's {rank}")
    return list(head) + [str(count - k) for k in range(count)] + list(tail)
