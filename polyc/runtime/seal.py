"""The seal of an artifact: its length and SHA-256, checked before it is loaded.

``dlopen`` maps a library's segments from the file as they are: a truncated artifact
killed the process with SIGBUS inside ``dlopen``, and one whose embedded manifest was
edited (an input shape changed) loaded and returned garbage. So
:func:`polyc.runtime.aot.write_artifact` ends every artifact with a seal of
:data:`SIZE` bytes, :data:`MAGIC` then the length of everything before the seal
(8 bytes, little-endian) and its SHA-256, and :func:`check` verifies all three in plain
Python before ``dlopen`` (the dynamic loader ignores bytes past what the ELF headers
describe). Hashing reads the file once: about 1 GB/s.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from polyc.errors import ArtifactError

MAGIC = b"polyc-artifact\x00\x01"  # the last byte numbers the seal's layout
SIZE = len(MAGIC) + 8 + 32
CHUNK = 1 << 20


def _digest(path: Path, length: int) -> bytes:
    """SHA-256 of the first ``length`` bytes of ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while length > 0:
            chunk = file.read(min(CHUNK, length))
            if not chunk:
                break
            digest.update(chunk)
            length -= len(chunk)
    return digest.digest()


def seal(path: str | os.PathLike) -> None:
    """Append the seal of ``path``'s current contents to it."""
    path = Path(path)
    length = path.stat().st_size
    trailer = MAGIC + length.to_bytes(8, "little") + _digest(path, length)
    with open(path, "ab") as file:
        file.write(trailer)


def check(path: str | os.PathLike) -> None:
    """Raise :class:`ArtifactError` unless ``path`` ends with the seal of the rest."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as file:
        file.seek(max(size - SIZE, 0))
        trailer = file.read(SIZE)
    if len(trailer) < SIZE or not trailer.startswith(MAGIC):
        raise ArtifactError(f"{path} has no polyc seal at its end: it is cut short, or not "
                            "an artifact of this version of polyc (recompile the model)")
    length = int.from_bytes(trailer[len(MAGIC):len(MAGIC) + 8], "little")
    if length != size - SIZE:
        raise ArtifactError(f"{path} holds {size - SIZE} bytes before its seal, which says "
                            f"{length}: the file was cut or extended (recompile the model)")
    if _digest(path, length) != trailer[len(MAGIC) + 8:]:
        raise ArtifactError(f"{path}: its contents do not match its seal (SHA-256): the file "
                            "was changed after polyc wrote it (recompile the model)")
