#include "runtime/fuse.h"

#include <limits>
#include <optional>
#include <vector>

#include "runtime/graph.h"

namespace qtool::runtime {
namespace {

bool onnx_op(const GraphNode& n, const char* op) { return n.info.domain.empty() && n.info.op_type == op; }

// A constant float scalar input i of a node (Clip's bounds), or `dflt` when the input is omitted;
// nullopt when the input is present but not a constant float scalar.
std::optional<float> const_scalar(const GraphNode& n, size_t i, float dflt) {
  if (i >= n.inputs.size() || n.inputs[i] < 0) return dflt;
  const Tensor* t = i < n.info.const_inputs.size() ? n.info.const_inputs[i] : nullptr;
  if (!t || t->dtype() != DType::Float32 || t->numel() != 1) return std::nullopt;
  return t->data<float>()[0];
}

// The activation a single-input node computes, when it is one the kernels can apply.
std::optional<FusedActivation> activation_of(const GraphNode& n) {
  using K = FusedActivation::Kind;
  if (onnx_op(n, "Relu")) return FusedActivation{K::Relu};
  if (onnx_op(n, "HardSwish")) return FusedActivation{K::HardSwish};
  if (onnx_op(n, "HardSigmoid"))
    return FusedActivation{K::HardSigmoid, n.info.attrs.get_float("alpha", 0.2f), n.info.attrs.get_float("beta", 0.5f)};
  if (onnx_op(n, "Clip")) {
    constexpr float inf = std::numeric_limits<float>::infinity();
    if (n.info.opset < 11)
      return FusedActivation{K::Clip, n.info.attrs.get_float("min", -inf), n.info.attrs.get_float("max", inf)};
    const auto lo = const_scalar(n, 1, std::numeric_limits<float>::lowest());
    const auto hi = const_scalar(n, 2, std::numeric_limits<float>::max());
    if (lo && hi) return FusedActivation{K::Clip, *lo, *hi};
  }
  return std::nullopt;
}

}  // namespace

int fuse_activations(Graph& g, const std::set<std::string>& keep) {
  const size_t count = g.nodes.size();
  // consumers[id]: indices of the nodes reading value id (once per reading input).
  std::vector<std::vector<size_t>> consumers(g.value_names.size());
  for (size_t k = 0; k < count; ++k) {
    for (int id : g.nodes[k].inputs)
      if (id >= 0) consumers[id].push_back(k);
    for (int id : g.nodes[k].implicit_inputs) consumers[id].push_back(k);
  }
  std::vector<bool> is_output(g.value_names.size(), false);
  for (const auto& o : g.outputs) is_output[o.id] = true;
  auto hidden_ok = [&](int id) { return !is_output[id] && !keep.count(g.value_names[id]); };

  std::vector<bool> removed(count, false);
  int fused = 0;
  for (size_t k = 0; k < count; ++k) {
    GraphNode& p = g.nodes[k];
    if (!(onnx_op(p, "Conv") || onnx_op(p, "Gemm") || onnx_op(p, "MatMul")) || p.outputs.size() != 1) continue;
    const int t = p.outputs[0];
    if (t < 0 || !hidden_ok(t)) continue;
    const auto& uses = consumers[t];
    if (uses.size() == 1) {  // P -> activation
      GraphNode& a = g.nodes[uses[0]];
      const auto act = a.inputs.size() >= 1 && a.inputs[0] == t && a.outputs.size() == 1 && a.implicit_inputs.empty()
                           ? activation_of(a)
                           : std::nullopt;
      if (!act) continue;
      p.info.activation = *act;
      p.outputs[0] = a.outputs[0];
      p.info.outputs[0] = a.info.outputs[0];
      removed[uses[0]] = true;
      ++fused;
    } else if (uses.size() == 2) {  // P -> Sigmoid -> Mul(t, sigmoid)
      size_t si = uses[0], mi = uses[1];
      if (!onnx_op(g.nodes[si], "Sigmoid")) std::swap(si, mi);
      GraphNode& s = g.nodes[si];
      GraphNode& m = g.nodes[mi];
      if (si == mi || !onnx_op(s, "Sigmoid") || !onnx_op(m, "Mul") || s.outputs.size() != 1 || m.inputs.size() != 2)
        continue;
      const int sv = s.outputs[0];
      const bool operands = (m.inputs[0] == t && m.inputs[1] == sv) || (m.inputs[0] == sv && m.inputs[1] == t);
      if (sv < 0 || !operands || !hidden_ok(sv) || consumers[sv].size() != 1) continue;
      p.info.activation = FusedActivation{FusedActivation::Kind::Silu};
      p.outputs[0] = m.outputs[0];
      p.info.outputs[0] = m.info.outputs[0];
      removed[si] = removed[mi] = true;
      fused += 2;
    }
  }
  if (fused == 0) return 0;
  std::vector<GraphNode> kept;
  kept.reserve(count - static_cast<size_t>(fused));
  for (size_t k = 0; k < count; ++k)
    if (!removed[k]) kept.push_back(std::move(g.nodes[k]));
  g.nodes = std::move(kept);
  return fused;
}

}  // namespace qtool::runtime
