"""Progress of a compile on a terminal (polyc.progress): shown under a pseudo-terminal,
quiet with POLYC_PROGRESS=0, --quiet, or when stderr is not a terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "mlp.onnx"
COMPILE = ("import sys, polyc, polyc.progress as p; p.DELAY = 0.0; "
           f"polyc.compile({str(EXAMPLE)!r}, cache=False); print('done', file=sys.stderr)")


def on_terminal(code: str, env: dict) -> str:
    """What ``python -c code`` writes to its terminal (stdout and stderr)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: its stdio is the pseudo-terminal
        os.execve(sys.executable, [sys.executable, "-c", code], env)
    out = b""
    while True:
        try:
            data = os.read(fd, 1 << 16)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        out += data
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out.decode(errors="replace")
    return out.decode(errors="replace")


def environment(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("POLYC_DEBUG", "POLYC_PROGRESS")}
    return {**env, "TERM": "xterm", **extra}


def test_a_compile_on_a_terminal_shows_its_stages_and_groups():
    text = on_terminal(COMPILE, environment())
    assert "polyc: compiling" in text and str(EXAMPLE) in text
    for shown in ("frontend", "schedule group 1 / 3", "schedule group 3 / 3", "ast",
                  "LLVM (O3, object)"):
        assert shown in text, shown
    assert "done" in text


@pytest.mark.parametrize("how", ["variable", "debug"])
def test_no_progress_when_asked_or_debugging(how):
    extra = {"POLYC_PROGRESS": "0"} if how == "variable" else {"POLYC_DEBUG": "1"}
    text = on_terminal(COMPILE, environment(**extra))
    assert "polyc: compiling" not in text and "done" in text


def test_no_progress_with_quiet_on_the_command_line(tmp_path):
    code = ("import sys, polyc.progress as p; p.DELAY = 0.0; from polyc.cli import main; "
            f"sys.exit(main(['compile', {str(EXAMPLE)!r}, '-o', {str(tmp_path / 'm.so')!r}, "
            "'--no-cache', '--quiet']))")
    text = on_terminal(code, environment())
    assert "polyc: compiling" not in text and "wrote" in text


def test_no_progress_when_stderr_is_not_a_terminal():
    done = subprocess.run([sys.executable, "-c", COMPILE], capture_output=True, text=True,
                          env=environment(), check=True)
    assert done.stderr.strip() == "done"
