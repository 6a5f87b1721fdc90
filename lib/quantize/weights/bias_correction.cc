// Empirical bias correction. Error it removes: the shift of each output channel's mean that weight rounding
// causes. For y = W x + b and rounded weights Wq, E[y] - E[yq] = (W - Wq) E[x] per output channel (linearity);
// adding it to b makes the quantized layer's mean output over the calibration inputs equal the float one.
// Rounding errors that are biased per channel (kernel-sum rounding cancels them only within one kernel; coarse
// per-tensor grids and saturation-safe scales do not) otherwise add up through the following layers. For a Conv,
// E[x] is the input's per-channel mean over samples and positions: taps that read padding see zeros, not the
// mean, so border outputs keep part of the shift.
#include "quantize/weights/bias_correction.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "numerics/qdq.h"
#include "quantize/graph.h"
#include "quantize/weights/segments.h"
#include "runtime/session.h"

namespace qtool::quantize {
namespace {

struct Layer {
  int node = -1;
  Tensor w, wq;          // float and rounded weights
  int64_t group = 1;     // Conv
  bool gemm = false, trans_b = false;
  float gain = 1.0f;     // Gemm alpha / beta: what a change of W·x is worth in units of the bias initializer
  float beta = 1.0f;     // Gemm beta: what a change of the output is worth in units of the bias initializer
  std::string input, bias;
};

// The weight of the node writing `output` in the QDQ model, dequantized; empty when it is not a DequantizeLinear
// of initializers (kept float).
Tensor rounded_weight(const Graph& q, const std::map<std::string, int>& by_output, const std::string& output) {
  const auto it = by_output.find(output);
  if (it == by_output.end()) return {};
  const auto& n = q.node(it->second);
  if (n.input_size() < 2) return {};
  const int d = q.producer(n.input(1));
  if (d < 0 || q.node(d).op_type() != "DequantizeLinear") return {};
  const auto& dq = q.node(d);
  for (const auto& in : dq.input())
    if (!in.empty() && !q.is_initializer(in)) return {};
  const Tensor x = q.initializer_tensor(dq.input(0)), scale = q.initializer_tensor(dq.input(1));
  std::optional<Tensor> zp;
  if (dq.input_size() > 2 && !dq.input(2).empty()) zp = q.initializer_tensor(dq.input(2));
  numerics::QdqAttrs attrs;
  attrs.axis = attr_int(dq, "axis", 1);
  attrs.block_size = attr_int(dq, "block_size", 0);
  return numerics::dequantize_linear(x, scale, zp ? &*zp : nullptr, attrs);
}

std::vector<Layer> find_layers(const Graph& g, const Graph& q) {
  std::map<std::string, int> by_output;
  for (int i = 0; i < q.node_count(); ++i)
    if (q.node(i).output_size() > 0) by_output[q.node(i).output(0)] = i;
  std::vector<Layer> layers;
  for (int i = 0; i < g.node_count(); ++i) {
    const auto& n = g.node(i);
    const bool conv = n.op_type() == "Conv", gemm = n.op_type() == "Gemm";
    if ((!conv && !gemm) || n.input_size() < 3 || n.output_size() != 1) continue;
    if (!g.is_float_initializer(n.input(1)) || !g.is_float_initializer(n.input(2))) continue;
    if (g.consumers(n.input(2)).size() != 1 || g.is_graph_input(n.input(2))) continue;
    if (gemm && attr_int(n, "transA", 0) != 0) continue;
    Layer l;
    l.node = i;
    l.w = g.initializer_tensor(n.input(1));
    l.wq = rounded_weight(q, by_output, n.output(0));
    if (l.wq.numel() == 0 || l.wq.shape() != l.w.shape() || l.w.rank() < 2) continue;
    l.gemm = gemm;
    l.trans_b = attr_int(n, "transB", 0) != 0;
    l.group = conv ? attr_int(n, "group", 1) : 1;
    l.gain = gemm ? attr_float(n, "alpha", 1.0f) / attr_float(n, "beta", 1.0f) : 1.0f;
    l.beta = gemm ? attr_float(n, "beta", 1.0f) : 1.0f;
    if (l.beta == 0.0f) continue;
    const int64_t outs = gemm && !l.trans_b ? l.w.dim(1) : l.w.dim(0);
    if (l.group < 1 || outs % l.group != 0 || g.initializer_tensor(n.input(2)).numel() != outs) continue;
    l.input = n.input(0);
    l.bias = n.input(2);
    layers.push_back(std::move(l));
  }
  return layers;
}

// Per-channel sums of a Conv input [N, C, ...] (channel axis 1) or a Gemm input [M, K] (axis 1 too).
struct ChannelMean {
  std::vector<double> sum;
  double count = 0;
  void add(const Tensor& x) {
    if (x.dtype() != DType::Float32 || x.rank() < 2) return;
    const int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / std::max<int64_t>(1, n * c);
    if (sum.empty()) sum.assign(static_cast<size_t>(c), 0.0);
    if (static_cast<int64_t>(sum.size()) != c) return;
    const float* d = x.data<float>();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t k = 0; k < c; ++k)
        for (int64_t t = 0; t < inner; ++t) sum[k] += d[(b * c + k) * inner + t];
    count += static_cast<double>(n * inner);
  }
};

// Per sample, the per-channel sums of the tensors `names` in `model`. One single-threaded session per thread, one
// sample per run: the figures do not depend on the thread count, as in the accuracy guard. `observed`: the
// session's (runtime::SessionOptions; unset: nothing fused).
std::vector<std::map<std::string, ChannelMean>> sample_means(const onnx::ModelProto& model,
                                                             const std::vector<std::map<std::string, Tensor>>& samples,
                                                             const std::set<std::string>& names, int threads,
                                                             const std::optional<std::set<std::string>>& observed) {
  std::map<std::string, ChannelMean> empty;
  for (const auto& name : names) empty[name];
  const auto n = static_cast<int64_t>(samples.size());
  std::vector<std::map<std::string, ChannelMean>> per_sample(samples.size(), empty);
  std::vector<std::string> errors(samples.size());
#pragma omp parallel num_threads(std::max(1, threads))
  {
    const runtime::Session session(model, {.threads = 1, .observed = observed});
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < n; ++i) {
      auto& mine = per_sample[static_cast<size_t>(i)];
      runtime::RunOptions ro;
      ro.tap = [&](const std::string& name, const Tensor& value) {
        if (auto it = mine.find(name); it != mine.end()) it->second.add(value);
      };
      try {
        session.run(samples[static_cast<size_t>(i)], ro);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(i)] = e.what();
      }
    }
  }
  for (size_t i = 0; i < errors.size(); ++i)
    if (!errors[i].empty()) throw InternalError("bias correction: sample " + std::to_string(i) + ": " + errors[i]);
  return per_sample;
}

