#include "quantize/op_roles.h"

#include <set>
#include <string>

#include "quantize/graph.h"

namespace qtool::quantize {
namespace {

struct Entry {
  std::string_view op;
  OpRole role;
};

// clang-format off
const Entry kRoles[] = {
  {"Conv",              {OpKind::Compute, {0}, 1, 2}},
  {"ConvTranspose",     {OpKind::Compute, {0}, 1, 2}},
  {"MatMul",            {OpKind::Compute, {0, 1}, 1, -1}},
  {"Gemm",              {OpKind::Compute, {0, 1}, 1, 2}},
  {"Add",               {OpKind::Compute, {0, 1}}},
  {"Sub",               {OpKind::Compute, {0, 1}}},
  {"Mul",               {OpKind::Compute, {0, 1}}},
  {"Div",               {OpKind::Compute, {0, 1}}},
  {"Concat",            {OpKind::Compute, {}}},
  {"AveragePool",       {OpKind::Compute, {0}}},
  {"GlobalAveragePool", {OpKind::Compute, {0}}},
  {"LeakyRelu",         {OpKind::Compute, {0}}},
  {"Sigmoid",           {OpKind::Compute, {0}}},
  {"HardSigmoid",       {OpKind::Compute, {0}}},
  {"Softmax",           {OpKind::Compute, {0}}},
  {"Tanh",              {OpKind::Compute, {0}}},
  {"Where",             {OpKind::Compute, {1, 2}}},
  {"Relu",              {OpKind::Activation, {0}}},
  {"Clip",              {OpKind::Activation, {0}}},
  {"MaxPool",           {OpKind::PassThrough, {0}}},
  {"Reshape",           {OpKind::PassThrough, {0}}},
  {"Transpose",         {OpKind::PassThrough, {0}}},
  {"Squeeze",           {OpKind::PassThrough, {0}}},
  {"Unsqueeze",         {OpKind::PassThrough, {0}}},
  {"Flatten",           {OpKind::PassThrough, {0}}},
  {"Slice",             {OpKind::PassThrough, {0}}},
  {"Split",             {OpKind::PassThrough, {0}}},
  {"Gather",            {OpKind::PassThrough, {0}, 0, -1}},  // weight: an embedding table (weight-only rules)
  {"Pad",               {OpKind::PassThrough, {0}}},
  {"Identity",          {OpKind::PassThrough, {0}}},
  {"Expand",            {OpKind::PassThrough, {0}}},
  {"DepthToSpace",      {OpKind::PassThrough, {0}}},
  {"SpaceToDepth",      {OpKind::PassThrough, {0}}},
  {"Resize",            {OpKind::PassThrough, {0}}},
  {"Min",               {OpKind::Compute, {}}},
  {"Max",               {OpKind::Compute, {}}},
};
// clang-format on

}  // namespace

OpRole op_role(const onnx::NodeProto& node, const Graph* g) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return {};
  for (const auto& e : kRoles)
    if (e.op == node.op_type()) {
      OpRole r = e.role;
      // Only nearest-neighbour Resize keeps values (and so the input's parameters) unchanged.
      if (node.op_type() == "Resize" && attr_string(node, "mode", "nearest") != "nearest") r.kind = OpKind::Compute;
      // Min/Max against a constant clamp values inside the input's range: the output keeps its parameters,
      // so Q(min(DQ(q), c)) = min(q, Q(c)) adds no rounding.
      if ((node.op_type() == "Min" || node.op_type() == "Max") && node.input_size() == 2 && g &&
          g->is_initializer(node.input(1)))
        r = {OpKind::PassThrough, {0}};
      // Pad in "constant" mode with a non-zero value could leave the input's range; edge/reflect keep it.
      return r;
    }
  return {};
}

bool is_coordinate_input(const onnx::NodeProto& node, int k) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return false;
  const std::string& op = node.op_type();
  return (k == 1 && (op == "GridSample" || op == "RoiAlign")) ||
         (k == 0 && (op == "NonMaxSuppression" || op == "AffineGrid"));
}

int64_t weight_channel_axis(const onnx::NodeProto& node, int64_t weight_rank) {
  const std::string& op = node.op_type();
  if (op == "Conv") return 0;
  if (op == "ConvTranspose") return attr_int(node, "group", 1) == 1 ? 1 : -1;
  if (op == "Gemm") return attr_int(node, "transB", 0) ? 0 : 1;
  if (op == "MatMul") return weight_rank == 2 ? 1 : -1;
  if (op == "Gather") {  // an embedding table [rows, dim]: one scale per gathered row
    const int64_t a = attr_int(node, "axis", 0);
    return weight_rank == 2 && (a == 0 || a == -2) ? 0 : -1;
  }
  return -1;
}

}  // namespace qtool::quantize

namespace qtool::quantize {

int64_t weight_block_axis(const onnx::NodeProto& node, int64_t weight_rank) {
  const std::string& op = node.op_type();
  if (op == "Conv") return weight_rank >= 2 ? 1 : -1;
  if (op == "ConvTranspose") return 0;
  if (op == "Gemm") return attr_int(node, "transB", 0) ? 1 : 0;
  if (op == "MatMul") return weight_rank >= 2 ? weight_rank - 2 : -1;
  if (op == "Gather") {  // blocks along each gathered row (as ONNX Runtime's GatherBlockQuantized)
    const int64_t a = attr_int(node, "axis", 0);
    return weight_rank == 2 && (a == 0 || a == -2) ? 1 : -1;
  }
  return -1;
}

bool is_elementwise_arithmetic(const onnx::NodeProto& node) {
  static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Div", "Sum", "Mean", "Max", "Min"};
  return (node.domain().empty() || node.domain() == "ai.onnx") && ops.count(node.op_type()) > 0;
}

}  // namespace qtool::quantize
