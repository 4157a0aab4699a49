"""Channels-last storage of 4-D activations, decided while lowering.

A direct convolution computes ``Yt[n, oh, ow, m]``, output channels in the vector
lanes. Written back in ONNX's NCHW order, every such conv paid a transposing pass
(0.3-0.4 ms after a 64-channel stem at 112x112), and the 1x1 conv after it packed its
input at run time. Instead the lowering stores such a tensor channels-last (NHWC) and
gives the ONNX value as a transpose :class:`~polyc.frontend.core.View` of it: no data
moves, and the SCoP composes every read through the view. Ops then follow the layout
of what they read (:meth:`polyc.frontend.lower.LoweringContext.map`):

- a Map over a 4-D shape whose reads of spatial data are all of channels-last tensors,
  each moving along channels with the Map's channel index only (:func:`follows`):
  elementwise ops and activations, a conv's padded copy, Concat and Slice along
  channels, MaxPool's window passes, a depthwise conv's taps, is itself written
  channels-last, its loops in ``(n, h, w, c)`` order (:func:`to_channels_last`);
- a conv over a channels-last input to a multiple of 16 channels reads it as it is
  (:mod:`polyc.frontend.ops.conv`: a 1x1 conv is direct too, its weights packed at
  compile time), and a depthwise conv is a Map as above;
- a Resize of the pixels alone resamples the stored tensor (:mod:`polyc.frontend.ops.resize`);
- other ops read through the view (transposing reads), except a reshape that would
  need a division in its index (a Flatten of ``[N, C, H, W]``): it reads an NCHW copy.
  A reshape that only splits channels (a detector head's ``[N, A*O, H, W]`` to
  ``[N, A, O, H, W]``) reads through the view too (:func:`splits_channels`).

A tensor with one channel or one pixel is the same in both orders and stays NCHW. Graph
outputs are NCHW (the lowering's copy of an output that is a view).
"""

from __future__ import annotations

import numpy as np

from polyc.frontend.core import Call, Const, Expr, Ix, Lookup, Read, reads

# View perm from the stored [N, H, W, C] to the logical [N, C, H, W] (numpy.transpose).
TO_NCHW = (0, 3, 1, 2)
# Loop variable of the logical (n, c, h, w) Map -> its variable in (n, h, w, c) order.
_NHWC_VAR = {0: 0, 1: 3, 2: 1, 3: 2}


def spatial(shape) -> bool:
    """Whether a 4-D ``shape`` has static channels and pixels, several of each (where
    NCHW and NHWC differ)."""
    if len(shape) != 4 or not all(isinstance(d, int) for d in shape[1:]):
        return False
    return shape[1] > 1 and shape[2] * shape[3] > 1


def nhwc(shape) -> tuple:
    """The stored shape of a logical ``[N, C, H, W]``."""
    return (shape[0], shape[2], shape[3], shape[1])


def nchw(stored) -> tuple:
    """The logical shape of a stored ``[N, H, W, C]``."""
    return (stored[0], stored[3], stored[1], stored[2])


def splits_channels(shape, new_shape) -> bool:
    """Whether reshaping ``[N, C, H, W]`` to ``new_shape`` only splits C (``[N, A, B,
    H, W]`` with ``A*B = C``): through a channels-last view the index stays affine
    (channel ``a*B + b`` of the stored row), with no division."""
    middle = new_shape[1:-2]
    return (len(new_shape) >= 4 and new_shape[0] == shape[0] and new_shape[-2:] == shape[2:]
            and all(isinstance(d, int) for d in middle)
            and int(np.prod(middle)) == shape[1])


def follows(shape, expr: Expr, is_channels_last, shape_of) -> bool:
    """Whether a Map ``out[n, c, h, w] = expr`` over ``shape`` is best written
    channels-last: ``shape`` is spatial, ``expr`` reads at least one channels-last
    tensor, no Lookup and no NCHW tensor that is :func:`spatial`, and each channels-last
    read indexes channels by ``c`` alone and nothing else by ``c``."""
    if not spatial(shape):
        return False
    found = False
    for read in reads(expr):
        if isinstance(read, Lookup):
            return False
        if is_channels_last(read.tensor):
            if not _along_channels(read.index):
                return False
            found = True
        elif spatial(shape_of(read.tensor)):
            return False
    return found


def _along_channels(index: tuple[Ix, ...]) -> bool:
    uses = [{v for v, coef in ix.terms if coef} for ix in index]
    return uses[1] <= {1} and all(1 not in u for k, u in enumerate(uses) if k != 1)


def to_channels_last(expr: Expr) -> Expr:
    """``expr`` with the loop variables of ``(n, c, h, w)`` renamed to their positions
    in ``(n, h, w, c)`` (the Map's loops when it writes channels-last)."""
    if isinstance(expr, Read):
        return Read(expr.tensor, tuple(renamed(ix) for ix in expr.index), expr.outside,
                    expr.fill)
    if isinstance(expr, Lookup):
        return Lookup(expr.tensor, tuple(renamed(ix) for ix in expr.index), expr.axis,
                      to_channels_last(expr.at))
    if isinstance(expr, Call):
        return Call(expr.fn, tuple(to_channels_last(a) for a in expr.args))
    assert isinstance(expr, Const)
    return expr


def renamed(ix: Ix) -> Ix:
    return Ix(tuple((_NHWC_VAR[v], coef) for v, coef in ix.terms), ix.const)
