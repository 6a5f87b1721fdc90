#!/usr/bin/python3
"""A zoo of small, realistic architectures built in torch (seeded random weights), exported at opsets 7 to 17, and a
few built with onnx.helper for ops torch 1.13 cannot export (opset 18/21 GroupNormalization, STFT; 'onnx' option) or
only scripted (sequences of tensors: SplitToSequence, a Loop appending to a list, ConcatFromSequence),
each run through qtool as a new user would (issue 12: models qtool was not tuned on).

usage: zoo.py [--all] [--json FILE] [--config QCONFIG.json] [--calib-samples N] [--eval-rows M] [--seed S] [NAME ...]
  default: the cases marked fast (the ctest run); --all: every case; NAME ...: just those; --config: quantize with
  that config instead of the default; --calib-samples N (4) calibration samples of batch 2 and --eval-rows M (3)
  held-out rows, drawn with --seed S (2): more of both (32, 64) to measure a change above 3 rows' noise.

Per model, on seeded inputs with batch > 1 (a calibration set of a few samples and a disjoint evaluation batch):
  1. `qtool run` on the float model against ONNX Runtime 1.30: within float tolerance (see FLOAT_TOL);
  2. `qtool quantize MODEL -o Q --data ...` with the default config: exit 0 (with --config: exit 0, or 2/4 with a
     one-line message, recorded, not a failure);
  3. ONNX Runtime loads and runs Q; the SQNR of Q's output against float on the evaluation batch is reported
     (random weights: indicative; no bar is fitted to it).
Fails (exit 1) on: a crash or exit 3 of any qtool command, exit 2 of `qtool run` on the float model (every op here is
a standard ONNX op a deployment model contains), exit 2 or 4 of `qtool quantize` under the default config (an
opset-9 Upsample refused, or the accuracy guard giving up, as on BERT at opset 11 under a calibration bug), a float
mismatch, ORT refusing or failing to run Q, and a float output Q no longer follows at all (SQNR < COLLAPSE_DB: the
error as large as the signal, as when ORT's QLinearSoftmax wrote zeros; int8 rounding on these models is 20-70 dB
away from it).
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qtest  # noqa: E402

# Float outputs of qtool and ORT differ by summation order only: |a - b| <= ATOL * (1 + max|b|) + RTOL * |b|.
FLOAT_ATOL, FLOAT_RTOL = 1e-4, 1e-3
COLLAPSE_DB = 3.0


def conv_bn(cin, cout, k=3, s=1, groups=1, dil=1, act=nn.ReLU):
    layers = [nn.Conv2d(cin, cout, k, s, dil * (k // 2), dilation=dil, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, act()) if act else nn.Sequential(*layers)


class ResNet(nn.Module):
    """Stem, maxpool, two basic blocks (one strided with a 1x1 projection), global pool, Linear, Softmax."""
    def __init__(self):
        super().__init__()
        self.stem, self.pool = conv_bn(3, 16, s=2), nn.MaxPool2d(3, 2, 1)
        self.b1 = nn.Sequential(conv_bn(16, 16), conv_bn(16, 16, act=None))
        self.b2 = nn.Sequential(conv_bn(16, 32, s=2), conv_bn(32, 32, act=None))
        self.proj = conv_bn(16, 32, k=1, s=2, act=None)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.pool(self.stem(x))
        x = F.relu(x + self.b1(x))
        x = F.relu(self.proj(x) + self.b2(x))
        return torch.softmax(self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)), 1)


class InvertedResidual(nn.Module):
    def __init__(self, c, e, act=nn.ReLU6, se=None):
        super().__init__()
        self.expand, self.dw = conv_bn(c, c * e, k=1, act=act), conv_bn(c * e, c * e, groups=c * e, act=act)
        self.se = se(c * e) if se else nn.Identity()
        self.project = conv_bn(c * e, c, k=1, act=None)

    def forward(self, x):
        return x + self.project(self.se(self.dw(self.expand(x))))


class SE(nn.Module):
    """Squeeze-excitation: global pool, two 1x1 convs, gate (sigmoid or hard sigmoid) multiplied into the input."""
    def __init__(self, c, gate=nn.Sigmoid, act=nn.ReLU):
        super().__init__()
        self.f = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, c // 4, 1), act(), nn.Conv2d(c // 4, c, 1), gate())

    def forward(self, x):
        return x * self.f(x)


class MobileNet(nn.Module):
    def __init__(self, act=nn.ReLU6, se=None, head_act=nn.ReLU6):
        super().__init__()
        self.stem = conv_bn(3, 16, s=2, act=act)
        self.blocks = nn.Sequential(InvertedResidual(16, 4, act, se), InvertedResidual(16, 4, act, se))
        self.head = nn.Sequential(conv_bn(16, 64, k=1, act=head_act), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Dropout(0.2), nn.Linear(64, 10))

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


class GroupedDilated(nn.Module):
    """ResNeXt-style grouped conv, a dilated conv (DeepLab), AvgPool with ceil_mode and no padded zeros counted."""
    def __init__(self):
        super().__init__()
        self.a, self.g = conv_bn(3, 32), conv_bn(32, 32, groups=4)
        self.d = conv_bn(32, 32, dil=2)
        self.pool = nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False)
        self.out = nn.Conv2d(32, 8, 1)

    def forward(self, x):
        x = self.a(x)
        return self.out(self.pool(self.d(self.g(x) + x)))


class UNet(nn.Module):
    """Two levels down (MaxPool), up with ConvTranspose or Upsample, skip connections concatenated."""
    def __init__(self, up='convt', norm=nn.BatchNorm2d):
        super().__init__()
        def block(ci, co):
            return nn.Sequential(nn.Conv2d(ci, co, 3, 1, 1), norm(co), nn.ReLU())
        self.e1, self.e2, self.mid = block(3, 8), block(8, 16), block(16, 32)
        if up == 'convt':
            self.u2, self.u1 = nn.ConvTranspose2d(32, 16, 2, 2), nn.ConvTranspose2d(16, 8, 2, 2)
        else:
            mode, ac = up
            kw = {} if mode == 'nearest' else {'align_corners': ac}
            self.u2 = nn.Sequential(nn.Upsample(scale_factor=2, mode=mode, **kw), nn.Conv2d(32, 16, 1))
            self.u1 = nn.Sequential(nn.Upsample(scale_factor=2, mode=mode, **kw), nn.Conv2d(16, 8, 1))
        self.d2, self.d1, self.out = block(32, 16), block(16, 8), nn.Conv2d(8, 2, 1)

    def forward(self, x):
        s1 = self.e1(x)
        s2 = self.e2(F.max_pool2d(s1, 2))
        m = self.mid(F.max_pool2d(s2, 2))
        y = self.d2(torch.cat([self.u2(m), s2], 1))
        y = self.d1(torch.cat([self.u1(y), s1], 1))
        return torch.sigmoid(self.out(y))


class SuperRes(nn.Module):
    """ESPCN: convs, then PixelShuffle x3 to the output image."""
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(1, 32, 5, 1, 2), nn.Tanh(), nn.Conv2d(32, 16, 3, 1, 1), nn.Tanh(),
                               nn.Conv2d(16, 9, 3, 1, 1), nn.PixelShuffle(3))

    def forward(self, x):
        return self.f(x)


class NormNet(nn.Module):
    """Convs with GroupNorm or InstanceNorm (affine), SiLU, ConvTranspose with output_padding."""
    def __init__(self, kind):
        super().__init__()
        norm = (lambda c: nn.GroupNorm(4, c)) if kind == 'group' else (lambda c: nn.InstanceNorm2d(c, affine=True))
        self.f = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), norm(16), nn.SiLU(), nn.Conv2d(16, 16, 3, 1, 1), norm(16),
                               nn.SiLU(), nn.ConvTranspose2d(16, 8, 3, 2, 1, output_padding=1), nn.Tanh())

    def forward(self, x):
        return self.f(x)


class Activations(nn.Module):
    """Linear layers separated by each common activation, LayerNorm, LogSoftmax head."""
    def __init__(self):
        super().__init__()
        acts = [nn.GELU(), nn.SiLU(), nn.Mish(), nn.LeakyReLU(0.1), nn.PReLU(24), nn.ELU(), nn.Softplus(),
                nn.Hardswish(), nn.Hardsigmoid(), nn.Tanh()]
        self.layers = nn.ModuleList([nn.Linear(24, 24) for _ in acts])
        self.acts = nn.ModuleList(acts)
        self.norm, self.head = nn.LayerNorm(24), nn.Linear(24, 12)

    def forward(self, x):
        for lin, act in zip(self.layers, self.acts):
            x = act(lin(x))
        return torch.log_softmax(self.head(self.norm(x)), -1)


class Encoder(nn.Module):
    """Token embedding + learned positions, nn.TransformerEncoder (pre-norm, GELU) with a key padding mask,
    mean pool, classifier."""
    def __init__(self, vocab=100, d=32, seq=16, layers=2, mask=True):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.randn(1, seq, d) * 0.1)
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, activation='gelu', batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head, self.mask = nn.Linear(d, 5), mask

    def forward(self, tokens, pad=None):
        h = self.enc(self.emb(tokens) + self.pos, src_key_padding_mask=pad if self.mask else None)
        return self.head(h.mean(1))


class MHA(nn.Module):
    """nn.MultiheadAttention (self-attention, batch_first) with key_padding_mask, residual, LayerNorm."""
    def __init__(self, d=32):
        super().__init__()
        self.attn, self.norm = nn.MultiheadAttention(d, 4, batch_first=True), nn.LayerNorm(d)

    def forward(self, x, pad):
        y, _ = self.attn(x, x, x, key_padding_mask=pad, need_weights=False)
        return self.norm(x + y)


class Recurrent(nn.Module):
    """LSTM or GRU (optionally bidirectional, stacked) over features, then a Linear per step."""
    def __init__(self, cell, bidir, layers=1, batch_first=True):
        super().__init__()
        self.rnn = cell(20, 24, layers, batch_first=batch_first, bidirectional=bidir)
        self.out = nn.Linear(48 if bidir else 24, 6)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.out(y)


class Audio1d(nn.Module):
    """KWS-style: Conv1d/BN/ReLU stack with strides and a dilated layer, MaxPool1d, global avg pool, LogSoftmax."""
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv1d(1, 16, 80, 4, 38), nn.BatchNorm1d(16), nn.ReLU(), nn.MaxPool1d(4),
                               nn.Conv1d(16, 32, 3, 1, 2, dilation=2), nn.BatchNorm1d(32), nn.ReLU(),
                               nn.Conv1d(32, 32, 3, 1, 1, groups=32), nn.ReLU(), nn.AdaptiveAvgPool1d(1))
        self.fc = nn.Linear(32, 8)

    def forward(self, x):
        return F.log_softmax(self.fc(self.f(x).squeeze(-1)), -1)


class EinsumAttention(nn.Module):
    """Multi-head attention written with einsum (as many research exports are)."""
    def __init__(self, d=32, h=4):
        super().__init__()
        self.qkv, self.o, self.h = nn.Linear(d, 3 * d), nn.Linear(d, d), h

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        a = torch.softmax(torch.einsum('bhqd,bhkd->bhqk', q, k) * (d // self.h) ** -0.5, -1)
        return self.o(torch.einsum('bhqk,bhkd->bqhd', a, v).reshape(b, n, d))


class Pools(nn.Module):
    """MaxPool with padding and dilation, AvgPool ceil_mode, global max pool, adaptive avg pool to 2x2."""
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 8, 3, 1, 1), nn.Conv2d(8, 8, 3, 1, 1)

    def forward(self, x):
        a = F.max_pool2d(F.relu(self.c1(x)), 3, 2, 1, dilation=1)
        b = F.avg_pool2d(self.c2(a), 2, 2, ceil_mode=True)
        g = F.adaptive_max_pool2d(b, 1).flatten(1)
        p = F.adaptive_avg_pool2d(F.max_pool2d(b, 3, 1, 1), 2).flatten(1)
        return torch.cat([g, p], 1)


class ShuffleNet(nn.Module):
    """ShuffleNet channel shuffle (Reshape, Transpose, Reshape), split into branches, Concat."""
    def __init__(self):
        super().__init__()
        self.stem = conv_bn(3, 16, s=2)
        self.branch = nn.Sequential(conv_bn(8, 8, k=1), conv_bn(8, 8, groups=8, act=None), conv_bn(8, 8, k=1))

    def forward(self, x):
        x = self.stem(x)
        a, b = x.chunk(2, 1)
        x = torch.cat([a, self.branch(b)], 1)
        n, c, h, w = x.shape
        return x.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)


class FullyConv(nn.Module):
    """A segmentation net with dynamic H and W: bilinear resize of the logits back to the input size."""
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(conv_bn(3, 16, s=2), conv_bn(16, 16, s=2), nn.Conv2d(16, 4, 1))

    def forward(self, x):
        return torch.softmax(F.interpolate(self.f(x), size=x.shape[2:], mode='bilinear', align_corners=False), 1)


class Yolo(nn.Module):
    """An anchor-free detection head: two scales, Sigmoid, grid offsets, stride Mul, Reshape/Transpose/Concat of the
    scales, then three outputs: boxes (pixels), best score and class id (int64 ArgMax)."""
    def __init__(self):
        super().__init__()
        self.s1, self.s2 = conv_bn(3, 16, s=2, act=nn.SiLU), conv_bn(16, 32, s=2, act=nn.SiLU)
        self.h1, self.h2 = nn.Conv2d(16, 4 + 3, 1), nn.Conv2d(32, 4 + 3, 1)

    def level(self, f, head, stride):
        p = head(f)
        n, c, h, w = p.shape
        gy, gx = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing='ij')
        xy = (torch.sigmoid(p[:, :2]) + torch.stack([gx, gy])) * stride
        wh = torch.exp(p[:, 2:4].clamp(max=4.0)) * stride
        return torch.cat([xy, wh, torch.sigmoid(p[:, 4:])], 1).reshape(n, c, -1).transpose(1, 2)

    def forward(self, x):
        a = self.s1(x)
        b = self.s2(a)
        d = torch.cat([self.level(a, self.h1, 2), self.level(b, self.h2, 4)], 1)
        score, cls = d[..., 4:].max(-1)
        return d[..., :4], score, cls


class Misc(nn.Module):
    """Ops of export glue: reflection and replicate padding, asymmetric padding for an even kernel, non-integer
    bicubic resize, flip, cumsum, F.normalize (ReduceL2), TopK, Where, Expand, Tile, Split with sizes."""
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3)
        self.c2 = nn.Conv2d(8, 8, 4)

    def forward(self, x):
        x = self.c1(F.pad(x, (1, 1, 1, 1), mode='reflect'))
        x = self.c2(F.pad(x, (2, 1, 1, 2), mode='replicate'))
        x = F.interpolate(x, scale_factor=1.5, mode='bicubic', align_corners=False)
        x = x + torch.flip(x, [3])
        v = F.normalize(x.flatten(2).mean(-1), dim=1)
        a, b = torch.split(x.flatten(2), [100, x.shape[2] * x.shape[3] - 100], 2)
        c = torch.cumsum(a, 2)
        top, _ = torch.topk(b.mean(1), 5, dim=1)
        w = torch.where(c > 0, c, 0.1 * c).mean(1)
        return torch.cat([v, top, w[:, :10], v.unsqueeze(1).expand(-1, 2, -1).reshape(v.shape[0], -1),
                          top.repeat(1, 2)], 1)


class StatefulLSTM(nn.Module):
    """A streaming LSTM as deployed: state h0, c0 are inputs and the new state is an output."""
    def __init__(self):
        super().__init__()
        self.rnn, self.out = nn.LSTM(20, 24, batch_first=True), nn.Linear(24, 2)

    def forward(self, x, h0, c0):
        y, (h, c) = self.rnn(x, (h0, c0))
        return torch.sigmoid(self.out(y)), h, c


class RMSNormMLP(nn.Module):
    """Llama-style block without attention: RMSNorm written out (Pow, ReduceMean, Sqrt, Reciprocal), SwiGLU."""
    def __init__(self, d=32):
        super().__init__()
        self.g, self.w1, self.w2, self.w3 = nn.Parameter(torch.ones(d)), nn.Linear(d, 64, False), \
            nn.Linear(64, d, False), nn.Linear(d, 64, False)

    def forward(self, x):
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.g
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Decoder1d(nn.Module):
    """Audio decoder: ConvTranspose1d upsampling with groups and dilation, LeakyReLU, Tanh waveform."""
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv1d(16, 32, 7, 1, 3), nn.LeakyReLU(0.2),
                               nn.ConvTranspose1d(32, 16, 8, 4, 2), nn.LeakyReLU(0.2),
                               nn.ConvTranspose1d(16, 8, 4, 2, 1, groups=2, dilation=1), nn.LeakyReLU(0.2),
                               nn.Conv1d(8, 1, 7, 1, 6, dilation=2), nn.Tanh())

    def forward(self, x):
        return self.f(x)


class BNUnfolded(nn.Module):
    """Linear -> BatchNorm1d on 2-D (kept as BatchNormalization), Hardtanh, Dropout, Linear, Softmax on axis 1 of a
    4-D tensor (opset 11's Softmax flattens from the axis)."""
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(24, 32), nn.BatchNorm1d(32), nn.Hardtanh(-2, 2), nn.Dropout(0.1),
                               nn.Linear(32, 4 * 3 * 3))

    def forward(self, x):
        return torch.softmax(self.f(x).reshape(-1, 4, 3, 3), 1)


