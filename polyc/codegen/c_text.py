"""A loop program as C text, for reading: isl's C printer of the AST, each statement
instance a macro call ``S0(c0, c2)`` whose arguments are the statement's iterators
(as Pluto's polycc prints its output). The statements' own C (from a C source:
``#define S0(i, j) C[(i)][(j)] *= beta``) is defined above the loops; statements
polyc added (copies that pack an operand) are listed in a comment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from polyc.codegen.ast import LoopProgram


def c_text(program: LoopProgram, macros: Mapping[str, tuple[tuple[str, ...], str]],
           notes: Sequence[str] = ()) -> str:
    """The loops of ``program`` as C; ``macros`` maps statement names to their
    iterators and C text (iterators parenthesised); ``notes`` are comment lines."""
    wholes = {instance.statement.name: instance.statement.whole
              for instance in program.instances}
    names = sorted(wholes, key=_natural)
    lines, defined = [], set()
    for name in names:
        whole = wholes[name] if name not in macros else name
        if whole in macros and whole not in defined:
            iterators, text = macros[whole]
            lines.append(f"#define {whole}({', '.join(iterators)}) {text}")
            defined.add(whole)
        if whole != name and whole in macros:
            iterators = ", ".join(macros[whole][0])
            lines.append(f"#define {name}({iterators}) {whole}({iterators})")
    added = [n for n in names if n not in macros and wholes[n] not in macros]
    if added:
        lines.append(f"/* added by polyc (copies that pack an operand): {', '.join(added)} */")
    lines += [f"/* {note} */" for note in notes]
    return "\n".join(lines + ["", program.root.to_C_str().rstrip(), ""])


def _natural(name: str):
    digits = "".join(ch for ch in name if ch.isdigit())
    return (name.rstrip("0123456789_"), int(digits) if digits else -1, name)
