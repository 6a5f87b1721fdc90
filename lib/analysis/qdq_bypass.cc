#include "analysis/qdq_bypass.h"

#include <set>

#include "core/error.h"
#include "onnx/model_walk.h"

namespace qtool::analysis {
namespace {

std::set<std::string> constant_names(const onnx::GraphProto& g) {
  std::set<std::string> names;
  for (const auto& t : g.initializer()) names.insert(t.name());
  for (const auto& n : g.node())
    if (n.op_type() == "Constant" && (n.domain().empty() || n.domain() == "ai.onnx"))
      for (const auto& o : n.output()) names.insert(o);
  return names;
}

bool is_op(const onnx::NodeProto& n, const char* op) {
  return n.op_type() == op && (n.domain().empty() || n.domain() == "ai.onnx");
}

// QuantizeLinear nodes of activations: output name -> input (the activation).
std::vector<std::pair<std::string, std::string>> activation_quantizers(const onnx::GraphProto& g) {
  const std::set<std::string> constants = constant_names(g);
  std::vector<std::pair<std::string, std::string>> q;
  for (const auto& n : g.node())
    if (is_op(n, "QuantizeLinear") && n.input_size() > 0 && n.output_size() > 0 && !constants.count(n.input(0)))
      q.emplace_back(n.output(0), n.input(0));
  return q;
}

}  // namespace

std::vector<std::string> quantized_activations(const onnx::ModelProto& model) {
  const auto& g = model.graph();
  std::set<std::string> quantized_outputs;
  for (const auto& [out, in] : activation_quantizers(g)) quantized_outputs.insert(out);
  std::set<std::string> dequantized;  // Q outputs some DequantizeLinear reads
  for (const auto& n : g.node())
    if (is_op(n, "DequantizeLinear") && n.input_size() > 0 && quantized_outputs.count(n.input(0)))
      dequantized.insert(n.input(0));
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const auto& [out, in] : activation_quantizers(g))
    if (dequantized.count(out) && seen.insert(in).second) names.push_back(in);
  return names;
}

onnx::ModelProto keep_float(const onnx::ModelProto& model, const std::string& tensor) {
  onnx::ModelProto m = model;
  auto* g = m.mutable_graph();
  std::set<std::string> q_outputs;
  for (const auto& [out, in] : activation_quantizers(*g))
    if (in == tensor) q_outputs.insert(out);
  int rewired = 0;
  for (auto& n : *g->mutable_node()) {
    if (!is_op(n, "DequantizeLinear") || n.input_size() == 0 || !q_outputs.count(n.input(0))) continue;
    const std::string out = n.output(0);
    n.Clear();
    n.set_op_type("Identity");
    n.add_input(tensor);
    n.add_output(out);
    ++rewired;
  }
  if (rewired == 0) throw BadInputError("tensor '" + tensor + "' has no QuantizeLinear -> DequantizeLinear pair");
  // Drop the QuantizeLinear nodes nothing reads any more (another node or a graph output may still read one).
  std::set<std::string> read;
  onnxio::collect_reads(*g, read);
  for (const auto& o : g->output()) read.insert(o.name());
  auto* nodes = g->mutable_node();
  for (int i = nodes->size(); i-- > 0;) {
    const auto& n = nodes->Get(i);
    if (is_op(n, "QuantizeLinear") && n.output_size() > 0 && q_outputs.count(n.output(0)) && !read.count(n.output(0)))
      nodes->DeleteSubrange(i, 1);
  }
  return m;
}

}  // namespace qtool::analysis