class TinyGPT(nn.Module):
    """Causal LM: token + position embeddings, causal mask filled with -inf (masked_fill), pre-norm attention and
    GELU MLP, output projection tied to the token embedding (one initializer read by Gather and by MatMul)."""
    def __init__(self, vocab=64, d=32, seq=12):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.ln1, self.ln2, self.lnf = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.register_buffer('causal', torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1))

    def forward(self, tokens):
        b, n = tokens.shape
        h = self.emb(tokens) + self.pos(torch.arange(n))
        q, k, v = self.qkv(self.ln1(h)).reshape(b, n, 3, 4, -1).permute(2, 0, 3, 1, 4)
        a = (q @ k.transpose(-1, -2)) * 0.35
        a = torch.softmax(a.masked_fill(self.causal[:n, :n], float('-inf')), -1)
        h = h + self.proj((a @ v).transpose(1, 2).reshape(b, n, -1))
        h = h + self.mlp(self.ln2(h))
        return torch.log_softmax(self.lnf(h) @ self.emb.weight.t(), -1)


class Siamese(nn.Module):
    """One conv tower applied to two inputs (shared initializers), cosine similarity and the embeddings out."""
    def __init__(self):
        super().__init__()
        self.tower = nn.Sequential(conv_bn(3, 16, s=2), conv_bn(16, 16, s=2), nn.AdaptiveAvgPool2d(1), nn.Flatten())

    def forward(self, a, b):
        ea, eb = self.tower(a), self.tower(b)
        return F.cosine_similarity(ea, eb, dim=1), ea


class Video3d(nn.Module):
    """Conv3d, BatchNorm3d, MaxPool3d, GLU gate over channels, ReLU6 as clamp (Clip), global average pool."""
    def __init__(self):
        super().__init__()
        self.c1, self.bn, self.c2 = nn.Conv3d(3, 8, 3, 1, 1), nn.BatchNorm3d(8), nn.Conv3d(8, 16, (1, 3, 3), 1, (0, 1, 1))
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = F.max_pool3d(F.relu(self.bn(self.c1(x))), 2)
        x = torch.clamp(F.glu(self.c2(x), 1), 0, 6)
        return self.fc(x.mean((2, 3, 4)))


class Upsample1d(nn.Module):
    """Audio upsampling by nearest and linear Resize on 3-D tensors; the input is also passed to an output."""
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv1d(4, 8, 3, 1, 1), nn.Conv1d(8, 4, 3, 1, 1)

    def forward(self, x):
        y = F.interpolate(F.relu(self.c1(x)), scale_factor=2, mode='nearest')
        y = F.interpolate(self.c2(y), scale_factor=2, mode='linear', align_corners=False)
        return y, x


class FlowWarp(nn.Module):
    """Optical-flow style warping: a conv predicts a flow field, added to the identity grid, F.grid_sample
    (GridSample, opset 16) warps the input features, convs refine."""
    def __init__(self, mode='bilinear', padding='border'):
        super().__init__()
        self.mode, self.padding = mode, padding
        self.enc, self.flow = conv_bn(3, 8), nn.Conv2d(8, 2, 3, 1, 1)
        self.out = nn.Sequential(conv_bn(8, 8), nn.Conv2d(8, 3, 1))

    def forward(self, x):
        f = self.enc(x)
        n, _, h, w = f.shape
        gy, gx = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing='ij')
        base = torch.stack([gx, gy], -1)[None]
        grid = base + 0.2 * torch.tanh(self.flow(f)).permute(0, 2, 3, 1)
        return self.out(F.grid_sample(f, grid, mode=self.mode, padding_mode=self.padding, align_corners=False))


class _NMS(torch.autograd.Function):
    """ONNX NonMaxSuppression as torchvision exports it (torchvision is not installed here): forward gives a
    placeholder of the output's rank for tracing; the exported node is the ONNX op."""
    @staticmethod
    def forward(ctx, boxes, scores):
        return torch.zeros(1, 3, dtype=torch.int64)

    @staticmethod
    def symbolic(g, boxes, scores):
        k = g.op('Constant', value_t=torch.tensor([20], dtype=torch.int64))
        iou = g.op('Constant', value_t=torch.tensor([0.5], dtype=torch.float32))
        thr = g.op('Constant', value_t=torch.tensor([0.3], dtype=torch.float32))
        return g.op('NonMaxSuppression', boxes, scores, k, iou, thr)


class _RoiAlign(torch.autograd.Function):
    """ONNX RoiAlign (opset 16, half_pixel) as torchvision.ops.roi_align exports it, 4x4 bins, 2x2 samples."""
    @staticmethod
    def forward(ctx, x, rois, batch_indices):
        return torch.zeros(rois.shape[0], x.shape[1], 4, 4)

    @staticmethod
    def symbolic(g, x, rois, batch_indices):
        return g.op('RoiAlign', x, rois, batch_indices, output_height_i=4, output_width_i=4, sampling_ratio_i=2,
                    spatial_scale_f=0.5, mode_s='avg', coordinate_transformation_mode_s='half_pixel')


class DetectorNMS(nn.Module):
    """A single-stage detector with NMS in the graph: per-location boxes (x1 y1 x2 y2 from sigmoid offsets) and
    class scores, NonMaxSuppression, the kept boxes and scores gathered by its indices. Outputs: all boxes, all
    scores and the int64 selection (which must never get Q/DQ)."""
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(conv_bn(3, 16, s=2), conv_bn(16, 16, s=2))
        self.box, self.cls = nn.Conv2d(16, 4, 1), nn.Conv2d(16, 3, 1)

    def forward(self, x):
        f = self.f(x)
        n, _, h, w = f.shape
        gy, gx = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32),
                                indexing='ij')
        centre = torch.stack([gy, gx, gy, gx])[None] * 4 + 2
        d = torch.sigmoid(self.box(f)) * 12
        boxes = (centre + torch.cat([-d[:, :2], d[:, 2:]], 1)).reshape(n, 4, -1).transpose(1, 2)
        scores = torch.sigmoid(self.cls(f)).reshape(n, 3, -1)
        return boxes, scores, _NMS.apply(boxes, scores)


