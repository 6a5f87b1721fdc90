// Output channels of the weight of a Conv, ConvTranspose or Gemm, for rewrites that fold a per-channel scale
// into it (BatchNormalization, a Mul by a constant).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "quantize/graph.h"
#include "runtime/conv_fold.h"

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

// W[...] *= s[channel the element feeds] (runtime/conv_fold.h scale_channels, on this producer's axis and group).
inline void scale_output_channels(const onnx::NodeProto& producer, Tensor& w, const std::vector<float>& s) {
  const int64_t group = producer.op_type() == "ConvTranspose" ? attr_int(producer, "group", 1) : 1;
  runtime::conv_fold::scale_channels(w, output_channel_axis(producer), group, s);
}

}  // namespace qtool::quantize
