"""RoiAlign: each region of interest pooled to ``output_height x output_width`` bins of
``sampling_ratio x sampling_ratio`` bilinear samples (Mask R-CNN's), as onnxruntime.

Per region, bin and sample, small Maps compute the sample's row and column: its two
neighbouring pixel indices, its fraction and whether it lies on the map (from the
region's corners, read at run time). The output is one Reduce over (region, channel,
bin row, bin column, sample row, sample column) of the four weighted neighbours, read
through Lookups of X seen as ``[C, N*H*W]`` (the region's batch index and the pixels
are both run-time values): their mean (``avg``), or the largest of the weighted
neighbours (``max``, onnxruntime's rule). ``sampling_ratio=0`` (a count that grows with
each region's size at run time) is refused.
"""

from __future__ import annotations

from polyc.frontend.core import Const, Ix, Lookup, Read, identity
from polyc.frontend.ops.elementwise import call
from polyc.frontend.ops.registry import onnx_op

MODES = ("half_pixel", "output_half_pixel")


@onnx_op("RoiAlign", 10)
def RoiAlign_10(ctx, X, rois, batch_indices, *, mode="avg", output_height=1, output_width=1,
                sampling_ratio=0, spatial_scale=1.0):
    """RoiAlign-10: the corners as they are (output_half_pixel)."""
    return RoiAlign(ctx, X, rois, batch_indices,
                    coordinate_transformation_mode="output_half_pixel", mode=mode,
                    output_height=output_height, output_width=output_width,
                    sampling_ratio=sampling_ratio, spatial_scale=spatial_scale)


@onnx_op("RoiAlign", 16, 22)
def RoiAlign(ctx, X, rois, batch_indices, *, coordinate_transformation_mode="half_pixel",
             mode="avg", output_height=1, output_width=1, sampling_ratio=0,
             spatial_scale=1.0):
    """RoiAlign: Y[r, c, ph, pw] pooled from X[batch_indices[r], c] (module docstring)."""
    if coordinate_transformation_mode not in MODES:
        raise ctx.unsupported(f"coordinate_transformation_mode "
                              f"'{coordinate_transformation_mode}'")
    if mode not in ("avg", "max"):
        raise ctx.unsupported(f"mode '{mode}' is not avg or max")
    if sampling_ratio < 1:
        raise ctx.unsupported("sampling_ratio=0 (its sample count depends on each region's "
                              "size at run time); give a positive sampling_ratio")
    if len(X.shape) != 4 or len(rois.shape) != 2 or rois.shape[1] != 4 or \
            tuple(batch_indices.shape) != (rois.shape[0],):
        raise ctx.shape_error(f"X {list(X.shape)}, rois {list(rois.shape)} and batch_indices "
                              f"{list(batch_indices.shape)} must be [N, C, H, W], [R, 4], [R]")
    n, channels, height, width = X.shape
    regions = rois.shape[0]
    half = coordinate_transformation_mode == "half_pixel"
    axes = [_Axis(ctx, rois, d, size, bins, sampling_ratio, spatial_scale, half)
            for d, (size, bins) in enumerate(((height, output_height), (width, output_width)))]
    pixels = ctx.view(ctx.view(X, (channels, n, height, width), kind="transpose",
                               perm=(1, 0, 2, 3), label="roi_pixels"),
                      (channels, n * height * width), label="roi_pixels")
    pixels = ctx.stored(pixels)
    # output loops: r, c, ph, pw, iy, ix
    r, where = Ix.var(0), {0: (Ix.var(0), Ix.var(2), Ix.var(4)),
                           1: (Ix.var(0), Ix.var(3), Ix.var(5))}
    batch = call("cast_int64", Read(batch_indices.name, (r,)))
    terms = []
    for corner_y in ("low", "high"):
        for corner_x in ("low", "high"):
            y, x = (axes[d].index(corner, where[d])
                    for d, corner in ((0, corner_y), (1, corner_x)))
            at = call("add", call("mul", call("add", call("mul", batch, Const(height, "int64")),
                                                   y), Const(width, "int64")), x)
            value = Lookup(pixels.name, (Ix.var(1), Ix.constant(0)), 1, at)
            weight = call("mul", axes[0].weight(corner_y, where[0]),
                          axes[1].weight(corner_x, where[1]))
            terms.append(call("mul", weight, value))
    valid = call("and", axes[0].valid(where[0]), axes[1].valid(where[1]))
    out_shape = (regions, channels, output_height, output_width)
    extents = out_shape + (sampling_ratio, sampling_ratio)
    out_index = tuple(Ix.var(k) for k in range(4))
    if mode == "max":
        best = call("max", call("max", terms[0], terms[1]), call("max", terms[2], terms[3]))
        return ctx.reduce(out_shape=out_shape, init=identity("max", X.dtype), extents=extents,
                          out_index=out_index, combiner="max",
                          expr=call("select", valid, best, 0.0), label="roi_align")
    total = call("add", call("add", terms[0], terms[1]), call("add", terms[2], terms[3]))
    count = float(sampling_ratio * sampling_ratio)
    return ctx.reduce(out_shape=out_shape, init=Const(0.0), extents=extents,
                      out_index=out_index, combiner="add",
                      expr=call("select", valid, call("div", total, count), 0.0),
                      label="roi_align")


