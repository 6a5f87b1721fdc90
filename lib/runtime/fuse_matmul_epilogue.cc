#include "runtime/fuse_matmul_epilogue.h"

#include <string>
#include <vector>

#include "runtime/fuse_match.h"
#include "runtime/graph.h"

namespace qtool::runtime {
namespace {

using fusion::const_scalar;
using fusion::onnx_op;

// Which input of binary node n is t; -1 when neither.
int operand_index(const GraphNode& n, int t) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1) return -1;
  return n.inputs[0] == t ? 0 : n.inputs[1] == t ? 1 : -1;
}

// The scale the node applies to t: Mul(t, c), Mul(c, t) or Div(t, c), c a constant float scalar.
std::optional<float> scale_of(const GraphNode& n, int t) {
  const int i = operand_index(n, t);
  if (i < 0) return std::nullopt;
  if (onnx_op(n, "Mul")) return const_scalar(n, 1 - i);
  if (onnx_op(n, "Div") && i == 0)
    if (const auto c = const_scalar(n, 1); c && *c != 0.f) return 1.f / *c;
  return std::nullopt;
}

// The input index of a constant float [N] bias Add(t, b) / Add(b, t) adds to t; -1 when it is not one.
int bias_input(const GraphNode& n, int t, const GraphNode& matmul) {
  const int i = operand_index(n, t);
  if (i < 0 || !onnx_op(n, "Add")) return -1;
  const Tensor* b = n.info.const_inputs.size() == 2 ? n.info.const_inputs[1 - i] : nullptr;
  const Tensor* w = matmul.info.const_inputs.size() == 2 ? matmul.info.const_inputs[1] : nullptr;
  if (!b || !w || b->dtype() != DType::Float32 || b->rank() != 1 || w->rank() != 2 || b->dim(0) != w->dim(1))
    return -1;
  return 1 - i;
}

// The input index of the operand y = Add(t, r) / Add(r, t) adds to t when r may become the MatMul's addend: any
// tensor but t itself whose value exists before the MatMul runs (a graph input, a constant, or the output of a
// node before position k); -1 otherwise.
int addend_input(const GraphNode& n, int t, const std::vector<int>& producer, size_t k) {
  const int i = operand_index(n, t);
  if (i < 0 || !onnx_op(n, "Add")) return -1;
  const int r = n.inputs[1 - i];
  if (r < 0 || r == t || producer[r] >= static_cast<int>(k)) return -1;
  return 1 - i;
}

}  // namespace

int fuse_matmul_epilogue(Graph& g, const std::set<std::string>& keep) {
  const fusion::Uses u = fusion::uses_of(g, keep);
  std::vector<int> producer(g.value_names.size(), -1);  // node index writing each value; -1: input or constant
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (int id : g.nodes[k].outputs)
      if (id >= 0) producer[id] = static_cast<int>(k);
  std::vector<bool> removed(g.nodes.size(), false);
  int fused = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    GraphNode& p = g.nodes[k];
    if (!onnx_op(p, "MatMul") || p.inputs.size() != 2 || p.outputs.size() != 1) continue;
    // Follow the chain: at most one scale, then at most one bias, then at most one addend.
    for (int step = 0; step < 3; ++step) {
      const int t = p.outputs[0];
      if (!u.single_hidden_use(t)) break;
      // p's output may be a node's output that an earlier step moved onto p: look its reader up by value.
      const size_t ci = u.consumers[t][0];
      GraphNode& c = g.nodes[ci];
      if (removed[ci] || c.outputs.size() != 1 || !c.implicit_inputs.empty()) break;
      const bool has_bias = p.inputs.size() > 2 && p.inputs[2] >= 0, has_addend = p.inputs.size() > 3;
      if (has_addend) break;
      const auto scale = has_bias ? std::nullopt : scale_of(c, t);
      const int bi = has_bias ? -1 : bias_input(c, t, p);
      const int ai = scale || bi >= 0 ? -1 : addend_input(c, t, producer, k);
      auto add_input = [&](int id, const std::string& name, const Tensor* value) {
        p.inputs.push_back(id);
        p.info.inputs.push_back(name);
        p.info.const_inputs.push_back(value);
      };
      if (scale) {
        p.info.matmul_alpha *= *scale;
      } else if (bi >= 0) {
        add_input(c.inputs[bi], c.info.inputs[bi], c.info.const_inputs[bi]);
      } else if (ai >= 0) {
        if (p.inputs.size() == 2) add_input(-1, "", nullptr);  // no bias: input 2 omitted
        add_input(c.inputs[ai], c.info.inputs[ai], c.info.const_inputs[ai]);
      } else {
        break;
      }
      p.outputs[0] = c.outputs[0];
      p.info.outputs[0] = c.info.outputs[0];
      producer[c.outputs[0]] = static_cast<int>(k);
      removed[ci] = true;
      ++fused;
    }
  }
  if (fused > 0) fusion::erase_nodes(g, removed);
  return fused;
}

}  // namespace qtool::runtime
