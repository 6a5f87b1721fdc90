#include "runtime/conv_layout.h"

#include <vector>

#include "runtime/fuse_match.h"
#include "runtime/graph.h"
#include "runtime/kernels/blocked_layout.h"
#include "runtime/kernels/conv_dnnl.h"

namespace qtool::runtime {
namespace {

using fusion::onnx_op;
using kernels::compute::blocked_layout_name;
using kernels::compute::channel_block;

// The output channel count of a Conv that runs on oneDNN; 0 for any other node.
int64_t dnnl_conv_channels(const GraphNode& n) {
  if (!onnx_op(n, "Conv") || n.inputs.size() < 2 || n.outputs.size() != 1 || !n.implicit_inputs.empty()) return 0;
  const Tensor* w = n.info.const_inputs[1];
  return w && w->dtype() == DType::Float32 && w->rank() == 4 ? w->dim(0) : 0;
}

// r is a Conv on oneDNN that reads value t as its input X only (not as W or B).
bool reads_as_conv_x(const GraphNode& r, int t) {
  return dnnl_conv_channels(r) > 0 && r.inputs[0] == t && r.inputs[1] != t && (r.inputs.size() < 3 || r.inputs[2] != t);
}

bool is_add(const GraphNode& n) {
  return onnx_op(n, "Add") && n.inputs.size() == 2 && n.inputs[0] >= 0 && n.inputs[1] >= 0 && n.outputs.size() == 1 &&
         n.outputs[0] >= 0 && n.implicit_inputs.empty();
}

// Where the blocked layout is NHWC: a Transpose from NHWC to NCHW (perm [0, 3, 1, 2]) whose output only oneDNN
// Convs read, as their input X, and which may disappear, is dropped, and those Convs read its NHWC input in place
// (NodeInfo::nhwc_input): a model exported from NHWC (TensorFlow's mobilenetv2) no longer copies its input into NCHW
// for the first Conv to copy back into NHWC rows. Returns the number of Transposes dropped.
int fold_nhwc_transposes(Graph& g, const fusion::Uses& u) {
  if (!kernels::compute::blocked_layout_is_nhwc()) return 0;
  std::vector<bool> removed(g.nodes.size(), false);
  int folded = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const GraphNode& tr = g.nodes[k];
    if (!onnx_op(tr, "Transpose") || tr.inputs.size() != 1 || tr.inputs[0] < 0 || tr.outputs.size() != 1 ||
        tr.outputs[0] < 0 || !tr.implicit_inputs.empty() || tr.info.attrs.get_ints("perm") != std::vector<int64_t>{0, 3, 1, 2})
      continue;
    const int t = tr.outputs[0];
    if (!u.hidden_ok(t) || u.consumers[t].empty()) continue;
    bool ok = true;
    for (size_t r : u.consumers[t]) ok = ok && reads_as_conv_x(g.nodes[r], t);
    if (!ok) continue;
    for (size_t r : u.consumers[t]) {
      GraphNode& c = g.nodes[r];
      c.inputs[0] = tr.inputs[0];
      c.info.inputs[0] = tr.info.inputs[0];
      c.info.blocked_input = true;
      c.info.nhwc_input = true;
    }
    removed[k] = true;
    ++folded;
  }
  if (folded > 0) fusion::erase_nodes(g, removed);
  return folded;
}

}  // namespace

int keep_conv_layout_blocked(Graph& g, const std::set<std::string>& keep) {
  if (!kernels::compute::dnnl_conv_available()) return 0;
  const fusion::Uses u = fusion::uses_of(g, keep);
  // channels[id] > 0: the value is (still) a candidate for the blocked layout, with that many channels.
  std::vector<int64_t> channels(g.value_names.size(), 0);
  std::vector<int> producer(g.value_names.size(), -1);
  for (size_t k = 0; k < g.nodes.size(); ++k) {  // topological: an Add's operands are settled before it
    const GraphNode& n = g.nodes[k];
    int64_t c = dnnl_conv_channels(n);
    if (is_add(n) && channels[n.inputs[0]] == channels[n.inputs[1]]) c = channels[n.inputs[0]];
    const int t = n.outputs.empty() ? -1 : n.outputs[0];
    if (c > 0 && channel_block(c) > 0 && u.hidden_ok(t) && !u.consumers[t].empty()) {
      channels[t] = c;
      producer[t] = static_cast<int>(k);
    }
  }
  // Drop candidates until every remaining one has a producer and readers that take the blocked layout. An Add is
  // layout-blind: its output and both operands are blocked together or not at all.
  auto blocked_add = [&](const GraphNode& n) {
    return is_add(n) && channels[n.inputs[0]] > 0 && channels[n.inputs[0]] == channels[n.inputs[1]] &&
           channels[n.outputs[0]] > 0;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t t = 0; t < channels.size(); ++t) {
      if (channels[t] == 0) continue;
      bool ok = dnnl_conv_channels(g.nodes[producer[t]]) > 0 || blocked_add(g.nodes[producer[t]]);
      for (size_t k : u.consumers[t]) {
        const GraphNode& r = g.nodes[k];
        ok = ok && (reads_as_conv_x(r, static_cast<int>(t)) || blocked_add(r));
      }
      if (!ok) {
        channels[t] = 0;
        changed = true;
      }
    }
  }
  // (u's node indices are stale from here: the fold erases nodes)
  int blocked = fold_nhwc_transposes(g, u);
  for (size_t t = 0; t < channels.size(); ++t) {
    if (channels[t] == 0) continue;
    ++blocked;
    const std::string suffix = std::string("/") + blocked_layout_name();
    std::string name = g.value_names[t] + suffix;
    for (int k = 1; g.value_ids.count(name); ++k) name = g.value_names[t] + suffix + "_" + std::to_string(k);
    g.value_ids.erase(g.value_names[t]);
    g.value_ids.emplace(name, static_cast<int>(t));
    g.value_names[t] = name;
  }
  if (blocked == 0) return 0;
  for (GraphNode& n : g.nodes) {
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (n.inputs[i] >= 0 && channels[n.inputs[i]] > 0) n.info.inputs[i] = g.value_names[n.inputs[i]];
    for (size_t o = 0; o < n.outputs.size(); ++o)
      if (n.outputs[o] >= 0 && channels[n.outputs[o]] > 0) n.info.outputs[o] = g.value_names[n.outputs[o]];
    if (dnnl_conv_channels(n) > 0) {
      n.info.blocked_input = n.info.nhwc_input || (n.inputs[0] >= 0 && channels[n.inputs[0]] > 0);
      n.info.blocked_output = channels[n.outputs[0]] > 0;
    }
  }
  return blocked;
}

}  // namespace qtool::runtime
