"""polyc: a polyhedral scheduling compiler for ONNX models.

``polyc.compile(path)`` compiles in process (JIT); ``polyc.load(path)`` opens an
ahead-of-time artifact and needs only numpy and ctypes; ``polyc.from_c(path)`` reads the
SCoP of a C source (PolyBench's kernels).
"""

from polyc.errors import (  # noqa: F401
    ArtifactError,
    CodegenError,
    CSourceError,
    IllegalScheduleError,
    InputError,
    ModelError,
    NestError,
    NotAffineError,
    OutputError,
    PolycError,
    RefusedError,
    ResourceError,
    ShapeError,
    UnsupportedDtypeError,
    UnsupportedOpError,
)

__version__ = "0.1.0"


def compile(model, **options):  # noqa: A001 - the natural name for a compiler's entry
    """Compile an ONNX model (path, bytes or ``onnx.ModelProto``) to a JIT-run model;
    ``options`` are :func:`polyc.pipeline.build`'s (``threads=N``, ``fuse=``, ``cache=``...)."""
    from polyc.pipeline import compile_model
    return compile_model(model, **options)


def from_c(source, **options):
    """The kernel of a C source (a ``.c`` path or C text) read into a SCoP, ready to
    compile: :func:`polyc.scop.c.from_c` (``function=``, ``defines=``, ``include=``)."""
    from polyc.scop.c import from_c as read
    return read(source, **options)


def load(path):
    """Open an AOT artifact written by ``polyc compile``; imports neither islpy nor llvmlite."""
    from polyc.runtime.artifact import load_artifact
    return load_artifact(path)


def __getattr__(name: str):
    """``polyc.Schedule`` (:mod:`polyc.steer`) and ``polyc.Trace`` (:mod:`polyc.trace`),
    imported when first used (they need islpy)."""
    if name == "Schedule":
        from polyc.steer import Schedule
        return Schedule
    if name == "Trace":
        from polyc.trace import Trace
        return Trace
    raise AttributeError(f"module 'polyc' has no attribute {name!r}")
