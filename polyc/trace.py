"""Traces: how a schedule came to be, as JSON that replays to the same schedule and
code. A :class:`Trace` holds the options the first stages ran with, the scheduler's
tree (isl's text), the steps of :class:`polyc.steer.Schedule` applied to it, the tree
they made and the options of the rest of the compile; :func:`trace_of` makes one for
an automatic compile (no steps, the schedule tiling started from). ``polyc compile``
and ``polyc cc`` read and write them (``--trace-in``, ``--trace-out``), and ``polyc
tune`` saves its best point's.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polyc.errors import PolycError
from polyc.options import MODEL, NEST, REST, START, Options, option_names, plain
from polyc.runtime.output import replacing

if TYPE_CHECKING:
    from polyc.steer import Schedule

TRACE_VERSION = 1


@dataclass
class Trace:
    """How a :class:`Schedule` came to be: the options its first stages ran with, the
    schedule tree the scheduler gave (isl's text), each primitive applied (its name and
    arguments) and the tree they made. :meth:`replay` redoes them on the same nest;
    :meth:`save` and :meth:`load` keep it as JSON."""

    start: dict[str, Any]
    initial: str  # the scheduler's tree, isl's text
    steps: list[dict[str, Any]] = field(default_factory=list)
    final: str = ""  # the tree after the steps
    compile: dict[str, Any] = field(default_factory=dict)  # Schedule.compile's options
    # what the tiling and parallel stages decided when it was compiled (for reading and
    # for checking a replay: :meth:`compiled`)
    decided: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        options = ", ".join(f"{k}={v!r}" for k, v in self.start.items())
        lines = [f"Schedule(nest, {options})"]
        for step in self.steps:
            args = ", ".join(f"{k}={plain(v)!r}" for k, v in step.items() if k != "op")
            lines.append(f"  .{step['op']}({args})")
        if self.compile:
            options = ", ".join(f"{k}={v!r}" for k, v in self.compile.items())
            lines.append(f"  .compile({options})")
        lines += [f"  # {decision}" for decision in self.decided]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"version": TRACE_VERSION, "start": self.start, "initial": self.initial,
                "steps": self.steps, "final": self.final, "compile": self.compile,
                "decided": self.decided}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Trace":
        if not isinstance(data, Mapping) or data.get("version") != TRACE_VERSION:
            raise PolycError(f"not a polyc schedule trace of version {TRACE_VERSION}: "
                             f"{str(data)[:80]}")
        try:
            return cls(dict(data["start"]), str(data["initial"]),
                       [dict(step) for step in data["steps"]], str(data.get("final", "")),
                       dict(data.get("compile") or {}),
                       [str(d) for d in data.get("decided") or ()])
        except (KeyError, TypeError, ValueError) as error:
            raise PolycError(f"a schedule trace needs start, initial and steps: {error}"
                             ) from None

    def save(self, path) -> None:
        """Write the trace as JSON to ``path`` (a new file, or one it replaces whole:
        :func:`polyc.runtime.output.replacing`)."""
        with replacing(path) as temporary:
            temporary.write_text(json.dumps(self.to_json(), indent=1) + "\n")

    @classmethod
    def load(cls, path) -> "Trace":
        try:
            data = json.loads(Path(path).read_text())
        except OSError as error:
            raise PolycError(f"cannot read the trace {path}: {error.strerror}") from None
        except json.JSONDecodeError as error:
            raise PolycError(f"{path} is not JSON: {error}") from None
        return cls.from_json(data)

    def replay(self, nest) -> "Schedule":
        """The steps redone on ``nest`` (the nest the trace was made on), from the
        scheduler's tree as recorded (so a scheduler whose output changed since, or that
        runs against a clock, replays the same); the result's tree is checked to be the
        recorded one."""
        from polyc.steer import PRIMITIVES, Schedule  # (above this module: it makes traces)
        schedule = Schedule(nest, _initial=self.initial, **self.start)
        for step in self.steps:
            args = {k: argument(v) for k, v in step.items() if k != "op"}
            if step["op"] not in PRIMITIVES:
                raise PolycError(f"unknown schedule primitive {step['op']!r} in the trace; "
                                 f"known: {', '.join(PRIMITIVES)}")
            getattr(schedule, step["op"])(**args)
        if self.final and str(schedule.tree) != self.final:
            raise PolycError("the replayed steps made another schedule than the trace's "
                             "(was the nest changed?)")
        return schedule

    def compiled(self, nest, **overrides):
        """:meth:`replay` on ``nest``, compiled with the options the trace recorded
        (``overrides`` replace some: ``threads=2``); without overrides, a compile whose
        tiling and parallel stages decide otherwise than the trace recorded (another
        polyc) is a :class:`PolycError`."""
        compiled = self.replay(nest).compile(**{**self.compile, **overrides})
        now = decided(compiled.schedule.decisions)
        if self.decided and now != self.decided and not overrides:
            first = next(k for k, (a, b) in enumerate(zip([*now, ""], [*self.decided, ""]))
                         if a != b)
            raise PolycError("the tiling and parallel stages decided otherwise than when "
                             f"the trace was made (another polyc version?): "
                             f"{(now + ['nothing'])[first]!r} where the trace has "
                             f"{(self.decided + ['nothing'])[first]!r}")
        return compiled


def trace_of(compilation) -> Trace:
    """The trace of an automatic compile (a loop nest's, a C kernel's or an ONNX
    model's :class:`~polyc.pipeline.Compilation`): its first stages' options, the
    schedule tiling started from (the autoselected one, if any) and the options of
    the rest, the cache sizes tiling sized for among them, so that
    :meth:`Trace.compiled` redoes the compile: the same tree, the same tiles and the
    same LLVM IR, on this host or another."""
    options = compilation.options
    kind = MODEL if compilation.graph is not None else NEST
    start = {**options.chosen(START, kind), "scheduler": compilation.schedule.scheduler}
    untiled = str(compilation.untiled)
    return Trace(start, untiled, [], untiled, recorded(options, kind),
                 decided(compilation.schedule.decisions))


def decided(decisions) -> list[str]:
    """The decisions of the tiling and parallel stages among a compile's."""
    return [d for d in decisions if d.startswith(("tiling:", "parallel:"))]


def compile_option_names(kind: str) -> list[str]:
    """The options a steered schedule compiles with (:meth:`polyc.Schedule.compile`):
    those of the stages after the scheduler's but the choice among schedules."""
    return [n for n in option_names(kind, REST) if n != "autoselect"]


def recorded(options: Options, kind: str) -> dict[str, Any]:
    """The compile options a trace records: :func:`compile_option_names`'s, with the
    cache sizes and the vector width tiling sizes for (the host's, unless given)
    written out."""
    from polyc.host import host_vector_bits
    from polyc.tiling.cache import assumed, host_caches
    with assumed(options.caches):
        caches = dataclasses.asdict(host_caches())
    chosen = options.chosen(REST, kind)
    return {**{n: chosen[n] for n in compile_option_names(kind)}, "caches": caches,
            "vector_bits": options.vector_bits or host_vector_bits()}


def argument(value):
    """A step's argument read back from JSON: a band ``["S1", 1]`` as a tuple."""
    if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
        return tuple(value)
    return value
