"""The calling convention shared by JIT-compiled models and AOT artifacts.

A compiled model is one C function and a manifest describing it::

    void polyc_main(float *in0, ..., float *out0, ..., void *scratch);

one pointer per graph input (graph order), one per graph output (graph order) and a
scratch buffer last. Every buffer is C-contiguous; inputs and outputs may have any
alignment; the scratch buffer is 64-byte aligned and ``scratch_bytes`` long. The
manifest (format ``polyc-1``) is a JSON-serialisable dict::

    {"format": "polyc-1", "entry": "polyc_main",
     "inputs":  [{"name": "x", "shape": [4, 64], "dtype": "float32"}, ...],
     "outputs": [{"name": "y", "shape": [4, 10], "dtype": "float32"}, ...],
     "scratch_bytes": 0, "model_hash": "...", "options": {...}, "polyc_version": "..."}

An output may carry ``"init"``: its buffer is then read and written in place (the
arrays of a loop nest). ``"given"``: the caller must pass its initial value, which is
copied; ``"zeros"``: copied if passed, zeros otherwise. Outputs without ``"init"``
(every ONNX output) start uninitialised and cannot be passed. Caller arrays are never
modified.

This module imports only numpy, ctypes and the standard library, so AOT artifacts
run without islpy or llvmlite.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from polyc.errors import InputError

FORMAT = "polyc-1"
SCRATCH_ALIGNMENT = 64
MANIFEST_KEYS = ("format", "entry", "inputs", "outputs", "scratch_bytes")
INITS = ("", "given", "zeros")  # "": not initialised (ONNX outputs)


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a compiled model: its name, shape and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    init: str = ""  # outputs only: one of INITS

    def __str__(self) -> str:
        optional = " (optional)" if self.init == "zeros" else ""
        return f"{self.name}: {self.dtype}[{', '.join(map(str, self.shape))}]{optional}"


def check_manifest(manifest: Mapping) -> None:
    """Raise ``TypeError``/``ValueError`` saying what is wrong unless ``manifest`` is polyc-1."""
    if not isinstance(manifest, Mapping):
        raise TypeError(f"the manifest is a {type(manifest).__name__}, not a JSON object")
    if manifest.get("format") != FORMAT:
        raise ValueError(f"manifest format {manifest.get('format')!r}, expected {FORMAT!r}")
    missing = [key for key in MANIFEST_KEYS if key not in manifest]
    if missing:
        raise ValueError(f"the manifest lacks {', '.join(missing)}")
    for key in ("inputs", "outputs"):
        tensor_specs(manifest, key)


def tensor_specs(manifest: Mapping, key: str) -> tuple[TensorSpec, ...]:
    """The ``TensorSpec`` of each entry of ``manifest[key]`` (``"inputs"`` or ``"outputs"``)."""
    try:
        specs = tuple(
            TensorSpec(str(t["name"]), tuple(int(d) for d in t["shape"]), np.dtype(t["dtype"]),
                       str(t.get("init", "")))
            for t in manifest[key])
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ValueError(f"bad {key} in the manifest: {error!r}") from None
    bad = [s.name for s in specs if s.init not in INITS or (s.init and key == "inputs")]
    if bad:
        raise ValueError(f"bad init of {', '.join(bad)} in the manifest's {key}")
    return specs


def signature(specs: tuple[TensorSpec, ...]) -> str:
    """``x: float32[4, 64], y: float32[4]``: what a model expects, for error messages."""
    return ", ".join(map(str, specs)) or "nothing"


def check_inputs(manifest: Mapping, inputs: Mapping) -> list[np.ndarray]:
    """The input arrays in the manifest's order, after checking them.

    Raises ``InputError`` for an unknown or missing name, or an array whose type,
    dtype, shape or layout (C-contiguous) is not the compiled one.
    """
    return check_arrays(tensor_specs(manifest, "inputs"), inputs)


def check_arrays(specs: tuple[TensorSpec, ...], inputs: Mapping,
                 optional: frozenset[str] = frozenset()) -> list[np.ndarray | None]:
    """:func:`check_inputs` against already-parsed ``specs``; an ``optional`` name may
    be omitted (``None`` in its place)."""
    if not isinstance(inputs, Mapping):
        raise InputError(f"inputs must be a dict of name -> numpy array, got "
                         f"{type(inputs).__name__}; this model takes {signature(specs)}")
    names = {spec.name for spec in specs}
    unknown = [name for name in inputs if name not in names]
    if unknown:
        raise InputError(f"unknown input {', '.join(map(repr, unknown))}; "
                         f"this model takes {signature(specs)}")
    missing = [spec for spec in specs if spec.name not in inputs and spec.name not in optional]
    if missing:
        raise InputError(f"missing input {', '.join(repr(s.name) for s in missing)}; "
                         f"this model takes {signature(specs)}")
    return [check_array(spec, inputs[spec.name]) if spec.name in inputs else None
            for spec in specs]


def check_array(spec: TensorSpec, array) -> np.ndarray:
    """``array`` itself if it matches ``spec``; otherwise ``InputError`` saying how it differs."""
    name = spec.name
    if not isinstance(array, np.ndarray):
        raise InputError(f"input '{name}' is a {type(array).__name__}, expected a numpy array "
                         f"({spec})")
    if array.dtype != spec.dtype:
        raise InputError(f"input '{name}' has dtype {array.dtype}, expected {spec.dtype} "
                         f"(convert with .astype(np.{spec.dtype}))")
    if array.shape != spec.shape:
        raise InputError(f"input '{name}' has shape {array.shape}, expected {spec.shape}")
    if not array.flags.c_contiguous:
        raise InputError(f"input '{name}' is not C-contiguous; "
                         f"pass np.ascontiguousarray({name}) instead")
    return array


def aligned_empty(nbytes: int, alignment: int = SCRATCH_ALIGNMENT) -> np.ndarray:
    """An uninitialised byte array of ``nbytes`` whose data starts on an ``alignment`` boundary."""
    raw = np.empty(nbytes + alignment, dtype=np.uint8)
    offset = -raw.ctypes.data % alignment
    # numpy resets the data pointer of an empty slice: slice one byte, then trim it.
    return raw[offset:offset + nbytes + 1][:nbytes]


def entry_function(address: int, n_args: int):
    """A ctypes callable for ``void f(void *, ...)`` at ``address``; calls release the GIL."""
    if not address:
        raise ValueError("null entry function address")
    prototype = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * n_args)
    return prototype(address)


def _output_buffer(spec: TensorSpec, initial: np.ndarray | None) -> np.ndarray:
    """A fresh buffer for an output: uninitialised, a copy of ``initial``, or zeros."""
    if not spec.init:
        return np.empty(spec.shape, dtype=spec.dtype)
    if initial is None:
        return np.zeros(spec.shape, dtype=spec.dtype)
    return initial.copy()


class Runner:
    """A compiled model callable from Python: ``run({name: array}) -> {name: array}``.

    Subclasses own the code behind ``address`` (a JIT engine or a loaded library) and
    must keep it alive as long as the runner. ``inputs``/``outputs`` list the
    ``TensorSpec`` (name, shape, dtype) of each tensor in graph order.
    """

    def __init__(self, manifest: Mapping, address: int):
        check_manifest(manifest)
        self.manifest = dict(manifest)
        self.inputs = tensor_specs(manifest, "inputs")
        self.outputs = tensor_specs(manifest, "outputs")
        self.scratch_bytes = int(manifest["scratch_bytes"])
        self._accepted = self.inputs + tuple(s for s in self.outputs if s.init)
        self._optional = frozenset(s.name for s in self.outputs if s.init == "zeros")
        n_args = len(self.inputs) + len(self.outputs) + 1
        self._function = entry_function(address, n_args)
        self._per_thread = threading.local()

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Check ``inputs``, run the compiled code, return fresh outputs in graph order."""
        checked = check_arrays(self._accepted, inputs, self._optional)
        given = {spec.name: array for spec, array in zip(self._accepted, checked)}
        arrays = [given[spec.name] for spec in self.inputs]
        outputs = [_output_buffer(spec, given.get(spec.name)) for spec in self.outputs]
        pointers = [array.ctypes.data for array in arrays + outputs]
        self._function(*pointers, self._scratch_address())
        return {spec.name: array for spec, array in zip(self.outputs, outputs)}

    __call__ = run

    def _scratch_address(self) -> int:
        """This thread's scratch buffer (threads may run the same model concurrently)."""
        local = self._per_thread
        if not hasattr(local, "address"):
            local.scratch = aligned_empty(self.scratch_bytes)
            local.address = local.scratch.ctypes.data
        return local.address

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} ({signature(self._accepted)}) -> "
                f"({signature(self.outputs)})>")
