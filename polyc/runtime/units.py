"""The code generator's LLVM module split into units that LLVM compiles apart, on
several cores (:mod:`polyc.workers`), into object files linked together.

The module's functions are the entry (``polyc_main``), the kernel that calls one
function per loop nest (``polyc_kernel.part*``, ``noinline``), and the loop bodies
those outline for the OpenMP runtime. A unit gets the entry and the kernel (the hub)
or none, and whole nests: a function with every defined function it refers to (but
the hub). A nest the kernel calls from another unit becomes a ``hidden`` symbol
(linked, not exported) and is declared where it is called. Every unit carries the
module's declarations, its external constants and all its metadata (each unit's loop
hints keep their numbers; the rest LLVM drops).

A module this splitter does not recognise (a global with a value, a nest that calls
the hub) stays one unit: splitting only ever costs parallelism, never correctness,
and LLVM parses and verifies each unit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# At least this much IR text per unit: O3 and the object take about 0.6 s a MB on this
# machine kind (mobilenetv3: 9.1 MB in 4.7 s), a unit costs a process and a parse.
UNIT_BYTES = 1 << 20
HUB = ("polyc_main", "polyc_kernel")
_MODULE_HEAD = "; ModuleID = "
_MODULE = re.compile(r"^; ModuleID = ", re.M)
_SYMBOL = re.compile(r'@"((?:[^"\\]|\\.)*)"|@([-\w.$]+)')


@dataclass
class _Function:
    name: str
    lines: list[str]
    refs: set[str] = field(default_factory=set)

    @property
    def size(self) -> int:
        return sum(len(line) + 1 for line in self.lines)


def split(llvm_ir: str, units: int) -> list[str]:
    """``llvm_ir`` as at most ``units`` module texts of balanced size, each at least
    :data:`UNIT_BYTES` but the one of the hub; ``[llvm_ir]`` when one unit is asked for
    or the module is not of the expected form. Text of several modules (the kernel's,
    then those of nests generated apart) is those modules, each split into pieces of
    about the size of one of ``units`` equal parts of the whole."""
    modules = _MODULE.split(llvm_ir)
    if len(modules) > 2:  # made as modules already (polyc.codegen.apart): each split
        texts = [_MODULE_HEAD + text for text in modules[1:]]  # into pieces of the mean
        size = max(UNIT_BYTES, len(llvm_ir) // units)
        return [piece for text in texts for piece in split(text, round(len(text) / size))]
    units = min(units, len(llvm_ir) // UNIT_BYTES)
    if units < 2:
        return [llvm_ir]
    parsed = _parse(llvm_ir)
    if parsed is None:
        return [llvm_ir]
    head, shared, functions, tail = parsed
    groups = _nests(functions)
    if groups is None or len(groups) < 2:
        return [llvm_ir]
    hub = [f for f in functions.values() if f.name in HUB]
    members: list[list[_Function]] = [list(hub)] + [[] for _ in range(units - 1)]
    loads = [sum(f.size for f in hub)] + [0] * (units - 1)
    for group in sorted(groups, key=lambda g: -sum(f.size for f in g)):
        k = loads.index(min(loads))
        members[k] += group
        loads[k] += sum(f.size for f in group)
    members = [m for m in members if m]
    home = {f.name: k for k, unit in enumerate(members) for f in unit}
    hidden = {ref for k, unit in enumerate(members) for f in unit for ref in f.refs
              if home[ref] != k}
    texts = []
    for k, unit in enumerate(members):
        declared = sorted({ref for f in unit for ref in f.refs if home[ref] != k})
        lines = head + shared + [_declaration(functions[name]) for name in declared] + [""]
        for f in unit:
            lines += [_hidden(f.lines[0]) if f.name in hidden else f.lines[0], *f.lines[1:], ""]
        texts.append("\n".join(lines + tail) + "\n")
    return texts


def _parse(text: str):
    """(head lines, declarations and constants, {name: function}, metadata and
    attribute lines), or None for a module with a global that has a value."""
    head, shared, tail = [], [], []
    functions: dict[str, _Function] = {}
    lines = text.split("\n")
    k = 0
    while k < len(lines):
        line = lines[k]
        if line.startswith("define "):
            end = lines.index("}", k)
            name = _defined_name(line)
            if name is None:
                return None
            functions[name] = _Function(name, lines[k:end + 1])
            k = end + 1
            continue
        if line.startswith("declare "):
            shared.append(line)
        elif line.startswith("@"):
            if " = external " not in line:
                return None
            shared.append(line)
        elif line.startswith(("!", "attributes ")):
            tail.append(line)
        elif not functions:
            head.append(line)
        elif line.strip():
            return None  # something after the functions this splitter does not know
        k += 1
    names = set(functions)
    for f in functions.values():
        f.refs = {a or b for line in f.lines for a, b in _SYMBOL.findall(line)} & names
        f.refs.discard(f.name)
    return head, shared, functions, tail


def _nests(functions: dict[str, _Function]) -> list[list[_Function]] | None:
    """The functions but the hub in groups that refer only to each other (union-find
    over their references), or None when one refers to the hub."""
    parent = {name: name for name in functions if name not in HUB}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for f in functions.values():
        if f.name in HUB:
            continue
        for ref in f.refs:
            if ref in HUB:
                return None
            parent[root(ref)] = root(f.name)
    groups: dict[str, list[_Function]] = {}
    for name in parent:
        groups.setdefault(root(name), []).append(functions[name])
    return list(groups.values())


def _defined_name(line: str) -> str | None:
    match = _SYMBOL.search(line)
    return None if match is None else match.group(1) or match.group(2)


def _hidden(header: str) -> str:
    """A definition's first line with internal linkage made hidden: linked across units
    but not exported from an artifact."""
    return header.replace("define internal ", "define hidden ", 1)


def _declaration(function: _Function) -> str:
    """``declare`` for a function defined in another unit: its first line up to the end of
    its parameters, without linkage."""
    header = function.lines[0]
    start = header.index("(", _SYMBOL.search(header).end() - 1)
    depth, quoted = 0, False
    for end in range(start, len(header)):
        char = header[end]
        if char == '"' and header[end - 1] != "\\":
            quoted = not quoted
        elif not quoted and char == "(":
            depth += 1
        elif not quoted and char == ")":
            depth -= 1
            if depth == 0:
                break
    words = header[len("define "):start].split()
    kept = [w for w in words if w not in ("internal", "hidden", "private", "dso_local")]
    return "declare " + " ".join(kept) + header[start:end + 1]
