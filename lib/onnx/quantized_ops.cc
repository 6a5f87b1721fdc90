#include "onnx/quantized_ops.h"

#include <onnx/onnx_pb.h>

#include <initializer_list>

#include "onnx/model_walk.h"

namespace qtool::onnxio {
namespace {

constexpr uint32_t bits(std::initializer_list<int> inputs) {
  uint32_t m = 0;
  for (int i : inputs) m |= 1u << i;
  return m;
}

// op, weight, granularity_from, channel_axis, params, integer_result
constexpr QuantizedOp kQuantizedOps[] = {
    {"QLinearConv", 3, 4, 0, bits({1, 2, 4, 5, 6, 7}), true},
    {"QLinearMatMul", 3, 4, -1, bits({1, 2, 4, 5, 6, 7}), true},
    {"QGemm", 3, 4, -1, bits({1, 2, 4, 5, 7, 8}), true},
    {"MatMulInteger", 1, 3, -1, bits({2, 3}), true},
    {"ConvInteger", 1, 3, 0, bits({2, 3}), true},
    {"DynamicQuantizeLinear", -1, -1, 0, 0, true},
    {"DynamicQuantizeMatMul", 1, 2, -1, bits({2, 3}), false},
    {"MatMulIntegerToFloat", 1, 3, -1, bits({2, 3, 4, 5}), false},
    {"MatMulNBits", 1, 2, 1, bits({2, 3}), false},
    {"GatherBlockQuantized", 0, 2, -1, bits({2, 3}), false},
    {"QLinearAdd", -1, -1, 0, bits({1, 2, 4, 5, 6, 7}), true},
    {"QLinearMul", -1, -1, 0, bits({1, 2, 4, 5, 6, 7}), true},
    {"QLinearSigmoid", -1, -1, 0, bits({1, 2, 3, 4}), true},
    {"QLinearLeakyRelu", -1, -1, 0, bits({1, 2, 3, 4}), true},
    {"QLinearGlobalAveragePool", -1, -1, 0, bits({1, 2, 3, 4}), true},
    {"QLinearAveragePool", -1, -1, 0, bits({1, 2, 3, 4}), true},
    {"QLinearSoftmax", -1, -1, 0, bits({1, 2, 3, 4}), true},
    {"QLinearConcat", -1, -1, 0, 0, true},
};

bool ort_domain(const std::string& d) { return d.empty() || d == "ai.onnx" || d == "com.microsoft"; }

}  // namespace

const QuantizedOp* quantized_op(const onnx::NodeProto& n) {
  if (!ort_domain(n.domain())) return nullptr;
  for (const auto& q : kQuantizedOps)
    if (n.op_type() == q.op) return &q;
  return nullptr;
}

bool is_quant_param_input(const onnx::NodeProto& n, int i) {
  const QuantizedOp* q = quantized_op(n);
  if (!q) return false;
  if (q->op == "QLinearConcat") return i < 2 || (i - 2) % 3 != 0;
  return i >= 0 && i < 32 && (q->params >> i & 1u) != 0;
}

std::string op_key(const onnx::NodeProto& n) {
  return n.domain().empty() || n.domain() == "ai.onnx" ? n.op_type() : n.domain() + "." + n.op_type();
}

std::map<std::string, int64_t> count_quantized_ops(const onnx::ModelProto& model) {
  std::map<std::string, int64_t> counts;
  for_each_node(model, [&](const onnx::NodeProto& n, int) {
    const bool qdq = ort_domain(n.domain()) && (n.op_type() == "QuantizeLinear" || n.op_type() == "DequantizeLinear");
    if (qdq || quantized_op(n)) ++counts[op_key(n)];
  });
  return counts;
}

}  // namespace qtool::onnxio