// (W - Wq) E[x] per output channel.
std::vector<double> mean_shift(const Layer& l, const std::vector<double>& mean) {
  const float* w = l.w.data<float>();
  const float* wq = l.wq.data<float>();
  if (l.gemm) {  // W [K, N], or [N, K] with transB
    const int64_t k_len = l.trans_b ? l.w.dim(1) : l.w.dim(0), n_len = l.trans_b ? l.w.dim(0) : l.w.dim(1);
    std::vector<double> d(static_cast<size_t>(n_len), 0.0);
    if (static_cast<int64_t>(mean.size()) != k_len) return {};
    for (int64_t k = 0; k < k_len; ++k)
      for (int64_t n = 0; n < n_len; ++n) {
        const int64_t at = l.trans_b ? n * k_len + k : k * n_len + n;
        d[n] += (double(w[at]) - wq[at]) * mean[k];
      }
    return d;
  }
  // Conv W [O, C/G, taps...]: output o reads channels [g·C/G, (g+1)·C/G), g = o / (O/G).
  const int64_t outs = l.w.dim(0), local = l.w.dim(1), taps = l.w.numel() / (outs * local);
  if (static_cast<int64_t>(mean.size()) != local * l.group) return {};
  std::vector<double> d(static_cast<size_t>(outs), 0.0);
  for (int64_t o = 0; o < outs; ++o)
    for (int64_t j = 0; j < local; ++j) {
      const double m = mean[(o / (outs / l.group)) * local + j];
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t at = (o * local + j) * taps + t;
        d[o] += (double(w[at]) - wq[at]) * m;
      }
    }
  return d;
}

}  // namespace

