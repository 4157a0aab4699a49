"""Opening AOT artifacts with ctypes and numpy alone.

An artifact is a shared library written by :func:`polyc.runtime.aot.write_artifact`:
it exports the entry function (``polyc_main``) and ``const char *polyc_manifest(void)``.
Importing this module loads neither islpy nor llvmlite, so a deployed model needs
only numpy (and libgomp, which ships with gcc; loaded first with polyc's wait policy,
:func:`polyc.runtime.openmp.load_libgomp`).
"""

from __future__ import annotations

import ctypes
import json
import os
import tempfile
from pathlib import Path

from polyc.errors import ArtifactError
from polyc.runtime import abi, openmp, seal

MANIFEST_FUNCTION = "polyc_manifest"
LINK_NAME = "artifact.so"


class Artifact(abi.Runner):
    """A loaded artifact: ``.run({name: array}) -> {name: array}``, ``.manifest``, ``.path``.

    It keeps the library handle open for as long as it lives.
    """

    def __init__(self, path: Path, library: ctypes.CDLL, manifest: dict):
        self.path = path
        self._library = library
        entry = manifest["entry"]
        try:
            address = ctypes.cast(library[entry], ctypes.c_void_p).value
        except AttributeError:
            raise ArtifactError(f"{path}: the manifest names entry function {entry!r}, "
                                "which the library does not export") from None
        try:
            super().__init__(manifest, address, lambda name: _address(library, name))
        except ValueError as error:
            raise ArtifactError(f"{path}: {error}") from None

    def __repr__(self) -> str:
        return f"<Artifact {self.path.name} ({abi.signature(self.inputs)}) -> " \
               f"({abi.signature(self.outputs)})>"


def _address(library: ctypes.CDLL, name: str) -> int:
    """The address of the exported function ``name``, or 0."""
    try:
        return ctypes.cast(library[name], ctypes.c_void_p).value or 0
    except AttributeError:
        return 0


def read_manifest(path: Path, library: ctypes.CDLL) -> dict:
    """The manifest embedded in ``library``, checked to be of the format this polyc reads."""
    try:
        function = library[MANIFEST_FUNCTION]
    except AttributeError:
        raise ArtifactError(f"{path} is not a polyc artifact "
                            f"(it does not export {MANIFEST_FUNCTION})") from None
    function.restype = ctypes.c_char_p
    function.argtypes = []
    try:
        manifest = json.loads(function().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ArtifactError(f"{path}: its polyc manifest is not JSON: {error}") from None
    found = manifest.get("format") if isinstance(manifest, dict) else None
    if found != abi.FORMAT:
        raise ArtifactError(f"{path} has artifact format {found!r}, but this polyc reads "
                            f"{abi.FORMAT!r}: recompile the model")
    try:
        abi.check_manifest(manifest)
    except ValueError as error:
        raise ArtifactError(f"{path}: unusable polyc manifest: {error}") from None
    return manifest


def load_artifact(path: str | os.PathLike) -> Artifact:
    """Open the artifact ``path``; raise ``ArtifactError`` naming the file if it is not one."""
    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"no such artifact: {path}")
    seal.check(path)  # (dlopen of a cut file is a SIGBUS; of an edited one, garbage)
    openmp.load_libgomp()  # before the library brings libgomp in with libgomp's defaults
    try:
        library = dlopen_current(path)
    except OSError as error:
        raise ArtifactError(f"{path} is not a loadable shared library: {error}") from None
    return Artifact(path, library, read_manifest(path, library))


def dlopen_current(path: Path) -> ctypes.CDLL:
    """``dlopen`` the file now at ``path``, even if an older file of that name is loaded.

    glibc returns an already-loaded library whose *name* matches, so an artifact
    rewritten since it was first loaded would come back stale. Opening it through a
    fresh symbolic link makes glibc compare the file's device and inode instead.
    """
    with tempfile.TemporaryDirectory(prefix="polyc-load-") as folder:
        link = Path(folder, LINK_NAME)
        link.symlink_to(path.resolve())
        try:
            return ctypes.CDLL(str(link))
        except OSError as error:  # dlopen's message starts with the link's name: drop it
            raise OSError(str(error).removeprefix(f"{link}: ")) from None
