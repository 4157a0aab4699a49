"""Sliding-window geometry shared by convolutions and pooling.

A window op over ``(N, C, D1, .., Dr)`` reads, for output position ``o`` and kernel
offset ``k`` of spatial dim ``d``, the input at ``o * stride + k * dilation - begin``:
``begin``/``end`` are the pads before and after (explicit, or from ``auto_pad``).
Reads outside the input are bounded reads (``Read.outside = "fill"``): the padding
value (0 for a convolution or a sum, -inf for a max).
"""

from __future__ import annotations

from dataclasses import dataclass

from polyc.frontend.core import Ix, Read, identity_index

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


@dataclass(frozen=True)
class Window:
    """Per spatial dim: kernel size, stride, dilation, pads before/after, output size."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    begin: tuple[int, ...]
    end: tuple[int, ...]
    out: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.kernel)

    def span(self, d: int) -> int:
        """How far output positions and kernel offsets of dim ``d`` reach from ``-begin``:
        ``(out - 1) * stride + (kernel - 1) * dilation + 1``."""
        return (self.out[d] - 1) * self.strides[d] + (self.kernel[d] - 1) * self.dilations[d] + 1

    def index(self, out_var: int, kernel_var: int) -> tuple[Ix, ...]:
        """Per spatial dim, the input index ``o * stride + k * dilation - begin`` with
        ``o`` the loop variable ``out_var + d`` and ``k`` the variable ``kernel_var + d``."""
        return tuple(Ix(((out_var + d, self.strides[d]), (kernel_var + d, self.dilations[d])),
                        -self.begin[d]) for d in range(self.rank))

    def fits(self, d: int, size: int) -> bool:
        """Whether every window of spatial dim ``d`` stays inside ``[0, size)``."""
        return self.begin[d] <= 0 and self.span(d) - self.begin[d] <= size

    def inside(self, spatial: tuple[int, ...]) -> bool:
        """Whether every window stays inside an input of spatial dims ``spatial``."""
        return all(self.fits(d, size) for d, size in enumerate(spatial))


def spatial_attribute(ctx, name: str, value, rank: int, default: int) -> tuple[int, ...]:
    """``strides``/``dilations``/``kernel_shape``: ``rank`` positive ints (``default`` each
    when the attribute is absent)."""
    if value is None:
        return (default,) * rank
    value = tuple(int(v) for v in value)
    if len(value) != rank:
        raise ctx.shape_error(f"{name} {list(value)} must have {rank} values, one per "
                              "spatial dim")
    if any(v < 1 for v in value):
        raise ctx.shape_error(f"{name} {list(value)} must be positive")
    return value


def window(ctx, spatial, kernel, *, strides=None, dilations=None, pads=None,
           auto_pad="NOTSET", ceil_mode=0) -> Window:
    """The geometry of a window op over input spatial dims ``spatial``.

    Output size per dim (``e = (kernel - 1) * dilation + 1``, the extent of a window):
    ``NOTSET`` ``floor((D + begin + end - e) / s) + 1`` (``ceil`` with ``ceil_mode``,
    where a last window that would start in the end padding is dropped, as onnxruntime
    does); ``VALID`` the same without pads; ``SAME_UPPER``/``SAME_LOWER`` ``ceil(D / s)``,
    padded by ``max(0, (out - 1) * s + e - D)`` in total, the odd one at the end (upper)
    or at the beginning (lower). Explicit ``pads`` are ignored unless ``NOTSET``.
    """
    rank = len(spatial)
    if auto_pad not in AUTO_PADS:
        raise ctx.unsupported(f"auto_pad '{auto_pad}' (expected one of {', '.join(AUTO_PADS)})")
    if ceil_mode not in (0, 1):
        raise ctx.unsupported(f"ceil_mode={ceil_mode} (expected 0 or 1)")
    strides = spatial_attribute(ctx, "strides", strides, rank, 1)
    dilations = spatial_attribute(ctx, "dilations", dilations, rank, 1)
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = tuple(-(-size // s) for size, s in zip(spatial, strides))
        total = [max(0, (o - 1) * s + e - size)
                 for o, s, e, size in zip(out, strides, extents, spatial)]
        small = [t // 2 for t in total]
        large = [t - t // 2 for t in total]
        begin, end = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
        return Window(tuple(kernel), strides, dilations, tuple(begin), tuple(end), out)
    begin, end = _pads(ctx, pads, rank) if auto_pad == "NOTSET" else ((0,) * rank,) * 2
    out = []
    for d in range(rank):
        room = spatial[d] + begin[d] + end[d] - extents[d]
        if room < 0:
            raise ctx.shape_error(f"the window extent {extents[d]} of spatial dim {d} exceeds "
                                  f"the padded input size {spatial[d] + begin[d] + end[d]}")
        size = (-(-room // strides[d]) if ceil_mode else room // strides[d]) + 1
        if ceil_mode and (size - 1) * strides[d] >= spatial[d] + begin[d]:
            size -= 1  # the last window would start in the end padding
        out.append(size)
    return Window(tuple(kernel), strides, dilations, begin, end, tuple(out))


def _pads(ctx, pads, rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``pads`` (``[b1, .., br, e1, .., er]``, default zeros) as (begin, end)."""
    if pads is None:
        return (0,) * rank, (0,) * rank
    pads = tuple(int(p) for p in pads)
    if len(pads) != 2 * rank:
        raise ctx.shape_error(f"pads {list(pads)} must have {2 * rank} values (begin and "
                              "end of every spatial dim)")
    if any(p < 0 for p in pads):
        raise ctx.unsupported(f"negative pads {list(pads)}")
    return pads[:rank], pads[rank:]


def padded_read(tensor, win: Window, out_var: int, kernel_var: int, lead: tuple[Ix, ...],
                fill: float, *, bounded: bool = False) -> Read:
    """``tensor[lead.., o * s + k * d - begin ..]``, reading ``fill`` outside ``tensor``: a
    plain read when every window stays inside, unless ``bounded``."""
    index = lead + win.index(out_var, kernel_var)
    if not bounded and win.inside(tensor.shape[len(lead):]):
        return Read(tensor.name, index)
    return Read(tensor.name, index, "fill", fill)


def tap_read(src, win: Window, position: dict[int, int], fill: float) -> Read:
    """``src[n, c, .., o*s + k*d - begin, ..]`` at the kernel offset ``k = position[d]``
    of each spatial dim ``d`` in ``position`` (the other dims read by the output's own
    loop variables): a bounded read (``fill`` outside) only when some window leaves
    ``src`` at that offset."""
    index = list(identity_index(len(src.shape)))
    inside = True
    for d, k in position.items():
        offset = k * win.dilations[d] - win.begin[d]
        index[2 + d] = Ix(((2 + d, win.strides[d]),), offset)
        inside = inside and 0 <= offset and \
            (win.out[d] - 1) * win.strides[d] + offset < src.shape[2 + d]
    return Read(src.name, tuple(index), *(() if inside else ("fill", fill)))

