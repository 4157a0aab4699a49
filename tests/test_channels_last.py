"""Channels-last activations (polyc.frontend.channels_last): which tensors the lowering
stores as [N, H, W, C], what reads them as they are, where NCHW copies come in; every
model compiled (legality checker on) and compared with onnxruntime on seeded random
inputs and seeded random weights.

Tolerances: rtol 1e-4, atol 1e-4 (sums over channels and windows in another order than
onnxruntime's, through two or three convs).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import helper

import polyc
from polyc.codegen import target
from polyc.frontend import import_model
from polyc.frontend.core import Map, View
from polyc.runtime.jit import JitModule

from onnx_helpers import make_model, random_inputs, run_onnxruntime

pytestmark = pytest.mark.usefixtures("avx512_register_tiles")  # the tiles named here


RTOL, ATOL = 1e-4, 1e-4


class Net:
    """A model under construction: convs with seeded random weights, and other nodes."""

    def __init__(self, channels: int, size: int):
        self.nodes, self.weights, self.seed = [], [], 0
        self.input = ("x", [1, channels, size, size])

    def conv(self, x, c_in, c_out, k, *, stride=1, group=1, pad=None):
        self.seed += 1
        rng = np.random.default_rng(self.seed)
        name = f"conv{self.seed}"
        self.weights += [
            (f"{name}_w", rng.uniform(-0.3, 0.3, (c_out, c_in // group, k, k)).astype(np.float32)),
            (f"{name}_b", rng.uniform(-1, 1, c_out).astype(np.float32))]
        pad = k // 2 if pad is None else pad
        return self.node("Conv", x, f"{name}_w", f"{name}_b", kernel_shape=[k, k],
                         strides=[stride, stride], pads=[pad] * 4, group=group)

    def node(self, op, *inputs, **attrs):
        out = f"t{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, list(inputs), [out], **attrs))
        return out

    def model(self, *outputs):
        return make_model(self.nodes, [self.input], list(outputs), initializers=self.weights)


def assert_matches(model, **options):
    compiled = polyc.compile(model, **options)
    inputs = random_inputs(model, 0)
    got, want = compiled.run(inputs), run_onnxruntime(model, inputs)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=RTOL, atol=ATOL, err_msg=name)
    return compiled


def stored(graph, label):
    """The Maps labelled ``label`` and the View each one's tensor is read through."""
    views = {op.src: op for op in graph.ops if isinstance(op, View)}
    return [(op, views.get(op.out)) for op in graph.ops if isinstance(op, Map)
            and op.label == label]


def test_activations_between_convs_are_stored_channels_last():
    """conv 3x3 -> Relu -> conv 1x1 -> Relu -> conv 3x3: each Relu is a Map over
    [N, H, W, C] whose ONNX value is a transpose View of it, and no NCHW copy or im2col
    is made; the graph output is written NCHW."""
    net = Net(8, 12)
    a = net.node("Relu", net.conv("x", 8, 32, 3))
    b = net.node("Relu", net.conv(a, 32, 16, 1))
    y = net.conv(b, 16, 32, 3, stride=2)
    model = net.model(y)
    graph = import_model(model)
    relus = stored(graph, "relu")
    assert len(relus) == 2
    for (op, view), shape in zip(relus, [(1, 12, 12, 32), (1, 12, 12, 16)]):
        assert op.shape == shape and view.kind == "transpose" and view.perm == (0, 3, 1, 2)
    labels = {op.label for op in graph.ops}
    assert "nchw" not in labels and "im2col" not in labels
    assert graph.outputs[0].shape == (1, 32, 6, 6)
    compiled = assert_matches(model, threads=1)
    tiles = [d for d in compiled.schedule.decisions if d.startswith("tiling: contraction")]
    # the 1x1 conv to 16 channels: a 16-wide tile of 16 pixels, weights packed
    assert any(re.search(r"register tile 12x16|register tile 16x16", d) for d in tiles)
    assert len(tiles) == 3 and all("packed into" in d and "at compile time" in d for d in tiles)


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_conv_over_channels_last_reads_taps_along_channels(stride):
    """A depthwise conv over a channels-last input is one channels-last Map whose
    weights are a constant [kh, kw, c] (a vector of channels per tap)."""
    net = Net(16, 15)
    a = net.node("Relu", net.conv("x", 16, 32, 3))
    d = net.node("Relu", net.conv(a, 32, 32, 3, stride=stride, group=32))
    y = net.conv(d, 32, 16, 1)
    model = net.model(y)
    graph = import_model(model)
    ((op, view),) = stored(graph, "depthwise_conv")
    out = 15 if stride == 1 else 8
    assert op.shape == (1, out, out, 32) and view is not None
    (taps,) = [t for t in graph.constants if t.startswith("_conv_taps")]
    assert graph.constants[taps].shape == (3, 3, 32)
    for options in ({"threads": 1}, {"threads": 2}, {"fuse": "none"}, {"tile": False}):
        assert_matches(model, **options)


