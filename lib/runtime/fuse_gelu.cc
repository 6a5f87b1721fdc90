#include "runtime/fuse_gelu.h"

#include <cmath>
#include <optional>
#include <vector>

#include "runtime/fuse_match.h"
#include "runtime/graph.h"

namespace qtool::runtime {
namespace {

using fusion::onnx_op;
using fusion::other_operand;

// n = op(v, c) or op(c, v) (commutative ops only for the second form) with c the constant float `value`.
bool with_constant(const GraphNode& n, const char* op, int v, float value, bool commutative) {
  return onnx_op(n, op) && fusion::has_const_operand(n, v, value, commutative);
}

}  // namespace

int fuse_gelu(Graph& g, const std::set<std::string>& keep) {
  const fusion::Uses u = fusion::uses_of(g, keep);
  std::vector<int> producer(g.value_names.size(), -1);
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (int id : g.nodes[k].outputs)
      if (id >= 0) producer[id] = static_cast<int>(k);
  const float sqrt2 = std::sqrt(2.f), inv_sqrt2 = 1.f / std::sqrt(2.f);
  std::vector<bool> removed(g.nodes.size(), false);
  int fused = 0;
  for (size_t ei = 0; ei < g.nodes.size(); ++ei) {
    const GraphNode& erf = g.nodes[ei];
    if (!onnx_op(erf, "Erf") || erf.inputs.size() != 1 || erf.outputs.size() != 1) continue;
    const int d = erf.inputs[0], e = erf.outputs[0];
    if (d < 0 || producer[d] < 0 || !u.single_hidden_use(d) || !u.single_hidden_use(e)) continue;
    const size_t di = static_cast<size_t>(producer[d]);
    const GraphNode& div = g.nodes[di];
    if (div.inputs.size() != 2 || div.inputs[0] < 0) continue;
    int x = -1;
    for (int v : div.inputs)
      if (v >= 0 && x < 0 &&
          (with_constant(div, "Div", v, sqrt2, false) || with_constant(div, "Mul", v, inv_sqrt2, true)))
        x = v;
    if (x < 0) continue;
    const size_t ai = u.consumers[e][0];
    const GraphNode& add = g.nodes[ai];
    if (!with_constant(add, "Add", e, 1.f, true) || !u.single_hidden_use(add.outputs[0])) continue;
    const int a = add.outputs[0];
    const size_t mi = u.consumers[a][0];
    const GraphNode& mid = g.nodes[mi];
    const int m_other = other_operand(mid, a);
    if (!onnx_op(mid, "Mul") || m_other < 0) continue;
    size_t fi = 0;  // the chain's last node, whose output y stays
    std::optional<size_t> half;  // form 2's Mul(x, 0.5)
    if (m_other == x) {  // form 1: y = Mul(Mul(x, a), 0.5)
      if (!u.single_hidden_use(mid.outputs[0])) continue;
      fi = u.consumers[mid.outputs[0]][0];
      if (!with_constant(g.nodes[fi], "Mul", mid.outputs[0], 0.5f, true)) continue;
    } else {  // form 2: y = Mul(Mul(x, 0.5), a)
      if (producer[m_other] < 0 || !u.single_hidden_use(m_other)) continue;
      half = static_cast<size_t>(producer[m_other]);
      if (!with_constant(g.nodes[*half], "Mul", x, 0.5f, true)) continue;
      fi = mi;
    }
    if (removed[di] || removed[ai] || removed[mi] || removed[fi] || (half && removed[*half])) continue;

    GraphNode gelu;
    gelu.info.name = g.nodes[fi].info.name;
    gelu.info.op_type = "Gelu";
    gelu.info.opset = 20;  // Gelu's first opset; the node's own model may predate it
    gelu.info.inputs = {g.value_names[x]};
    gelu.info.outputs = g.nodes[fi].info.outputs;
    gelu.info.const_inputs = {nullptr};
    gelu.inputs = {x};
    gelu.outputs = g.nodes[fi].outputs;
    g.nodes[fi] = std::move(gelu);  // the last node of the chain: every reader of y still comes after it
    removed[di] = removed[ei] = removed[ai] = true;
    if (half) removed[*half] = true;
    if (mi != fi) removed[mi] = true;
    fused += 4;
  }
  if (fused > 0) fusion::erase_nodes(g, removed);
  return fused;
}

}  // namespace qtool::runtime
