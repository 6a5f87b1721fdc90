// How each op type is quantized in QDQ form: which inputs carry data (quantized as activations),
// which is a weight or a bias, and whether the op passes its input's quantization through unchanged.
// The list is explicit (op_roles.cc); which ops are quantized at all is policy and lives in configs/.
#pragma once

#include <onnx/onnx_pb.h>

#include <string_view>
#include <vector>

namespace qtool::quantize {

enum class OpKind {
  Compute,      // inputs and output get their own Q/DQ (Conv, MatMul, Add, Concat, Sigmoid, unknown ops...)
  PassThrough,  // output keeps input 0's parameters (MaxPool, Reshape, Transpose, Resize nearest...)
  Activation,   // Relu/Clip: quantized after the producer, which then needs no Q/DQ of its own
};

struct OpRole {
  OpKind kind = OpKind::Compute;
  std::vector<int> data_inputs;  // empty = every input (variadic: Concat, Sum, unknown ops)
  int weight_input = -1;         // a float initializer there is quantized as a weight
  int bias_input = -1;           // int32 bias with scale s_input * s_weight
};

class Graph;
// `g` (optional) lets roles depend on which inputs are constants (Min/Max against a constant pass through).
OpRole op_role(const onnx::NodeProto& node, const Graph* g = nullptr);
// Whether input k of `node` is read as sampling or box coordinates (GridSample's grid, RoiAlign's rois,
// NonMaxSuppression's boxes, AffineGrid's theta): an integer grid there moves where the op samples or how boxes overlap by a step of the
// whole range (an 8-bit grid over [-1, 1] is 2.5 pixels of a 320-pixel image), so such values stay float.
bool is_coordinate_input(const onnx::NodeProto& node, int k);
// Elementwise arithmetic (Add, Sub, Mul, Div, Sum, Mean, Max, Min of the default domain): its integer form
// (QLinearAdd, QLinearMul) costs what the float op does, so the QDQ rewrite keeps it integer only where that loses
// nothing (qdq.cc: inputs made in float, spread slices).
bool is_elementwise_arithmetic(const onnx::NodeProto& node);
// Output-channel axis of the weight for per-channel quantization; -1 when per-channel does not apply.
// Gather's weight is an embedding table (weight-only rules): one scale per gathered row.
int64_t weight_channel_axis(const onnx::NodeProto& node, int64_t weight_rank);
// Axis along which per_block weights are blocked: the reduction (input-channel / K) axis, as ONNX Runtime's
// MatMulNBits and TensorRT's int4 weight-only kernels expect; for a Gather's table, along each row (as ORT's
// GatherBlockQuantized).
int64_t weight_block_axis(const onnx::NodeProto& node, int64_t weight_rank);

}  // namespace qtool::quantize
