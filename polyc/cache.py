"""The compile cache: a model compiled once is loaded, not compiled, the next time.

An entry holds what the JIT and artifacts are made of: the object files of
:func:`polyc.runtime.native.emit_object`, the model's constants after the compiler's
folding and packing, and the manifest; an artifact (``polyc compile -o``) is added
to its entry the first time one is asked for and copied from then on.

**Key.** SHA-256 of the model's bytes (and of each external data file it names), every
compile option, the source of this polyc (its ``.py`` files: a changed compiler
misses), the versions of islpy, llvmlite, LLVM and onnx, and the host CPU's name
and features. A Python object built in memory (a ``Graph``) is not cached.

**Location and size.** ``$POLYC_CACHE_DIR``, else ``$XDG_CACHE_HOME/polyc``, else
``~/.cache/polyc``; at most ``$POLYC_CACHE_SIZE`` bytes (default
:data:`DEFAULT_SIZE`; ``512M``, ``8G``...): after each store, the entries used least
recently go until the rest fit. ``POLYC_CACHE=0`` (or ``off``) turns the cache off
for the process, as ``cache=False`` / ``--no-cache`` do for one compile.

A hit reads one SHA-256 pass over the entry's files (the check); the model file's own
digest is remembered in ``files/`` under its path and status (:func:`file_digest`),
and the JIT reads the constants from the entry's memory map (the file is never
rewritten in place: entries are renamed in and out whole).

**Safety.** An entry is written in a private folder and renamed into place whole, so
a reader never sees half an entry and two processes compiling the same model both
succeed (the second rename loses and its copy is dropped). Every file's length and
SHA-256 are checked on load; an entry that fails (cut, edited, half-deleted) is
removed and the model is compiled again. A cache folder that cannot be written
leaves compiles uncached (a warning), never failed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from polyc import config
from polyc.errors import PolycError
from polyc.runtime import seal
from polyc.runtime.native import NativeCode, NativeProgram

FORMAT = 2  # the layout of an entry; part of the folder name
DEFAULT_SIZE = 4 << 30
OBJECT, CONSTANTS, MANIFEST, INDEX, ARTIFACT = (
    "object.o", "constants.bin", "manifest.json", "entry.json", "artifact.so")
ALIGN = 64  # each constant's offset in constants.bin
CHUNK = 1 << 20


class Entry:
    """One model's folder in the cache."""

    def __init__(self, cache: "Cache", key: str):
        self.cache, self.key = cache, key
        self.path = cache.entries / key

    def exists(self) -> bool:
        return (self.path / INDEX).is_file()

    def load(self) -> NativeProgram | None:
        """The entry's program, checked; None (and the entry removed) if it is missing
        or damaged."""
        try:
            index = json.loads((self.path / INDEX).read_text())
            files = index["files"]
            for name, (size, digest) in files.items():
                if _digest(self.path / name, size) != digest:
                    raise ValueError(f"{name} does not match its checksum")
            if not index["objects"] or not set(index["objects"]) <= set(files):
                raise ValueError("the index names objects it does not check")
            objects = tuple((self.path / name).read_bytes() for name in index["objects"])
            code = NativeCode(objects, tuple(index["functions"]),
                              tuple(c["name"] for c in index["constants"]))
            manifest = json.loads((self.path / MANIFEST).read_text())
            constants = _read_constants(self.path / CONSTANTS, index["constants"])
        except FileNotFoundError:
            if self.exists():  # partly removed by another process
                self.remove()
            return None
        except (OSError, ValueError, KeyError, TypeError) as error:
            config.log(config.STAGES, f"polyc: cache entry {self.key} is damaged ({error}): "
                                      "compiling again")
            self.remove()
            return None
        self.touch()
        return NativeProgram(code, manifest, constants)

    def touch(self) -> None:
        """Mark the entry as just used (its index file's time)."""
        try:
            os.utime(self.path / INDEX)
        except OSError:
            pass

    def remove(self) -> None:
        """Take the entry out (renamed away first, so that readers never see part of one)."""
        trash = self.cache.scratch / f"removed-{self.key}-{os.getpid()}-{time.time_ns()}"
        try:
            self.cache.scratch.mkdir(parents=True, exist_ok=True)
            os.rename(self.path, trash)
        except OSError:
            return
        shutil.rmtree(trash, ignore_errors=True)

    def artifact(self, write) -> Path:
        """The entry's artifact, made by ``write(path)`` the first time; checked by its
        seal (a damaged one is made again)."""
        path = self.path / ARTIFACT
        if path.is_file():
            try:
                seal.check(path)
                self.touch()
                return path
            except PolycError:
                path.unlink(missing_ok=True)
        partial = self.path / f".{ARTIFACT}.{os.getpid()}.{time.time_ns()}"
        try:
            write(partial)
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)
        self.cache.trim(keep=self.key)
        return path


