// Output channels of the weight of a Conv, ConvTranspose or Gemm, for rewrites that fold a per-channel scale
// into it (BatchNormalization, a Mul by a constant).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "quantize/graph.h"

namespace qtool::quantize {

// The axis of the weight that indexes output channels (within a group for ConvTranspose).
inline int64_t output_channel_axis(const onnx::NodeProto& producer) {
  if (producer.op_type() == "ConvTranspose") return 1;
  if (producer.op_type() == "Gemm") return attr_int(producer, "transB", 0) ? 0 : 1;
  return 0;  // Conv
}

// Output channels the producer writes: the weight's size on that axis, times group for ConvTranspose.
inline int64_t output_channels(const onnx::NodeProto& producer, const Tensor& w) {
  const int64_t axis = output_channel_axis(producer);
  const int64_t group = producer.op_type() == "ConvTranspose" ? attr_int(producer, "group", 1) : 1;
  return w.rank() > axis ? w.dim(axis) * group : 0;
}

// W[...] *= s[channel the element feeds]. W viewed as [outer, per, inner] with per = W's size on the channel axis;
// element (o, c, k) feeds channel c, plus (o / (outer / group))·per for a grouped ConvTranspose (outer = C_in).
inline void scale_output_channels(const onnx::NodeProto& producer, Tensor& w, const std::vector<float>& s) {
  const int64_t axis = output_channel_axis(producer);
  const int64_t group = producer.op_type() == "ConvTranspose" ? attr_int(producer, "group", 1) : 1;
  const int64_t per = w.dim(axis);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= w.dim(d);
  for (int64_t d = axis + 1; d < w.rank(); ++d) inner *= w.dim(d);
  const int64_t outer_per_group = outer / group;
  float* wd = w.data<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < per; ++c) {
      const float f = s[static_cast<size_t>((o / outer_per_group) * per + c)];
      for (int64_t k = 0; k < inner; ++k) wd[(o * per + c) * inner + k] *= f;
    }
}

}  // namespace qtool::quantize
