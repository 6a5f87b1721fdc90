#include "quantize/passes/passes.h"

#include <set>

#include "core/error.h"

namespace qtool::quantize {

int remove_dead_nodes(Graph& g) {
  int removed = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = g.node_count() - 1; i >= 0; --i) {
      const auto& n = g.node(i);
      bool live = false;
      for (const auto& o : n.output())
        live = live || (!o.empty() && (!g.consumers(o).empty() || g.is_graph_output(o) || g.used_by_subgraph(o)));
      if (!live) {
        g.remove_node(i);
        ++removed;
        changed = true;
      }
    }
    g.compact();
  }
  // Initializers nobody reads (those also listed as graph inputs are part of the interface: kept).
  std::vector<std::string> unused;
  for (const auto& t : g.proto().initializer())
    if (g.consumers(t.name()).empty() && !g.is_graph_output(t.name()) && !g.is_graph_input(t.name()) &&
        !g.used_by_subgraph(t.name()))
      unused.push_back(t.name());
  for (const auto& name : unused) g.remove_initializer(name);
  g.reindex();
  return removed;
}

int fold_constants(Graph& g) {
  // Shape-only ops on initializers: the data is unchanged, only the shape (or nothing) changes.
  int folded = 0;
  for (int i = 0; i < g.node_count(); ++i) {
    const auto& n = g.node(i);
    if (!n.domain().empty() || n.output_size() != 1 || g.is_graph_output(n.output(0))) continue;
    const std::string& op = n.op_type();
    if (op != "Identity" && op != "Reshape" && op != "Squeeze" && op != "Unsqueeze" && op != "Flatten") continue;
    bool all_const = n.input_size() > 0;
    for (const auto& in : n.input())
      all_const = all_const && !in.empty() && g.is_initializer(in) && !g.is_graph_input(in);
    if (!all_const) continue;
    const Tensor x = g.initializer_tensor(n.input(0));
    Shape shape = x.shape();
    if (op == "Reshape") {
      const Tensor s = g.initializer_tensor(n.input(1));
      if (s.dtype() != DType::Int64 || attr_int(n, "allowzero", 0)) continue;
      Shape out(s.span<int64_t>().begin(), s.span<int64_t>().end());
      int64_t known = 1, infer = -1;
      for (size_t d = 0; d < out.size(); ++d) {
        if (out[d] == 0) out[d] = d < shape.size() ? shape[d] : 0;
        if (out[d] == -1)
          infer = static_cast<int64_t>(d);
        else
          known *= out[d];
      }
      if (infer >= 0) out[static_cast<size_t>(infer)] = known ? x.numel() / known : 0;
      if (shape_numel(out) != x.numel()) continue;
      shape = out;
    } else if (op == "Flatten") {
      int64_t axis = attr_int(n, "axis", 1);
      if (axis < 0) axis += x.rank();
      int64_t a = 1;
      for (int64_t d = 0; d < axis; ++d) a *= shape[static_cast<size_t>(d)];
      shape = {a, a ? x.numel() / a : 0};
    } else if (op == "Squeeze" || op == "Unsqueeze") {
      std::vector<int64_t> axes = attr_ints(n, "axes");
      if (n.input_size() > 1) {
        const Tensor a = g.initializer_tensor(n.input(1));
        axes.assign(a.span<int64_t>().begin(), a.span<int64_t>().end());
      }
      if (op == "Squeeze") {
        std::set<int64_t> drop;
        for (auto a : axes) drop.insert(a < 0 ? a + x.rank() : a);
        Shape out;
        for (int64_t d = 0; d < x.rank(); ++d)
          if (!(axes.empty() ? shape[d] == 1 : drop.count(d) > 0)) out.push_back(shape[d]);
        shape = out;
      } else {
        const int64_t rank = x.rank() + static_cast<int64_t>(axes.size());
        std::set<int64_t> add;
        for (auto a : axes) add.insert(a < 0 ? a + rank : a);
        Shape out;
        size_t k = 0;
        for (int64_t d = 0; d < rank; ++d) out.push_back(add.count(d) ? 1 : shape[k++]);
        shape = out;
      }
    }
    g.set_initializer(n.output(0), x.reshaped(shape));
    g.remove_node(i);
    ++folded;
  }
  g.compact();
  return folded;
}

int drop_initializer_inputs(Graph& g) {
  auto* inputs = g.proto().mutable_input();
  int dropped = 0;
  for (int i = inputs->size() - 1; i >= 0; --i)
    if (g.is_initializer(inputs->Get(i).name())) {
      inputs->DeleteSubrange(i, 1);
      ++dropped;
    }
  g.reindex();
  return dropped;
}

PrepareReport prepare_model(onnx::ModelProto& model, int64_t min_opset) {
  Graph g(model);
  PrepareReport r;
  r.opset_before = g.opset();
  r.rewrites["drop_initializer_inputs"] = drop_initializer_inputs(g);
  r.rewrites["lift_constants"] = run_pass(g, *make_lift_constants_pass());
  r.rewrites["fold_constants"] = fold_constants(g);
  r.rewrites["fold_batchnorm"] = run_pass(g, *make_fold_batchnorm_pass());
  upgrade_opset(g, min_opset);
  r.rewrites["relu_min_to_clip"] = run_pass(g, *make_relu_min_to_clip_pass());
  r.rewrites["drop_redundant_relu"] = run_pass(g, *make_drop_redundant_relu_pass());
  r.rewrites["remove_dead_nodes"] = remove_dead_nodes(g);
  r.opset_after = g.opset();
  return r;
}

}  // namespace qtool::quantize
