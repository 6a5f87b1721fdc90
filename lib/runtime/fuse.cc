#include "runtime/fuse.h"

#include <limits>
#include <optional>
#include <vector>

#include "runtime/fuse_match.h"
#include "runtime/graph.h"

namespace qtool::runtime {
namespace fusion {

std::optional<std::pair<float, float>> clip_bounds(const GraphNode& n) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  if (n.info.opset < 11) return std::pair{n.info.attrs.get_float("min", -inf), n.info.attrs.get_float("max", inf)};
  const auto lo = const_scalar(n, 1, std::numeric_limits<float>::lowest());
  const auto hi = const_scalar(n, 2, std::numeric_limits<float>::max());
  if (lo && hi) return std::pair{*lo, *hi};
  return std::nullopt;
}

bool has_const_operand(const GraphNode& n, int v, float c, bool either_order) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1) return false;
  if (n.inputs[0] == v) {
    const auto k = const_scalar(n, 1);
    return k && *k == c;
  }
  if (either_order && n.inputs[1] == v) {
    const auto k = const_scalar(n, 0);
    return k && *k == c;
  }
  return false;
}

Uses uses_of(const Graph& g, const std::set<std::string>& keep) {
  Uses u;
  u.consumers.resize(g.value_names.size());
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    for (int id : g.nodes[k].inputs)
      if (id >= 0) u.consumers[id].push_back(k);
    for (int id : g.nodes[k].implicit_inputs) u.consumers[id].push_back(k);
  }
  u.is_output.assign(g.value_names.size(), false);
  for (const auto& o : g.outputs) u.is_output[o.id] = true;
  u.keep = &keep;
  u.graph = &g;
  return u;
}

void erase_nodes(Graph& g, const std::vector<bool>& removed) {
  std::vector<GraphNode> kept;
  kept.reserve(g.nodes.size());
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (!removed[k]) kept.push_back(std::move(g.nodes[k]));
  g.nodes = std::move(kept);
}

int add_constant(Graph& g, const std::string& hint, Tensor t) {
  std::string name = hint;
  for (int k = 1; g.value_ids.count(name); ++k) name = hint + "_" + std::to_string(k);
  const int id = static_cast<int>(g.value_names.size());
  g.value_names.push_back(name);
  g.value_ids.emplace(name, id);
  g.constants[id] = std::move(t);
  return id;
}

void drop_unread_constants(Graph& g, const std::vector<int>& ids) {
  if (ids.empty()) return;
  const std::set<std::string> none;
  const Uses u = uses_of(g, none);
  for (int id : ids)
    if (u.consumers[id].empty() && !u.is_output[id]) g.constants.erase(id);
}

}  // namespace fusion

namespace {

using fusion::onnx_op;

// The activation a single-input node computes, when it is one the kernels can apply (Gelu only on the CPU).
std::optional<FusedActivation> activation_of(const GraphNode& n, bool cpu) {
  using K = FusedActivation::Kind;
  if (cpu && onnx_op(n, "Gelu") && n.info.attrs.get_string("approximate", "none") == "none")
    return FusedActivation{K::Gelu};
  if (onnx_op(n, "Relu")) return FusedActivation{K::Relu};
  if (onnx_op(n, "HardSwish")) return FusedActivation{K::HardSwish};
  if (onnx_op(n, "HardSigmoid"))
    return FusedActivation{K::HardSigmoid, n.info.attrs.get_float("alpha", 0.2f), n.info.attrs.get_float("beta", 0.5f)};
  if (onnx_op(n, "Clip"))
    if (const auto bounds = fusion::clip_bounds(n)) return FusedActivation{K::Clip, bounds->first, bounds->second};
  return std::nullopt;
}

}  // namespace

int fuse_activations(Graph& g, const std::set<std::string>& keep, bool cpu) {
  const size_t count = g.nodes.size();
  const fusion::Uses u = fusion::uses_of(g, keep);
  const auto& consumers = u.consumers;
  auto hidden_ok = [&](int id) { return u.hidden_ok(id); };

  std::vector<bool> removed(count, false);
  int fused = 0;
  for (size_t k = 0; k < count; ++k) {
    GraphNode& p = g.nodes[k];
    if (!(onnx_op(p, "Conv") || onnx_op(p, "Gemm") || onnx_op(p, "MatMul")) || p.outputs.size() != 1) continue;
    const int t = p.outputs[0];
    if (t < 0 || !hidden_ok(t)) continue;
    const auto& uses = consumers[t];
    if (uses.size() == 1 && cpu && onnx_op(p, "MatMul")) {  // MatMul -> [Cast to float] -> Softmax over the last axis
      size_t si = uses[0];
      const bool cast = onnx_op(g.nodes[si], "Cast") && g.nodes[si].info.attrs.get_int("to", 0) == 1 &&
                        g.nodes[si].outputs.size() == 1 && hidden_ok(g.nodes[si].outputs[0]) &&
                        consumers[g.nodes[si].outputs[0]].size() == 1;
      const int sv = cast ? g.nodes[si].outputs[0] : t;  // what the Softmax reads (MatMul's output is float)
      if (cast) si = consumers[sv][0];
      const GraphNode& s = g.nodes[si];
      if (onnx_op(s, "Softmax") && s.info.opset >= 13 && s.info.attrs.get_int("axis", -1) == -1 &&
          s.inputs.size() == 1 && s.inputs[0] == sv && s.outputs.size() == 1 && s.implicit_inputs.empty()) {
        p.info.activation = FusedActivation{FusedActivation::Kind::Softmax};
        p.outputs[0] = s.outputs[0];
        p.info.outputs[0] = s.info.outputs[0];
        removed[uses[0]] = removed[si] = true;
        fused += cast ? 2 : 1;
        continue;
      }
    }
    if (uses.size() == 1) {  // P -> activation
      GraphNode& a = g.nodes[uses[0]];
      const auto act = a.inputs.size() >= 1 && a.inputs[0] == t && a.outputs.size() == 1 && a.implicit_inputs.empty()
                           ? activation_of(a, cpu)
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
  fusion::erase_nodes(g, removed);
  return fused;
}

}  // namespace qtool::runtime
