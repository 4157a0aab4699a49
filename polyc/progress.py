"""A compile's progress on the terminal: the stage, ``group i / N`` where a stage goes
group by group, and the time since the compile started.

Shown with ``rich`` on stderr when stderr is a terminal, after :data:`DELAY` seconds
(a quick compile prints nothing), and cleared when the compile ends. Quiet when stderr
is not a terminal, with ``POLYC_PROGRESS=0`` or ``polyc ... --quiet``, and at
``POLYC_DEBUG`` levels (they print every stage's time instead). The per-stage times
stay in the compile's ``report()``.

Stages report through :func:`step`, which costs nothing when no compile is shown.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time

from polyc import config

DELAY = 1.0  # seconds before anything is shown
_current: list["_Display"] = []  # the compile being shown (one per process at a time)
_lock = threading.Lock()
_quiet: list[bool] = []  # set by quiet()


def quiet() -> None:
    """Show no progress in this process (``polyc --quiet``)."""
    _quiet.append(True)


def enabled() -> bool:
    """Whether compiles show progress here: a terminal, not quiet, not debugging."""
    return (not _quiet and config.progress_enabled() and config.debug_level() == 0
            and hasattr(sys.stderr, "isatty") and sys.stderr.isatty())


@contextlib.contextmanager
def compile_progress(what: str):
    """Show the progress of compiling ``what`` for the block (if :func:`enabled`)."""
    with _lock:
        nested = bool(_current)
    if nested or not enabled():
        yield
        return
    display = _Display(what)
    with _lock:
        _current.append(display)
    try:
        yield
    finally:
        with _lock:
            _current.clear()
        display.close()


def stage(name: str) -> None:
    """The compile moved on to stage ``name``."""
    if _current:
        _current[0].update(name, None)


def step(done: int, total: int) -> None:
    """The current stage has finished ``done`` of its ``total`` groups."""
    if _current:
        _current[0].update(None, (done, total))


class _Display:
    def __init__(self, what: str):
        self.what, self.name, self.count = what, "", None
        self.start = time.monotonic()
        self.progress = None  # made once DELAY has passed
        self.task = None

    def update(self, name: str | None, count: tuple[int, int] | None) -> None:
        if name is not None:
            self.name, self.count = name, None
        if count is not None:
            self.count = count
        if self.progress is None and time.monotonic() - self.start < DELAY:
            return
        self._show()

    def _show(self) -> None:
        if self.progress is None:
            from rich.console import Console
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                                     TimeElapsedColumn(), transient=True,
                                     console=Console(stderr=True), get_time=time.monotonic)
            self.progress.start()
            self.task = self.progress.add_task("", total=None)
            self.progress.tasks[0].start_time = self.start  # elapsed: since the compile began
        text = f"polyc: compiling {self.what}: {self.name}"
        if self.count is not None:
            text += f" group {self.count[0]} / {self.count[1]}"
        self.progress.update(self.task, description=text, refresh=True)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
