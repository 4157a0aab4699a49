"""Activation functions: each lowers to one core ``Map`` over its input's shape.

Branches are ``select(compare(x, ..), .., x)`` and clamps NaN-propagating ``max`` /
``min``, so that a NaN input gives what the ONNX formula and onnxruntime give: NaN,
except ThresholdedRelu (0). Relu, Sigmoid and Tanh, single core functions, are in
:mod:`polyc.frontend.ops.elementwise`.
"""

from __future__ import annotations

import math

from polyc.frontend.core import Read
from polyc.frontend.ops.elementwise import call, elementwise
from polyc.frontend.ops.indexing import broadcast_index
from polyc.frontend.ops.registry import onnx_op

SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def negative_branch(x, negative):
    """``x < 0 ? negative : x`` (NaN takes the ``x`` branch)."""
    return call("select", call("lt", x, 0.0), negative, x)


def hard_sigmoid(x, alpha: float, beta: float):
    """max(0, min(1, alpha * x + beta))."""
    return call("max", 0.0, call("min", 1.0, call("add", call("mul", alpha, x), beta)))


def _log1p(t):
    """log(1 + t) for t in [0, 1]: below 0.01, where 1 + t would round t's low bits
    away, the series t - t^2/2 + t^3/3 - t^4/4 (relative error < 3e-9)."""
    series = call("mul", t, call("sub", 1.0, call("mul", t, call(
        "sub", 0.5, call("mul", t, call("sub", 1 / 3, call("mul", t, 0.25)))))))
    return call("select", call("lt", t, 0.01), series, call("log", call("add", 1.0, t)))


def softplus(x):
    """log(1 + e^x) as max(x, 0) + log1p(e^-|x|): no overflow for large x, full
    relative precision for very negative x."""
    return call("add", call("max", x, 0.0), _log1p(call("exp", call("neg", call("abs", x)))))


@onnx_op("LeakyRelu", 6, 16)
def LeakyRelu(ctx, X, *, alpha=0.01):
    """LeakyRelu: Y[i] = x < 0 ? alpha * x : x."""
    return elementwise(ctx, "leaky_relu",
                       lambda x: negative_branch(x, call("mul", alpha, x)), X)


@onnx_op("PRelu", 7, 9, 16)
def PRelu(ctx, X, slope):
    """PRelu: Y[i] = x < 0 ? slope[bcast(i)] * x : x; slope broadcasts to X's shape
    (unidirectionally)."""
    try:
        s = Read(slope.name, broadcast_index(slope.shape, X.shape))
    except ValueError as e:
        raise ctx.shape_error(f"slope: {e}") from None
    return elementwise(ctx, "prelu", lambda x: negative_branch(x, call("mul", s, x)), X)


@onnx_op("ThresholdedRelu", 10, 22)
def ThresholdedRelu(ctx, X, *, alpha=1.0):
    """ThresholdedRelu: Y[i] = x > alpha ? x : 0 (NaN gives 0)."""
    return elementwise(ctx, "thresholded_relu",
                       lambda x: call("select", call("gt", x, alpha), x, 0.0), X)


@onnx_op("Elu", 6, 22)
def Elu(ctx, X, *, alpha=1.0):
    """Elu: Y[i] = x < 0 ? alpha * (e^x - 1) : x."""
    def build(x):
        return negative_branch(x, call("mul", alpha, call("sub", call("exp", x), 1.0)))
    return elementwise(ctx, "elu", build, X)


@onnx_op("Celu", 12, 28)
def Celu(ctx, X, *, alpha=1.0):
    """Celu: Y[i] = max(0, x) + min(0, alpha * (e^(x / alpha) - 1))."""
    def build(x):
        negative = call("mul", alpha, call("sub", call("exp", call("div", x, alpha)), 1.0))
        return call("add", call("max", 0.0, x), call("min", 0.0, negative))
    return elementwise(ctx, "celu", build, X)


