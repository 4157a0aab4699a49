"""Models exported from PyTorch (CPU torch 2.13.0, the ``test`` extra) for end-to-end
checks: a ResNet-18-style CNN, a 2-layer MLP, a BERT-style encoder layer, a small 6-layer
encoder, MobileNetV2-, MobileNetV3- and EfficientNet-style CNNs (depthwise convolutions,
squeeze-excite, ReLU6, HardSwish, SiLU), a small YOLO-style detector (SiLU as
Sigmoid * Mul, upsample + concat, three heads), a 4-layer BERT-style encoder at
sequence length 128, an LSTM sequence tagger and a GRU frame classifier. Everything is
written here (no torchvision, no downloaded weights).
Weights are seeded; ``export(name)`` gives the ONNX model and an input.
"""

from __future__ import annotations

import io
import math
import warnings

import numpy as np
import onnx
import torch
from torch import nn


class BasicBlock(nn.Module):
    """ResNet's two 3x3 convolutions with a shortcut (1x1 strided conv when the shape changes)."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18's layout (7x7 stem, max pool, 4 stages of 2 blocks, global pool, fc)."""

    def __init__(self, width: int = 64, classes: int = 100):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], width
        for stage in range(4):
            cout = width * 2 ** stage
            blocks += [BasicBlock(cin, cout, 1 if stage == 0 else 2), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        y = self.blocks(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


class MLP(nn.Module):
    def __init__(self, sizes=(784, 256, 10)):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(sizes[0], sizes[1]), nn.Linear(sizes[1], sizes[2])

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class EncoderLayer(nn.Module):
    """A BERT encoder layer: multi-head self-attention with an additive mask, residual +
    LayerNorm, a GELU (erf) feed-forward, residual + LayerNorm."""

    def __init__(self, hidden: int, heads: int, ffn: int):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
        self.out = nn.Linear(hidden, hidden)
        self.norm1, self.norm2 = nn.LayerNorm(hidden, eps=1e-12), nn.LayerNorm(hidden, eps=1e-12)
        self.ffn1, self.ffn2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)

    def split(self, x):
        b, s, h = x.shape
        return x.reshape(b, s, self.heads, h // self.heads).transpose(1, 2)

    def forward(self, x, mask):
        b, s, h = x.shape
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(h // self.heads) + mask
        context = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, s, h)
        x = self.norm1(x + self.out(context))
        return self.norm2(x + self.ffn2(nn.functional.gelu(self.ffn1(x))))


class Encoder(nn.Module):
    def __init__(self, layers: int, hidden: int, heads: int, ffn: int):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads, ffn) for _ in range(layers))

    def forward(self, x, mask):
        for layer in self.layers:
            x = layer(x, mask)
        return x


def _divisible(channels: float, divisor: int = 8) -> int:
    """``channels`` rounded to a multiple of ``divisor``, never below 90% of it (the
    MobileNet and EfficientNet channel rule)."""
    rounded = max(divisor, int(channels + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * channels else rounded


def conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1,
            act: type[nn.Module] | None = nn.ReLU) -> nn.Sequential:
    """Conv (same padding, no bias), BatchNorm, then ``act`` (none when ``None``)."""
    layers = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, *([act()] if act else []))


class SqueezeExcite(nn.Module):
    """Global average pool, 1x1 conv down to ``squeeze`` channels, ``act``, 1x1 conv back,
    ``gate``, times the input: the channel attention of MobileNetV3 and EfficientNet."""

    def __init__(self, channels: int, squeeze: int, act=nn.ReLU, gate=nn.Hardsigmoid):
        super().__init__()
        self.reduce, self.expand = nn.Conv2d(channels, squeeze, 1), nn.Conv2d(squeeze, channels, 1)
        self.act, self.gate = act(), gate()

    def forward(self, x):
        scale = nn.functional.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.expand(self.act(self.reduce(scale))))


