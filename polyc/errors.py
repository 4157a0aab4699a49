"""The one error hierarchy of polyc.

Every error a user can meet is a ``PolycError``; its message names what is wrong
(the node, op, opset, tensor, statement, or input) so the CLI can print it as one line.
"""


class PolycError(Exception):
    """Base class of every error polyc raises on purpose."""


class ModelError(PolycError):
    """The model file cannot be read, parsed, or fails ``onnx.checker``."""


class UnsupportedOpError(PolycError):
    """An ONNX op (or one of its attributes) that polyc cannot lower yet."""

    def __init__(self, op_type, node_name, opset, detail=""):
        self.op_type, self.node_name, self.opset = op_type, node_name, opset
        what = f"unsupported op {op_type} (opset {opset}) at node '{node_name}'"
        super().__init__(f"{what}: {detail}" if detail else what)


class UnsupportedDtypeError(PolycError):
    """A tensor whose element type polyc does not compile (only float32 for now)."""


class ShapeError(PolycError):
    """A shape that is unknown, symbolic, or inconsistent with the op using it."""


class NotAffineError(PolycError):
    """An index, bound or schedule that is not an (integer) affine function of the
    iterators and parameters; the message names the statement and the expression."""


class NestError(PolycError):
    """A loop nest written with ``polyc.scop.nest`` is malformed: an unknown array or
    parameter, a wrong number of indices, a domain or schedule isl cannot read, or a
    missing parameter value at compile time."""


class IllegalScheduleError(PolycError):
    """A schedule that runs some dependence backwards; the message shows which."""


class CodegenError(PolycError):
    """Code generation or the native toolchain (LLVM, the C compiler) failed."""


class InputError(PolycError):
    """Inputs given to a compiled model do not match what it was compiled for."""


class ArtifactError(PolycError):
    """A compiled artifact (.so) is missing, corrupt, or of another format version."""