class Cache:
    """The cache folder ``root``, holding at most ``limit`` bytes."""

    def __init__(self, root: Path, limit: int):
        self.root, self.limit = Path(root), limit
        self.entries = self.root / f"entries-{FORMAT}"
        self.scratch = self.root / "tmp"
        self.files = self.root / "files"  # digests of model files (file_digest)

    def entry(self, key: str) -> Entry:
        return Entry(self, key)

    def store(self, key: str, program: NativeProgram, description: str) -> Entry | None:
        """Write an entry of ``program`` for ``key`` (None if the folder cannot be
        written)."""
        entry = self.entry(key)
        try:
            self.scratch.mkdir(parents=True, exist_ok=True)
            self.entries.mkdir(parents=True, exist_ok=True)
            folder = Path(tempfile.mkdtemp(prefix=f"new-{key[:16]}-", dir=self.scratch))
            try:
                _write_entry(folder, program, description)
                try:
                    os.rename(folder, entry.path)
                except OSError:
                    if not entry.exists():  # not another process's copy of it: a failure
                        raise
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError as error:
            warnings.warn(f"polyc: cannot write the compile cache at {self.root} "
                          f"({error.strerror or error}); compiling without it",
                          RuntimeWarning, stacklevel=3)
            return None
        self.trim(keep=key)
        return entry

    def listing(self) -> list[tuple[float, int, Path]]:
        """``(last use, bytes, folder)`` of each entry, least recently used first."""
        found = []
        if not self.entries.is_dir():
            return found
        for folder in self.entries.iterdir():
            try:
                used = (folder / INDEX).stat().st_mtime
                size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
            except OSError:
                continue
            found.append((used, size, folder))
        return sorted(found)

    def trim(self, *, keep: str | None = None) -> None:
        """Remove the least recently used entries until the rest fit in ``limit``."""
        listing = self.listing()
        total = sum(size for _, size, _ in listing)
        for _, size, folder in listing:
            if total <= self.limit:
                break
            if folder.name != keep:
                self.entry(folder.name).remove()
                total -= size

    def clear(self) -> int:
        """Remove every entry; return how many there were."""
        listing = self.listing()
        for _, _, folder in listing:
            self.entry(folder.name).remove()
        shutil.rmtree(self.scratch, ignore_errors=True)
        shutil.rmtree(self.files, ignore_errors=True)
        return len(listing)

    def info(self) -> str:
        listing = self.listing()
        used = sum(size for _, size, _ in listing)
        return (f"polyc compile cache: {self.root}\n"
                f"  {len(listing)} entr{'y' if len(listing) == 1 else 'ies'}, {_size(used)} "
                f"of at most {_size(self.limit)} "
                f"(POLYC_CACHE_SIZE)")


def open_cache(enabled: bool | None = None) -> Cache | None:
    """The cache this process uses, or None when it is off (``enabled=False``, or
    ``POLYC_CACHE=0`` unless ``enabled=True``)."""
    if enabled is False or (enabled is None and not config.cache_enabled()):
        return None
    return Cache(config.cache_dir(), config.cache_size(DEFAULT_SIZE))


def model_key(model, options: Mapping, files: Path | None = None) -> str | None:
    """The cache key of ``model`` (a path, bytes or ``onnx.ModelProto``) compiled with
    ``options``; None for what is not cached (a Graph, an unreadable path: the compile
    reports that). ``files`` is a folder that remembers the digests of model files by
    their path and status (:func:`file_digest`)."""
    digest = hashlib.sha256()
    digest.update(json.dumps({"options": dict(options), "compiler": compiler_id()},
                             sort_keys=True, default=repr).encode())
    try:
        if isinstance(model, (str, os.PathLike)):
            path = Path(model)
            found, external = file_digest(path, files)
            digest.update(b"file")
            digest.update(found.encode())
            for data in _external_files(path) if external else ():
                digest.update(str(data.relative_to(path.parent)).encode())
                digest.update(file_digest(data, files)[0].encode())
        elif isinstance(model, (bytes, bytearray, memoryview)):
            digest.update(b"bytes")
            digest.update(bytes(model))
        elif type(model).__name__ == "ModelProto":
            digest.update(b"proto")
            digest.update(model.SerializeToString(deterministic=True))
        else:
            return None
    except (OSError, ValueError):
        return None
    return digest.hexdigest()


def file_digest(path: Path, files: Path | None = None) -> tuple[str, bool]:
    """SHA-256 of the file ``path`` and whether it may name external data (it holds the
    bytes ``location``, the key of an external data entry). With a ``files`` folder the
    answer is remembered under the file's absolute path, size, modification and status
    change times (nanoseconds), inode and device, and read back while those stay the
    same: a cached compile of vgg19 (548 MB) need not hash the model again."""
    status = path.stat()
    identity = hashlib.sha256("\0".join(map(str, (
        path.resolve(), status.st_size, status.st_mtime_ns, status.st_ctime_ns,
        status.st_ino, status.st_dev))).encode()).hexdigest()
    memo = files / identity if files is not None else None
    if memo is not None:
        try:
            found, flag = memo.read_text().split()
            if len(found) == 64 and flag in ("0", "1"):
                return found, flag == "1"
        except (OSError, ValueError):
            pass
    answer = _sha256(path, b"location")
    if memo is not None:
        try:
            files.mkdir(parents=True, exist_ok=True)
            partial = files / f".{identity}.{os.getpid()}.{time.time_ns()}"
            partial.write_text(f"{answer[0]} {int(answer[1])}")
            os.replace(partial, memo)
        except OSError:
            pass
    return answer