class TwoStageRoi(nn.Module):
    """The second stage of a two-stage detector (Faster/Mask R-CNN): fixed proposals per image pooled from a
    stride-2 feature map with RoiAlign, a conv and a Linear head per ROI."""
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(conv_bn(3, 8), conv_bn(8, 16, s=2))
        self.head = nn.Sequential(conv_bn(16, 16), nn.Flatten(), nn.Linear(16 * 16, 5))
        self.register_buffer('proposals', torch.tensor([[0, 0, 16, 16], [4, 6, 28, 20], [10, 2, 31, 31],
                                                        [2.5, 3.5, 9.5, 30.0]]))

    def forward(self, x):
        f = self.f(x)
        n, k = f.shape[0], self.proposals.shape[0]
        bi = (torch.arange(n)[:, None] * torch.ones(1, k, dtype=torch.int64)).reshape(-1)
        rois = self.proposals.repeat(n, 1)
        return self.head(_RoiAlign.apply(f, rois, bi)).reshape(n, k, 5)


def onnx_norm_embedding(opset):
    """Built with onnx.helper (torch 1.13 exports up to opset 17): Conv, GroupNormalization (opset 18: scale per
    group; 21: per channel), SiLU, Conv, MeanVarianceNormalization, global pool, Gemm, and an L2-normalised
    embedding (LpNormalization), as face/speaker embedding and diffusion exports carry them."""
    import onnx
    from onnx import helper, numpy_helper, TensorProto
    rng = np.random.default_rng(0)

    def t(name, *shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)
    g = 4 if opset < 21 else 16
    inits = [t('w1', 16, 3, 3, 3), t('b1', 16), t('gs', g, scale=0.2), t('gb', g, scale=0.2), t('w2', 16, 16, 3, 3),
             t('b2', 16), t('wf', 32, 16), t('bf', 32)]
    inits[2].CopyFrom(numpy_helper.from_array(1 + numpy_helper.to_array(inits[2]), 'gs'))
    nodes = [helper.make_node('Conv', ['x', 'w1', 'b1'], ['c1'], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node('GroupNormalization', ['c1', 'gs', 'gb'], ['gn'], num_groups=4, epsilon=1e-5),
             helper.make_node('Sigmoid', ['gn'], ['sg']), helper.make_node('Mul', ['gn', 'sg'], ['a1']),
             helper.make_node('Conv', ['a1', 'w2', 'b2'], ['c2'], pads=[1, 1, 1, 1]),
             helper.make_node('MeanVarianceNormalization', ['c2'], ['mv'], axes=[2, 3]),
             helper.make_node('Relu', ['mv'], ['r2']), helper.make_node('GlobalAveragePool', ['r2'], ['gp']),
             helper.make_node('Flatten', ['gp'], ['fl']),
             helper.make_node('Gemm', ['fl', 'wf', 'bf'], ['emb'], transB=1),
             helper.make_node('LpNormalization', ['emb'], ['y'], axis=1, p=2)]
    graph = helper.make_graph(nodes, 'norm_embedding', [helper.make_tensor_value_info('x', TensorProto.FLOAT,
                                                                                      ['B', 3, 24, 24])],
                              [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['B', 32])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid('', opset)])
    m.ir_version = 8  # no onnx.checker: the installed onnx (1.12) predates GroupNormalization
    return m


def onnx_logmel_classifier(opset):
    """Built with onnx.helper (torch 1.13 has no STFT export): an audio front-end as deployed keyword spotters and
    speech encoders carry it — HannWindow, STFT (400-sample frames, hop 160), power spectrum, MatMul with a
    MelWeightMatrix (40 bands), Log, then Conv1d / Relu / global pool / Gemm."""
    from onnx import helper, numpy_helper, TensorProto
    rng = np.random.default_rng(0)

    def t(name, *shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    def c(name, v, dt=np.int64):
        return numpy_helper.from_array(np.array(v, dt), name)
    inits = [c('n_fft', 400), c('hop', 160), c('mels', 40), c('rate', 16000), c('lo', 20.0, np.float32),
             c('hi', 7600.0, np.float32), c('eps', 1e-6, np.float32), c('last', [-1]), t('w1', 32, 40, 3),
             t('b1', 32), t('wf', 10, 32), t('bf', 10)]
    nodes = [helper.make_node('HannWindow', ['n_fft'], ['win']),
             helper.make_node('STFT', ['x', 'hop', 'win', 'n_fft'], ['spec']),
             helper.make_node('Mul', ['spec', 'spec'], ['sq']),
             helper.make_node('ReduceSum', ['sq', 'last'], ['power'], keepdims=0),
             helper.make_node('MelWeightMatrix', ['mels', 'n_fft', 'rate', 'lo', 'hi'], ['melw']),
             helper.make_node('MatMul', ['power', 'melw'], ['mel']),
             helper.make_node('Add', ['mel', 'eps'], ['mel_eps']), helper.make_node('Log', ['mel_eps'], ['logmel']),
             helper.make_node('Transpose', ['logmel'], ['feat'], perm=[0, 2, 1]),
             helper.make_node('Conv', ['feat', 'w1', 'b1'], ['c1'], pads=[1, 1]),
             helper.make_node('Relu', ['c1'], ['r1']), helper.make_node('GlobalAveragePool', ['r1'], ['gp']),
             helper.make_node('Flatten', ['gp'], ['fl']), helper.make_node('Gemm', ['fl', 'wf', 'bf'], ['y'], transB=1)]
    graph = helper.make_graph(nodes, 'logmel', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['B', 4000, 1])],
                              [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['B', 10])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid('', opset)])
    m.ir_version = 8
    return m


def onnx_split_sequence_convnet(opset):
    """Built with onnx.helper in the form torch.jit.script exports list code (torch.split into a list, a for loop
    appending to another, torch.cat; torch.unbind and torch.stack): Conv, then the channels split into a sequence
    (SplitToSequence), a Loop over it whose body applies a shared Conv to each part and appends it (SequenceAt,
    SequenceInsert: a Loop-carried sequence), ConcatFromSequence back to a tensor, an unbind/stack round trip
    (SplitToSequence keepdims 0, ConcatFromSequence new_axis 1), a residual Add, a 1x1 Conv, global pool and Gemm.
    Activations pass through sequences between quantized Convs: none of them may get Q/DQ."""
    from onnx import helper, numpy_helper, TensorProto
    rng = np.random.default_rng(0)

    def t(name, *shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)
    inits = [t('w1', 16, 3, 3, 3), t('b1', 16), t('wb', 4, 4, 3, 3), t('bb', 4), t('w2', 32, 16, 1, 1), t('b2', 32),
             t('wf', 10, 32), t('bf', 10), numpy_helper.from_array(np.array(4, np.int64), 'four')]
    seq = helper.make_tensor_sequence_value_info
    body = helper.make_graph(
        [helper.make_node('SequenceAt', ['parts', 'i'], ['part']),
         helper.make_node('Conv', ['part', 'wb', 'bb'], ['part_conv'], pads=[1, 1, 1, 1]),
         helper.make_node('Relu', ['part_conv'], ['part_act']),
         helper.make_node('SequenceInsert', ['acc', 'part_act'], ['acc_next']),
         helper.make_node('Identity', ['cond'], ['cond_next'])],
        'per_part', [helper.make_tensor_value_info('i', TensorProto.INT64, []),
                     helper.make_tensor_value_info('cond', TensorProto.BOOL, []), seq('acc', TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info('cond_next', TensorProto.BOOL, []), seq('acc_next', TensorProto.FLOAT, None)])
    nodes = [helper.make_node('Conv', ['x', 'w1', 'b1'], ['c1'], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node('Relu', ['c1'], ['r1']),
             helper.make_node('SplitToSequence', ['r1', 'four'], ['parts'], axis=1),
             helper.make_node('SequenceLength', ['parts'], ['n']),
             helper.make_node('SequenceEmpty', [], ['empty']),
             helper.make_node('Loop', ['n', '', 'empty'], ['done'], body=body),
             helper.make_node('ConcatFromSequence', ['done'], ['cat'], axis=1),
             helper.make_node('SplitToSequence', ['cat'], ['channels'], axis=1, keepdims=0),
             helper.make_node('ConcatFromSequence', ['channels'], ['stacked'], axis=1, new_axis=1),
             helper.make_node('Add', ['stacked', 'r1'], ['res']),
             helper.make_node('Conv', ['res', 'w2', 'b2'], ['c2']), helper.make_node('Relu', ['c2'], ['r2']),
             helper.make_node('GlobalAveragePool', ['r2'], ['gp']), helper.make_node('Flatten', ['gp'], ['fl']),
             helper.make_node('Gemm', ['fl', 'wf', 'bf'], ['y'], transB=1)]
    graph = helper.make_graph(nodes, 'split_sequence', [helper.make_tensor_value_info('x', TensorProto.FLOAT,
                                                                                      ['B', 3, 24, 24])],
                              [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['B', 10])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid('', opset)])
    m.ir_version = 8
    return m


def trained_norm_gains(model, outliers=2, magnitude=12.0):
    """Norm gains as trained transformers have them: near 1, with a few channels an order of magnitude larger (the
    outlier features of LLM.int8 / SmoothQuant, which a per-tensor activation scale must cover), small biases."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.LayerNorm, LayerNorm2d, T5RMSNorm)):
                w = m.weight
                w.copy_(1 + 0.1 * torch.randn_like(w))
                w[torch.randperm(w.numel())[:outliers]] = magnitude * (1 + torch.rand(outliers))
                if getattr(m, 'bias', None) is not None:
                    m.bias.copy_(0.05 * torch.randn_like(m.bias))


class YoloV8(nn.Module):
    """YOLOv8's detection head as ultralytics exports it: per stride (8, 16, 32) a box branch (4 sides x 16 DFL bins)
    and a class branch, flattened and concatenated over the levels; DFL = Softmax over the 16 bins of each side, then
    a fixed 1x1 Conv with weights 0..15 (the expected distance); dist2bbox against the anchor points (xywh), times
    the stride; class Sigmoid; one output [B, 4 + nc, anchors]: box coordinates in pixels beside probabilities.
    Trained statistics: box logits spread over several units (peaked bin distributions), class logits spread around
    a bias at the prior log(p / (1 - p)), p = 0.01 (most anchors are background, a few score high)."""
    def __init__(self, nc=6, reg=16, size=64):
        super().__init__()
        self.nc, self.reg = nc, reg
        self.stem = conv_bn(3, 16, s=2, act=nn.SiLU)
        self.down = nn.ModuleList([nn.Sequential(conv_bn(16, 24, s=2, act=nn.SiLU), conv_bn(24, 24, s=2, act=nn.SiLU)),
                                   conv_bn(24, 32, s=2, act=nn.SiLU), conv_bn(32, 32, s=2, act=nn.SiLU)])
        chans = (24, 32, 32)
        self.box = nn.ModuleList([nn.Sequential(conv_bn(c, 32, act=nn.SiLU), nn.Conv2d(32, 4 * reg, 1)) for c in chans])
        self.cls = nn.ModuleList([nn.Sequential(conv_bn(c, 32, act=nn.SiLU), nn.Conv2d(32, nc, 1)) for c in chans])
        self.dfl = nn.Conv2d(reg, 1, 1, bias=False)
        anchors, strides = [], []
        for s in (8, 16, 32):
            n = size // s
            gy, gx = torch.meshgrid(torch.arange(n) + 0.5, torch.arange(n) + 0.5, indexing='ij')
            anchors.append(torch.stack([gx, gy]).reshape(2, -1))
            strides.append(torch.full((1, n * n), float(s)))
        self.register_buffer('anchors', torch.cat(anchors, 1))
        self.register_buffer('strides', torch.cat(strides, 1))
        with torch.no_grad():
            self.dfl.weight.copy_(torch.arange(reg, dtype=torch.float32).view(1, reg, 1, 1))
            for b, c in zip(self.box, self.cls):
                b[-1].weight.mul_(24.0)  # bin logits several units apart
                c[-1].weight.mul_(8.0)  # a few anchors score high
                c[-1].bias.fill_(-math.log(99.0))

    def forward(self, x):
        f, levels = self.stem(x), []
        for down, box, cls in zip(self.down, self.box, self.cls):
            f = down(f)
            levels.append(torch.cat([box(f), cls(f)], 1).flatten(2))
        box, cls = torch.cat(levels, 2).split((4 * self.reg, self.nc), 1)
        b, _, a = box.shape
        dist = self.dfl(box.view(b, 4, self.reg, a).transpose(2, 1).softmax(1)).view(b, 4, a)
        lt, rb = dist.chunk(2, 1)
        x1y1, x2y2 = self.anchors - lt, self.anchors + rb
        boxes = torch.cat([(x1y1 + x2y2) / 2, x2y2 - x1y1], 1) * self.strides
        return torch.cat([boxes, cls.sigmoid()], 1)


class LayerNorm2d(nn.Module):
    """ConvNeXt's channels-first LayerNorm written out: mean and variance over C, then a per-channel affine."""
    def __init__(self, c, eps=1e-6):
        super().__init__()
        self.weight, self.bias, self.eps = nn.Parameter(torch.ones(c)), nn.Parameter(torch.zeros(c)), eps

    def forward(self, x):
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        return self.weight[:, None, None] * ((x - u) / torch.sqrt(s + self.eps)) + self.bias[:, None, None]


class ConvNeXtBlock(nn.Module):
    """7x7 depthwise conv, permute to channels-last, LayerNorm, Linear 4x, GELU, Linear, layer scale (a learned
    per-channel gamma, initialised at 1e-6), permute back, residual (drop path is the identity at inference)."""
    def __init__(self, c):
        super().__init__()
        self.dw, self.norm = nn.Conv2d(c, c, 7, 1, 3, groups=c), nn.LayerNorm(c, eps=1e-6)
        self.pw1, self.pw2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        # Trained layer scales: channels the block learned nothing for stay near the 1e-6 init, the others grew to
        # 1e-3..1 (either sign): a per-channel factor spanning six decades.
        mag = 10 ** torch.empty(c).uniform_(-3, 0)
        mag[torch.randperm(c)[:c // 4]] = 1e-6
        self.gamma = nn.Parameter(mag * torch.sign(torch.randn(c)))

    def forward(self, x):
        y = self.pw2(F.gelu(self.pw1(self.norm(self.dw(x).permute(0, 2, 3, 1)))))
        return x + (self.gamma * y).permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    """Patchify stem (4x4 stride 4) + channels-first LayerNorm, two blocks, downsample (channels-first LayerNorm, 2x2
    stride-2 conv), a block, global average pool, LayerNorm, Linear."""
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 4, 4), LayerNorm2d(32))
        self.s1 = nn.Sequential(ConvNeXtBlock(32), ConvNeXtBlock(32))
        self.down = nn.Sequential(LayerNorm2d(32), nn.Conv2d(32, 64, 2, 2))
        self.s2 = ConvNeXtBlock(64)
        self.norm, self.head = nn.LayerNorm(64, eps=1e-6), nn.Linear(64, 10)
        trained_norm_gains(self)

    def forward(self, x):
        x = self.s2(self.down(self.s1(self.stem(x))))
        return self.head(self.norm(x.mean((2, 3))))


class MBConv(nn.Module):
    """EfficientNet's MBConv: 1x1 expand (x6), BN, SiLU, depthwise kxk, BN, SiLU, squeeze-excite sized by the block's
    input channels (SiLU inside, Sigmoid gate), 1x1 project, BN, residual when shapes allow (drop path: identity)."""
    def __init__(self, cin, cout, k=3, s=1, e=6):
        super().__init__()
        c, r = cin * e, max(1, cin // 4)
        self.expand = conv_bn(cin, c, k=1, act=nn.SiLU) if e != 1 else nn.Identity()
        self.dw = conv_bn(c, c, k=k, s=s, groups=c, act=nn.SiLU)
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, r, 1), nn.SiLU(), nn.Conv2d(r, c, 1), nn.Sigmoid())
        self.project = conv_bn(c, cout, k=1, act=None)
        self.residual = s == 1 and cin == cout

    def forward(self, x):
        y = self.dw(self.expand(x))
        y = self.project(y * self.se(y))
        return x + y if self.residual else y


