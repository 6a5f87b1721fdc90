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
// 3. Conv (with its fused activation) -> clamps -> affine:  Relu, Clip (constant bounds), Min/Max(t, C), then
//    Mul/Add/Sub(t, S) or BatchNormalization; C and S constant, one value or one per output channel   ==>   after its
//    activation the Conv applies y = min(max(y, lo[m]), hi[m])·s[m] + h[m] per output channel m
//    (FusedActivation::channels), in the same pass over each block of its output. Clamps compose exactly; Min, Max
//    and Clip give the same values (NaN propagates); a Relu in the chain differs only on NaN (Relu gives 0, the clamp
//    NaN) and on -0 (kept). The affine part may round once instead of twice (a fused multiply-add). CPU sessions
//    only: the GPU Conv has no such epilogue. (mobilenetv2's ReLU6 is Relu -> Min(per-channel C) -> Relu after 17
//    Convs; ppocrv4-det has a scalar Mul and Add after each of its 24 HardSwishes.)
// Same visibility rule as runtime/fuse.h: each tensor that disappears must have the next node of the pattern as its
// only reader and be neither a graph output nor in `keep`. Passes 1 and 2 run before the activation pass, so an
// activation after the affine still folds into the Conv; pass 3 after it.
#pragma once

#include <set>
#include <string>

namespace qtool::runtime {

class Graph;

// Rewrites g.nodes (and adds the folded weights to g.constants) before kernels are created. Each returns the number
// of nodes removed.
int fold_pad_into_conv(Graph& g, const std::set<std::string>& keep);
int fold_conv_affine(Graph& g, const std::set<std::string>& keep);
// Runs after the activation pass (runtime/fuse.h), so the chain starts after the activation the Conv applies.
int fuse_conv_epilogue(Graph& g, const std::set<std::string>& keep);

}  // namespace qtool::runtime
