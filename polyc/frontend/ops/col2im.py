"""Col2Im: the columns of an im2col folded back into an image (PyTorch's ``fold``).

Each column element is added at ``o * stride + k * dilation`` (block position ``o``,
kernel offset ``k``) of an image padded by ``pads``: one Reduce over (n, c, kernel
offsets, block positions) whose output index is that affine position, then a Map
cropping the padding off (without pads the Reduce writes the image itself).
"""

from __future__ import annotations

import math

from polyc.frontend.core import Ix, Read, identity, identity_index
from polyc.frontend.ops.registry import onnx_op
from polyc.frontend.ops.window import window


@onnx_op("Col2Im", 18)
def Col2Im(ctx, input, image_shape, block_shape, *, dilations=None, pads=None, strides=None):
    """Col2Im: the blocks (columns of ``input`` [N, C * prod(block), L]) summed back
    into an image of ``image_shape`` (both shapes constants; module docstring)."""
    image = tuple(ctx.int_values(image_shape, "image_shape"))
    kernel = tuple(ctx.int_values(block_shape, "block_shape"))
    rank = len(image)
    if len(kernel) != rank or len(input.shape) != 3 or any(k < 1 for k in kernel):
        raise ctx.shape_error(f"input {list(input.shape)}, image_shape {list(image)} and "
                              f"block_shape {list(kernel)} do not fit (input [N, C*block, L])")
    win = window(ctx, image, kernel, strides=strides, dilations=dilations, pads=pads)
    per_block = math.prod(kernel)
    if input.shape[1] % per_block or input.shape[2] != math.prod(win.out):
        raise ctx.shape_error(f"input {list(input.shape)} must be [N, C*{per_block}, "
                              f"{math.prod(win.out)}] for image {list(image)}")
    n, c = input.shape[0], input.shape[1] // per_block
    padded = tuple(size + b + e for size, b, e in zip(image, win.begin, win.end))
    k_var, o_var = 2, 2 + rank

    def row_major(first: int, extents) -> Ix:
        terms, stride = [], 1
        for d in reversed(range(len(extents))):
            terms.append((first + d, stride))
            stride *= extents[d]
        return Ix(tuple(terms[::-1]))

    channel = row_major(k_var, kernel)
    channel = Ix(((1, per_block),) + channel.terms)
    column = Read(input.name, (Ix.var(0), channel, row_major(o_var, win.out)))
    at = tuple(Ix(((o_var + d, win.strides[d]), (k_var + d, win.dilations[d])))
               for d in range(rank))
    summed = ctx.reduce(out_shape=(n, c) + padded, init=identity("add", input.dtype),
                        extents=(n, c) + kernel + win.out,
                        out_index=(Ix.var(0), Ix.var(1)) + at, combiner="add", expr=column,
                        label="col2im")
    if padded == image:
        return summed
    crop = identity_index(2) + tuple(Ix(((2 + d, 1),), win.begin[d]) for d in range(rank))
    return ctx.map((n, c) + image, Read(summed.name, crop), label="col2im_crop")