class InvertedResidual(nn.Module):
    """MobileNetV2's block, MobileNetV3's bneck and EfficientNet's MBConv: 1x1 expansion
    (left out when ``expanded == cin``), depthwise ``kernel`` x ``kernel`` conv, optional
    squeeze-excite, linear 1x1 projection; a residual add when the shape is kept."""

    def __init__(self, cin: int, expanded: int, cout: int, kernel: int, stride: int,
                 act=nn.ReLU6, se: SqueezeExcite | None = None):
        super().__init__()
        expand = [conv_bn(cin, expanded, 1, act=act)] if expanded != cin else []
        self.body = nn.Sequential(*expand,
                                  conv_bn(expanded, expanded, kernel, stride, expanded, act),
                                  *([se] if se else []),
                                  conv_bn(expanded, cout, 1, act=None))
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


def _init_scaled(module: nn.Module) -> nn.Module:
    """He-normal conv weights (fan-out, as torchvision's MobileNets and EfficientNet), so
    activations keep their scale through deep stacks instead of fading towards the
    biases, which would hide errors; BatchNorm scales in [0.5, 1.5] and small seeded
    biases everywhere (``export`` sets the running statistics)."""
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out")
        if isinstance(m, nn.BatchNorm2d):
            nn.init.uniform_(m.weight, 0.5, 1.5)
        if isinstance(m, (nn.Conv2d, nn.Linear, nn.BatchNorm2d)) and m.bias is not None:
            nn.init.uniform_(m.bias, -0.1, 0.1)
    return module


class PooledClassifier(nn.Module):
    """``features``, global average pool, flatten, ``classifier``: the frame of the
    MobileNets and EfficientNet, weights set by :func:`_init_scaled`."""

    def __init__(self, features: list[nn.Module], classifier: nn.Module):
        super().__init__()
        self.features, self.classifier = nn.Sequential(*features), classifier
        _init_scaled(self)

    def forward(self, x):
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(
            self.features(x), 1), 1))


# expansion t, channels c, blocks n, first stride s (MobileNetV2 paper, table 2)
MOBILENETV2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
               (6, 160, 3, 2), (6, 320, 1, 1))


def mobilenetv2(classes: int = 1000) -> PooledClassifier:
    """MobileNetV2 (width 1.0): 3x3 stem, 17 inverted residual blocks with ReLU6
    (exported as Clip), 1x1 conv to 1280, pool, classifier."""
    layers, cin = [conv_bn(3, 32, 3, 2, act=nn.ReLU6)], 32
    for t, c, n, s in MOBILENETV2:
        for i in range(n):
            layers.append(InvertedResidual(cin, cin * t, c, 3, s if i == 0 else 1))
            cin = c
    layers.append(conv_bn(cin, 1280, 1, act=nn.ReLU6))
    return PooledClassifier(layers, nn.Linear(1280, classes))


# kernel, expanded, out, squeeze-excite, HardSwish (else ReLU), stride (MobileNetV3
# paper, table 2: the Small model)
MOBILENETV3_SMALL = ((3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2),
                     (3, 88, 24, False, False, 1), (5, 96, 40, True, True, 2),
                     (5, 240, 40, True, True, 1), (5, 240, 40, True, True, 1),
                     (5, 120, 48, True, True, 1), (5, 144, 48, True, True, 1),
                     (5, 288, 96, True, True, 2), (5, 576, 96, True, True, 1),
                     (5, 576, 96, True, True, 1))


def mobilenetv3_small(classes: int = 1000) -> PooledClassifier:
    """MobileNetV3-Small: HardSwish stem, 11 bnecks (3x3 and 5x5 depthwise, ReLU or
    HardSwish, squeeze-excite with HardSigmoid), 1x1 conv to 576, pool, two linear
    layers with HardSwish between."""
    layers, cin = [conv_bn(3, 16, 3, 2, act=nn.Hardswish)], 16
    for kernel, expanded, cout, se, hswish, stride in MOBILENETV3_SMALL:
        act = nn.Hardswish if hswish else nn.ReLU
        excite = SqueezeExcite(expanded, _divisible(expanded / 4)) if se else None
        layers.append(InvertedResidual(cin, expanded, cout, kernel, stride, act, excite))
        cin = cout
    layers.append(conv_bn(cin, 576, 1, act=nn.Hardswish))
    return PooledClassifier(layers, nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(),
                                                  nn.Linear(1024, classes)))


# expansion, kernel, first stride, out, blocks (EfficientNet paper, table 1)
EFFICIENTNET_B0 = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
                   (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1))


