#include "runtime/fuse_hardswish.h"

#include <optional>
#include <vector>

#include "runtime/fuse_match.h"
#include "runtime/graph.h"

namespace qtool::runtime {
namespace {

using fusion::has_const_operand;
using fusion::onnx_op;

// n computes v / 6 (Div by 6, or Mul by the float nearest 1/6).
bool divides_by_six(const GraphNode& n, int v) {
  return (onnx_op(n, "Div") && has_const_operand(n, v, 6.f, false)) ||
         (onnx_op(n, "Mul") && has_const_operand(n, v, 1.f / 6.f, true));
}

// n = Mul(x, v) or Mul(v, x).
bool multiplies(const GraphNode& n, int x, int v) {
  return onnx_op(n, "Mul") && n.inputs.size() == 2 && n.outputs.size() == 1 &&
         ((n.inputs[0] == x && n.inputs[1] == v) || (n.inputs[0] == v && n.inputs[1] == x));
}

}  // namespace

int fuse_hard_swish(Graph& g, const std::set<std::string>& keep) {
  const fusion::Uses u = fusion::uses_of(g, keep);
  std::vector<bool> removed(g.nodes.size(), false);
  int fused = 0;
  for (size_t ci = 0; ci < g.nodes.size(); ++ci) {
    const GraphNode& clip = g.nodes[ci];
    if (!onnx_op(clip, "Clip") || clip.inputs.empty() || clip.outputs.size() != 1) continue;
    const auto bounds = fusion::clip_bounds(clip);
    const int a = clip.inputs[0], c = clip.outputs[0];
    if (!bounds || bounds->first != 0.f || bounds->second != 6.f || !u.single_hidden_use(a) ||
        !u.single_hidden_use(c))
      continue;
    // The node writing a (earlier: nodes are in topological order) must be Add(x, 3).
    std::optional<size_t> add;
    int x = -1;
    for (size_t k = 0; k < ci && !add; ++k) {
      const GraphNode& n = g.nodes[k];
      if (!onnx_op(n, "Add") || n.outputs.size() != 1 || n.outputs[0] != a || n.inputs.size() != 2) continue;
      for (int i = 0; i < 2 && !add; ++i)
        if (n.inputs[i] >= 0 && has_const_operand(n, n.inputs[i], 3.f, true)) add = k, x = n.inputs[i];
    }
    if (!add || removed[*add]) continue;
    const size_t mi = u.consumers[c][0];
    const GraphNode& mid = g.nodes[mi];
    if (mid.outputs.size() != 1 || !u.single_hidden_use(mid.outputs[0])) continue;
    const size_t fi = u.consumers[mid.outputs[0]][0];
    const GraphNode& fin = g.nodes[fi];
    const bool form_a = multiplies(mid, x, c) && divides_by_six(fin, mid.outputs[0]);
    const bool form_b = divides_by_six(mid, c) && multiplies(fin, x, mid.outputs[0]);
    if (!(form_a || form_b) || removed[mi] || removed[fi]) continue;

    GraphNode hs;
    hs.info.name = fin.info.name;
    hs.info.op_type = "HardSwish";
    hs.info.opset = 14;  // HardSwish's first opset; the node's own model may predate it
    hs.info.inputs = {g.value_names[x]};
    hs.info.outputs = fin.info.outputs;
    hs.info.const_inputs = {nullptr};
    hs.inputs = {x};
    hs.outputs = fin.outputs;
    g.nodes[fi] = std::move(hs);  // the last node of the chain: every reader of y still comes after it
    removed[*add] = removed[ci] = removed[mi] = true;
    fused += 3;
  }
  if (fused > 0) fusion::erase_nodes(g, removed);
  return fused;
}

}  // namespace qtool::runtime