@pytest.mark.parametrize("threads", [1, 2])
def test_depthwise_conv_over_channels_last_is_tiled_one_vector_of_channels_wide(threads):
    """The channels-last depthwise Map (48 channels, 5x5 taps at 20x20) is tiled 16
    channels (one vector, its weights in registers) by 16x16 pixels, with SiLU after
    it, inlined; 20 pixels a side leave partial tiles of 4 at the edges."""
    net = Net(16, 20)
    a = net.node("Relu", net.conv("x", 16, 48, 3))
    d = net.conv(a, 48, 48, 5, group=48)
    s = net.node("Mul", d, net.node("Sigmoid", d))
    model = net.model(net.conv(s, 48, 16, 1))
    compiled = assert_matches(model, threads=threads)
    bands = [d for d in compiled.schedule.decisions
             if re.match(r"tiling: band of S\d+_mul: tiles", d)]
    assert bands == [bands[0]] and bands[0].endswith("tiles 16x16x16x16"), bands


def test_depthwise_taps_outside_the_input_load_at_an_address_inside_it():
    """A tap of a channels-last depthwise conv is inside the input for all its lanes
    (channels) or for none, so its masked load is addressed at the clamped pixel, never
    before or after the array: a masked load whose lanes lie in a page not yet touched
    takes a microcode assist at every call (efficientnet's depthwise convs ran 30x
    slower when their input was the first temporary of scratch, depending on where
    numpy put the scratch). Only the graph input's padded copy, whose lanes run along
    a row and may start before it, keeps an address outside (a plain GEP)."""
    net = Net(16, 15)
    a = net.node("Relu", net.conv("x", 16, 32, 3))
    d = net.node("Relu", net.conv(a, 32, 32, 5, group=32))
    model = net.model(net.conv(d, 32, 16, 1))
    compiled = assert_matches(model, threads=1)
    llvm_ir = compiled.compilation.llvm_ir
    assert "llvm.masked.load" in llvm_ir
    outside = set(re.findall(r'= getelementptr (?:float|i8), ptr %"([^"]+)"', llvm_ir))
    assert outside <= {"x"}, outside


