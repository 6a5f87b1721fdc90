// What the weight algorithms need from calibration: which layers ask for GPTQ / AWQ, and their inputs' Hessians.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "quantize/qconfig.h"
#include "quantize/weights/weight_quantizer.h"

namespace onnx {
class ModelProto;
}

namespace qtool::quantize {

// Data inputs of the MatMul / Gemm nodes whose weight the config quantizes with "algorithm": "gptq" or "awq".
std::vector<std::string> gptq_layer_inputs(const onnx::ModelProto& model, const QConfig& config);

// Runs the float model on `samples` (one input map per run) and sums X^T X of each named tensor, read as rows of
// its last dimension (Gemm with transA: of its first). Memory: one K x K matrix per name, whatever the sample count.
LayerHessians collect_hessians(const onnx::ModelProto& model, const std::vector<std::string>& inputs,
                               const std::vector<std::map<std::string, Tensor>>& samples, int threads);

// The same Hessians, held a bounded group at a time. The layer inputs are ordered by where the graph produces them
// and cut into groups whose Hessians (8 K^2 bytes each) fit `budget_bytes` (a group has at least one). A group's
// Hessians are computed when one of them is first asked for, and the previous group's are released then: the QDQ
// rewrite asks in graph order, so each group is computed once and at most one group is held. Each group runs only
// its own segment of the graph (the nodes after the previous group's last producer up to its own), fed with the
// float activations the previous segments left for later nodes (kept per sample), so the interpreter holds one
// segment's weights; the inputs are those of the float model (not of the already quantized layers before it), so
// every Hessian equals collect_hessians' bit for bit. One group when everything fits (or the graph has If/Loop/Scan
// bodies, or is not in topological order): one pass, computed up front. Asking for an earlier group again (the
// accuracy guard rewrites the model several times) recomputes from the first segment.
// Memory: one group's Hessians, one segment's weights, the activations crossing one cut for every sample and, with
// several groups, a copy of the float model (cheap when its weights stay in external data).
class LayerHessianSource {
 public:
  LayerHessianSource(const onnx::ModelProto& model, const std::vector<std::string>& inputs,
                     const std::vector<std::map<std::string, Tensor>>& samples, int threads, int64_t budget_bytes);
  ~LayerHessianSource();
  LayerHessianSource(const LayerHessianSource&) = delete;
  LayerHessianSource& operator=(const LayerHessianSource&) = delete;

  // The Hessian of layer input `name` (or of a name given to add_fixed), or null when it is not one of `inputs` or
  // no run reached it.
  const LayerHessian* find(const std::string& name);
  // Hessians computed elsewhere (a conv's patch Hessians, keyed by its weight: weights/conv_gptq.h). find() returns
  // them as given; they are held for the source's life and not counted in the budget.
  void add_fixed(LayerHessians hessians);
  int groups() const;
  int segments_run() const;  // segment passes so far (each over every sample)

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace qtool::quantize