class EfficientNet(nn.Module):
    """EfficientNet-B0's first stages: stem, a depthwise MBConv without expansion, a strided MBConv x6, a residual
    5x5 MBConv, 1x1 head conv, pool, Linear."""
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(conv_bn(3, 16, s=2, act=nn.SiLU), MBConv(16, 16, e=1), MBConv(16, 24, s=2),
                               MBConv(24, 24, k=5), conv_bn(24, 96, k=1, act=nn.SiLU), nn.AdaptiveAvgPool2d(1),
                               nn.Flatten(), nn.Linear(96, 10))

    def forward(self, x):
        return self.f(x)


class SwinBlock(nn.Module):
    """Swin window attention: (shifted by torch.roll) window partition by Reshape/Transpose, relative position bias
    gathered from a table by an index buffer, the shifted windows' mask (-100 between regions), pre-norm MLP."""
    def __init__(self, d=32, heads=2, ws=4, shift=0, res=8):
        super().__init__()
        self.heads, self.ws, self.shift = heads, ws, shift
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.table = nn.Parameter(torch.randn((2 * ws - 1) ** 2, heads) * 2.0)  # trained biases: several units
        c = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing='ij')).flatten(1)
        rel = (c[:, :, None] - c[:, None, :]).permute(1, 2, 0) + ws - 1
        self.register_buffer('index', rel[..., 0] * (2 * ws - 1) + rel[..., 1])
        if shift:
            img = torch.zeros(1, res, res, 1)
            cnt = 0
            for hs in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
                for wsl in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
                    img[:, hs, wsl, :] = cnt
                    cnt += 1
            mw = self.partition(img).squeeze(-1)
            m = mw[:, None, :] - mw[:, :, None]
            self.register_buffer('mask', m.masked_fill(m != 0, -100.0).masked_fill(m == 0, 0.0))

    def partition(self, x):
        b, h, w, c = x.shape
        ws = self.ws
        return x.view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, c)

    def forward(self, x):
        b, h, w, c = x.shape
        ws, s, nh = self.ws, self.shift, self.heads
        y = self.norm1(x)
        if s:
            y = torch.roll(y, (-s, -s), (1, 2))
        win = self.partition(y)
        bw, n, _ = win.shape
        q, k, v = self.qkv(win).reshape(bw, n, 3, nh, c // nh).permute(2, 0, 3, 1, 4)
        a = (q * (c // nh) ** -0.5) @ k.transpose(-2, -1)
        a = a + self.table[self.index.view(-1)].view(n, n, nh).permute(2, 0, 1).unsqueeze(0)
        if s:
            nw = self.mask.shape[0]
            a = (a.view(-1, nw, nh, n, n) + self.mask.unsqueeze(1).unsqueeze(0)).view(-1, nh, n, n)
        o = self.proj((a.softmax(-1) @ v).transpose(1, 2).reshape(bw, n, c))
        o = o.view(b, h // ws, w // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)
        if s:
            o = torch.roll(o, (s, s), (1, 2))
        x = x + o
        return x + self.mlp(self.norm2(x))


class Swin(nn.Module):
    """Patch embedding (4x4 stride 4, channels-last, LayerNorm), a window block and a shifted-window block on an 8x8
    grid (windows of 4), LayerNorm, mean pool, Linear."""
    def __init__(self):
        super().__init__()
        self.embed, self.norm0 = nn.Conv2d(3, 32, 4, 4), nn.LayerNorm(32)
        self.blocks = nn.Sequential(SwinBlock(shift=0), SwinBlock(shift=2))
        self.norm, self.head = nn.LayerNorm(32), nn.Linear(32, 10)
        trained_norm_gains(self)

    def forward(self, x):
        x = self.blocks(self.norm0(self.embed(x).permute(0, 2, 3, 1)))
        return self.head(self.norm(x).mean((1, 2)))


class T5RMSNorm(nn.Module):
    """T5's LayerNorm: no mean subtraction, no bias."""
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


class T5Encoder(nn.Module):
    """T5 encoder as Hugging Face writes it: RMSNorm, unscaled attention plus a relative position bias whose buckets
    are computed at run time from the sequence length (abs, log, Cast, min, where; exact below 8, logarithmic to
    128), ReLU FFN, final RMSNorm; a BERT pooler (Linear + Tanh on the first token) beside the sequence output."""
    def __init__(self, vocab=100, d=32, heads=4, ff=64, layers=2, buckets=32, max_distance=128):
        super().__init__()
        self.heads, self.buckets, self.max_distance = heads, buckets, max_distance
        self.emb, self.rel = nn.Embedding(vocab, d), nn.Embedding(buckets, heads)
        self.layers = nn.ModuleList([nn.ModuleDict({
            'ln1': T5RMSNorm(d), 'q': nn.Linear(d, d, False), 'k': nn.Linear(d, d, False),
            'v': nn.Linear(d, d, False), 'o': nn.Linear(d, d, False), 'ln2': T5RMSNorm(d),
            'wi': nn.Linear(d, ff, False), 'wo': nn.Linear(ff, d, False)}) for _ in range(layers)])
        self.norm, self.pool = T5RMSNorm(d), nn.Linear(d, d)
        with torch.no_grad():
            self.emb.weight.mul_(4.0)  # T5 embeddings are large (no scaling before the first RMSNorm)
            self.rel.weight.mul_(3.0)  # trained position biases: several units
        trained_norm_gains(self)

    def bucket(self, n):
        pos = torch.arange(n)
        rp = pos[None, :] - pos[:, None]
        nb = self.buckets // 2
        out = (rp > 0).long() * nb
        rp = rp.abs()
        exact = nb // 2
        large = exact + (torch.log(rp.float() / exact) / math.log(self.max_distance / exact) * (nb - exact)).long()
        large = torch.min(large, torch.full_like(large, nb - 1))
        return out + torch.where(rp < exact, rp, large)

    def forward(self, tokens):
        b, n = tokens.shape
        nh = self.heads
        bias = self.rel(self.bucket(n)).permute(2, 0, 1).unsqueeze(0)
        h = self.emb(tokens)
        for L in self.layers:
            y = L['ln1'](h)
            q, k, v = (L[m](y).view(b, n, nh, -1).transpose(1, 2) for m in 'qkv')
            a = torch.softmax(q @ k.transpose(-1, -2) + bias, -1)
            h = h + L['o']((a @ v).transpose(1, 2).reshape(b, n, -1))
            h = h + L['wo'](F.relu(L['wi'](L['ln2'](h))))
        h = self.norm(h)
        return torch.tanh(self.pool(h[:, 0])), h


class CLIPText(nn.Module):
    """CLIP's text tower as Hugging Face exports it: token + learned position embeddings, causal mask filled with the
    float32 minimum, pre-norm attention, quick_gelu MLP (x * sigmoid(1.702 x)), final LayerNorm, pooling at the EOT
    token (the largest id: ArgMax of the ids cast to int32, then a Gather per row), text projection."""
    def __init__(self, vocab=64, d=32, heads=4, seq=12, layers=2):
        super().__init__()
        self.heads = heads
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.randn(seq, d) * 0.1)
        self.layers = nn.ModuleList([nn.ModuleDict({
            'ln1': nn.LayerNorm(d), 'q': nn.Linear(d, d), 'k': nn.Linear(d, d), 'v': nn.Linear(d, d),
            'o': nn.Linear(d, d), 'ln2': nn.LayerNorm(d), 'fc1': nn.Linear(d, 4 * d), 'fc2': nn.Linear(4 * d, d)})
            for _ in range(layers)])
        self.norm, self.proj = nn.LayerNorm(d), nn.Linear(d, 16, bias=False)
        self.register_buffer('causal', torch.full((seq, seq), torch.finfo(torch.float32).min).triu(1))
        trained_norm_gains(self)

    def forward(self, tokens):
        b, n = tokens.shape
        nh = self.heads
        h = self.tok(tokens) + self.pos[:n]
        for L in self.layers:
            y = L['ln1'](h)
            q, k, v = (L[m](y).view(b, n, nh, -1).transpose(1, 2) for m in 'qkv')
            a = torch.softmax((q * (q.shape[-1] ** -0.5)) @ k.transpose(-1, -2) + self.causal[:n, :n], -1)
            h = h + L['o']((a @ v).transpose(1, 2).reshape(b, n, -1))
            y = L['fc1'](L['ln2'](h))
            h = h + L['fc2'](y * torch.sigmoid(1.702 * y))
        h = self.norm(h)
        return self.proj(h[torch.arange(b), tokens.to(torch.int32).argmax(-1)])


def sinusoids(length, channels, max_timescale=10000):
    inc = math.log(max_timescale) / (channels // 2 - 1)
    t = torch.arange(length)[:, None] * torch.exp(-inc * torch.arange(channels // 2))[None, :]
    return torch.cat([torch.sin(t), torch.cos(t)], 1)


class WhisperEncoder(nn.Module):
    """Whisper's audio encoder: log-mel frames, Conv1d + GELU, Conv1d stride 2 + GELU, sinusoidal positions added,
    pre-norm attention (q and k each scaled by d_head^-1/4, k without bias), GELU MLP, final LayerNorm."""
    def __init__(self, mels=16, d=32, heads=4, frames=64, layers=2):
        super().__init__()
        self.heads = heads
        self.conv1, self.conv2 = nn.Conv1d(mels, d, 3, 1, 1), nn.Conv1d(d, d, 3, 2, 1)
        self.register_buffer('pos', sinusoids(frames // 2, d))
        self.layers = nn.ModuleList([nn.ModuleDict({
            'ln1': nn.LayerNorm(d), 'q': nn.Linear(d, d), 'k': nn.Linear(d, d, bias=False), 'v': nn.Linear(d, d),
            'o': nn.Linear(d, d), 'ln2': nn.LayerNorm(d), 'fc1': nn.Linear(d, 4 * d), 'fc2': nn.Linear(4 * d, d)})
            for _ in range(layers)])
        self.norm = nn.LayerNorm(d)
        trained_norm_gains(self)

    def forward(self, x):
        x = F.gelu(self.conv2(F.gelu(self.conv1(x)))).permute(0, 2, 1) + self.pos
        b, n, d = x.shape
        nh = self.heads
        scale = (d // nh) ** -0.25
        for L in self.layers:
            y = L['ln1'](x)
            q, k, v = (L[m](y).view(b, n, nh, -1).transpose(1, 2) for m in 'qkv')
            a = torch.softmax((q * scale) @ (k * scale).transpose(-1, -2), -1)
            x = x + L['o']((a @ v).transpose(1, 2).reshape(b, n, -1))
            x = x + L['fc2'](F.gelu(L['fc1'](L['ln2'](x))))
        return self.norm(x)


class Wav2Vec2(nn.Module):
    """wav2vec2 / HuBERT audio encoder as Hugging Face exports it: a strided Conv1d feature extractor on the raw
    waveform (the first layer followed by a GroupNorm with one group per channel, GELU after each), LayerNorm and a
    feature projection, the grouped convolutional position embedding (kernel 16, 4 groups, the last frame dropped for
    the even kernel, GELU) added to the features, LayerNorm, post-norm transformer layers (GELU MLP)."""
    def __init__(self, d=32, heads=4, layers=2):
        super().__init__()
        self.heads = heads
        convs = [(1, 16, 10, 5), (16, 16, 3, 2), (16, 16, 3, 2), (16, 16, 2, 2)]
        self.fe = nn.ModuleList([nn.Conv1d(ci, co, k, s, bias=False) for ci, co, k, s in convs])
        self.gn = nn.GroupNorm(16, 16)
        self.fln, self.fproj = nn.LayerNorm(16), nn.Linear(16, d)
        self.pos = nn.Conv1d(d, d, 16, 1, 8, groups=4)
        self.ln0 = nn.LayerNorm(d)
        self.layers = nn.ModuleList([nn.ModuleDict({
            'q': nn.Linear(d, d), 'k': nn.Linear(d, d), 'v': nn.Linear(d, d), 'o': nn.Linear(d, d),
            'ln1': nn.LayerNorm(d), 'fc1': nn.Linear(d, 4 * d), 'fc2': nn.Linear(4 * d, d), 'ln2': nn.LayerNorm(d)})
            for _ in range(layers)])
        trained_norm_gains(self)

    def forward(self, x):
        for i, conv in enumerate(self.fe):
            x = conv(x)
            x = F.gelu(self.gn(x) if i == 0 else x)
        h = self.fproj(self.fln(x.transpose(1, 2)))
        p = F.gelu(self.pos(h.transpose(1, 2))[:, :, :-1])
        h = self.ln0(h + p.transpose(1, 2))
        b, n, d = h.shape
        nh = self.heads
        for L in self.layers:
            q, k, v = (L[m](h).view(b, n, nh, -1).transpose(1, 2) for m in 'qkv')
            a = torch.softmax((q * (d // nh) ** -0.5) @ k.transpose(-1, -2), -1)
            h = L['ln1'](h + L['o']((a @ v).transpose(1, 2).reshape(b, n, d)))
            h = L['ln2'](h + L['fc2'](F.gelu(L['fc1'](h))))
        return h


class BertHF(nn.Module):
    """BERT-base as Hugging Face exports it: word + token_type + position embeddings (position ids sliced from a
    buffer), LayerNorm; the int64 attention_mask turned into an additive mask (Unsqueeze, Cast, 1 - mask, times -10000
    (older transformers) or the float32 minimum (newer)); post-norm layers, erf GELU; the pooler (Linear + Tanh on
    the first token) beside the sequence output."""
    def __init__(self, fill=-10000.0, vocab=100, d=32, heads=4, ff=64, layers=2, maxpos=32):
        super().__init__()
        self.heads, self.fill = heads, fill
        self.word, self.typ, self.posemb = nn.Embedding(vocab, d), nn.Embedding(2, d), nn.Embedding(maxpos, d)
        self.register_buffer('position_ids', torch.arange(maxpos)[None])
        self.eln = nn.LayerNorm(d)
        self.layers = nn.ModuleList([nn.ModuleDict({
            'q': nn.Linear(d, d), 'k': nn.Linear(d, d), 'v': nn.Linear(d, d), 'o': nn.Linear(d, d),
            'ln1': nn.LayerNorm(d), 'fc1': nn.Linear(d, ff), 'fc2': nn.Linear(ff, d), 'ln2': nn.LayerNorm(d)})
            for _ in range(layers)])
        self.pool = nn.Linear(d, d)
        trained_norm_gains(self)

    def forward(self, input_ids, token_type_ids, attention_mask):
        b, n = input_ids.shape
        nh = self.heads
        h = self.eln(self.word(input_ids) + self.typ(token_type_ids) + self.posemb(self.position_ids[:, :n]))
        ext = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * self.fill
        d = h.shape[-1]
        for L in self.layers:
            q, k, v = (L[m](h).view(b, n, nh, -1).transpose(1, 2) for m in 'qkv')
            a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // nh) + ext, -1)
            h = L['ln1'](h + L['o']((a @ v).transpose(1, 2).reshape(b, n, d)))
            h = L['ln2'](h + L['fc2'](F.gelu(L['fc1'](h))))
        return h, torch.tanh(self.pool(h[:, 0]))


class DETR(nn.Module):
    """DETR's decoder on a small conv backbone: features flattened to a sequence with a learned position embedding
    added (a transformer encoder layer over it), learned object queries, decoder layers (self-attention among the
    queries, cross-attention to the memory, FFN, post-norm), then two outputs: class logits (nc + 1 with no-object)
    and boxes from a 3-layer MLP + Sigmoid (cx cy w h in 0..1)."""
    def __init__(self, d=32, queries=10, nc=5):
        super().__init__()
        self.backbone = nn.Sequential(conv_bn(3, 16, s=2), conv_bn(16, 32, s=2), conv_bn(32, 32, s=2))
        self.inproj = nn.Conv2d(32, d, 1)
        self.pos = nn.Parameter(torch.randn(1, 16, d) * 0.5)
        self.query = nn.Parameter(torch.randn(queries, d))
        self.enc = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, batch_first=True)
        self.sa = nn.MultiheadAttention(d, 4, batch_first=True)
        self.ca = nn.MultiheadAttention(d, 4, batch_first=True)
        self.n1, self.n2, self.n3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.ffn = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, d))
        self.cls = nn.Linear(d, nc + 1)
        self.box = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 4))

    def forward(self, x):
        f = self.inproj(self.backbone(x)).flatten(2).transpose(1, 2)
        mem = self.enc(f + self.pos)
        q = self.query.unsqueeze(0).expand(x.shape[0], -1, -1)
        t = torch.zeros_like(q)
        t = self.n1(t + self.sa(t + q, t + q, t, need_weights=False)[0])
        t = self.n2(t + self.ca(t + q, mem + self.pos, mem, need_weights=False)[0])
        t = self.n3(t + self.ffn(t))
        return self.cls(t), torch.sigmoid(self.box(t))


class MobileViT(nn.Module):
    """MobileViT block: conv stem, local 3x3 + 1x1 convs, unfold into 2x2 patches by Reshape/Transpose (pixels at the
    same patch offset form one sequence), a pre-norm transformer layer (SiLU MLP), fold back, 1x1 conv, Concat with
    the block input, 3x3 fusion conv, pool, Linear."""
    def __init__(self, c=16, d=24, p=2):
        super().__init__()
        self.p = p
        self.stem = nn.Sequential(conv_bn(3, c, s=2, act=nn.SiLU), InvertedResidual(c, 2, nn.SiLU))
        self.local = nn.Sequential(conv_bn(c, c, act=nn.SiLU), nn.Conv2d(c, d, 1, bias=False))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))
        self.back, self.fuse = conv_bn(d, c, k=1, act=nn.SiLU), conv_bn(2 * c, c, act=nn.SiLU)
        self.head = nn.Linear(c, 10)

    def forward(self, x):
        x = self.stem(x)
        y = self.local(x)
        b, d, h, w = y.shape
        p, nh = self.p, 2
        y = y.reshape(b, d, h // p, p, w // p, p).permute(0, 3, 5, 2, 4, 1).reshape(b * p * p, -1, d)
        bp, n, _ = y.shape
        q, k, v = self.qkv(self.ln1(y)).reshape(bp, n, 3, nh, -1).permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ k.transpose(-1, -2) * (d // nh) ** -0.5, -1)
        y = y + self.o((a @ v).transpose(1, 2).reshape(bp, n, d))
        y = y + self.mlp(self.ln2(y))
        y = y.reshape(b, p, p, h // p, w // p, d).permute(0, 5, 3, 1, 4, 2).reshape(b, d, h, w)
        x = self.fuse(torch.cat([x, self.back(y)], 1))
        return self.head(x.mean((2, 3)))


class ASPP(nn.Module):
    """DeepLabv3: a stride-8 backbone, ASPP (1x1, three 3x3 convs dilated 2/4/6, image pooling: global average,
    1x1, bilinear Resize back), Concat of the five branches, 1x1 projection, classifier, bilinear Resize to the
    input size."""
    def __init__(self, nc=4):
        super().__init__()
        self.backbone = nn.Sequential(conv_bn(3, 16, s=2), conv_bn(16, 24, s=2), conv_bn(24, 32, s=2), conv_bn(32, 32))
        self.branches = nn.ModuleList([conv_bn(32, 16, k=1)] + [conv_bn(32, 16, dil=r) for r in (2, 4, 6)])
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), conv_bn(32, 16, k=1))
        self.project = conv_bn(5 * 16, 16, k=1)
        self.cls = nn.Sequential(conv_bn(16, 16), nn.Conv2d(16, nc, 1))

    def forward(self, x):
        f = self.backbone(x)
        g = F.interpolate(self.pool(f), size=f.shape[2:], mode='bilinear', align_corners=False)
        y = self.cls(self.project(torch.cat([br(f) for br in self.branches] + [g], 1)))
        return F.interpolate(y, size=x.shape[2:], mode='bilinear', align_corners=False)


class DenseInception(nn.Module):
    """Concat-heavy CNN: a DenseNet block (BN-ReLU-Conv1x1-BN-ReLU-Conv3x3, each layer's output concatenated to all
    before it), a transition (BN, ReLU, 1x1, AvgPool), an Inception block (1x1 / 1x1-3x3 / 1x1-5x5 / MaxPool-1x1
    branches concatenated), global pool, Linear."""
    def __init__(self, growth=8):
        super().__init__()
        self.stem = conv_bn(3, 16)
        self.dense = nn.ModuleList()
        c = 16
        for _ in range(4):
            self.dense.append(nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, 2 * growth, 1, bias=False),
                                            nn.BatchNorm2d(2 * growth), nn.ReLU(),
                                            nn.Conv2d(2 * growth, growth, 3, 1, 1, bias=False)))
            c += growth
        self.trans = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, 24, 1, bias=False), nn.AvgPool2d(2))
        self.b1 = conv_bn(24, 8, k=1)
        self.b2 = nn.Sequential(conv_bn(24, 8, k=1), conv_bn(8, 12))
        self.b3 = nn.Sequential(conv_bn(24, 4, k=1), conv_bn(4, 8, k=5))
        self.b4 = nn.Sequential(nn.MaxPool2d(3, 1, 1), conv_bn(24, 8, k=1))
        self.fc = nn.Linear(36, 10)

    def forward(self, x):
        x = self.stem(x)
        for layer in self.dense:
            x = torch.cat([x, layer(x)], 1)
        x = self.trans(x)
        x = torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class SSD(nn.Module):
    """SSD-style multi-scale heads: three feature scales, per scale a box conv (4 x anchors) and a class conv
    (classes x anchors), each permuted to channels-last and reshaped to [B, -1, 4] / [B, -1, C]; boxes concatenated
    with boxes, scores with scores, Softmax over the classes. Two outputs: box regressions and class probabilities."""
    def __init__(self, nc=5, anchors=(4, 6, 6)):
        super().__init__()
        self.nc = nc
        self.f = nn.ModuleList([nn.Sequential(conv_bn(3, 16, s=2), conv_bn(16, 24, s=2)), conv_bn(24, 32, s=2),
                                conv_bn(32, 32, s=2)])
        chans = (24, 32, 32)
        self.box = nn.ModuleList([nn.Conv2d(c, 4 * a, 3, 1, 1) for c, a in zip(chans, anchors)])
        self.cls = nn.ModuleList([nn.Conv2d(c, nc * a, 3, 1, 1) for c, a in zip(chans, anchors)])
        with torch.no_grad():  # box regressions in encoded units (variance 0.1/0.2 divides them): several units
            for b in self.box:
                b.weight.mul_(4.0)

    def forward(self, x):
        boxes, scores = [], []
        for f, bh, ch in zip(self.f, self.box, self.cls):
            x = f(x)
            n = x.shape[0]
            boxes.append(bh(x).permute(0, 2, 3, 1).reshape(n, -1, 4))
            scores.append(ch(x).permute(0, 2, 3, 1).reshape(n, -1, self.nc))
        return torch.cat(boxes, 1), torch.softmax(torch.cat(scores, 1), -1)


class ActCNN(nn.Module):
    """A CNN whose activations are not ReLU: per-channel PReLU, LeakyReLU(0.01), ELU, Mish (Softplus, Tanh, Mul at
    opset < 18), a depthwise conv, global pool, Linear."""
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(conv_bn(3, 16, s=2, act=None), nn.PReLU(16), conv_bn(16, 16, act=nn.LeakyReLU),
                               conv_bn(16, 32, s=2, act=nn.ELU), conv_bn(32, 32, groups=32, act=nn.Mish),
                               conv_bn(32, 32, k=1, act=None), nn.PReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                               nn.Linear(32, 10))
        with torch.no_grad():  # trained PReLU slopes differ per channel, some negative
            self.f[1].weight.uniform_(-0.2, 0.6)

    def forward(self, x):
        return self.f(x)


class CRNN(nn.Module):
    """CRNN text recogniser: a conv stack on a 32-pixel-high grey line (pools 2x2 then 2x1) down to height 1,
    squeezed and permuted to time-major [W, B, C], a bidirectional 2-layer LSTM, a Linear per step, LogSoftmax over
    the CTC classes (blank included), permuted back to [B, W, classes]."""
    def __init__(self, nc=37):
        super().__init__()
        self.f = nn.Sequential(conv_bn(1, 16), nn.MaxPool2d(2, 2), conv_bn(16, 32), nn.MaxPool2d(2, 2),
                               conv_bn(32, 48), nn.MaxPool2d((2, 1), (2, 1)), conv_bn(48, 48),
                               nn.MaxPool2d((2, 1), (2, 1)), nn.Conv2d(48, 64, (2, 1)), nn.BatchNorm2d(64), nn.ReLU())
        self.rnn = nn.LSTM(64, 32, 2, bidirectional=True)
        self.out = nn.Linear(64, nc)

    def forward(self, x):
        f = self.f(x).squeeze(2).permute(2, 0, 1)
        y, _ = self.rnn(f)
        return F.log_softmax(self.out(y), -1).permute(1, 0, 2)


class MixedRanks(nn.Module):
    """Glue of mixed ranks: einsums of rank 3 x 2, 3 x 1 and 2 x 3, MatMul of rank 4 by rank 3 (broadcast), Expand
    of a learned vector and Tile (repeat) of the pooled one, Where against a data-dependent mask, CumSum, TopK
    values, and two int64 ArgMax outputs beside the float ones."""
    def __init__(self, d=16):
        super().__init__()
        self.w = nn.Parameter(torch.randn(d, d) * 0.3)
        self.att = nn.Parameter(torch.randn(d) * 0.5)
        self.lin, self.proj = nn.Linear(d, d), nn.Linear(d, 8)
        self.m = nn.Parameter(torch.randn(2, d, d) * 0.3)

    def forward(self, x):
        b, n, d = x.shape
        h = torch.tanh(torch.einsum('bnd,de->bne', x, self.w))
        s = torch.softmax(torch.einsum('bnd,d->bn', h, self.att), -1)
        pooled = torch.einsum('bn,bnd->bd', s, h)
        g = (h.unsqueeze(1) @ self.m).mean(1)
        e = self.att.expand(b, n, d)
        t = pooled.unsqueeze(1).repeat(1, n, 1)
        y = torch.where(g > 0, g + e, t - g)
        c = torch.cumsum(self.lin(y), 1)
        top, _ = torch.topk(c.mean(-1), 4, -1)
        logits = self.proj(c)
        return logits, top, logits.argmax(-1), s.argmax(-1)


def img(c, h, w):
    return [('x', (c, h, w), 'normal')]



class TopKHead(nn.Module):
    """A retrieval / ranking head: Linear scores, Softmax, the 3 best per row (TopK: k an attribute before opset 10)
    as values and int64 indices."""
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))

    def forward(self, x):
        return torch.topk(torch.softmax(self.f(x), -1), 3, -1)

