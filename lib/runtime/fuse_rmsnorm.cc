#include "runtime/fuse_rmsnorm.h"

#include <optional>
#include <vector>

#include "runtime/fuse_match.h"
#include "runtime/graph.h"

namespace qtool::runtime {
namespace {

using fusion::const_scalar;
using fusion::onnx_op;
using fusion::other_operand;

// The reader of v when v is hideable and read by one node (not yet removed); nullopt otherwise.
std::optional<size_t> sole_reader(const fusion::Uses& u, const std::vector<bool>& removed, int v) {
  if (v < 0 || !u.single_hidden_use(v) || removed[u.consumers[v][0]]) return std::nullopt;
  return u.consumers[v][0];
}

// ReduceMean over the last axis only, keeping it: axes = [-1] as the attribute (opset < 18) or a constant input.
bool mean_over_last_axis(const GraphNode& n) {
  if (!onnx_op(n, "ReduceMean") || n.outputs.size() != 1 || n.info.attrs.get_int("keepdims", 1) != 1) return false;
  std::vector<int64_t> axes = n.info.attrs.get_ints("axes");
  if (n.inputs.size() > 1 && n.inputs[1] >= 0) {
    const Tensor* t = n.info.const_inputs.size() > 1 ? n.info.const_inputs[1] : nullptr;
    if (!t || t->dtype() != DType::Int64) return false;
    axes.assign(t->data<int64_t>(), t->data<int64_t>() + t->numel());
  }
  return axes == std::vector<int64_t>{-1};
}

}  // namespace

int fuse_rmsnorm(Graph& g, const std::set<std::string>& keep) {
  const fusion::Uses u = fusion::uses_of(g, keep);
  std::vector<bool> removed(g.nodes.size(), false);
  int fused = 0;
  for (size_t pi = 0; pi < g.nodes.size(); ++pi) {
    const GraphNode& pow = g.nodes[pi];
    if (removed[pi] || pow.outputs.size() != 1 || pow.inputs.size() != 2 || pow.inputs[0] < 0) continue;
    const int x = pow.inputs[0];
    const bool square = (onnx_op(pow, "Pow") && const_scalar(pow, 1) == 2.f) ||
                        (onnx_op(pow, "Mul") && pow.inputs[1] == x);
    if (!square) continue;
    const auto mi = sole_reader(u, removed, pow.outputs[0]);
    if (!mi || !mean_over_last_axis(g.nodes[*mi]) || g.nodes[*mi].inputs[0] != pow.outputs[0]) continue;
    const auto ai = sole_reader(u, removed, g.nodes[*mi].outputs[0]);
    if (!ai || !onnx_op(g.nodes[*ai], "Add")) continue;
    const GraphNode& add = g.nodes[*ai];
    const int m = g.nodes[*mi].outputs[0];
    const auto eps = add.inputs.size() == 2 ? const_scalar(add, add.inputs[0] == m ? 1 : 0) : std::nullopt;
    if (!eps || other_operand(add, m) < 0) continue;
    const auto si = sole_reader(u, removed, add.outputs[0]);
    if (!si || !onnx_op(g.nodes[*si], "Sqrt") || g.nodes[*si].outputs.size() != 1) continue;
    const int s = g.nodes[*si].outputs[0];
    const auto di = sole_reader(u, removed, s);
    if (!di) continue;
    const GraphNode& div = g.nodes[*di];
    std::vector<size_t> chain = {pi, *mi, *ai, *si, *di};
    size_t ni = *di;  // the node writing n = x / s
    if (onnx_op(div, "Div") && div.inputs.size() == 2 && div.inputs[1] == s && div.inputs[0] == x) {
      // n = Div(x, s)
    } else if (onnx_op(div, "Div") && div.inputs.size() == 2 && div.inputs[1] == s && const_scalar(div, 0) == 1.f) {
      const auto mul = sole_reader(u, removed, div.outputs[0]);
      if (!mul || !onnx_op(g.nodes[*mul], "Mul") || other_operand(g.nodes[*mul], div.outputs[0]) != x) continue;
      ni = *mul;
      chain.push_back(ni);
    } else {
      continue;
    }
    // An optional Mul by a constant float scale.
    int out = g.nodes[ni].outputs[0];
    size_t last = ni;
    int scale = -1;
    std::string scale_name;
    const Tensor* scale_value = nullptr;
    if (const auto wi = sole_reader(u, removed, out); wi && onnx_op(g.nodes[*wi], "Mul")) {
      const GraphNode& wm = g.nodes[*wi];
      const int w = other_operand(wm, out);
      const size_t wpos = wm.inputs[0] == out ? 1 : 0;
      const Tensor* wt = w >= 0 && wpos < wm.info.const_inputs.size() ? wm.info.const_inputs[wpos] : nullptr;
      if (wt && wt->dtype() == DType::Float32 && wt->rank() <= 1) {
        scale = w;
        scale_name = wm.info.inputs[wpos];
        scale_value = wt;
        last = *wi;
        chain.push_back(last);
      }
    }
    GraphNode rms;
    rms.info.name = g.nodes[last].info.name;
    rms.info.op_type = "RMSNormalization";
    rms.info.opset = 23;  // the op's first opset; the model's own may predate it
    rms.info.attrs.values["axis"].i = -1;
    rms.info.attrs.values["epsilon"].kind = Attribute::Kind::Float;
    rms.info.attrs.values["epsilon"].f = *eps;
    rms.info.inputs = {g.value_names[x], scale_name};
    rms.info.const_inputs = {nullptr, scale_value};
    rms.info.outputs = g.nodes[last].info.outputs;
    rms.inputs = {x, scale};
    rms.outputs = g.nodes[last].outputs;
    g.nodes[last] = std::move(rms);  // the chain's last node: every reader of y still comes after it
    for (size_t k : chain)
      if (k != last) removed[k] = true;
    fused += static_cast<int>(chain.size()) - 1;
  }
  if (fused > 0) fusion::erase_nodes(g, removed);
  return fused;
}

}  // namespace qtool::runtime
