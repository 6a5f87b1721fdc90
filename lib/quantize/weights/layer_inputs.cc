#include "quantize/weights/layer_inputs.h"

#include <onnx/onnx_pb.h>

#include <set>

#include "quantize/graph.h"
#include "quantize/op_roles.h"
#include "runtime/session.h"

namespace qtool::quantize {

std::vector<std::string> gptq_layer_inputs(const onnx::ModelProto& model, const QConfig& config) {
  std::set<std::string> inits;
  for (const auto& t : model.graph().initializer()) inits.insert(t.name());
  std::vector<std::string> out;
  for (const auto& node : model.graph().node()) {
    if (node.op_type() != "MatMul" && node.op_type() != "Gemm") continue;
    if (node.input_size() < 2 || !inits.count(node.input(1)) || inits.count(node.input(0))) continue;
    const NodeQuant q = config.resolve(node.name(), node.op_type());
    if (!q.quantized || !q.weight) continue;
    TensorSettings w = *q.weight;
    if (const SettingsSlot* o = config.tensor_override(node.input(1)); o) {
      if (o->is_null) continue;
      apply_patch(w, o->patch);
    }
    if (needs_layer_inputs(w.algorithm) && std::find(out.begin(), out.end(), node.input(0)) == out.end())
      out.push_back(node.input(0));
  }
  return out;
}

LayerHessians collect_hessians(const onnx::ModelProto& model, const std::vector<std::string>& inputs,
                               const std::vector<std::map<std::string, Tensor>>& samples, int threads) {
  std::map<std::string, bool> transposed;  // Gemm transA: rows are the first dimension's columns
  for (const auto& name : inputs) transposed[name] = false;
  for (const auto& node : model.graph().node())
    if (node.op_type() == "Gemm" && node.input_size() > 0 && transposed.count(node.input(0)))
      transposed[node.input(0)] = attr_int(node, "transA", 0) != 0;
  LayerHessians hs;
  const runtime::Session session(model, {.threads = threads});
  runtime::RunOptions ro;
  ro.tap = [&](const std::string& name, const Tensor& x) {
    auto t = transposed.find(name);
    if (t == transposed.end() || x.dtype() != DType::Float32 || x.rank() < 1 || x.numel() == 0) return;
    const bool ta = t->second;
    const int64_t K = ta ? x.dim(0) : x.dim(x.rank() - 1);
    const int64_t rows = x.numel() / K;
    LayerHessian& h = hs[name];
    if (h.k == 0) h.k = K, h.h.assign(static_cast<size_t>(K * K), 0.0);
    if (h.k != K) return;  // a layer fed with differently shaped inputs: not a MatMul weight's K
    const float* d = x.data<float>();
    std::vector<double> row(static_cast<size_t>(K));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t k = 0; k < K; ++k) row[static_cast<size_t>(k)] = ta ? d[k * rows + r] : d[r * K + k];
      for (int64_t i = 0; i < K; ++i) {
        const double a = row[static_cast<size_t>(i)];
        if (a == 0) continue;
        double* hr = h.h.data() + i * K;
        for (int64_t j = 0; j < K; ++j) hr[j] += a * row[static_cast<size_t>(j)];
      }
    }
    h.rows += rows;
  };
  for (const auto& s : samples) session.run(s, ro);
  return hs;
}

}  // namespace qtool::quantize