def test_depthwise_conv_over_few_pixels_runs_its_border_without_guards():
    """At 7x7 a 5x5 window's interior is 9 of 49 pixels: the border is split into the
    24 parts where each tap is inside or not (polyc.tiling.borders), none guarded. The
    parts run inside the loop over blocks of 16 channels, on which no guard depends:
    the 25 loops of one block, not 25 loops over all blocks."""
    net = Net(16, 7)
    a = net.node("Relu", net.conv("x", 16, 48, 3))
    d = net.node("Relu", net.conv(a, 48, 48, 5, group=48))
    compiled = assert_matches(net.model(net.conv(d, 48, 16, 1)), threads=1, profile=True)
    decisions = compiled.schedule.decisions
    assert any("interior rows split from 24 border parts" in d for d in decisions), decisions
    assert any("tile band members (0, 1, 2, 3) and band members (0,) (no bounded read "
               "depends on them) kept around the parts" in d for d in decisions), decisions
    nests = [name for part in compiled.manifest["profile"] for name in part["statements"]]
    assert len(nests) == len(set(nests)), nests  # (before: 25 top-level nests of one)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsampled_neck_and_its_concat_stay_channels_last(mode):
    """A detector neck: a channels-last image upsampled (Resize resamples it as stored,
    channels in the lanes) and concatenated along channels with another; the Concat is
    split where each input's guard holds throughout (polyc.tiling.borders), so
    neither part tests a guard."""
    net = Net(16, 16)
    small = net.node("Relu", net.conv("x", 16, 32, 3, stride=2))
    net.weights.append(("scales", np.array([1, 1, 2, 2], dtype=np.float32)))
    up = net.node("Resize", small, "", "scales", mode=mode)
    side = net.node("Relu", net.conv("x", 16, 32, 3))
    both = net.node("Concat", up, side, axis=1)
    model = net.model(net.conv(both, 64, 16, 3))
    graph = import_model(model)
    assert all(view is not None for _, view in stored(graph, "resize"))
    ((concat, view),) = stored(graph, "concat")
    assert concat.shape == (1, 16, 16, 64) and view is not None
    for threads in (1, 2):
        compiled = assert_matches(model, threads=threads)
        assert any("concat: split into 2 parts" in decision
                   for decision in compiled.schedule.decisions), compiled.schedule.decisions


