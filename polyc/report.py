"""Human-readable reports: per-stage times and sizes, and the full inspection text."""

from __future__ import annotations

from polyc.islutil import union_maps


def compile_report(compilation, native_times, *, cached: bool = False) -> str:
    """The report of ``compilation``; ``native_times`` are ``(stage, seconds)`` of making
    and loading its native code, which came from the compile cache if ``cached`` (its
    stages then did not run for this compile, and only those times are listed)."""
    graph, scop = compilation.graph, compilation.scop
    deps = sum(len(union_maps(m)) for m in scop.dependences.kinds().values())
    options = compilation.options
    symbolic = scop.symbolic_params
    kept = f", symbolic {', '.join(symbolic)}" if symbolic else ""
    nest = _values(scop.param_values) + kept if scop.param_values or not symbolic else kept[2:]
    source = (f"'{graph.name}' (opset {graph.opset}{kept})" if graph is not None
              else f"a loop nest ({nest})")
    ops = f"{len(graph.ops)} core ops -> " if graph is not None else ""
    lines = [
        f"polyc report for {source}; scheduler {options.scheduler}, fusion {options.fuse}",
        f"  {ops}{len(scop.statements)} statements in "
        f"{len(compilation.groups.groups)} fusion groups; {deps} dependence relations",
        f"  {_scratch(compilation.plan)}; {len(compilation.plan.constants)} constants",
    ]
    lines += [f"  note: {note}" for note in (graph.notes if graph is not None else ())]
    if cached:
        lines.append("  read from the compile cache (polyc.cache): no stage ran")
    lines.append(f"  {'stage':<14}{'ms':>10}")
    times = ([] if cached else list(compilation.times)) + list(native_times)
    lines += [f"  {name:<14}{seconds * 1e3:>10.2f}" for name, seconds in times]
    lines.append(f"  {'total':<14}{sum(s for _, s in times) * 1e3:>10.2f}")
    if not cached:
        lines += _schedule_lines(compilation)
    return "\n".join(lines)


# statements whose schedule the report shows in Pluto's notation (inspect() shows all)
SHOWN_STATEMENTS = 40


def _schedule_lines(compilation) -> list[str]:
    """The fusion groups' and the schedule's decisions, then each statement's schedule
    in Pluto's notation (the first :data:`SHOWN_STATEMENTS`)."""
    schedule = str(compilation.schedule).splitlines()
    decisions = [line for line in schedule if line.startswith(("scheduler:", "  "))]
    notation = [line for line in schedule if line.startswith("T(")]
    lines = ["  fusion groups:", *(f"    {g}" for g in str(compilation.groups).splitlines())]
    lines += [f"  {decisions[0]}" if decisions else "  schedule:",
              *(f"  {d}" for d in decisions[1:])]
    lines += [f"  {row}" for row in notation[:SHOWN_STATEMENTS]]
    if len(notation) > SHOWN_STATEMENTS:
        lines.append(f"  ... {len(notation) - SHOWN_STATEMENTS} more statements "
                     "(inspect() shows every one)")
    return lines


def _scratch(plan) -> str:
    """``3 temporaries, scratch 4096 bytes (8192 without reuse)`` (plus those of symbolic
    size)."""
    text = (f"{len(plan.scratch)} temporaries, scratch {plan.scratch_bytes} bytes "
            f"({plan.unshared_bytes} without reuse)")
    if plan.symbolic:
        text += f" and {len(plan.symbolic)} of symbolic size ({', '.join(plan.params)})"
    return text


def _values(values) -> str:
    return ", ".join(f"{k}={v}" for k, v in (values or {}).items()) or "no parameters"


def inspect_text(compilation) -> str:
    graph = [("CORE GRAPH", str(compilation.graph))] if compilation.graph is not None else []
    sections = graph + [
        ("SCOP", str(compilation.scop)),
        ("FUSION GROUPS", str(compilation.groups)),
        ("SCHEDULE", str(compilation.schedule)),
        ("LOOPS", str(compilation.program)),
        ("BUFFERS", str(compilation.plan)),
    ]
    return "\n\n".join(f"== {title} ==\n{body.rstrip()}" for title, body in sections)