def efficientnet_b0(classes: int = 1000) -> PooledClassifier:
    """EfficientNet-B0: 3x3 stem, 16 MBConv blocks with SiLU (exported as Sigmoid * Mul)
    and squeeze-excite (a quarter of the block's input channels, SiLU, Sigmoid), 1x1
    conv to 1280, pool, classifier."""
    layers, cin = [conv_bn(3, 32, 3, 2, act=nn.SiLU)], 32
    for t, kernel, stride, cout, n in EFFICIENTNET_B0:
        for i in range(n):
            excite = SqueezeExcite(cin * t, max(1, cin // 4), nn.SiLU, nn.Sigmoid)
            layers.append(InvertedResidual(cin, cin * t, cout, kernel,
                                           stride if i == 0 else 1, nn.SiLU, excite))
            cin = cout
    layers.append(conv_bn(cin, 1280, 1, act=nn.SiLU))
    return PooledClassifier(layers, nn.Linear(1280, classes))


class ConvSiLU(nn.Module):
    """YOLO's Conv: conv, BatchNorm, SiLU written out as ``x * sigmoid(x)``."""

    def __init__(self, cin: int, cout: int, kernel: int = 1, stride: int = 1):
        super().__init__()
        self.conv = conv_bn(cin, cout, kernel, stride, act=None)

    def forward(self, x):
        y = self.conv(x)
        return y * torch.sigmoid(y)


class YoloHead(nn.Module):
    """A small YOLO-style detector: a strided ConvSiLU backbone down to strides 8, 16 and
    32, a top-down neck (1x1 conv, nearest 2x upsample, concat with the finer level, 3x3
    conv), and one 1x1 detection conv per level whose output is reshaped to (batch,
    anchors, height, width, 5 + classes) and squashed by a sigmoid."""

    output_names = ("p3", "p4", "p5")

    def __init__(self, width: int = 16, classes: int = 20, anchors: int = 3):
        super().__init__()
        w = [width * 2 ** i for i in range(5)]  # 16 .. 256 (YOLOv5n's widths)
        self.anchors, self.outputs = anchors, 5 + classes
        self.stem = nn.Sequential(ConvSiLU(3, w[0], 3, 2), ConvSiLU(w[0], w[1], 3, 2),
                                  ConvSiLU(w[1], w[2], 3, 2))
        self.down4, self.down5 = ConvSiLU(w[2], w[3], 3, 2), ConvSiLU(w[3], w[4], 3, 2)
        self.lateral5, self.lateral4 = ConvSiLU(w[4], w[3]), ConvSiLU(w[3], w[2])
        self.merge4, self.merge3 = ConvSiLU(2 * w[3], w[3], 3), ConvSiLU(2 * w[2], w[2], 3)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.detect = nn.ModuleList(nn.Conv2d(c, anchors * self.outputs, 1)
                                    for c in (w[2], w[3], w[4]))
        _init_scaled(self)

    def head(self, level: int, x):
        b, _, h, w = x.shape
        y = self.detect[level](x).reshape(b, self.anchors, self.outputs, h, w)
        return torch.sigmoid(y.permute(0, 1, 3, 4, 2))

    def forward(self, x):
        c3 = self.stem(x)
        c4 = self.down4(c3)
        c5 = self.down5(c4)
        top5 = self.lateral5(c5)
        p4 = self.merge4(torch.cat([self.up(top5), c4], 1))
        p3 = self.merge3(torch.cat([self.up(self.lateral4(p4)), c3], 1))
        return self.head(0, p3), self.head(1, p4), self.head(2, c5)


class Tagger(nn.Module):
    """A sequence tagger: token embeddings, a 2-layer bidirectional LSTM, a linear layer
    on every token's states."""

    def __init__(self, vocab: int = 1000, embed: int = 64, hidden: int = 128, tags: int = 17):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.out = nn.Linear(2 * hidden, tags)

    def forward(self, tokens):
        states, _ = self.lstm(self.embed(tokens))
        return self.out(states)


class FrameClassifier(nn.Module):
    """A voice-activity-style model: a 2-layer GRU over frames of audio features, a
    sigmoid score per frame."""

    def __init__(self, features: int = 40, hidden: int = 64):
        super().__init__()
        self.gru = nn.GRU(features, hidden, num_layers=2, batch_first=True)
        self.out = nn.Linear(hidden, 1)

    def forward(self, frames):
        states, _ = self.gru(frames)
        return torch.sigmoid(self.out(states))


def _encoder_inputs(batch: int, seq: int, hidden: int, rng: np.random.Generator):
    x = rng.standard_normal((batch, seq, hidden), dtype=np.float32)
    mask = np.zeros((batch, 1, 1, seq), dtype=np.float32)
    mask[:, :, :, seq - seq // 4:] = -10000.0  # the padding positions of a BERT batch
    return {"x": x, "mask": mask}


def _image(rng: np.random.Generator, size: int) -> np.ndarray:
    return rng.standard_normal((1, 3, size, size), dtype=np.float32)


# name -> (module factory, input factory). The MobileNets and EfficientNet take their
# usual 224x224 input at full width, the YOLO-style detector 320x320; each compiles in
# 10-30 s. bert4 has BERT-small's shape (4 layers, hidden 512, 8 heads, feed-forward
# 2048) at sequence length 128, batch 1.
MODELS = {
    "resnet18": (lambda: ResNet18(width=32, classes=100),
                 lambda rng: {"x": rng.standard_normal((1, 3, 64, 64), dtype=np.float32)}),
    "mlp2": (MLP, lambda rng: {"x": rng.standard_normal((8, 784), dtype=np.float32)}),
    "bert_layer": (lambda: Encoder(1, 128, 4, 512),
                   lambda rng: _encoder_inputs(2, 32, 128, rng)),
    "encoder6": (lambda: Encoder(6, 64, 4, 256), lambda rng: _encoder_inputs(2, 16, 64, rng)),
    "mobilenetv2": (mobilenetv2, lambda rng: {"x": _image(rng, 224)}),
    "mobilenetv3": (mobilenetv3_small, lambda rng: {"x": _image(rng, 224)}),
    "efficientnet": (efficientnet_b0, lambda rng: {"x": _image(rng, 224)}),
    "yolo_head": (YoloHead, lambda rng: {"x": _image(rng, 320)}),
    "bert4": (lambda: Encoder(4, 512, 8, 2048), lambda rng: _encoder_inputs(1, 128, 512, rng)),
    "lstm_tagger": (Tagger, lambda rng: {"tokens": rng.integers(0, 1000, (2, 32))}),
    "gru_frames": (FrameClassifier,
                   lambda rng: {"frames": rng.standard_normal((1, 100, 40), dtype=np.float32)}),
}
# exported with their BatchNormalization nodes (TrainingMode.PRESERVE of a module in eval
# mode: inference BatchNormalization), so that polyc's fold_batch_norm folds them rather
# than the exporter
KEEP_BATCH_NORM = {"mobilenetv2", "mobilenetv3", "efficientnet", "yolo_head"}


def export(name: str, seed: int = 0, dynamic_axes=None
           ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The ONNX model (opset 17, legacy TorchScript exporter, eval mode, constants folded;
    BatchNormalization nodes kept for ``KEEP_BATCH_NORM``, else folded by the exporter) of
    ``MODELS[name]`` with seeded weights, and a seeded input for it; outputs are named
    ``y``, or as the module's ``output_names``. ``dynamic_axes`` (``{"x": {0: "batch"}}``)
    declares named dynamic dims, as torch.onnx.export."""
    make_module, make_inputs = MODELS[name]
    torch.manual_seed(seed)
    module = make_module().eval()
    for m in module.modules():  # non-trivial batch-norm statistics
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    inputs = make_inputs(np.random.default_rng(seed))
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, tuple(torch.from_numpy(v) for v in inputs.values()), buffer,
                          input_names=list(inputs), opset_version=17,
                          output_names=list(getattr(module, "output_names", ["y"])),
                          dynamo=False, do_constant_folding=True, dynamic_axes=dynamic_axes,
                          training=(torch.onnx.TrainingMode.PRESERVE if name in KEEP_BATCH_NORM
                                    else torch.onnx.TrainingMode.EVAL))
    model = onnx.load_from_string(buffer.getvalue())
    return model, inputs
