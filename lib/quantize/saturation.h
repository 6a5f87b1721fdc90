// Where ONNX Runtime's u8s8 integer GEMM can overflow, per output channel of a weight (see saturation_safe in
// quantize/qparams.h for why): x86 AVX2 without VNNI multiplies uint8 activation codes by int8 weight codes with
// VPMADDUBSW, which adds the two products of neighbouring positions (2j, 2j+1) of the reduction axis in int16.
// Activation codes are in [0, 255], so the pair's sum is largest when both codes are 255 and both weights have the
// same sign: 255 · max(w_a⁺ + w_b⁺, w_a⁻ + w_b⁻). The reduction order is MLAS's, measured on ONNX Runtime 1.30:
//   MatMul [K, N] / Gemm: along K;  Conv [M, C/g, k...]: spatial taps major, input channels minor (a single input
//   channel pairs neighbouring taps of a row); depthwise Conv (C/g = 1, M = g > 1) runs a kernel that does not pair (with a channel multiplier M > g, it pairs taps).
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>
#include <vector>

#include "core/tensor.h"

namespace qtool::quantize {

// For each index along `channel_axis` (one value when channel_axis < 0: the whole tensor), the largest same-sign
// pair sum of |w| the kernel forms; zeros when it forms none (depthwise). nullopt when the op's reduction order is
// not known here: the caller then assumes the worst pairing (the two largest magnitudes).
std::optional<std::vector<double>> u8s8_pair_sums(const onnx::NodeProto& node, const Tensor& w, int64_t channel_axis);

}  // namespace qtool::quantize