@functools.cache
def compiler_id() -> dict:
    """What decides the code besides the model and options: polyc's source, its
    libraries' versions, the host CPU."""
    import islpy
    import llvmlite
    import llvmlite.binding as llvm
    import onnx

    from polyc.codegen import target

    source = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        source.update(str(path.relative_to(package)).encode())
        source.update(path.read_bytes())
    cpu, features = target.host_cpu()
    return {"polyc": source.hexdigest(), "islpy": islpy.__version__,
            "llvmlite": llvmlite.__version__, "llvm": list(llvm.llvm_version_info),
            "onnx": onnx.__version__, "python": sys.version_info[:2], "cpu": cpu,
            "features": features}


def _external_files(path: Path) -> list[Path]:
    """The external data files the ONNX model ``path`` names."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 - not a model: the frontend says what is wrong
        return []
    found = set()
    for tensor in _tensors(model.graph):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            location = {e.key: e.value for e in tensor.external_data}.get("location")
            if location:
                found.add(path.parent / location)
    return sorted(found)


def _tensors(graph):
    """The tensors of ``graph``: initializers and tensor attributes, subgraphs' too."""
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            for sub in [attribute.g] if attribute.HasField("g") else []:
                yield from _tensors(sub)
            for sub in attribute.graphs:
                yield from _tensors(sub)


def _write_entry(folder: Path, program: NativeProgram, description: str) -> None:
    """The entry's files, each hashed as it is written, and its index."""
    files = {}

    def written(name: str, chunks) -> None:
        digest, size = hashlib.sha256(), 0
        with open(folder / name, "wb") as file:
            for chunk in chunks:
                digest.update(chunk)
                file.write(chunk)
                size += len(chunk)
        files[name] = [size, digest.hexdigest()]

    layout = []

    def constants():
        offset = 0
        for name in program.code.constants:
            value = np.ascontiguousarray(program.constants[name])
            padding = -offset % ALIGN
            layout.append({"name": name, "dtype": value.dtype.str, "shape": list(value.shape),
                           "offset": offset + padding})
            yield bytes(padding)
            yield value.reshape(-1).view(np.uint8)
            offset += padding + value.nbytes

    objects = [_object_name(k) for k in range(len(program.code.objects))]
    for name, data in zip(objects, program.code.objects):
        written(name, [data])
    written(MANIFEST, [json.dumps(program.manifest).encode()])
    written(CONSTANTS, constants())
    index = {"format": FORMAT, "model": description, "files": files, "objects": objects,
             "functions": list(program.code.functions), "constants": layout,
             "created": time.strftime("%Y-%m-%d %H:%M:%S")}
    (folder / INDEX).write_text(json.dumps(index, indent=1))


def _object_name(k: int) -> str:
    """The file of the entry's object ``k`` (``object.o``, ``object1.o``, ...)."""
    return OBJECT if k == 0 else OBJECT.replace(".o", f"{k}.o")


def _read_constants(path: Path, layout: list[dict]) -> dict[str, np.ndarray]:
    """Read-only views of the file, mapped (the JIT reads them where they are)."""
    data = np.memmap(path, dtype=np.uint8, mode="r") if path.stat().st_size else \
        np.zeros(0, np.uint8)
    constants = {}
    for item in layout:
        dtype = np.dtype(item["dtype"])
        count = int(np.prod(item["shape"], dtype=np.int64))
        start = item["offset"]
        raw = data[start:start + count * dtype.itemsize]
        if raw.size != count * dtype.itemsize:
            raise ValueError(f"constants.bin is too short for {item['name']}")
        constants[item["name"]] = raw.view(dtype).reshape(item["shape"])
    return constants


def _digest(path: Path, size: int) -> str:
    """SHA-256 of the file ``path`` (hex); ValueError if its length is not ``size``."""
    if path.stat().st_size != size:
        raise ValueError(f"{path.name} has {path.stat().st_size} bytes, expected {size}")
    return _sha256(path)[0]


def _sha256(path: Path, word: bytes = b"") -> tuple[str, bool]:
    """SHA-256 of the file ``path`` (hex), and whether it holds the bytes ``word``."""
    digest, found, tail = hashlib.sha256(), False, b""
    with open(path, "rb") as file:
        while chunk := file.read(CHUNK):
            digest.update(chunk)
            if word and not found:
                found = word in chunk or word in tail + chunk[:len(word)]
                tail = chunk[-len(word):]
    return digest.hexdigest(), found


def _size(count: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"
