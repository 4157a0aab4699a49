"""Models exported from PyTorch (CPU torch 2.13.0, the ``test`` extra) for end-to-end
checks: a ResNet-18-style CNN, a 2-layer MLP, a BERT-style encoder layer and a small
6-layer encoder. Weights are seeded; ``export(name)`` gives the ONNX model and an input.
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


def _encoder_inputs(batch: int, seq: int, hidden: int, rng: np.random.Generator):
    x = rng.standard_normal((batch, seq, hidden), dtype=np.float32)
    mask = np.zeros((batch, 1, 1, seq), dtype=np.float32)
    mask[:, :, :, seq - seq // 4:] = -10000.0  # the padding positions of a BERT batch
    return {"x": x, "mask": mask}


# name -> (module factory, input factory)
MODELS = {
    "resnet18": (lambda: ResNet18(width=32, classes=100),
                 lambda rng: {"x": rng.standard_normal((1, 3, 64, 64), dtype=np.float32)}),
    "mlp2": (MLP, lambda rng: {"x": rng.standard_normal((8, 784), dtype=np.float32)}),
    "bert_layer": (lambda: Encoder(1, 128, 4, 512),
                   lambda rng: _encoder_inputs(2, 32, 128, rng)),
    "encoder6": (lambda: Encoder(6, 64, 4, 256), lambda rng: _encoder_inputs(2, 16, 64, rng)),
}


def export(name: str, seed: int = 0, dynamic_axes=None
           ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The ONNX model (opset 17, legacy TorchScript exporter, eval mode, constants folded)
    of ``MODELS[name]`` with seeded weights, and a seeded input for it; ``dynamic_axes``
    (``{"x": {0: "batch"}}``) declares named dynamic dims, as torch.onnx.export."""
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
                          input_names=list(inputs), output_names=["y"], opset_version=17,
                          dynamo=False, do_constant_folding=True, dynamic_axes=dynamic_axes)
    model = onnx.load_from_string(buffer.getvalue())
    return model, inputs
