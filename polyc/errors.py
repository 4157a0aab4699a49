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
        self.problems = (self,)  # every node polyc cannot lower, see combine()
        what = f"unsupported op {op_type} (opset {opset}) at node '{node_name}'"
        super().__init__(f"{what}: {detail}" if detail else what)

    @classmethod
    def combine(cls, problems) -> "UnsupportedOpError":
        """One error naming every problem of a model: a line per op type, with its nodes."""
        problems = tuple(problems)
        if len(problems) == 1:
            return problems[0]
        by_op: dict[str, list] = {}
        for problem in problems:
            by_op.setdefault(problem.op_type, []).append(problem)
        lines = [f"{len(by_op)} unsupported op(s) in {len(problems)} nodes:"]
        for op_type, errors in by_op.items():
            nodes = ", ".join(f"'{e.node_name}'" for e in errors[:5])
            more = f" and {len(errors) - 5} more" if len(errors) > 5 else ""
            detail = str(errors[0]).split(": ", 1)[-1]
            lines.append(f"  {op_type} (opset {errors[0].opset}) at {nodes}{more}: {detail}")
        error = cls(", ".join(by_op), problems[0].node_name, problems[0].opset)
        error.args = ("\n".join(lines),)
        error.problems = problems
        return error


class UnsupportedDtypeError(PolycError):
    """A tensor whose element type polyc does not compile (it computes with float32,
    int64, int32 and bool), or an op given operands of a type it does not take."""


class ShapeError(PolycError):
    """A shape that is unknown, symbolic, or inconsistent with the op using it."""


class NotAffineError(PolycError):
    """An index, bound or schedule that is not an (integer) affine function of the
    iterators and parameters; the message names the statement and the expression."""


class NestError(PolycError):
    """A loop nest written with ``polyc.scop.nest`` is malformed: an unknown array or
    parameter, a wrong number of indices, a domain or schedule isl cannot read, or a
    missing parameter value at compile time."""


class CSourceError(PolycError):
    """A C source polyc cannot read (``polyc cc``): its file and line, and what is
    wrong there."""


class IllegalScheduleError(PolycError):
    """A schedule that runs some dependence backwards; the message shows which, and
    ``witness`` (when known) is that dependence's instance pairs (an ``isl.Map``)."""

    def __init__(self, message: str, *, witness=None):
        super().__init__(message)
        self.witness = witness


class RefusedError(IllegalScheduleError):
    """A schedule primitive (:mod:`polyc.steer`) refused: it would run a dependence
    backward or tile a band that is not permutable; the schedule stays as it was."""


class CodegenError(PolycError):
    """Code generation or the native toolchain (LLVM, the C compiler) failed."""


class InputError(PolycError):
    """Inputs given to a compiled model do not match what it was compiled for."""


class ResourceError(PolycError):
    """A model that needs more memory than the limit (``memory_limit``, by default this
    machine's memory); the message gives the sizes."""


class OutputError(PolycError):
    """A file polyc was asked to write (an artifact, saved outputs) cannot replace its
    target safely: the target is a file being read, a directory or a device, or the
    writing failed; nothing was changed."""


class ArtifactError(PolycError):
    """A compiled artifact (.so) is missing, corrupt, or of another format version."""
