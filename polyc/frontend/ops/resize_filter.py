"""What Resize reads along one axis, and the periodic form that makes those reads affine.

Along an axis of input size ``n`` and output size ``m``, output position ``o`` has a
source coordinate ``x(o)`` (the coordinate transformation mode) and reads
``sum_j w[o, j] * X[base[o] + j]``, every index clamped into ``[0, n)`` (edge):

- nearest: one tap, ``base[o]`` = ``x(o)`` rounded by ``nearest_mode``, weight 1;
- linear:  taps ``floor(x), floor(x) + 1`` with weights ``1 - f, f`` (``f = x - floor(x)``);
- cubic:   taps ``floor(x) - 1 .. floor(x) + 2`` with the cubic convolution weights of
  ``f`` (``exclude_outside`` zeroes the taps outside ``[0, n)`` and renormalises).

That table (an :class:`AxisFilter`) is computed at compile time. Because the scale is
rational, it is periodic: with ``o = p*t + r`` (``0 <= r < p``), ``base[o] = q*t + base[r]``
and ``w[o] = w[r]``. :func:`periodic` finds the smallest such period ``p`` and writes
each phase's taps into one window of ``width`` consecutive elements, so that
output ``(t, r)`` reads ``X[q*t + slope*r + offset + k]`` with weight ``table[r, k]``
for ``k < width``: affine in ``(t, r)`` (a :class:`PeriodicFilter`). A table with no
shorter period has period ``m`` (``t`` is always 0): then it is a banded matrix.

Coordinates follow onnxruntime, the project's reference: for nearest they are computed
in its float32 arithmetic (rounding at exact ties depends on it); for linear and cubic,
whose weights are continuous in ``x``, exactly, with the scale taken as the simplest
fraction that rounds to the given float32 scale.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

F32 = np.float32

COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                    "align_corners", "asymmetric", "tf_half_pixel_for_nn")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")

# Nearest: a coordinate this close to a half is a tie (onnxruntime's behaviour).
TIE_TOLERANCE = 1e-6

# Longer periods are not split into (t, r): the reshape of (t, r) into the axis is a
# floor/mod map that makes isl's dependence analysis and scheduling slow (3.6 s for a
# period of 14 on two axes, far more when p*T is cut back to m).
MAX_PERIOD = 8

# Weights of one phase must agree this closely at every period to count as equal.
WEIGHT_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Axis:
    """One resized axis: input size, output size and the float32 scale in effect."""

    n: int
    m: int
    scale: np.float32


@dataclass(frozen=True)
class AxisFilter:
    """Output ``o`` reads ``sum_j weights[o, j] * X[clamp(base[o] + j)]``."""

    base: np.ndarray     # int64[m], unclamped
    weights: np.ndarray  # float64[m, taps]


@dataclass(frozen=True)
class PeriodicFilter:
    """Output ``o = period*t + r`` reads ``sum_k table[r, k] * X[clamp(step*t + slope*r +
    offset + k)]``."""

    period: int
    step: int
    slope: int
    offset: int
    table: np.ndarray  # float64[period, width]

    @property
    def width(self) -> int:
        return self.table.shape[1]


# -- source coordinates -----------------------------------------------------------------

def coordinates_f32(axis: Axis, mode: str) -> np.ndarray:
    """``x(o)`` for every output position as onnxruntime computes it (float32)."""
    o = np.arange(axis.m, dtype=F32)
    s, half = axis.scale, F32(0.5)
    if mode == "half_pixel":
        return (o + half) / s - half
    if mode == "pytorch_half_pixel":
        return (o + half) / s - half if axis.m > 1 else np.zeros(axis.m, F32)
    if mode == "asymmetric":
        return o / s
    if mode == "tf_half_pixel_for_nn":
        return (o + half) / s
    if mode == "align_corners":
        if axis.m == 1:
            return np.zeros(1, F32)
        return o * F32(axis.n - 1) / F32(axis.m - 1)
    if mode == "half_pixel_symmetric":  # float32 offset, the rest in double
        adjustment = F32(axis.m) / (s * F32(axis.n))
        offset = F32(axis.n) / F32(2) * (F32(1) - adjustment)
        x = np.float64(offset) + (o.astype(np.float64) + 0.5) / np.float64(s) - 0.5
        return x.astype(F32)
    raise ValueError(f"unknown coordinate transformation mode {mode!r}")


def coordinates_exact(axis: Axis, mode: str) -> list[Fraction]:
    """``x(o)`` for every output position, exactly, for the rational scale ``axis.scale``
    stands for (see :func:`rational_scale`)."""
    s, n, m = rational_scale(axis.scale), axis.n, axis.m
    half = Fraction(1, 2)
    if mode == "half_pixel" or (mode == "pytorch_half_pixel" and m > 1):
        return [(o + half) / s - half for o in range(m)]
    if mode == "asymmetric":
        return [o / s for o in range(m)]
    if mode == "tf_half_pixel_for_nn":
        return [(o + half) / s for o in range(m)]
    if mode == "align_corners" and m > 1:
        return [Fraction(o * (n - 1), m - 1) for o in range(m)]
    if mode in ("pytorch_half_pixel", "align_corners"):  # one output element
        return [Fraction(0)] * m
    if mode == "half_pixel_symmetric":
        offset = Fraction(n, 2) * (1 - m / (s * n))
        return [offset + (o + half) / s - half for o in range(m)]
    raise ValueError(f"unknown coordinate transformation mode {mode!r}")


def rational_scale(scale: np.float32) -> Fraction:
    """The fraction with the smallest denominator (up to 2**24) that rounds to the float32
    ``scale``: 0.6 for float32(0.6), 75/56 for float32(300/224); else its exact value."""
    exact = Fraction(float(scale))
    for bits in range(25):
        candidate = exact.limit_denominator(1 << bits)
        if F32(candidate.numerator / candidate.denominator) == scale:
            return candidate
    return exact


# -- the tables -------------------------------------------------------------------------

def nearest_filter(x: np.ndarray, nearest_mode: str) -> AxisFilter:
    """One tap at ``x`` (float32) rounded as onnxruntime rounds it: floor and ceil exactly;
    the round modes break ties towards floor / ceil, and (measured on onnxruntime 1.31)
    count as a tie every ``x`` within :data:`TIE_TOLERANCE` of a half."""
    x = np.asarray(x, np.float64)  # exact: every float32 is a double
    if nearest_mode == "floor":
        index = np.floor(x)
    elif nearest_mode == "ceil":
        index = np.ceil(x)
    else:
        below = np.floor(x)
        tie = np.abs(x - below - 0.5) <= TIE_TOLERANCE
        prefer = below if nearest_mode == "round_prefer_floor" else below + 1
        index = np.where(tie, prefer, np.floor(x + 0.5))
    return AxisFilter(index.astype(np.int64), np.ones((len(x), 1)))


def linear_filter(x: list[Fraction]) -> AxisFilter:
    """Taps ``floor(x), floor(x) + 1`` weighted ``1 - f, f``."""
    base = np.array([xo.__floor__() for xo in x], dtype=np.int64)
    f = np.array([float(xo - b) for xo, b in zip(x, base.tolist())])
    return AxisFilter(base, np.stack([1 - f, f], axis=1).reshape(len(x), 2))


def cubic_filter(x: list[Fraction], n: int, a: float, exclude_outside: bool) -> AxisFilter:
    """Taps ``floor(x) - 1 .. floor(x) + 2`` with Keys' cubic convolution weights
    (coefficient ``a``) of their distances to ``x``."""
    floor = np.array([xo.__floor__() for xo in x], dtype=np.int64)
    f = np.array([float(xo - b) for xo, b in zip(x, floor.tolist())]).reshape(-1, 1)
    distance = np.abs(f - np.arange(-1, 3))  # to the taps floor-1 .. floor+2
    near = ((a + 2) * distance - (a + 3)) * distance * distance + 1
    far = ((a * distance - 5 * a) * distance + 8 * a) * distance - 4 * a
    weights = np.where(distance <= 1, near, np.where(distance < 2, far, 0.0))
    base = floor - 1
    if exclude_outside:
        taps = base.reshape(-1, 1) + np.arange(4)
        weights = np.where((taps < 0) | (taps >= n), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    return AxisFilter(base, weights.reshape(len(x), 4))


# -- the periodic form ------------------------------------------------------------------

def periodic(table: AxisFilter) -> PeriodicFilter:
    """The table with its smallest period, or with period ``m`` (one phase per output,
    a banded matrix) when that is above :data:`MAX_PERIOD`; see the module docstring."""
    base, weights = table.base, table.weights
    m = len(base)
    period = next(p for p in range(1, m + 1) if _has_period(base, weights, p))
    if period > MAX_PERIOD:  # the (t, r) split's mod-p view costs isl too much
        period = m
    step = int(base[period] - base[0]) if period < m else 0
    phase_base = base[:period]
    slope, offset, width = min(_windows(phase_base, weights.shape[1]), key=lambda w: w[2])
    window = np.zeros((period, width))
    for r in range(period):
        start = int(phase_base[r]) - slope * r - offset
        window[r, start:start + weights.shape[1]] = weights[r]
    return PeriodicFilter(period, step, slope, offset, window)


def _has_period(base: np.ndarray, weights: np.ndarray, p: int) -> bool:
    shifted = base[p:] - base[:-p] if p < len(base) else np.zeros(0, np.int64)
    if shifted.size and np.any(shifted != shifted[0]):
        return False
    return bool(np.all(np.abs(weights[p:] - weights[:len(base) - p]) <= WEIGHT_TOLERANCE))


def _windows(phase_base: np.ndarray, taps: int):
    """(slope, offset, width) for the slopes worth trying: phase ``r``'s taps start at
    ``phase_base[r] = slope*r + offset + e_r`` with ``0 <= e_r``, width ``max e_r + taps``."""
    p = len(phase_base)
    rise = (int(phase_base[-1]) - int(phase_base[0])) / (p - 1) if p > 1 else 0.0
    for slope in sorted({int(np.floor(rise)), int(np.ceil(rise))}):
        excess = phase_base - slope * np.arange(p)
        offset = int(excess.min())
        yield slope, offset, int(excess.max()) - offset + taps
