#include "quantize/weights/layer_inputs.h"

#include <onnx/onnx_pb.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

#include "quantize/graph.h"
#include "quantize/op_roles.h"
#include "quantize/weights/segments.h"
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

namespace {

using Samples = std::vector<std::map<std::string, Tensor>>;

// H += X^T X over the rows of x (its last dimension; transposed: its first). Unchanged from the one-pass version,
// so grouped and one-pass Hessians are equal bit for bit.
void accumulate(LayerHessian& h, const Tensor& x, bool ta) {
  if (x.dtype() != DType::Float32 || x.rank() < 1 || x.numel() == 0) return;
  const int64_t K = ta ? x.dim(0) : x.dim(x.rank() - 1);
  const int64_t rows = x.numel() / K;
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
}

}  // namespace

struct LayerHessianSource::State {
  const Samples& samples;
  int threads = 1;
  std::map<std::string, bool> transposed;  // layer input -> Gemm transA (rows are the first dimension's columns)
  std::map<std::string, int> group_of;     // layer input -> group
  int groups = 1;
  // Several groups: the float model, the end (exclusive node index) of each group's segment, and the runner that
  // holds, per sample, the values computed so far that later segments read; `next` is the next segment to run.
  std::optional<onnx::ModelProto> model;
  std::vector<int> seg_end;
  std::optional<SegmentRunner> runner;
  // Progress: `current` is the group whose Hessians `hs` holds (-1: none).
  LayerHessians hs;
  LayerHessians fixed;  // add_fixed: held for the source's life
  int current = -1, next = 0, segments_run = 0;

  explicit State(const Samples& s) : samples(s) {}

  runtime::TapFn tap(int group) {
    return [this, group](const std::string& name, const Tensor& x) {
      auto g = group_of.find(name);
      if (g == group_of.end() || g->second != group) return;
      accumulate(hs[name], x, transposed.at(name));
    };
  }

  void compute(int group) {
    hs.clear();
    current = -1;
    if (!model) {  // one group: one pass of the whole model
      const runtime::Session session(*full, {.threads = threads});
      runtime::RunOptions ro;
      ro.tap = tap(0);
      for (const auto& s : samples) session.run(s, ro);
      ++segments_run;
      current = 0;
      return;
    }
    if (group < next) next = 0;
    if (next == 0) runner->restart();
    for (; next <= group; ++next, ++segments_run)
      runner->run_to(seg_end[static_cast<size_t>(next)], next == group ? tap(next) : runtime::TapFn());
    current = group;
  }

  const onnx::ModelProto* full = nullptr;  // one group: the caller's model, during the constructor only
};

LayerHessianSource::LayerHessianSource(const onnx::ModelProto& model, const std::vector<std::string>& inputs,
                                       const Samples& samples, int threads, int64_t budget_bytes)
    : s_(std::make_unique<State>(samples)) {
  State& s = *s_;
  s.threads = threads;
  if (inputs.empty()) return;  // only add_fixed's Hessians: nothing to run
  const onnx::GraphProto& g = model.graph();
  for (const auto& name : inputs) s.transposed[name] = false, s.group_of[name] = 0;
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : g.initializer()) inits[t.name()] = &t;
  // K of each layer input, from its weight's shape (the Hessian is 8 K^2 bytes); producer position of each value.
  std::map<std::string, int64_t> k_of;
  std::map<std::string, int> producer;
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    for (const auto& out : n.output()) producer.emplace(out, i);
    if ((n.op_type() != "MatMul" && n.op_type() != "Gemm") || n.input_size() < 2 || !s.group_of.count(n.input(0)))
      continue;
    const bool gemm = n.op_type() == "Gemm";
    if (gemm) s.transposed[n.input(0)] = attr_int(n, "transA", 0) != 0;
    auto w = inits.find(n.input(1));
    if (w == inits.end() || w->second->dims_size() != 2 || k_of.count(n.input(0))) continue;
    k_of[n.input(0)] = w->second->dims(gemm && attr_int(n, "transB", 0) != 0 ? 1 : 0);
  }
  // Groups: layer inputs by producer position (graph inputs first), cut where the next one would pass the budget;
  // inputs with the same position stay together (a segment cannot end between them).
  std::vector<std::string> order = inputs;
  auto pos = [&](const std::string& name) {
    auto p = producer.find(name);
    return p == producer.end() ? -1 : p->second;
  };
  std::stable_sort(order.begin(), order.end(), [&](const auto& x, const auto& y) { return pos(x) < pos(y); });
  std::vector<int> ends;
  int64_t bytes = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const int64_t k = k_of.count(order[i]) ? k_of[order[i]] : 0;
    const int64_t h = 8 * k * k;
    if (h > budget_bytes)  // held alone: the budget cannot split one layer's Hessian
      spdlog::warn("GPTQ: the Hessian of '{}' ({} x {}) needs {} MiB, more than the {} MiB budget (--gptq-memory); "
                   "it is held alone, so this layer takes that much",
                   order[i], k, k, (h + (1 << 20) - 1) >> 20, budget_bytes >> 20);
    if (i > 0 && bytes + h > budget_bytes && pos(order[i]) != pos(order[i - 1]))
      ends.push_back(pos(order[i - 1]) + 1), bytes = 0;
    s.group_of[order[i]] = static_cast<int>(ends.size());
    bytes += h;
  }
  if (!order.empty()) ends.push_back(pos(order.back()) + 1);
  s.groups = static_cast<int>(std::max<size_t>(1, ends.size()));
  if (s.groups > 1 && !segmentable(g)) {  // segments need a plain, ordered graph
    for (auto& [name, grp] : s.group_of) grp = 0;
    s.groups = 1;
  }
  if (s.groups == 1) {
    s.full = &model;
    s.compute(0);
    s.full = nullptr;
    return;
  }
  s.model = model;
  s.seg_end = ends;
  s.runner.emplace(*s.model, samples, threads, ends.back());
}

LayerHessianSource::~LayerHessianSource() = default;

const LayerHessian* LayerHessianSource::find(const std::string& name) {
  if (auto f = s_->fixed.find(name); f != s_->fixed.end()) return &f->second;
  auto g = s_->group_of.find(name);
  if (g == s_->group_of.end()) return nullptr;
  if (g->second != s_->current) s_->compute(g->second);
  auto h = s_->hs.find(name);
  return h == s_->hs.end() ? nullptr : &h->second;
}

void LayerHessianSource::add_fixed(LayerHessians hessians) { s_->fixed.merge(hessians); }

int LayerHessianSource::groups() const { return s_->groups; }
int LayerHessianSource::segments_run() const { return s_->segments_run; }

LayerHessians collect_hessians(const onnx::ModelProto& model, const std::vector<std::string>& inputs,
                               const Samples& samples, int threads) {
  LayerHessianSource source(model, inputs, samples, threads, INT64_MAX);
  LayerHessians hs;
  for (const auto& name : inputs)
    if (const LayerHessian* h = source.find(name)) hs[name] = *h;
  return hs;
}

}  // namespace qtool::quantize