@onnx_op("Selu", 6, 22)
def Selu(ctx, X, *, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
    """Selu: Y[i] = gamma * (x > 0 ? x : alpha * e^x - alpha)."""
    def build(x):
        negative = call("sub", call("mul", alpha, call("exp", x)), alpha)
        return call("mul", gamma, call("select", call("gt", x, 0.0), x, negative))
    return elementwise(ctx, "selu", build, X)


@onnx_op("HardSigmoid", 6, 22)
def HardSigmoid(ctx, X, *, alpha=0.2, beta=0.5):
    """HardSigmoid: Y[i] = max(0, min(1, alpha * x + beta))."""
    return elementwise(ctx, "hard_sigmoid", lambda x: hard_sigmoid(x, alpha, beta), X)


@onnx_op("HardSwish", 14, 22)
def HardSwish(ctx, X):
    """HardSwish: Y[i] = x * max(0, min(1, x / 6 + 1/2)) (NaN at -inf, as the formula)."""
    return elementwise(ctx, "hard_swish",
                       lambda x: call("mul", x, hard_sigmoid(x, 1 / 6, 0.5)), X)


@onnx_op("Softplus", 1, 22)
def Softplus(ctx, X):
    """Softplus: Y[i] = max(x, 0) + log1p(e^-|x|) (= log(1 + e^x), without overflow;
    log1p as a series for small arguments)."""
    return elementwise(ctx, "softplus", softplus, X)


@onnx_op("Softsign", 1, 22)
def Softsign(ctx, input):
    """Softsign: Y[i] = x / (1 + |x|) (NaN at +-inf, as the formula)."""
    return elementwise(ctx, "softsign",
                       lambda x: call("div", x, call("add", 1.0, call("abs", x))), input)


@onnx_op("Mish", 18, 22)
def Mish(ctx, X):
    """Mish: Y[i] = x * tanh(softplus(x)) (softplus as in Softplus; NaN at -inf)."""
    return elementwise(ctx, "mish", lambda x: call("mul", x, call("tanh", softplus(x))), X)


def _gelu_erf(x):
    """x/2 * (1 + erf(x / sqrt 2))."""
    return call("mul", call("mul", 0.5, x),
                call("add", 1.0, call("erf", call("mul", x, math.sqrt(0.5)))))


def _gelu_tanh(x):
    """x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))."""
    inner = call("add", x, call("mul", 0.044715, call("mul", call("mul", x, x), x)))
    return call("mul", call("mul", 0.5, x),
                call("add", 1.0, call("tanh", call("mul", SQRT_2_OVER_PI, inner))))


@onnx_op("Gelu", 20)
def Gelu(ctx, X, *, approximate="none"):
    """Gelu: Y[i] = x/2 * (1 + erf(x / sqrt 2)); with ``approximate="tanh"``,
    x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))). NaN at -inf, as the formula."""
    build = {"none": _gelu_erf, "tanh": _gelu_tanh}.get(approximate)
    if build is None:
        raise ctx.unsupported(f"approximate='{approximate}' (only 'none' and 'tanh')")
    return elementwise(ctx, "gelu", build, X)


@onnx_op("Swish", 24)
def Swish(ctx, X, *, alpha=1.0):
    """Swish: Y[i] = x * sigmoid(alpha * x)."""
    return elementwise(ctx, "swish",
                       lambda x: call("mul", x, call("sigmoid", call("mul", alpha, x))), X)


@onnx_op("Shrink", 9)
def Shrink(ctx, input, *, bias=0.0, lambd=0.5):
    """Shrink: Y[i] = x < -lambd ? x + bias : (x > lambd ? x - bias : 0) (NaN gives 0,
    as both comparisons are false)."""
    def shrink(x):
        upper = call("select", call("gt", x, lambd), call("sub", x, bias), 0.0)
        return call("select", call("lt", x, -lambd), call("add", x, bias), upper)
    return elementwise(ctx, "shrink", shrink, input)
