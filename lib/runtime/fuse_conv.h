// Graph preparation passes that fold a Conv's neighbours into the Conv's own attributes and constants, so their
// tensors are never written and read back (ONNX Runtime's PadFusion, ConvMulFusion, ConvAddFusion and
// ConvBNFusion). The rules themselves are runtime/conv_fold.h, shared with the quantizer's ONNX passes.
//
// 1. Pad -> Conv:  z = Pad(x, pads, 0);  y = Conv(z, W, B)   ==>   y = Conv(x, W, B) with the Pad's spatial pads
//    added to the Conv's. Exact: the Conv's padding reads the zeros the Pad wrote. Mode constant, value 0, no `axes`,
//    non-negative pads on the spatial axes only, Conv auto_pad NOTSET. (mobilenetv2: the Pad before each of its four
//    stride-2 depthwise Convs copied up to 4.9 MB.)
// 2. Conv -> per-channel affine:  t = Conv(x, W, B);  y = Mul(t, S) | Add(t, H) | Sub(t, H) |
//    BatchNormalization(t, gamma, beta, mean, var)   (Mul and Add in either operand order; S, H constant float,
//    finite, one value or one per output channel on axis 1)   ==>   y = Conv(x, W', B') with W'[m] = W[m]·s[m],
//    B'[m] = B[m]·s[m] + h[m] (BatchNormalization: s = gamma/√(var + eps), h = beta - mean·s); chains fold in turn.
//    Not bit-exact: Σ(W·s)·x + B·s + h rounds differently from (Σ W·x + B)·s + h, a few ulps of Σ|W·x|·|s|, like ORT's
//    own fusions; tests/runtime/fuse_conv_test.cc compares against the unfused graph within float tolerance.
//    (ppocrv4-det writes a learnable scalar Mul and Add after each Conv: 62 Mul and 65 Add nodes, 23 % of its time.)
// Same visibility rule as runtime/fuse.h: the tensor that disappears (z, t) must have the Conv (the affine node) as
// its only reader and be neither a graph output nor in `keep`. Both run before the activation pass, so an
// activation after the affine still folds into the Conv.
#pragma once

#include <set>
#include <string>

namespace qtool::runtime {

class Graph;

// Rewrites g.nodes (and adds the folded weights to g.constants) before kernels are created. Each returns the number
// of nodes removed.
int fold_pad_into_conv(Graph& g, const std::set<std::string>& keep);
int fold_conv_affine(Graph& g, const std::set<std::string>& keep);

}  // namespace qtool::runtime