def test_pooling_concat_and_residual_stay_channels_last():
    """MaxPool's window passes, a residual Add and a Concat along channels of
    channels-last tensors are channels-last Maps; a 1x1 stride-2 conv reads the Concat
    as it is (direct, no im2col); GlobalAveragePool and Flatten of the result are right."""
    net = Net(4, 20)
    a = net.node("Relu", net.conv("x", 4, 32, 3))
    p = net.node("MaxPool", a, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    b = net.node("Add", net.conv(p, 32, 32, 3), p)
    c = net.node("Concat", b, net.conv(p, 32, 16, 1), axis=1)
    d = net.conv(c, 48, 32, 1, stride=2, pad=0)
    g = net.node("GlobalAveragePool", d)
    f = net.node("Flatten", d)
    model = net.model(g, f)
    graph = import_model(model)
    for label in ("max_pool", "add", "concat"):
        assert stored(graph, label) and all(view is not None for _, view in stored(graph, label))
    labels = [op.label for op in graph.ops]
    assert "im2col" not in labels
    # Flatten of [1, 32, 5, 5] needs NCHW order: one copy, read by the reshape
    assert labels.count("nchw") == 1
    assert_matches(model, threads=1)
    assert_matches(model, threads=2)


def test_mixed_layouts_read_through_the_view():
    """An Add of a channels-last tensor and the NCHW graph input stays NCHW (reading
    the channels-last one through its view); a 1x1 conv to 20 channels (32 would be
    too many more) reads an NCHW copy (a product over pixels)."""
    net = Net(32, 9)
    a = net.conv("x", 32, 32, 3)
    s = net.node("Add", a, "x")
    b = net.conv(net.node("Relu", a), 32, 20, 1)
    model = net.model(s, b)
    graph = import_model(model)
    assert not stored(graph, "add")[0][1]  # no view: an NCHW Map
    assert "nchw" in {op.label for op in graph.ops}
    assert_matches(model, threads=1)


@pytest.mark.parametrize("threads", [1, 2])
def test_conv_to_channels_short_of_whole_vectors(threads):
    """1x1 and 3x3 convs over channels-last data to 24 and 40 channels (8 more than
    whole vectors) compute those, stored channels-last, their register tiles one tile
    wide with the last 8 channels a half vector (``<8 x float>``); a conv to 72 computes
    80 (zero weights and bias beyond), its ONNX value a view of the first 72; the
    residual Add and the depthwise conv after them stay channels-last (no NCHW copy)."""
    net = Net(16, 11)
    a = net.node("Relu", net.conv("x", 16, 32, 3))
    b = net.conv(a, 32, 24, 1)
    c = net.node("Add", net.conv(net.node("Relu", b), 24, 24, 3), b)
    d = net.node("Relu", net.conv(c, 24, 24, 5, stride=2, group=24))
    y = net.conv(net.node("Relu", net.conv(d, 24, 40, 3)), 40, 72, 1)
    model = net.model(y)
    graph = import_model(model)
    convs = [op for op in graph.ops if op.label == "conv_transposed"]
    assert [op.out_shape[3] for op in convs] == [32, 24, 24, 40, 80]
    views = {op.src: op for op in graph.ops if isinstance(op, View)}
    assert [graph.tensors[views[op.out].out].shape[1] for op in convs] == [32, 24, 24, 40, 72]
    assert "nchw" not in {op.label for op in graph.ops}
    assert stored(graph, "add")[0][1] is not None and stored(graph, "depthwise_conv")[0][1]
    compiled = assert_matches(model, threads=threads)
    tiles = [re.search(r"register tile (\d+)x(\d+)", d).group(2)
             for d in compiled.schedule.decisions if d.startswith("tiling: contraction")]
    assert tiles == ["32", "24", "24", "40", "16"], tiles
    assert "<8 x float>" in compiled.compilation.llvm_ir


def test_half_vectors_of_a_tile_are_known_once_its_vectors_are_unrolled():
    """A 1x1 conv to 24 channels-last channels: the vector loop of its tile's second
    vector, ``c12 <= min(23, 16 * c11 + 15)``, is 8 lanes once codegen unrolls the
    loop of ``c11`` from 0, so the optimized code has unmasked ``<8 x float>`` sums
    (masked, LLVM kept them in memory: mobilenetv3 ran 1.95x slower)."""
    net = Net(16, 11)
    model = net.model(net.conv(net.node("Relu", net.conv("x", 16, 32, 3)), 32, 24, 1))
    compiled = assert_matches(model, threads=1)
    c = compiled.compilation
    assert re.search(r"c(\d+) <= min\(23, 16 \* c\d+ \+ 15\)", str(c.program))
    optimized = JitModule(c.llvm_ir, c.manifest, c.constants).optimized_ir
    assert "<8 x float>" in optimized


def test_residual_add_after_a_pointwise_conv_is_a_pass_of_its_own():
    """conv 1x1 + residual Sum + Relu over channels-last pixels: the Sum is not in the
    conv's register tile (an epilogue reading other computed data), the Relu after the
    first conv is; results match onnxruntime."""
    net = Net(16, 14)
    a = net.node("Relu", net.conv("x", 16, 32, 3))
    s = net.node("Relu", net.node("Sum", net.conv(a, 32, 64, 1), net.conv(a, 32, 64, 1)))
    y = net.conv(s, 64, 16, 3)
    model = net.model(y)
    compiled = assert_matches(model, threads=1)
    notes = [d for d in compiled.schedule.decisions if d.startswith("tiling: contraction")]
    assert sum("epilogue" in d for d in notes) == 1  # the first conv's Relu
    assert any(re.match(r"tiling: band of S\d+_relu: ", d) for d in compiled.schedule.decisions)


def test_graph_output_that_is_also_read_on():
    """A channels-last value that is a graph output and is read by the next conv: the
    output is written NCHW, the conv reads it as it is."""
    net = Net(8, 10)
    a = net.node("Relu", net.conv("x", 8, 16, 3))
    y = net.conv(a, 16, 16, 3)
    assert_matches(net.model(a, y), threads=1)


@pytest.mark.parametrize("threads", [1, 2])
def test_global_average_pool_of_channels_last_data_sums_along_channels(threads):
    """GlobalAveragePool of a channels-last conv output (and ReduceMean over H, W): the
    Reduce's loops are (n, h, w, c), and tiling keeps them in that order (Pluto puts
    the parallel n, c outside, which reads with a stride of a row of channels)."""
    net = Net(8, 13)
    a = net.node("Relu", net.conv("x", 8, 48, 3))
    g = net.node("GlobalAveragePool", a)
    m = net.node("ReduceMean", net.node("Sigmoid", a), axes=[2, 3], keepdims=1)
    compiled = assert_matches(net.model(g, m), threads=threads)
    kept = [d for d in compiled.schedule.decisions if "program order" in d]
    assert len(kept) == 2 and all("jumped by 48 elements" in d for d in kept), kept


@pytest.mark.parametrize("channels, block", [(32, None), (288, 144)])
def test_global_average_pool_keeps_its_sums_in_registers(channels, block):
    """GlobalAveragePool of a channels-last conv output: its update runs whole vectors
    of channels unrolled, so the optimized code carries the sums from pixel to pixel
    in vector registers (``phi <16 x float>``) rather than loading and storing them per
    pixel; more channels than ``ACCUMULATOR_VECTORS`` vectors are cut into blocks of
    whole vectors that divide them (288 = 2 x 144), the block loop outermost. Results
    match onnxruntime on 1 and 2 threads."""
    net = Net(8, 12)
    model = net.model(net.node("GlobalAveragePool",
                               net.node("Relu", net.conv("x", 8, channels, 3))))
    for threads in (1, 2):
        compiled = assert_matches(model, threads=threads)
        notes = [d for d in compiled.schedule.decisions if "program order" in d]
        assert len(notes) == 1 and (f"blocks of {block} outermost" in notes[0]) == bool(block)
    profiled = polyc.compile(model, threads=1, profile=True)
    [part] = [k for k, p in enumerate(profiled.manifest["profile"])
              if any("mean_sum_update" in s for s in p["statements"])]
    tm = target.host_target_machine(jit=True)
    module = target.parse(profiled.compilation.llvm_ir, tm)
    target.optimize(module, tm)
    name = "polyc_kernel.part" + (f".{part}" if part else "")
    assert "phi <16 x float>" in str(module.get_function(name))


def test_detector_head_reshape_splits_channels_through_the_view():
    """A detection conv to 3 x 25 channels (padded to 80), reshaped to [N, 3, 25, H, W],
    transposed to [N, 3, H, W, 25] and squashed: the reshape only splits channels, so
    it reads the channels-last conv output through its view (no NCHW copy), and the
    Sigmoid, whose lane index 25*a + o would take a division in the register tile,
    runs as a pass of its own; results match onnxruntime."""
    net = Net(16, 10)
    a = net.node("Relu", net.conv("x", 16, 32, 3))
    h = net.conv(a, 32, 75, 1)
    shape = "shape"
    net.weights.append((shape, np.array([1, 3, 25, 10, 10], dtype=np.int64)))
    r = net.node("Reshape", h, shape)
    y = net.node("Sigmoid", net.node("Transpose", r, perm=[0, 1, 3, 4, 2]))
    model = net.model(y)
    assert "nchw" not in {op.label for op in import_model(model).ops}
    for threads in (1, 2):
        compiled = assert_matches(model, threads=threads)
        notes = [d for d in compiled.schedule.decisions if d.startswith("tiling: contraction")]
        assert len(notes) == 2 and not any("sigmoid" in d for d in notes), notes


@pytest.mark.parametrize("threads", [1, 2])
def test_padded_copy_of_many_channels_has_a_longer_pixel_pitch(threads):
    """A 3x3 conv's padded copy of channels-last data with 128 channels holds 144 per
    pixel (the last 16 zeros the conv never reads), so that a register tile's pixels do
    not share cache sets; 96 channels stay 96. Both stride 1 and 2 match onnxruntime."""
    net = Net(8, 9)
    a = net.node("Relu", net.conv("x", 8, 128, 3))
    b = net.node("Relu", net.conv(a, 128, 96, 3, stride=2))
    y = net.conv(b, 96, 32, 3)
    model = net.model(y)
    pads = stored(import_model(model), "conv_pad")  # the first of x, NCHW
    assert [(op.shape, view and view.kind) for op, view in pads] == [
        ((1, 8, 11, 11), None), ((1, 11, 11, 144), "transpose"), ((1, 7, 7, 96), "transpose")]
    assert_matches(model, threads=threads)
