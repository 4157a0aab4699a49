"""Long sums in statement bodies: a window's taps, summed in partial chains.

A sum of LONG_SUM terms or more (a window's taps: 9 for 3x3, 25 for 5x5) is computed as
SUM_CHAINS partial sums of every SUM_CHAINS-th term, added at the end, unless the float
order must be kept (fast_math=False): LLVM keeps the program's chain of dependent adds
(or FMAs), whose latency (25 x 4 cycles for a 5x5 depthwise conv) then bounds the loop
as much as its throughput. 5x5 depthwise conv + SiLU, 672 channels at 14x14 inside a
block (x, 1x1 conv, the conv, 1x1 conv): 0.175 -> 0.161 ms, the block 0.812 -> 0.783
(2 chains 0.791); efficientnet 10.60 -> 10.42 ms, one thread. Their adds carry no
``reassoc`` flag: with it LLVM's reassociation made one chain of most of the sum again
(3x3 depthwise conv + SiLU, 32 channels at 112x112, 0.193 -> 0.178 ms without it;
efficientnet 10.11 -> 9.96 ms).
"""

from __future__ import annotations

from polyc.frontend.core import Call
from polyc.scop.model import Load, LoadAt

LONG_SUM = 8
SUM_CHAINS = 4


def terms(expr) -> list:
    """The terms of a chain of ``add`` calls ``add(add(a, b), c)``: ``[a, b, c]``."""
    if isinstance(expr, Call) and expr.fn == "add":
        return terms(expr.args[0]) + terms(expr.args[1])
    return [expr]


def long_sum(expr):
    """The first subtree of a body ``expr`` (outermost first) that is a sum of LONG_SUM
    terms or more, or None."""
    if not isinstance(expr, Call):
        return None
    if len(terms(expr)) >= LONG_SUM:
        return expr
    return next((s for s in map(long_sum, expr.args) if s is not None), None)


def loads(expr) -> list:
    """The Load and LoadAt nodes of a body expression, in order."""
    if isinstance(expr, Load):
        return [expr]
    if isinstance(expr, LoadAt):
        return [expr, *loads(expr.at)]
    if isinstance(expr, Call):
        return [load for arg in expr.args for load in loads(arg)]
    return []
