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

Symbolic dims (one artifact for every batch size): the manifest may list ``"params"``
(names, e.g. ``["batch"]``) that shapes use in place of ints. Their values are appended
to the entry's arguments as ``int64_t`` (in that order)::

    void polyc_main(float *in0, ..., float *out0, ..., void *scratch, int64_t batch, ...);

At each call the runtime reads every value from the input shapes (each parameter
appears in some input), refuses inputs that disagree, and sizes the outputs. With
parameters, ``scratch_bytes`` may be the name of an exported ``int64_t f(int64_t
params...)`` that returns the scratch size for the values.

An output may carry ``"init"``: its buffer is then read and written in place (the
arrays of a loop nest). ``"given"``: the caller must pass its initial value, which is
copied; ``"zeros"``: copied if passed, zeros otherwise. Outputs without ``"init"``
(every ONNX output) start uninitialised and cannot be passed. Caller arrays are never
modified, but the buffers a call is given for its outputs (``run(inputs, out=...)``).

``"host"`` and ``"results"`` (optional): ops the runtime runs after the call on the
inputs and outputs (NonMaxSuppression, Unique, Compress: their output lengths depend on
the values), and the names a call returns, in the model's order
(:mod:`polyc.runtime.host`).

This module imports only numpy, ctypes and the standard library, so AOT artifacts
run without islpy or llvmlite.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import ml_dtypes  # noqa: F401 - registers numpy's bfloat16 dtype (arrays of bfloat16)
import numpy as np

from polyc.errors import InputError
from polyc.runtime import host

FORMAT = "polyc-1"
SCRATCH_ALIGNMENT = 64
MANIFEST_KEYS = ("format", "entry", "inputs", "outputs", "scratch_bytes")
INITS = ("", "given", "zeros")  # "": not initialised (ONNX outputs)


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a compiled model: its name, shape and dtype."""

    name: str
    shape: tuple[int | str, ...]  # a str: a parameter of the manifest
    dtype: np.dtype
    init: str = ""  # outputs only: one of INITS

    def bound(self, values: Mapping[str, int]) -> TensorSpec:
        """This spec with each parameter that ``values`` has replaced by its value."""
        if all(isinstance(d, int) for d in self.shape):
            return self
        return replace(self, shape=tuple(values.get(d, d) if isinstance(d, str) else d
                                         for d in self.shape))

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
    params = manifest_params(manifest)
    inputs, outputs = tensor_specs(manifest, "inputs"), tensor_specs(manifest, "outputs")
    given = inputs + tuple(spec for spec in outputs if spec.init == "given")
    named = {d for spec in given for d in spec.shape if isinstance(d, str)}
    unread = [p for p in params if p not in named]
    if unread:
        raise ValueError(f"parameter {', '.join(unread)} is in no input shape")
    scratch = manifest["scratch_bytes"]
    if isinstance(scratch, str) and not params:
        raise ValueError("scratch_bytes names a function, but the manifest has no params")
    if "host" in manifest:
        host.check_steps(manifest, tuple(spec.name for spec in inputs + outputs))


def manifest_params(manifest: Mapping) -> tuple[str, ...]:
    """The names of the manifest's parameters (symbolic dims), in argument order."""
    params = manifest.get("params", [])
    if not isinstance(params, list) or not all(isinstance(p, str) and p for p in params) \
            or len(set(params)) != len(params):
        raise ValueError(f"bad params in the manifest: {params!r}")
    return tuple(params)