class _Axis:
    """The samples along one spatial dim (0: rows, 1: columns): per (region, bin,
    sample) their position, neighbours, fraction and validity, each a small Map."""

    def __init__(self, ctx, rois, d: int, size: int, bins: int, ratio: int, scale: float,
                 half: bool):
        regions = rois.shape[0]
        offset = 0.5 if half else 0.0
        start = call("sub", call("mul", Read(rois.name, (Ix.var(0), Ix.constant(1 - d))),
                                 scale), offset)
        end = call("sub", call("mul", Read(rois.name, (Ix.var(0), Ix.constant(3 - d))),
                               scale), offset)
        extent = call("sub", end, start)
        if not half:  # malformed regions made 1 pixel
            extent = call("max", extent, 1.0)
        bin_size = call("div", extent, float(bins))
        b = Read(ctx.positions(bins).name, (Ix.var(1),))
        k = Read(ctx.positions(ratio).name, (Ix.var(2),))
        position = call("add", call("add", start, call("mul", call("cast_float32", b),
                                                        bin_size)),
                        call("div", call("mul", call("add", call("cast_float32", k), 0.5),
                                         bin_size), float(ratio)))
        shape = (regions, bins, ratio)
        p = ctx.map(shape, position, label="roi_sample")
        at = Read(p.name, (Ix.var(0), Ix.var(1), Ix.var(2)))
        self.valid_map = ctx.map(shape, call("and", call("ge", at, -1.0),
                                             call("le", at, float(size))), label="roi_inside")
        clamped = call("max", at, 0.0)
        low = call("cast_int64", clamped)  # truncation = floor for clamped >= 0
        edge = call("ge", low, Const(size - 1, "int64"))
        last = Const(size - 1, "int64")
        self.low = ctx.map(shape, call("select", edge, last, low), label="roi_low")
        self.high = ctx.map(shape, call("select", edge, last, call("add", low,
                                                                   Const(1, "int64"))),
                            label="roi_high")
        fraction = call("select", edge, 0.0, call("sub", clamped, call("cast_float32", low)))
        self.fraction = ctx.map(shape, fraction, label="roi_fraction")

    def index(self, corner: str, where) -> Read:
        return Read((self.low if corner == "low" else self.high).name, where)

    def weight(self, corner: str, where):
        f = Read(self.fraction.name, where)
        return call("sub", 1.0, f) if corner == "low" else f

    def valid(self, where) -> Read:
        return Read(self.valid_map.name, where)