std::vector<BiasCorrection> bias_corrections(const onnx::ModelProto& prepared, const onnx::ModelProto& quantized,
                                             const std::vector<std::map<std::string, Tensor>>& samples, int threads) {
  std::vector<BiasCorrection> out;
  if (samples.empty()) return out;
  onnx::ModelProto fcopy = prepared, qcopy = quantized;
  Graph g(fcopy), q(qcopy);
  const std::vector<Layer> layers = find_layers(g, q);
  if (layers.empty()) return out;
  std::set<std::string> inputs;
  for (const auto& l : layers) inputs.insert(l.input);
  const std::vector<std::map<std::string, ChannelMean>> per_sample =
      sample_means(prepared, samples, inputs, threads, {});
  std::map<std::string, ChannelMean> means;
  for (const auto& sample : per_sample)
    for (const auto& [name, cm] : sample) {
      ChannelMean& total = means[name];
      if (cm.sum.empty()) continue;
      if (total.sum.empty()) total.sum.assign(cm.sum.size(), 0.0);
      if (total.sum.size() != cm.sum.size()) continue;
      for (size_t k = 0; k < cm.sum.size(); ++k) total.sum[k] += cm.sum[k];
      total.count += cm.count;
    }
  for (const auto& l : layers) {
    const ChannelMean& cm = means.at(l.input);
    if (cm.count == 0) continue;
    std::vector<double> mean(cm.sum);
    for (double& m : mean) m /= cm.count;
    const std::vector<double> shift = mean_shift(l, mean);
    if (shift.empty()) continue;
    Tensor b = g.initializer_tensor(l.bias).clone();
    for (int64_t c = 0; c < b.numel(); ++c) b.data<float>()[c] += static_cast<float>(shift[c] * l.gain);
    out.push_back({g.node(l.node).input(1), l.bias, b, b.clone()});
  }
  return out;
}

namespace {

// Two-sided 95 % quantile of Student's t with `df` degrees of freedom (tabulated to 30; beyond, the normal
// quantile with its first correction, within 0.002 of the exact value).
double t_quantile_975(int64_t df) {
  static constexpr double kTable[30] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                        2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                        2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df < 1) return INFINITY;
  if (df <= 30) return kTable[df - 1];
  return 1.959964 + 2.37 / static_cast<double>(df);
}

}  // namespace