def tensor_specs(manifest: Mapping, key: str) -> tuple[TensorSpec, ...]:
    """The ``TensorSpec`` of each entry of ``manifest[key]`` (``"inputs"`` or ``"outputs"``)."""
    params = manifest_params(manifest)
    dim = lambda d: d if isinstance(d, str) and d in params else int(d)  # noqa: E731
    try:
        specs = tuple(
            TensorSpec(str(t["name"]), tuple(dim(d) for d in t["shape"]), np.dtype(t["dtype"]),
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


def _quick_addresses(specs: tuple[tuple[str, tuple, np.dtype], ...], inputs) -> list | None:
    """The data addresses of ``inputs`` when it is a dict of exactly the arrays ``specs``
    (name, shape, dtype) describe, in their order; else None (a quick test that never
    raises: anything else goes through :func:`check_arrays`, which says what is wrong)."""
    if type(inputs) is not dict or len(inputs) != len(specs):
        return None
    addresses = []
    for name, shape, dtype in specs:
        array = inputs.get(name)
        if (type(array) is not np.ndarray or array.shape != shape or array.dtype != dtype
                or not array.flags.c_contiguous):
            return None
        addresses.append(data_address(array))
    return addresses


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


def _check_buffer(spec: TensorSpec, buffer) -> None:
    """``InputError`` unless ``buffer`` can take output ``spec``: its shape and dtype,
    C order, writeable."""
    if not isinstance(buffer, np.ndarray):
        raise InputError(f"out '{spec.name}' is a {type(buffer).__name__}, expected a numpy "
                         f"array ({spec})")
    if buffer.dtype != spec.dtype or buffer.shape != spec.shape:
        raise InputError(f"out '{spec.name}' is {buffer.dtype}{list(buffer.shape)}, expected "
                         f"{spec}")
    if not buffer.flags.c_contiguous or not buffer.flags.writeable:
        raise InputError(f"out '{spec.name}' must be a writeable C-contiguous array")


def _check_apart(inputs: list[np.ndarray], outputs: list[np.ndarray], names: list[str]
                 ) -> None:
    """``InputError`` when an output buffer shares memory with an input or another
    output (the code would read what it overwrites)."""
    for k, buffer in enumerate(outputs):
        for other in [*inputs, *outputs[k + 1:]]:
            if buffer.size and other.size and np.shares_memory(buffer, other):
                raise InputError(f"out '{names[k]}' shares memory with another input or "
                                 "output array")


def data_address(array: np.ndarray) -> int:
    """The address of a C-contiguous ``array``'s first element: through a ctypes view
    of its buffer (0.37 us), else (read-only or empty) ``array.ctypes.data`` (1.7 us,
    twice per call of a model with one input and one output)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError):
        return array.ctypes.data


def aligned_empty(nbytes: int, alignment: int = SCRATCH_ALIGNMENT) -> np.ndarray:
    """An uninitialised byte array of ``nbytes`` whose data starts on an ``alignment`` boundary."""
    raw = np.empty(nbytes + alignment, dtype=np.uint8)
    offset = -raw.ctypes.data % alignment
    # numpy resets the data pointer of an empty slice: slice one byte, then trim it.
    return raw[offset:offset + nbytes + 1][:nbytes]


def entry_function(address: int, n_args: int, n_params: int = 0):
    """A ctypes callable for ``void f(void *, ..., int64_t, ...)`` at ``address`` (``n_args``
    pointers, then ``n_params`` integers); calls release the GIL."""
    if not address:
        raise ValueError("null entry function address")
    prototype = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * n_args,
                                 *[ctypes.c_int64] * n_params)
    return prototype(address)


def bind_params(params: tuple[str, ...], specs: tuple[TensorSpec, ...],
                arrays: list[np.ndarray | None]) -> dict[str, int]:
    """Each parameter's value, read from the shapes of the given arrays; ``InputError``
    when two inputs disagree on one or a value is not positive. An array of the wrong
    rank is skipped here (its shape check says what is wrong)."""
    values: dict[str, int] = {}
    seen: dict[str, str] = {}
    for spec, array in zip(specs, arrays):
        if not isinstance(array, np.ndarray) or array.ndim != len(spec.shape):
            continue
        for axis, (dim, size) in enumerate(zip(spec.shape, array.shape)):
            if not isinstance(dim, str):
                continue
            where = f"input '{spec.name}' dim {axis}"
            if dim in values and values[dim] != size:
                raise InputError(f"{where} gives {dim} = {size}, but {seen[dim]} gave "
                                 f"{dim} = {values[dim]}: inputs must agree on {dim}")
            if size < 1:
                raise InputError(f"{where} gives {dim} = {size}; {dim} must be at least 1")
            values[dim], seen[dim] = size, where
    return values


def _output_buffer(spec: TensorSpec, initial: np.ndarray | None,
                   kept: dict[str, np.ndarray], out: Mapping | None = None) -> np.ndarray:
    """A buffer for an output: the caller's in ``out`` (checked, ``initial`` copied in
    unless it is that buffer); a copy of ``initial``, or zeros (an output with an
    initial value); else the array ``kept`` from the previous call when nothing else
    references it any more (:func:`_unused`), or a new uninitialised one, kept."""
    buffer = out.get(spec.name) if out else None
    if buffer is not None:
        _check_buffer(spec, buffer)
        if spec.init and initial is not None and initial is not buffer:
            np.copyto(buffer, initial)
        return buffer
    if spec.init:
        return np.zeros(spec.shape, dtype=spec.dtype) if initial is None else initial.copy()
    array = _unused(kept, spec.name)
    if array is None or array.shape != spec.shape or array.dtype != spec.dtype:
        array = kept[spec.name] = np.empty(spec.shape, dtype=spec.dtype)
    return array


def _unused(kept: dict[str, np.ndarray], name: str) -> np.ndarray | None:
    """``kept[name]`` if only ``kept`` references it (no caller holds the array, a view
    of it or the dict it was returned in), else None. Reusing it keeps its memory
    mapped: a new 4 MB output page-faults again whenever the allocator has given the
    memory back (Softmax 1024x1024 timed between numpy calls: 2.15 ms a call, 0.75
    reusing)."""
    array, refs = _with_refs(kept, name)
    return array if array is not None and refs == _UNUSED_REFS else None


def _with_refs(kept: dict[str, np.ndarray], name: str) -> tuple[np.ndarray | None, int]:
    """``kept[name]`` (or None) and its reference count as seen here."""
    array = kept.get(name)
    return array, sys.getrefcount(array)


# The count :func:`_with_refs` sees for an array that only its dict references
# (measured, not assumed: interpreters count references differently).
_UNUSED_REFS = _with_refs({"probe": np.empty(1)}, "probe")[1]


def _list_refs(arrays: list) -> list[int]:
    """The reference count of each of ``arrays`` as seen here."""
    return [sys.getrefcount(array) for array in arrays]


# ... and of an array that only its list references.
_LIST_REFS = _list_refs([np.empty(1)])[0]


class Runner:
    """A compiled model callable from Python: ``run({name: array}) -> {name: array}``.

    Subclasses own the code behind ``address`` (a JIT engine or a loaded library) and
    must keep it alive as long as the runner. ``inputs``/``outputs`` list the
    ``TensorSpec`` (name, shape, dtype) of each tensor in graph order.
    """

    def __init__(self, manifest: Mapping, address: int,
                 symbol: Callable[[str], int] | None = None):
        """``symbol`` gives the address of another exported function (a symbolic
        scratch size)."""
        check_manifest(manifest)
        self.manifest = dict(manifest)
        self.symbol = symbol or (lambda name: 0)
        self.params = manifest_params(manifest)
        self.inputs = tensor_specs(manifest, "inputs")
        self.outputs = tensor_specs(manifest, "outputs")
        scratch = manifest["scratch_bytes"]
        self.scratch_bytes = scratch if isinstance(scratch, str) else int(scratch)
        self._scratch_function = None
        if isinstance(scratch, str):
            address_of = symbol(scratch) if symbol else 0
            if not address_of:
                raise ValueError(f"the manifest's scratch size function {scratch} is missing")
            self._scratch_function = ctypes.CFUNCTYPE(
                ctypes.c_int64, *[ctypes.c_int64] * len(self.params))(address_of)
        self._accepted = self.inputs + tuple(s for s in self.outputs if s.init)
        self._optional = frozenset(s.name for s in self.outputs if s.init == "zeros")
        n_args = len(self.inputs) + len(self.outputs) + 1
        self._function = entry_function(address, n_args, len(self.params))
        self._per_thread = threading.local()
        # no parameters and no output with an initial value: run's quick path
        plain = not self.params and not any(s.init for s in self.outputs)
        self._quick = (tuple((s.name, s.shape, np.dtype(s.dtype)) for s in self.inputs)
                       if plain else None)
        self._output_names = [spec.name for spec in self.outputs]
        self._host = bool(manifest.get("host"))
        self._unused_refs = [_LIST_REFS] * len(self.outputs)

    def run(self, inputs: Mapping[str, np.ndarray],
            out: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """Check ``inputs``, run the compiled code, return fresh outputs in graph order.

        ``out`` (``{output name: array}``) gives buffers the code writes into instead:
        no allocation and no copy for those outputs, which the call returns. An output
        read and written in place (a loop nest's array) starts from what its buffer
        holds, unless the inputs give it too (then that value is copied in); so a nest
        whose arrays are all in ``out`` runs on them in place, without a copy. Buffers
        must match the output (shape, dtype, C order), be writeable and share no
        memory with an input or another buffer."""
        if out is not None:
            inputs = self._with_initial(inputs, out)
        elif self._quick is not None:
            addresses = _quick_addresses(self._quick, inputs)
            if addresses is not None:
                outputs, trailing = (self._per_thread.__dict__.get("quick")
                                     or self._quick_state())
                if _list_refs(outputs) != self._unused_refs:
                    self._renew_outputs(outputs, trailing)
                self._function(*addresses, *trailing)
                return self._results(inputs, dict(zip(self._output_names, outputs)))
        values: dict[str, int] = {}
        accepted = self._accepted
        if self.params:
            if isinstance(inputs, Mapping):
                values = bind_params(self.params, accepted,
                                     [inputs.get(spec.name) for spec in accepted])
            accepted = tuple(spec.bound(values) for spec in accepted)
        checked = check_arrays(accepted, inputs, self._optional)
        given = {spec.name: array for spec, array in zip(accepted, checked)}
        arrays = [given[spec.name] for spec in self.inputs]
        kept = self._per_thread.__dict__.setdefault("outputs", {})
        outputs = [_output_buffer(spec.bound(values) if values else spec,
                                  given.get(spec.name), kept, out)
                   for spec in self.outputs]
        if out:
            _check_apart([a for name, a in given.items() if name not in out and a is not None],
                         outputs, self._output_names)
        arguments = [values[p] for p in self.params]
        self._function(*map(data_address, arrays + outputs),
                       self._scratch_address(arguments), *arguments)
        return self._results(given, dict(zip(self._output_names, outputs)))

    def _with_initial(self, inputs, out) -> Mapping:
        """``inputs`` with the buffers of ``out`` that hold an output's initial value
        (one read and written in place) where the inputs do not give it: a nest whose
        arrays are all in ``out`` runs on them without a copy. ``out``'s names are
        checked to be outputs."""
        if not isinstance(out, Mapping):
            raise InputError(f"out must be a dict of output name -> numpy array, got "
                             f"{type(out).__name__}")
        unknown = [name for name in out if name not in self._output_names]
        if unknown:
            raise InputError(f"out names {', '.join(map(repr, unknown))}, not an output; "
                             f"the outputs are {signature(self.outputs)}")
        if not isinstance(inputs, Mapping):
            return inputs  # (check_arrays says what is wrong)
        initial = {spec.name for spec in self.outputs if spec.init}
        return {**{name: array for name, array in out.items() if name in initial},
                **inputs}

    def _results(self, inputs: Mapping, outputs: dict[str, np.ndarray]
                 ) -> dict[str, np.ndarray]:
        """What a call returns: the outputs, or the results of the manifest's host ops
        on the inputs and outputs (:mod:`polyc.runtime.host`)."""
        return host.finish(self.manifest, {**inputs, **outputs}) if self._host else outputs

    # The quick path (no parameters, no output with an initial value, the inputs exactly
    # as the model takes them) keeps, per thread, its outputs and the arguments after the
    # inputs (output addresses, scratch address). Checking the inputs, finding the
    # outputs one by one and the scratch had taken 4.8 us around a 30 us call of a
    # 2-layer MLP at batch 8 (Python's data is out of cache after the model ran).

    def _quick_state(self) -> tuple[list, list[int]]:
        """This thread's quick-path state, made on its first call: outputs to be made
        (None) and their addresses (0), then the scratch address."""
        n = len(self.outputs)
        state = self._per_thread.quick = ([None] * n, [0] * n + [self._scratch_address([])])
        return state

    def _renew_outputs(self, outputs: list, addresses: list[int]) -> None:
        """New arrays for the quick path's outputs that something besides ``outputs``
        references (the caller kept them: see :func:`_unused`)."""
        for i, refs in enumerate(_list_refs(outputs)):
            if refs != _LIST_REFS:
                spec = self.outputs[i]
                outputs[i] = np.empty(spec.shape, dtype=spec.dtype)
                addresses[i] = data_address(outputs[i])

    __call__ = run

    def profile(self, inputs: Mapping[str, np.ndarray], repeat: int = 10,
                onnxruntime: Mapping | None = None):
        """Per-nest times of ``repeat`` runs (code compiled with ``profile=True``): a
        :class:`polyc.runtime.profile.Profile`, whose ``str`` is a table."""
        from polyc.runtime.profile import measure
        return measure(self, inputs, repeat, onnxruntime)

    def _scratch_address(self, arguments: list[int]) -> int:
        """This thread's scratch buffer (threads may run the same model concurrently),
        grown when the parameter values need more."""
        size = (int(self._scratch_function(*arguments)) if self._scratch_function
                else self.scratch_bytes)
        local = self._per_thread
        if getattr(local, "size", -1) < size:
            local.scratch = aligned_empty(size)
            local.address, local.size = local.scratch.ctypes.data, size
        return local.address

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} ({signature(self._accepted)}) -> "
                f"({signature(self.outputs)})>")
