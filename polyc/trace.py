"""Traces: how a schedule came to be, as JSON that replays to the same schedule and
code. A :class:`Trace` holds the options the first stages ran with, the scheduler's
tree (isl's text), the steps of :class:`polyc.steer.Schedule` applied to it, the tree
they made and the options of the rest of the compile; :func:`trace_of` makes one for
an automatic compile (no steps, the schedule tiling started from). ``polyc compile``
and ``polyc cc`` read and write them (``--trace-in``, ``--trace-out``), and ``polyc
tune`` saves its best point's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polyc.errors import PolycError

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

    def __str__(self) -> str:
        options = ", ".join(f"{k}={v!r}" for k, v in self.start.items())
        lines = [f"Schedule(nest, {options})"]
        for step in self.steps:
            args = ", ".join(f"{k}={plain(v)!r}" for k, v in step.items() if k != "op")
            lines.append(f"  .{step['op']}({args})")
        if self.compile:
            options = ", ".join(f"{k}={v!r}" for k, v in self.compile.items())
            lines.append(f"  .compile({options})")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"version": TRACE_VERSION, "start": self.start, "initial": self.initial,
                "steps": self.steps, "final": self.final, "compile": self.compile}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Trace":
        if not isinstance(data, Mapping) or data.get("version") != TRACE_VERSION:
            raise PolycError(f"not a polyc schedule trace of version {TRACE_VERSION}: "
                             f"{str(data)[:80]}")
        try:
            return cls(dict(data["start"]), str(data["initial"]),
                       [dict(step) for step in data["steps"]], str(data.get("final", "")),
                       dict(data.get("compile") or {}))
        except (KeyError, TypeError, ValueError) as error:
            raise PolycError(f"a schedule trace needs start, initial and steps: {error}"
                             ) from None

    def save(self, path) -> None:
        """Write the trace as JSON to ``path`` (a new file, or one it replaces whole)."""
        path = Path(path)
        text = json.dumps(self.to_json(), indent=1) + "\n"
        partial = path.with_name(path.name + ".partial")
        partial.write_text(text)
        partial.replace(path)

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
        (``overrides`` replace some: ``threads=2``)."""
        options = {k: argument(v) for k, v in self.compile.items()}
        return self.replay(nest).compile(**{**options, **overrides})


def trace_of(compilation, nest=None) -> Trace:
    """The trace of an automatic compile (a loop nest's, a C kernel's or an ONNX
    model's :class:`~polyc.pipeline.Compilation`): its first stages' options, the
    schedule tiling started from (the autoselected one, if any) and the options of
    the rest, so that :meth:`Trace.compiled` redoes the compile, the same tree and the
    same code on the same host."""
    options = compilation.options
    if options.blocking is not None or isinstance(options.tile_size, Mapping):
        raise PolycError("a trace records tile sizes for every band only, not blocking "
                         "or sizes per statement")
    start = {"symbolic": list(options.symbolic or ()),
             "scheduler": compilation.schedule.scheduler, "fuse": options.fuse,
             "split": options.split, "expand": options.expand}
    if compilation.graph is not None:
        start.update(shapes={k: list(v) for k, v in (options.shapes or {}).items()},
                     dims=dict(options.dims or {}), winograd=options.winograd)
    else:
        start = {"params": dict(options.params or {}), **start}
    untiled = str(compilation.untiled)
    return Trace(start, untiled, [], untiled,
                 {"tile": options.tile, "tile_size": plain(options.tile_size),
                  "without": list(options.without), "threads": options.threads,
                  "fast_math": options.fast_math})


def plain(value):
    """``value`` with tuples as lists: as JSON keeps it."""
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    return value


def argument(value):
    """A step's argument read back from JSON: a band ``["S1", 1]`` as a tuple."""
    if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
        return tuple(value)
    return value
