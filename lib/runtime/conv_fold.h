// Rules for folding a Conv's neighbours into its attributes and constants, written once for both graph forms:
// the interpreter's preparation passes (runtime/fuse_conv.cc) and the quantizer's ONNX passes
// (quantize/passes/fold_pad.cc, fold_affine.cc, fold_batchnorm.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace qtool::runtime::conv_fold {

// A zero constant Pad in front of a Conv (auto_pad NOTSET) folds into the Conv's pads:
//   Pad(x, pad_pads, 0) -> Conv(pads = conv_pads)   ==>   Conv(x, pads = conv_pads + spatial part of pad_pads)
// Exact: the Conv's own padding reads zeros, as the Pad wrote. pad_pads are the Pad's [begin..., end...] over all
// axes of an N, C, spatial... tensor; conv_pads the Conv's (empty: no padding). nullopt when it does not fold: pads
// on the batch or channel axis, a negative (cropping) pad, no spatial axis, or conv_pads of another rank.
// The caller checks the rest: mode constant, value 0, no `axes`, the Conv its only reader.
std::optional<std::vector<int64_t>> pads_with_pad(std::span<const int64_t> pad_pads, std::vector<int64_t> conv_pads);

// c broadcasts against a rank-`rank` Conv output [N, channels, ...] without changing its shape and varies at most
// along the channel axis: one value, or `channels` values on axis 1.
bool per_channel(const Shape& c, int64_t rank, int64_t channels);

// The value c (shaped as per_channel accepts) holds for output channel m.
inline float channel_value(const Tensor& c, int64_t m) { return c.data<float>()[c.numel() == 1 ? 0 : m]; }

// W[...] *= s[channel the element feeds], W viewed as [outer, per, inner] with `per` its size on `axis` (the axis of
// output channels: 0 for Conv, 1 for ConvTranspose, 0 or 1 for Gemm). Element (o, c, k) feeds channel c, plus
// (o / (outer / group))·per for a grouped ConvTranspose (outer = C_in); group is 1 for the others.
void scale_channels(Tensor& w, int64_t axis, int64_t group, std::span<const float> s);

}  // namespace qtool::runtime::conv_fold
