"""A loop program as C text, for reading: isl's C printer of the AST, each statement
instance a macro call ``S0(c0, c2)`` whose arguments are the statement's iterators
(as Pluto's polycc prints its output). The statements' own C (from a C source:
``#define S0(i, j) C[(i)][(j)] *= beta``) is defined above the loops; statements
polyc added (copies that pack an operand) are listed in a comment.
"""

from __future__ import annotations

from collections.abc import Mapping

from polyc.codegen.ast import LoopProgram


def c_text(program: LoopProgram, macros: Mapping[str, tuple[tuple[str, ...], str]]) -> str:
    """The loops of ``program`` as C; ``macros`` maps statement names to their
    iterators and C text (iterators parenthesised)."""
    names = sorted({instance.statement.name for instance in program.instances},
                   key=_natural)
    lines = []
    for name in names:
        if name in macros:
            iterators, text = macros[name]
            lines.append(f"#define {name}({', '.join(iterators)}) {text}")
    added = [n for n in names if n not in macros]
    if added:
        lines.append(f"/* added by polyc (copies that pack an operand): {', '.join(added)} */")
    return "\n".join(lines + ["", program.root.to_C_str().rstrip(), ""])


def _natural(name: str):
    digits = "".join(ch for ch in name if ch.isdigit())
    return (name.rstrip("0123456789_"), int(digits) if digits else -1, name)
