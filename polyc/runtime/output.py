"""Files polyc writes (artifacts, ``polyc run -o`` results) replace their target whole
or not at all.

The target is checked before any work: it must not be a file the command reads (the
model being compiled or run, an input), an existing directory, or anything but a
regular file (a device such as ``/dev/null``, a FIFO, a socket), and its folder must
exist. The content then goes to a temporary file in the same folder, which replaces
the target in one ``os.replace`` (atomic on POSIX) once it is complete; on any failure
the temporary file is removed and the target is left as it was. A symbolic link as
target is replaced by the file (what it points to is not written).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from polyc.errors import OutputError


def check_target(path: str | os.PathLike, *, reads: Iterable = ()) -> Path:
    """``path`` as a Path, if a new file may replace it; else :class:`OutputError`.
    ``reads`` are the files the command reads (paths; other objects are ignored)."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"cannot write {path}: it is a directory")
    if path.exists() and not path.is_file():
        raise OutputError(f"cannot write {path}: not a regular file (a device, FIFO or "
                          "socket); give the path of a file")
    for source in reads:
        if isinstance(source, (str, os.PathLike)) and path.exists() \
                and Path(source).exists() and os.path.samefile(path, source):
            raise OutputError(f"cannot write {path}: it is {source}, which this command "
                              "reads; give another output path")
    if not path.parent.is_dir():
        raise OutputError(f"cannot write {path}: directory {path.parent} does not exist")
    return path


@contextmanager
def replacing(path: str | os.PathLike, *, reads: Iterable = ()) -> Iterator[Path]:
    """A temporary path next to ``path`` (checked by :func:`check_target`) to write;
    it replaces ``path`` when the block ends without an error, and is removed in any
    case."""
    path = check_target(path, reads=reads)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield temporary
        os.replace(temporary, path)
    except OSError as error:
        raise OutputError(f"cannot write {path}: {error.strerror or error}") from None
    finally:
        temporary.unlink(missing_ok=True)