BERT_INPUTS = [('input_ids', (16,), 'tokens:100'), ('token_type_ids', (16,), 'tokens:2'),
               ('attention_mask', (16,), 'attn')]


# name: (builder, inputs [(name, per-sample shape, kind)], opset, fast, dynamic axes beyond batch {input: {axis: name}}
#        [, options: static = batch fixed at export (calibration samples are batch-1 rows of one array per input),
#                    fp16_weights = weights stored float16 behind Cast nodes, as fp16 converters keep io types,
#                    fp16_model = the whole model in float16, inputs and outputs included (converters' default),
#                    eval_shape = {input: per-sample shape} evaluated at a size calibration never saw,
#                    outputs = the graph output names when not "y"])
CASES = {
    'resnet_o13': (ResNet, img(3, 32, 32), 13, True, {}),
    'resnet_o11': (ResNet, img(3, 32, 32), 11, False, {}),
    'mobilenetv2_o11': (MobileNet, img(3, 32, 32), 11, True, {}),
    'mobilenetv3_o17': (lambda: MobileNet(nn.Hardswish, lambda c: SE(c, nn.Hardsigmoid), nn.Hardswish),
                        img(3, 32, 32), 17, True, {}),
    'efficientnet_se_o13': (lambda: MobileNet(nn.SiLU, SE, nn.SiLU), img(3, 32, 32), 13, True, {}),
    'grouped_dilated_o13': (GroupedDilated, img(3, 24, 24), 13, True, {}),
    'unet_convt_o13': (UNet, img(3, 32, 32), 13, True, {}),
    'unet_nearest_o11': (lambda: UNet(('nearest', None)), img(3, 32, 32), 11, True, {}),
    'unet_bilinear_ac_o11': (lambda: UNet(('bilinear', True)), img(3, 32, 32), 11, True, {}),
    'unet_bilinear_o17': (lambda: UNet(('bilinear', False)), img(3, 32, 32), 17, True, {}),
    'unet_groupnorm_o13': (lambda: UNet(norm=lambda c: nn.GroupNorm(4, c)), img(3, 32, 32), 13, False, {}),
    'superres_pixelshuffle_o13': (SuperRes, img(1, 24, 24), 13, True, {}),
    'groupnorm_o13': (lambda: NormNet('group'), img(3, 24, 24), 13, True, {}),
    'instancenorm_o11': (lambda: NormNet('instance'), img(3, 24, 24), 11, True, {}),
    'activations_o17': (Activations, [('x', (24,), 'normal')], 17, True, {}),
    'activations_o13': (Activations, [('x', (24,), 'normal')], 13, False, {}),
    'encoder_o13': (Encoder, [('tokens', (16,), 'tokens:100'), ('pad', (16,), 'pad')], 13, True, {}),
    'encoder_nomask_o17': (lambda: Encoder(mask=False), [('tokens', (16,), 'tokens:100')], 17, False, {}),
    'mha_padmask_o14': (MHA, [('x', (10, 32), 'normal'), ('pad', (10,), 'pad')], 14, True, {}),
    'lstm_o11': (lambda: Recurrent(nn.LSTM, False), [('x', (12, 20), 'normal')], 11, True, {}),
    'gru_bidir_o13': (lambda: Recurrent(nn.GRU, True), [('x', (12, 20), 'normal')], 13, True, {}),
    'lstm_bidir2_o17': (lambda: Recurrent(nn.LSTM, True, 2), [('x', (12, 20), 'normal')], 17, False, {}),
    'gru_seqfirst_o11': (lambda: Recurrent(nn.GRU, False, 2, batch_first=False), [('x', (12, 20), 'normal')], 11,
                         False, {}),
    'audio_conv1d_o13': (Audio1d, [('x', (1, 1600), 'normal')], 13, True, {}),
    'einsum_attention_o13': (EinsumAttention, [('x', (10, 32), 'normal')], 13, True, {}),
    'pools_o11': (Pools, img(3, 30, 30), 11, True, {}),
    'shufflenet_o13': (ShuffleNet, img(3, 32, 32), 13, True, {}),
    'fully_conv_dynamic_hw_o17': (FullyConv, img(3, 32, 32), 17, True, {'x': {2: 'H', 3: 'W'}},
                                  {'eval_shape': {'x': (3, 40, 24)}}),
    'fully_conv_dynamic_hw_o11': (FullyConv, img(3, 32, 32), 11, True, {'x': {2: 'H', 3: 'W'}},
                                  {'eval_shape': {'x': (3, 40, 24)}}),
    'yolo_head_o13': (Yolo, img(3, 32, 32), 13, True, {}),
    'yolo_head_o11': (Yolo, img(3, 32, 32), 11, False, {}),
    'misc_glue_o13': (Misc, img(3, 20, 20), 13, True, {}),
    'misc_glue_o11': (Misc, img(3, 20, 20), 11, False, {}),
    'stateful_lstm_o13': (StatefulLSTM, [('x', (12, 20), 'normal'), ('h0', (1, 24), 'state'), ('c0', (1, 24), 'state')],
                          13, True, {}),
    'rmsnorm_swiglu_o17': (RMSNormMLP, [('x', (10, 32), 'normal')], 17, True, {}),
    'decoder_convt1d_o13': (Decoder1d, [('x', (16, 50), 'normal')], 13, True, {}),
    'bn_unfolded_softmax4d_o11': (BNUnfolded, [('x', (24,), 'normal')], 11, True, {}),
    'tiny_gpt_tied_o13': (TinyGPT, [('tokens', (12,), 'tokens:64')], 13, True, {}),
    'tiny_gpt_tied_o17': (TinyGPT, [('tokens', (12,), 'tokens:64')], 17, False, {}),
    'tiny_gpt_dynamic_len_o13': (TinyGPT, [('tokens', (12,), 'tokens:64')], 13, True, {'tokens': {1: 'T'}},
                                 {'eval_shape': {'tokens': (7,)}}),
    'siamese_shared_o13': (Siamese, [('x', (3, 24, 24), 'normal'), ('x2', (3, 24, 24), 'normal')], 13, True, {}),
    'video_conv3d_o13': (Video3d, [('x', (3, 4, 12, 12), 'normal')], 13, True, {}),
    'upsample1d_passthrough_o11': (Upsample1d, [('x', (4, 20), 'normal')], 11, True, {}),
    'resnet_static_batch1_o13': (ResNet, img(3, 32, 32), 13, True, {}, {'static': True}),
    'mobilenetv3_fp16_weights_o13': (lambda: MobileNet(nn.Hardswish, lambda c: SE(c, nn.Hardsigmoid), nn.Hardswish),
                                     img(3, 32, 32), 13, True, {}, {'fp16_weights': True}),
    'mobilenetv3_fp16_model_o13': (lambda: MobileNet(nn.Hardswish, lambda c: SE(c, nn.Hardsigmoid), nn.Hardswish),
                                   img(3, 32, 32), 13, True, {}, {'fp16_model': True}),
    'tiny_gpt_fp16_model_o17': (TinyGPT, [('tokens', (12,), 'tokens:64')], 17, True, {}, {'fp16_model': True}),
    'flow_warp_gridsample_o16': (FlowWarp, img(3, 20, 20), 16, True, {}),
    'flow_warp_gridsample_bicubic_o16': (lambda: FlowWarp('bicubic', 'reflection'), img(3, 20, 20), 16, False, {}),
    'detector_nms_o13': (DetectorNMS, img(3, 32, 32), 13, True, {}),
    'two_stage_roialign_o16': (TwoStageRoi, img(3, 32, 32), 16, True, {}),
    'norm_embedding_o18': (onnx_norm_embedding, img(3, 24, 24), 18, True, {}, {'onnx': True}),
    'norm_embedding_o21': (onnx_norm_embedding, img(3, 24, 24), 21, False, {}, {'onnx': True}),
    'audio_logmel_stft_o17': (onnx_logmel_classifier, [('x', (4000, 1), 'normal')], 17, True, {}, {'onnx': True}),
    'split_sequence_loop_o13': (onnx_split_sequence_convnet, img(3, 24, 24), 13, True, {}, {'onnx': True}),
    'yolov8_dfl_o13': (YoloV8, img(3, 64, 64), 13, True, {}),
    'convnext_layerscale_o17': (ConvNeXt, img(3, 32, 32), 17, False, {}),
    'efficientnet_mbconv_o13': (EfficientNet, img(3, 32, 32), 13, False, {}),
    'swin_shifted_window_o13': (Swin, img(3, 32, 32), 13, False, {}),
    't5_encoder_relbias_o13': (T5Encoder, [('tokens', (20,), 'tokens:100')], 13, True,
                               {'tokens': {1: 'T'}, 'h': {1: 'T'}}, {'eval_shape': {'tokens': (32,)}}),
    'clip_text_eot_o14': (CLIPText, [('tokens', (12,), 'tokens:64')], 14, False, {}),
    'whisper_encoder_o17': (WhisperEncoder, [('x', (16, 64), 'normal')], 17, False, {}),
    'wav2vec2_audio_o14': (Wav2Vec2, [('x', (1, 1600), 'normal')], 14, False, {}),
    'bert_hf_mask10000_o11': (lambda: BertHF(-10000.0), BERT_INPUTS, 11, True, {},
                              {'outputs': ['y', 'pooled']}),
    'bert_hf_finfo_min_o14': (lambda: BertHF(torch.finfo(torch.float32).min), BERT_INPUTS, 14, False, {},
                              {'outputs': ['y', 'pooled']}),
    'detr_decoder_o13': (DETR, img(3, 32, 32), 13, False, {}, {'outputs': ['logits', 'boxes']}),
    'mobilevit_unfold_o13': (MobileViT, img(3, 32, 32), 13, False, {}),
    'deeplabv3_aspp_o11': (ASPP, img(3, 32, 32), 11, False, {}),
    'densenet_inception_o13': (DenseInception, img(3, 24, 24), 13, False, {}),
    'ssd_multiscale_o13': (SSD, img(3, 64, 64), 13, True, {}, {'outputs': ['boxes', 'scores']}),
    'act_cnn_prelu_elu_mish_o13': (ActCNN, img(3, 32, 32), 13, False, {}),
    'crnn_ctc_o13': (CRNN, [('x', (1, 32, 64), 'normal')], 13, False, {}),
    'mixed_ranks_o13': (MixedRanks, [('x', (10, 16), 'normal')], 13, True, {},
                        {'outputs': ['logits', 'top', 'cls', 'att_arg']}),
    'resnet_o9': (ResNet, img(3, 32, 32), 9, False, {}),
    'mobilenetv2_o7': (MobileNet, img(3, 32, 32), 7, False, {}),
    'unet_nearest_upsample_o9': (lambda: UNet(('nearest', None)), img(3, 32, 32), 9, True, {}),
    'unet_bilinear_o10': (lambda: UNet(('bilinear', False)), img(3, 32, 32), 10, False, {}),
    'lstm_o9': (lambda: Recurrent(nn.LSTM, False), [('x', (12, 20), 'normal')], 9, False, {}),
    'densenet_inception_o7': (DenseInception, img(3, 24, 24), 7, False, {}),
    'misc_topk_o9': (TopKHead, [('x', (10, 16), 'normal')], 9, False, {}, {'outputs': ['top', 'idx']}),
    'act_cnn_o10': (ActCNN, img(3, 32, 32), 10, False, {}),
    'ssd_multiscale_o9': (SSD, img(3, 64, 64), 9, False, {}, {'outputs': ['boxes', 'scores']}),
    'bert_hf_mask10000_o10': (lambda: BertHF(-10000.0), BERT_INPUTS, 10, False, {},
                              {'outputs': ['y', 'pooled']}),
}
# A case that fails for a reason not fixed yet: name -> the reason (documented in docs/reliability.md). The check
# still runs and prints its result; it does not fail the test.
KNOWN = {}