// Error it removes: the shift of each output channel's mean that rounding the activations leaves, which the weight
// part above cannot see (it reads the float model's inputs): clipped tails, noise passed through a nonlinearity
// (E[f(x + e)] != f(x) where f bends, e.g. at a Relu or HardSwish knee), rounding offsets of inputs that sit still on
// the grid (flat image regions). It is measured on the quantized model itself, layer by layer in graph order, and
// each layer's output is corrected before the next layer runs (the quantized graph is run a piece at a time:
// weights/segments.h), so a layer's correction counts only what the layers before it leave after their own
// correction. Measured all at once from one run, a shift made upstream would be corrected at every layer it reaches.
// Each sample gives one per-channel mean shift d_s (float model's mean minus the quantized model's, over the
// sample's positions); what is added is m·max(0, 1 - (t·se/m)^2), m the mean of d_s over the S samples, se its
// standard error and t the 95 % Student t quantile with S - 1 degrees of freedom. A shift the samples disagree on
// (|m| within t standard errors of 0) belongs to those inputs, not to the model (a flat background's rounding offset
// depends on its colour), and applied to other inputs it would add error, so it is shrunk to nothing; a consistent
// one is applied nearly whole. It takes at least kMinActivationSamples samples.
int add_activation_shifts(const onnx::ModelProto& prepared, const onnx::ModelProto& quantized,
                          const std::vector<std::map<std::string, Tensor>>& samples, int threads,
                          std::vector<BiasCorrection>& corrections) {
  if (samples.size() < kMinActivationSamples || !segmentable(quantized.graph())) return 0;
  onnx::ModelProto fcopy = prepared, qcopy = quantized;
  Graph g(fcopy), q(qcopy);
  std::vector<Layer> layers = find_layers(g, q);
  if (layers.empty()) return 0;
  // Where each layer sits in the quantized graph (same output names); in graph order.
  std::map<std::string, int> position;
  for (int i = 0; i < q.node_count(); ++i)
    if (q.node(i).output_size() > 0) position[q.node(i).output(0)] = i;
  auto output_of = [&](const Layer& l) { return g.node(l.node).output(0); };
  std::erase_if(layers, [&](const Layer& l) { return !position.count(output_of(l)); });
  std::sort(layers.begin(), layers.end(),
            [&](const Layer& a, const Layer& b) { return position.at(output_of(a)) < position.at(output_of(b)); });
  std::set<std::string> outputs;
  for (const auto& l : layers) outputs.insert(output_of(l));
  const std::vector<std::map<std::string, ChannelMean>> reference =
      sample_means(prepared, samples, outputs, threads, outputs);

  const auto n = static_cast<int64_t>(samples.size());
  const double t = t_quantile_975(n - 1);
  SegmentRunner runner(qcopy, samples, threads, q.node_count());
  int measured = 0;
  for (const auto& l : layers) {
    const std::string out = output_of(l);
    std::vector<ChannelMean> got;
    runner.run_to(position.at(out) + 1, [&](const std::string& name, const Tensor& value) {
      if (name == out) got.emplace_back().add(value);
    });
    if (static_cast<int64_t>(got.size()) != n) continue;
    const size_t channels = got[0].sum.size();
    std::vector<double> shift(channels, 0.0);
    bool usable = channels > 0;
    for (size_t c = 0; c < channels && usable; ++c) {
      double sum = 0, sum2 = 0;
      for (int64_t s = 0; s < n; ++s) {
        const ChannelMean& r = reference[static_cast<size_t>(s)].at(out);
        const ChannelMean& x = got[static_cast<size_t>(s)];
        if (r.sum.size() != channels || x.sum.size() != channels || r.count == 0 || x.count == 0) {
          usable = false;
          break;
        }
        const double d = r.sum[c] / r.count - x.sum[c] / x.count;
        sum += d;
        sum2 += d * d;
      }
      if (!usable) break;
      const double m = sum / static_cast<double>(n);
      const double var = std::max(0.0, (sum2 - sum * m) / static_cast<double>(n - 1));
      const double se2 = var / static_cast<double>(n);
      const double keep = m == 0 ? 0.0 : std::clamp(1.0 - t * t * se2 / (m * m), 0.0, 1.0);
      shift[c] = std::isfinite(m * keep) ? m * keep : 0.0;  // inf/NaN in a sample: left alone
    }
    if (!usable) continue;
    ++measured;
    // The next pieces read this layer's output as corrected.
    for (auto& values : runner.values()) {
      auto it = values.find(out);
      if (it == values.end() || it->second.dtype() != DType::Float32 || it->second.rank() < 2 ||
          it->second.dim(1) != static_cast<int64_t>(channels))
        continue;
      Tensor& y = it->second;
      const int64_t batch = y.dim(0), inner = y.numel() / std::max<int64_t>(1, batch * y.dim(1));
      float* d = y.data<float>();
      for (int64_t b = 0; b < batch; ++b)
        for (size_t c = 0; c < channels; ++c)
          for (int64_t k = 0; k < inner; ++k)
            d[(b * static_cast<int64_t>(channels) + c) * inner + k] += static_cast<float>(shift[c]);
    }
    auto entry =
        std::find_if(corrections.begin(), corrections.end(), [&](const BiasCorrection& c) { return c.bias == l.bias; });
    if (entry == corrections.end()) {
      const Tensor original = g.initializer_tensor(l.bias);
      corrections.push_back({g.node(l.node).input(1), l.bias, original.clone(), original.clone()});
      entry = std::prev(corrections.end());
    }
    if (entry->corrected.numel() != static_cast<int64_t>(channels)) continue;
    for (size_t c = 0; c < channels; ++c) entry->corrected.data<float>()[c] += static_cast<float>(shift[c] / l.beta);
  }
  return measured;
}

int apply_bias_corrections(onnx::ModelProto& model, const std::vector<BiasCorrection>& corrections,
                           const std::vector<std::string>& float_tensors) {
  Graph g(model);
  // Every value computed from a tensor kept float.
  std::set<std::string> downstream(float_tensors.begin(), float_tensors.end());
  std::vector<std::string> todo(float_tensors.begin(), float_tensors.end());
  while (!todo.empty()) {
    const std::string t = std::move(todo.back());
    todo.pop_back();
    for (int c : g.consumers(t))
      for (const auto& out : g.node(c).output())
        if (!out.empty() && downstream.insert(out).second) todo.push_back(out);
  }
  int applied = 0;
  for (const auto& c : corrections) {
    if (std::find(float_tensors.begin(), float_tensors.end(), c.weight) != float_tensors.end()) continue;
    if (!g.is_float_initializer(c.bias)) continue;
    bool below = false;
    for (int n : g.consumers(c.weight)) below = below || downstream.count(g.node(n).input(0)) > 0;
    g.set_initializer(c.bias, below ? c.weight_only : c.corrected);
    ++applied;
  }
  return applied;
}

}  // namespace qtool::quantize
