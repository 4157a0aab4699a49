"""Human-readable reports: per-stage times and sizes, and the full inspection text."""

from __future__ import annotations

from polyc.islutil import union_maps


def compile_report(compilation, jit_seconds: float) -> str:
    graph, scop = compilation.graph, compilation.scop
    deps = sum(len(union_maps(m)) for m in scop.dependences.kinds().values())
    options = compilation.options
    lines = [
        f"polyc report for '{graph.name}' (opset {graph.opset}); scheduler {options.scheduler},"
        f" fusion {options.fuse}",
        f"  {len(graph.ops)} core ops -> {len(scop.statements)} statements in "
        f"{len(compilation.groups.groups)} fusion groups; {deps} dependence relations",
        f"  {len(compilation.plan.scratch)} temporaries in {compilation.plan.scratch_bytes} "
        f"bytes of scratch; {len(compilation.plan.constants)} constants",
    ]
    lines += [f"  note: {note}" for note in graph.notes]
    lines.append(f"  {'stage':<14}{'ms':>10}")
    times = list(compilation.times) + [("jit", jit_seconds)]
    lines += [f"  {name:<14}{seconds * 1e3:>10.2f}" for name, seconds in times]
    lines.append(f"  {'total':<14}{sum(s for _, s in times) * 1e3:>10.2f}")
    return "\n".join(lines)


def inspect_text(compilation) -> str:
    sections = [
        ("CORE GRAPH", str(compilation.graph)),
        ("SCOP", str(compilation.scop)),
        ("FUSION GROUPS", str(compilation.groups)),
        ("SCHEDULE", str(compilation.schedule)),
        ("LOOPS", str(compilation.program)),
        ("BUFFERS", str(compilation.plan)),
    ]
    return "\n\n".join(f"== {title} ==\n{body.rstrip()}" for title, body in sections)
