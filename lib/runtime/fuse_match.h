// Matching helpers shared by the graph-preparation fusion passes (runtime/fuse.cc, runtime/fuse_hardswish.cc).
#pragma once

#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/graph.h"

namespace qtool::runtime::fusion {

inline bool onnx_op(const GraphNode& n, const char* op) { return n.info.domain.empty() && n.info.op_type == op; }

// A constant float scalar input i of a node (Clip's bounds, an Add's constant), or `dflt` when the input is
// omitted; nullopt when the input is present but not a constant float scalar.
inline std::optional<float> const_scalar(const GraphNode& n, size_t i, std::optional<float> dflt = std::nullopt) {
  if (i >= n.inputs.size() || n.inputs[i] < 0) return dflt;
  const Tensor* t = i < n.info.const_inputs.size() ? n.info.const_inputs[i] : nullptr;
  if (!t || t->dtype() != DType::Float32 || t->numel() != 1) return std::nullopt;
  return t->data<float>()[0];
}

// The operand of binary node n that is not v; -1 when v is not an operand or n is not a one-output binary node.
inline int other_operand(const GraphNode& n, int v) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1) return -1;
  return n.inputs[0] == v ? n.inputs[1] : n.inputs[1] == v ? n.inputs[0] : -1;
}

// Binary node n reads v as its first operand (or as either, with either_order) and the constant float scalar c as
// the other.
bool has_const_operand(const GraphNode& n, int v, float c, bool either_order);

// Clip's [min, max] when both are constants (attributes before opset 11, initializer inputs after); an
// omitted bound is the float range's end.
std::optional<std::pair<float, float>> clip_bounds(const GraphNode& n);

// Who reads each value, and whether a rewrite may make a value disappear: not a graph output, not in `keep`
// (the tensors a tap must see).
struct Uses {
  std::vector<std::vector<size_t>> consumers;  // per value id: indices of the nodes reading it, once per input
  std::vector<bool> is_output;
  const std::set<std::string>* keep = nullptr;
  const Graph* graph = nullptr;
  bool hidden_ok(int id) const { return id >= 0 && !is_output[id] && !keep->count(graph->value_names[id]); }
  // The value is hideable and read by exactly one node.
  bool single_hidden_use(int id) const { return hidden_ok(id) && consumers[id].size() == 1; }
};
Uses uses_of(const Graph& g, const std::set<std::string>& keep);

// The node that alone reads p's single output, when that output may disappear (Uses::single_hidden_use) and the node
// is not already marked in `removed`: the next link of a chain a pass folds into p.
inline std::optional<size_t> sole_reader(const Uses& u, const GraphNode& p, const std::vector<bool>& removed) {
  const int t = p.outputs.size() == 1 ? p.outputs[0] : -1;
  if (!u.single_hidden_use(t) || removed[u.consumers[t][0]]) return std::nullopt;
  return u.consumers[t][0];
}

// p now computes c's output too (c's work folded into p); the caller marks c removed.
inline void take_output(GraphNode& p, const GraphNode& c) {
  p.outputs[0] = c.outputs[0];
  p.info.outputs[0] = c.info.outputs[0];
}

// Drops the nodes marked in `removed` (indexed like g.nodes), keeping the order of the rest.
void erase_nodes(Graph& g, const std::vector<bool>& removed);

// Adds t to g.constants under a new value name made from `hint`; returns its id. The tensor's address is stable
// (std::map), so a NodeInfo::const_inputs entry may point at it.
int add_constant(Graph& g, const std::string& hint, Tensor t);

// Drops the constants among `ids` that no node reads any more and that are not graph outputs (the weights a
// fold replaced with new ones), so the session does not hold both copies.
void drop_unread_constants(Graph& g, const std::vector<int>& ids);

}  // namespace qtool::runtime::fusion