def make_input(kind, shape, batch, rng):
    if kind == 'normal':
        return rng.normal(0, 1, (batch,) + shape).astype(np.float32)
    if kind.startswith('tokens:'):
        return rng.integers(0, int(kind.split(':')[1]), (batch,) + shape).astype(np.int64)
    if kind == 'state':  # LSTM state [layers, B, hidden]: batch on axis 1
        return rng.normal(0, 0.5, (shape[0], batch) + shape[1:]).astype(np.float32)
    if kind == 'attn':  # Hugging Face attention_mask: int64, 1 = token, 0 = padding (the last 0..n/2 of each row)
        n = shape[-1]
        lens = rng.integers(n // 2, n + 1, batch)
        return (np.arange(n)[None, :] < lens[:, None]).astype(np.int64)
    if kind == 'pad':  # key padding mask: True = padding, the last 0..n/2 positions of each row
        n = shape[-1]
        lens = rng.integers(n // 2, n + 1, batch)
        return np.arange(n)[None, :] >= lens[:, None]
    raise ValueError(kind)


def options(name):
    return CASES[name][5] if len(CASES[name]) > 5 else {}


def fp16_weights(path):
    """Stores every float initializer with more than one element as float16 behind a Cast to float."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    casts = []
    for init in list(m.graph.initializer):
        a = numpy_helper.to_array(init)
        if a.dtype == np.float32 and a.size > 1:
            m.graph.initializer.remove(init)
            m.graph.initializer.append(numpy_helper.from_array(a.astype(np.float16), init.name + '_fp16'))
            casts.append(onnx.helper.make_node('Cast', [init.name + '_fp16'], [init.name], to=onnx.TensorProto.FLOAT))
    nodes = casts + list(m.graph.node)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    onnx.checker.check_model(m)
    onnx.save(m, path)


def fp16_model(path):
    """The whole model in float16 (float inputs and outputs too), as float16 converters write it by default: every
    float tensor, Constant and float Cast becomes float16; the inputs that ONNX types as float only (Resize scales)
    stay float."""
    import onnx
    from onnx import numpy_helper, TensorProto
    m = onnx.load(path)
    float_only = {n.input[2] for n in m.graph.node if n.op_type == 'Resize' and len(n.input) > 2}

    def narrow(t):
        if t.data_type == TensorProto.FLOAT and t.name not in float_only:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    for t in m.graph.initializer:
        narrow(t)
    for n in m.graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and n.output[0] not in float_only:
                narrow(a.t)
            if n.op_type == 'Cast' and a.name == 'to' and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
    for v in list(m.graph.input) + list(m.graph.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    del m.graph.value_info[:]
    onnx.checker.check_model(m)
    onnx.save(m, path)


def export(name, work):
    build, inputs, opset, _, dyn = CASES[name][:5]
    if options(name).get('onnx'):  # built with onnx.helper for opsets torch cannot export
        import onnx
        path = os.path.join(work, name + '.onnx')
        onnx.save(build(opset), path)
        return path, inputs
    torch.manual_seed(0)
    model = build().eval()
    with torch.no_grad():  # non-trivial BatchNorm statistics, as a trained model has
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.3, 0.3)
    rng = np.random.default_rng(1)
    example = tuple(torch.from_numpy(make_input(k, s, 1 if options(name).get('static') else 2, rng))
                    for _, s, k in inputs)
    if 'seqfirst' in name:
        example = tuple(e.transpose(0, 1).contiguous() for e in example)
    path = os.path.join(work, name + '.onnx')
    names = [n for n, _, _ in inputs]
    outs = {Yolo: ['y', 'score', 'cls'], DetectorNMS: ['boxes', 'scores', 'selected'], StatefulLSTM: ['y', 'h', 'c'], Siamese: ['y', 'emb'],
            Upsample1d: ['y', 'x_out'], T5Encoder: ['y', 'h']}.get(build, options(name).get('outputs', ['y']))
    axes = {n: {0: 'B', **dyn.get(n, {})} for n in names + outs}
    if build is DetectorNMS:  # selected indices: [num_selected, 3]
        axes['selected'] = {0: 'S'}
    if build is StatefulLSTM:
        axes.update({n: {1: 'B'} for n in ('h0', 'c0', 'h', 'c')})
    if 'seqfirst' in name:  # sequence-first RNN: axis 1 is the batch
        axes = {'x': {1: 'B'}, 'y': {1: 'B'}}
    with torch.enable_grad():  # autograd on: nn.MultiheadAttention's fused inference path has no ONNX export
        torch.onnx.export(model, example, path, input_names=names, output_names=outs,
                          dynamic_axes=None if options(name).get('static') else axes, opset_version=opset,
                          do_constant_folding=True)
    if options(name).get('fp16_weights'):
        fp16_weights(path)
    if options(name).get('fp16_model'):
        fp16_model(path)
    return path, inputs


# --calib-samples, --eval-rows, --seed (main): the default is the ctest run's small set; more of both (e.g. 32 and 64)
# measure a change's effect above the noise of 3 held-out rows.
CALIB_SAMPLES, EVAL_ROWS, DATA_SEED = 4, 3, 2


def batches(name, inputs, work):
    """Calibration: CALIB_SAMPLES (4) samples of batch 2 (one .npz each; static batch: twice as many rows of one array
    per input); evaluation: one disjoint batch of EVAL_ROWS (3; static: 1). Returns the --data arguments and
    {input: eval .npy}."""
    rng = np.random.default_rng(DATA_SEED)
    seqfirst = 'seqfirst' in name

    def one(batch):
        d = {}
        for n, s, k in inputs:
            a = make_input(k, s, batch, rng)
            d[n] = np.swapaxes(a, 0, 1).copy() if seqfirst else a
        return d
    if options(name).get('static'):  # one array per input, axis 0 = samples of batch 1
        calib = one(2 * CALIB_SAMPLES)
        calib_args = []
        for n, a in calib.items():
            f = os.path.join(work, f'{name}_calib_{n}.npy')
            np.save(f, a)
            calib_args += ['--data', f'{n}={f}']
        ev = one(1)
    else:
        calib_dir = os.path.join(work, name + '_calib')
        os.makedirs(calib_dir, exist_ok=True)
        for i in range(CALIB_SAMPLES):
            d = one(2)
            if options(name).get('fp16_model'):
                d = {k: a.astype(np.float16) if a.dtype == np.float32 else a for k, a in d.items()}
            np.savez(os.path.join(calib_dir, f'sample_{i:04d}.npz'), **d)
        calib_args = ['--data', calib_dir]
        ev = one(EVAL_ROWS)
    for n, shape in options(name).get('eval_shape', {}).items():  # a size the calibration never saw
        kind = next(k for m, _, k in inputs if m == n)
        ev[n] = make_input(kind, shape, len(ev[n]), rng)
    files = {}
    for n, a in ev.items():
        if options(name).get('fp16_model') and a.dtype == np.float32:
            a = a.astype(np.float16)
        files[n] = os.path.join(work, f'{name}_eval_{n}.npy')
        np.save(files[n], a)
    return calib_args, files


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def last_line(s):
    lines = [ln for ln in s.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ''


def ort(model, files, outdir, opt_level=None):
    cmd = ['node', qtest.ORT_RUN, model, '--output-dir', outdir, '--threads', '1']
    if opt_level:
        cmd += ['--opt-level', opt_level]
    for k, v in files.items():
        cmd += ['--input', f'{k}={v}']
    rc, out, err = run(cmd)
    if rc != 0:
        return None, last_line(err) or last_line(out)
    res = json.loads(last_line(out))
    return {k: np.load(v['file']) for k, v in res['outputs'].items()}, ''


def sqnr(f, q):
    f, q = f.astype(np.float64), q.astype(np.float64)
    return float(10 * np.log10((f ** 2).sum() / max(((f - q) ** 2).sum(), 1e-30)))


def check_case(name, work, config=None):
    """Returns (problems: list of str, record: dict)."""
    t0 = time.time()
    rec, problems = {'name': name, 'opset': CASES[name][2]}, []
    try:
        model, inputs = export(name, work)
    except Exception as e:  # the case itself is broken (torch cannot export it)
        return ['torch export: ' + str(e).splitlines()[0]], rec
    calib_args, files = batches(name, inputs, work)
    yf, err = ort(model, files, os.path.join(work, name + '_ortf'))
    if yf is None:
        return ['ORT cannot run the float model: ' + err], rec
    # 1. qtool's interpreter against ORT on the float model.
    outdir = os.path.join(work, name + '_qrun')
    cmd = [qtest.qtool(), 'run', model, '-o', outdir, '-t', '1'] + [a for k, v in files.items() for a in ('-i', f'{k}={v}')]
    rc, out, err = run(cmd)
    rec['run_exit'] = rc
    if rc != 0:
        problems.append(f'qtool run exit {rc}: {last_line(err)}')
    else:
        for k, ref in yf.items():
            got = np.load(os.path.join(outdir, k + '.npy'))
            if got.shape != ref.shape:
                problems.append(f'qtool run output {k} shape {got.shape}, ORT {ref.shape}')
                continue
            # A float16 model: ORT rounds every node's output to float16 (eps 2^-10), qtool computes in float32
            # inside (onnx/float32_promotion.h): tens of roundings apart, so ten float16 epsilons.
            atol, rtol = (1e-2, 1e-2) if ref.dtype == np.float16 else (FLOAT_ATOL, FLOAT_RTOL)
            tol = atol * (1 + np.abs(ref).max()) + rtol * np.abs(ref)
            bad = np.abs(got.astype(np.float64) - ref) > tol
            bad |= np.isnan(got) != np.isnan(ref)
            rec['float_max_abs_err'] = float(np.nanmax(np.abs(got.astype(np.float64) - ref)))
            if bad.any():
                problems.append(f'qtool run output {k}: {int(bad.sum())} of {bad.size} values off float tolerance '
                                f'(max |err| {rec["float_max_abs_err"]:.3g})')
    # 2. quantize with the default config.
    q = os.path.join(work, name + '.int8.onnx')
    rc, out, err = run([qtest.qtool(), 'quantize', model, '-o', q, '--json', '-t', '1'] + calib_args +
                         (['--config', config] if config else []))
    rec['quantize_exit'] = rc
    if rc in (2, 4):
        rec['quantize_message'] = last_line(err)
        if len([ln for ln in err.strip().splitlines() if ln.startswith('error')]) > 1:
            problems.append('quantize exit %d with more than one error line' % rc)
        if not config:  # every op here is standard, and the default int8 is meant to serve every case
            problems.append(f'quantize exit {rc} under the default config: {rec["quantize_message"]}')
    elif rc != 0:
        problems.append(f'qtool quantize exit {rc}: {last_line(err)}')
    else:
        # 3. ORT loads and runs Q.
        # A config for another runtime (e.g. TensorRT with FP8 activations) runs in ORT's CPU provider only with graph
        # optimizations off (docs/fp8.md), as acceptance.py scores it.
        target = json.load(open(config)).get('target', 'ort-cpu') if config else 'ort-cpu'
        yq, err = ort(q, files, os.path.join(work, name + '_ortq'), None if target == 'ort-cpu' else 'disabled')
        if yq is None:
            problems.append('ORT cannot run the quantized model: ' + err)
        else:
            rec['sqnr_db'] = {k: round(sqnr(yf[k], yq[k]), 1) for k in yf if yf[k].dtype.kind == 'f'}
            # Integer outputs of data-dependent size (NonMaxSuppression's selection) may differ in length: 0.
            rec['int_agreement'] = {k: float((yf[k] == yq[k]).mean()) if yf[k].shape == yq[k].shape else 0.0
                                    for k in yf if yf[k].dtype.kind != 'f'}
            collapsed = [k for k, db in rec['sqnr_db'].items() if db < COLLAPSE_DB]
            if collapsed:
                problems.append(f'quantized output(s) {", ".join(collapsed)} collapsed in ORT (SQNR < {COLLAPSE_DB} dB)')
    rec['seconds'] = round(time.time() - t0, 1)
    return problems, rec


def main():
    args = sys.argv[1:]
    run_all = '--all' in args
    json_out, config = None, None
    if '--json' in args:
        json_out = args[args.index('--json') + 1]
        args = [a for a in args if a not in ('--json', json_out)]
    if '--config' in args:
        config = os.path.abspath(args[args.index('--config') + 1])
        args = [a for a in args if a not in ('--config', config) and os.path.abspath(a) != config]
    global CALIB_SAMPLES, EVAL_ROWS, DATA_SEED
    for flag in ('--calib-samples', '--eval-rows', '--seed'):
        if flag in args:
            v = args[args.index(flag) + 1]
            if not v.isdigit() or (flag != '--seed' and int(v) < 1):
                sys.stderr.write(f'zoo.py: {flag} needs a positive integer, got {v!r}\n')
                return 2
            if flag == '--calib-samples':
                CALIB_SAMPLES = int(v)
            elif flag == '--eval-rows':
                EVAL_ROWS = int(v)
            else:
                DATA_SEED = int(v)
            i = args.index(flag)
            args = args[:i] + args[i + 2:]
    names = [a for a in args if not a.startswith('--')]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        sys.stderr.write(f"zoo.py: unknown case {', '.join(unknown)}; cases: {', '.join(CASES)}\n")
        return 2
    names = names or [n for n, c in CASES.items() if run_all or c[3]]
    work = tempfile.mkdtemp(prefix='qtool-zoo-')
    failures, records = [], []
    for name in names:
        problems, rec = check_case(name, work, config)
        rec['problems'] = problems
        records.append(rec)
        status = 'ok   ' if not problems else ('known' if name in KNOWN else 'FAIL ')
        detail = {k: v for k, v in rec.items() if k not in ('name', 'problems')}
        print(f'{status} {name}: {json.dumps(detail)}' + ''.join(f'\n      {p}' for p in problems), flush=True)
        if problems and name not in KNOWN:
            failures.append(name)
    if json_out:
        json.dump(records, open(json_out, 'w'), indent=1)
    print(json.dumps({'ok': not failures, 'failures': failures, 'cases': len(names)}))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
