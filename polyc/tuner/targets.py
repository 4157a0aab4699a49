"""What ``polyc tune`` tunes: a loop-nest kernel by name (``jacobi-2d``, the kernels of
:mod:`polyc.scop.polybench`), a PolyBench/C kernel (``polybench:jacobi-2d``, read by
polyc's C frontend from the PolyBench sources next to polyc's checkout) or an ONNX
model (``model.onnx``). A :class:`Target` compiles itself with a point's options,
holds seeded inputs and the outputs every point is checked against, and names the
points of its search space (:func:`points`).

The reference outputs: a loop-nest kernel's numpy reference (the loops as written, in
numpy); for a C kernel the loops as written compiled by polyc with IEEE float order
(``scheduler="original", tile=False, fast_math=False``: the C code's own order of
operations); for a model onnxruntime's outputs (onnxruntime must be installed).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from polyc.errors import PolycError

POLYBENCH_PREFIX = "polybench:"
POLYBENCH_SIZES = ("MINI", "SMALL", "MEDIUM", "LARGE", "EXTRALARGE")
# fast math reassociates sums: a point's outputs may differ from the reference's by this
TOLERANCE = {"float32": (1e-3, 1e-4), "float64": (1e-9, 1e-12)}


@dataclass
class Target:
    name: str
    kind: str  # "nest", "polybench" or "onnx"
    compile: Callable[[Mapping[str, Any]], Any]  # options -> something with run(inputs)
    inputs: dict[str, np.ndarray]
    reference: dict[str, np.ndarray]
    sizes: tuple[int, ...] = (16, 32, 64, 128)  # tile sizes a grid tries by default
    details: dict[str, Any] = field(default_factory=dict)  # what the JSON records

    def check(self, outputs: Mapping[str, np.ndarray]) -> str | None:
        """None when ``outputs`` match the reference (fast math's tolerance per dtype),
        else what differs."""
        for name, expected in self.reference.items():
            if name not in outputs:
                return f"output {name} is missing"
            got = np.asarray(outputs[name])
            rtol, atol = TOLERANCE.get(str(expected.dtype), (1e-3, 1e-4))
            scale = float(np.max(np.abs(expected))) if expected.size else 0.0
            if got.shape != expected.shape or not np.allclose(
                    got, expected, rtol=rtol, atol=atol * max(scale, 1.0), equal_nan=True):
                error = np.max(np.abs(got - expected)) if got.shape == expected.shape else None
                return f"{name} differs from the reference (max abs error {error})"
        return None


def target(spec: str, *, params: Mapping[str, int] | None = None, size: str = "MEDIUM",
           threads: int | None = 1, seed: int = 0) -> Target:
    """The target named by ``spec``: ``KERNEL``, ``polybench:KERNEL`` or a ``.onnx``
    path; ``params`` override a kernel's parameter values, ``size`` is a PolyBench
    dataset (MINI..EXTRALARGE)."""
    if spec.startswith(POLYBENCH_PREFIX):
        return _polybench(spec[len(POLYBENCH_PREFIX):], params, size, threads, seed)
    if spec.lower().endswith(".onnx"):
        return _onnx(spec, threads, seed)
    return _nest(spec, params, threads, seed)


def kernel_compiler(spec: str, *, params: Mapping[str, int] | None = None,
                    size: str = "MEDIUM", threads: int | None = 1):
    """``(name, kernel, values, compile)`` of the loop-nest or PolyBench kernel named
    by ``spec``: its object (a :class:`~polyc.scop.polybench.Kernel` or a C kernel),
    its parameters' values and ``compile(options)``; no inputs made, nothing run
    (``polyc inspect`` compiles the kernel once)."""
    if spec.startswith(POLYBENCH_PREFIX):
        from polyc.scop.c import from_c
        name = spec[len(POLYBENCH_PREFIX):]
        if size not in POLYBENCH_SIZES:
            raise PolycError(f"PolyBench dataset sizes are {', '.join(POLYBENCH_SIZES)}, "
                             f"got {size!r}")
        kernels = polybench_kernels()
        if name not in kernels:
            raise PolycError(f"no PolyBench kernel {name!r}; choose one of "
                             f"{', '.join(kernels)}")
        kernel = from_c(kernels[name], defines=[f"{size}_DATASET"],
                        include=[polybench_root() / "utilities"])
        values = kernel.values(params)
        return spec, kernel, values, lambda options: kernel.compile(
            params=values, threads=threads, **options)
    from polyc.scop.polybench import KERNELS
    try:
        kernel = KERNELS[spec]
    except KeyError as error:
        raise PolycError(f"{error.args[0]} (or polybench:KERNEL, or an .onnx model)") from None
    values = {**kernel.params, **(params or {})}
    return kernel.name, kernel, values, lambda options: kernel.build().compile(
        params=values, threads=threads, **options)


def polybench_root() -> Path:
    """PolyBench/C's sources: ``$POLYC_POLYBENCH``, else ``third_party/polybench-c-4.2.1``
    of the checkout polyc runs from."""
    given = os.environ.get("POLYC_POLYBENCH")
    root = Path(given) if given else \
        Path(__file__).resolve().parents[2] / "third_party" / "polybench-c-4.2.1"
    if not (root / "utilities" / "polybench.h").is_file():
        raise PolycError(f"no PolyBench/C sources at {root} (set POLYC_POLYBENCH to the "
                         "folder of PolyBench/C 4.2.1)")
    return root


def polybench_kernels() -> dict[str, Path]:
    root = polybench_root()
    return {p.stem: p for p in sorted(root.rglob("*.c"))
            if "utilities" not in p.parts and p.stem == p.parent.name}


def _nest(name: str, params, threads, seed) -> Target:
    name, kernel, values, build = kernel_compiler(name, params=params, threads=threads)
    inputs = kernel.inputs(seed=seed, params=values)
    reference = kernel.reference(values, inputs)
    return Target(name, "nest", build, inputs, reference, details={"params": values})


def _polybench(name: str, params, size: str, threads, seed) -> Target:
    spec = f"{POLYBENCH_PREFIX}{name}"
    _, kernel, values, build = kernel_compiler(spec, params=params, size=size,
                                               threads=threads)
    rng = np.random.default_rng(seed)
    inputs = {array: (rng.random(shape) + 0.5).astype(dtype) if shape else
              np.asarray(rng.random() + 0.5, dtype=dtype)
              for array, (dtype, shape) in _shapes(kernel, values).items()}
    original = kernel.compile(params=values, scheduler="original", tile=False,
                              fast_math=False, threads=1)
    reference = dict(original.run(inputs))
    return Target(spec, "polybench", build, inputs, reference,
                  details={"params": values, "size": size, "source": str(kernel.file)})


def _shapes(kernel, values) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Each array's dtype and shape at the parameter values."""
    from polyc.scop.params import bind_parameters
    scop = bind_parameters(kernel.scop(values), values)
    return {a.name: (a.dtype, tuple(a.shape)) for a in scop.arrays
            if a.kind in ("inout", "result")}


def _onnx(path: str, threads, seed) -> Target:
    if not Path(path).is_file():
        raise PolycError(f"no such model file: {path}")
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        raise PolycError("tuning a model checks every point against onnxruntime: "
                         "pip install onnxruntime") from None
    from polyc.pipeline import build
    first = build(path, threads=threads)
    rng = np.random.default_rng(seed)
    inputs = {spec.name: rng.standard_normal([1 if isinstance(d, str) else d
                                             for d in spec.shape]).astype(spec.dtype)
              for spec in first.inputs}
    reference = _onnxruntime(path, inputs, threads)

    def compile_(options):
        return build(path, threads=threads, cache=False, **options).loaded()

    return Target(Path(path).name, "onnx", compile_, inputs, reference,
                  details={"path": str(path)})


def _onnxruntime(path: str, inputs, threads) -> dict[str, np.ndarray]:
    import onnxruntime as ort
    session_options = ort.SessionOptions()
    if threads:
        session_options.intra_op_num_threads = threads
    session = ort.InferenceSession(path, session_options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs)))
