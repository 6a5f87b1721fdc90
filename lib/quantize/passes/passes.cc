#include "quantize/passes/passes.h"

#include <set>

#include "core/error.h"
#include "core/limits.h"
#include "onnx/body_names.h"
#include "onnx/external_data.h"
#include "onnx/float32_promotion.h"
#include "runtime/session.h"

namespace qtool::quantize {

int remove_dead_nodes(Graph& g) {
  // Live: a node with an output that is a graph output or read inside a subgraph, and every producer of an input
  // of a live node: one walk back from those (sweeping until nothing changed took one sweep per node of a dead
  // chain, each with a reindex: quadratic).
  std::vector<char> live(static_cast<size_t>(g.node_count()), 0);
  std::vector<int> work;
  for (int i = 0; i < g.node_count(); ++i)
    for (const auto& o : g.node(i).output())
      if (!live[i] && !o.empty() && (g.is_graph_output(o) || g.used_by_subgraph(o))) live[i] = 1, work.push_back(i);
  while (!work.empty()) {
    const int i = work.back();
    work.pop_back();
    for (const auto& in : g.node(i).input())
      if (const int p = in.empty() ? -1 : g.producer(in); p >= 0 && !live[p]) live[p] = 1, work.push_back(p);
  }
  int removed = 0;
  for (int i = 0; i < g.node_count(); ++i)
    if (!live[i]) g.remove_node(i), ++removed;
  g.compact();
  // Initializers nobody reads (those also listed as graph inputs are part of the interface: kept).
  std::set<std::string> unused;
  for (const auto& t : g.proto().initializer())
    if (g.consumers(t.name()).empty() && !g.is_graph_output(t.name()) && !g.is_graph_input(t.name()) &&
        !g.used_by_subgraph(t.name()))
      unused.insert(t.name());
  g.remove_initializers(unused);
  g.reindex();
  return removed;
}

namespace {

// Ops never folded: randomness, quantization nodes (an existing QDQ model keeps its integer weights) and
// control flow (subgraphs).
bool foldable_op(const onnx::NodeProto& n) {
  static const std::set<std::string> kSkip = {"QuantizeLinear",
                                              "DequantizeLinear",
                                              "DynamicQuantizeLinear",
                                              "RandomNormal",
                                              "RandomUniform",
                                              "RandomNormalLike",
                                              "RandomUniformLike",
                                              "Multinomial",
                                              "Bernoulli",
                                              "If",
                                              "Loop",
                                              "Scan",
                                              "Constant"};
  return (n.domain().empty() || n.domain() == "ai.onnx") && !kSkip.count(n.op_type());
}

}  // namespace

int fold_constants(Graph& g) {
  // Each node whose inputs are all initializers runs once in qtool's interpreter; its outputs become
  // initializers. Graph order is topological, so chains fold in one sweep. Outputs much larger than the
  // inputs (ConstantOfShape, Expand, Tile) stay computed at run time to keep the file small.
  int folded = 0;
  for (int i = 0; i < g.node_count(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (!foldable_op(n) || n.output_size() == 0) continue;
    bool all_const = true;
    int64_t in_bytes = 0, largest_input = 0;
    for (const auto& in : n.input()) {
      if (in.empty()) continue;
      const auto* t = g.initializer(in);
      all_const = all_const && t && !g.is_graph_input(in);
      if (t) {
        in_bytes += t->data_location() == onnx::TensorProto::EXTERNAL  // left on disk (onnx/spill.h)
                        ? onnxio::tensor_proto_bytes(*t)
                        : static_cast<int64_t>(t->raw_data().size()) + 4 * t->float_data_size() +
                              8 * t->int64_data_size();
        largest_input = std::max(largest_input, onnxio::tensor_proto_bytes(*t));
      }
    }
    bool has_out = false;
    for (const auto& o : n.output()) has_out = has_out || (!o.empty() && !g.is_graph_output(o));
    if (!all_const || !has_out) continue;
    onnx::ModelProto one;
    one.set_ir_version(g.model().ir_version());
    *one.mutable_opset_import() = g.model().opset_import();
    auto* og = one.mutable_graph();
    og->set_name("fold");
    *og->add_node() = n;
    for (const auto& in : n.input())
      if (!in.empty()) *og->add_initializer() = *g.initializer(in);
    for (const auto& o : n.output())
      if (!o.empty()) og->add_output()->set_name(o);
    const int64_t max_out_bytes = std::max<int64_t>(2 * in_bytes, 1 << 16);
    std::map<std::string, Tensor> outs;
    try {
      // Results larger than max_out_bytes are not folded: refuse to compute them at all (Expand or Tile of a
      // tiny constant to [65536,65536] would otherwise allocate gigabytes here).
      // (The inputs themselves are decoded into tensors too: the cap is at least the largest of them.)
      const ScopedTensorLimit small(std::max(max_out_bytes, largest_input) + 64,
                                    "for a constant-folding result (the node stays in the graph)");
      outs = runtime::Session(one).run({});
    } catch (const Error&) {
      continue;  // not computable here (unsupported kernel, dtype, too large...): leave it to the runtime
    }
    // A sequence output (SplitToSequence of a constant) has no initializer form: Session::run leaves it out.
    bool all_tensors = true;
    for (const auto& o : n.output()) all_tensors = all_tensors && (o.empty() || outs.count(o));
    if (!all_tensors) continue;
    int64_t out_bytes = 0;
    for (const auto& [name, t] : outs) out_bytes += static_cast<int64_t>(t.nbytes());
    if (out_bytes > max_out_bytes) continue;
    for (const auto& [name, t] : outs) g.set_initializer(name, t);
    g.remove_node(i);
    ++folded;
  }
  g.compact();
  return folded;
}

int drop_initializer_inputs(Graph& g) {
  // One stable sweep (deleting each from the middle of the list was quadratic in models listing every weight
  // as an input, as IR < 4 exporters do).
  auto* inputs = g.proto().mutable_input();
  int kept = 0;
  for (int i = 0; i < inputs->size(); ++i) {
    if (g.is_initializer(inputs->Get(i).name())) continue;
    if (kept != i) inputs->SwapElements(kept, i);
    ++kept;
  }
  const int dropped = inputs->size() - kept;
  inputs->DeleteSubrange(kept, dropped);
  g.reindex();
  return dropped;
}

namespace {

// Inside If/Loop/Scan bodies (recursively): Constant nodes become body initializers and constant subexpressions
// fold, as in the main graph, so that a body's weights are found as weights. Exporters keep whole sub-models in
// branches: Silero VAD v5 (spox) holds every weight of its 8 kHz and 16 kHz networks as Constant nodes of one If's
// two branches; read through a Constant, a Conv weight looked like an activation without a calibrated range.
// Returns the number of rewrites.
int prepare_bodies(Graph& outer) {
  int rewrites = 0;
  for (int i = 0; i < outer.node_count(); ++i)
    for (auto& a : *outer.node(i).mutable_attribute()) {
      std::vector<onnx::GraphProto*> bodies;
      if (a.has_g()) bodies.push_back(a.mutable_g());
      for (auto& b : *a.mutable_graphs()) bodies.push_back(&b);
      for (onnx::GraphProto* body : bodies) {
        Graph g(outer.model(), *body, outer);
        rewrites += run_pass(g, *make_lift_constants_pass());
        rewrites += fold_constants(g);
        rewrites += prepare_bodies(g);
      }
    }
  if (rewrites > 0) outer.reindex();  // what the bodies read from this graph may have changed
  return rewrites;
}

}  // namespace

PrepareReport prepare_model(onnx::ModelProto& model, int64_t min_opset, const PrepareOptions& options) {
  PrepareReport r;
  // Body tensors get the names qtool calibrate recorded them under (onnx/body_names.h).
  r.rewrites["scope_body_names"] = onnxio::scope_body_names(model);
  const onnxio::Float32Promotion wide = onnxio::promote_to_float32(model);  // before Graph indexes the model
  r.rewrites["promote_to_float32"] = wide.inputs + wide.outputs + wide.tensors + wide.typed_nodes;
  Graph g(model);
  r.opset_before = g.opset();
  r.rewrites["drop_initializer_inputs"] = drop_initializer_inputs(g);
  r.rewrites["lift_constants"] = run_pass(g, *make_lift_constants_pass());
  r.rewrites["fold_constants"] = fold_constants(g);
  r.rewrites["prepare_bodies"] = prepare_bodies(g);
  r.rewrites["fold_batchnorm"] = run_pass(g, *make_fold_batchnorm_pass());
  r.rewrites["drop_infinite_bound"] = run_pass(g, *make_drop_infinite_bound_pass());
  upgrade_opset(g, min_opset);
  r.rewrites["relu_min_to_clip"] = run_pass(g, *make_relu_min_to_clip_pass());
  r.rewrites["drop_redundant_relu"] = run_pass(g, *make_drop_redundant_relu_pass());
  r.rewrites["div_to_mul"] = run_pass(g, *make_div_to_mul_pass());
  // After div_to_mul ("/ 6" is a Mul by then); a BatchNormalization behind a folded bias Add folds next.
  r.rewrites["fold_affine"] = fold_affine(g, options.fold_scale_after_conv);
  r.rewrites["fold_batchnorm"] += run_pass(g, *make_fold_batchnorm_pass());
  r.rewrites["fold_pad_into_conv"] = run_pass(g, *make_fold_pad_into_conv_pass());
  r.rewrites["remove_dead_nodes"] = remove_dead_nodes(g);
  r.opset_after = g.opset();
  return r;
}

}  // namespace qtool::quantize
