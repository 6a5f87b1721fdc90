// Cross-layer equalization. Error it reduces: the per-tensor weight quantization error that comes from channels of
// very different ranges sharing one scale. For a pair W1 (output channel i, range r1_i) -> W2 (input channel i,
// range r2_i), scaling channel i by 1/s_i in W1 and s_i in W2 leaves the float function unchanged (positive
// homogeneity of Relu) and, with s_i = sqrt(r1_i * r2_i) / r2_i, gives both channels the range sqrt(r1_i * r2_i);
// this maximises sum_i (r1_i / R1)(r2_i / R2), the precision the per-tensor grid leaves to each channel of the
// pair (Nagel et al. 2019, eq. 9-10). Chains (pointwise -> depthwise -> pointwise) are swept until the scales
// settle.
#include "quantize/weights/cross_layer_equalization.h"

#include <algorithm>
#include <cmath>

#include "core/tensor.h"
#include "quantize/qparams.h"
#include "quantize/weights/conv_channels.h"

namespace qtool::quantize {
namespace {

struct Pair {
  int first = -1, second = -1;  // node indices of the two Convs
};

// Activations f with f(x / s) = f(x) / s for every s > 0.
bool positively_homogeneous(const onnx::NodeProto& n) { return n.op_type() == "Relu" || n.op_type() == "LeakyRelu"; }

// A weight whose values are already integer multiples of one int8 step (a model exported from a quantized one)
// is represented exactly by that grid; rescaling its channels would trade the exact codes for rounding error.
bool on_integer_grid(const Graph& g, const std::string& weight) {
  TensorSettings int8;
  int8.dtype = DType::Int8;
  int8.symmetric = true;
  return existing_grid(g.initializer_tensor(weight), int8).has_value();
}

std::vector<Pair> find_pairs(const Graph& g) {
  std::vector<Pair> pairs;
  for (int b = 0; b < g.node_count(); ++b) {
    if (!own_conv(g, b)) continue;
    std::string x = g.node(b).input(0);
    if (!g.has_single_reader(x)) continue;
    int a = g.producer(x);
    if (a >= 0 && positively_homogeneous(g.node(a))) {
      x = g.node(a).input(0);
      if (!g.has_single_reader(x)) continue;
      a = g.producer(x);
    }
    if (!own_conv(g, a)) continue;
    if (on_integer_grid(g, g.node(a).input(1)) || on_integer_grid(g, g.node(b).input(1))) continue;
    const auto* wa = g.initializer(g.node(a).input(1));
    const auto* wb = g.initializer(g.node(b).input(1));
    const int64_t group = attr_int(g.node(b), "group", 1);
    if (wa->dims_size() < 2 || wb->dims_size() < 2 || group < 1 || wa->dims(0) != wb->dims(1) * group ||
        wb->dims(0) % group != 0)
      continue;
    pairs.push_back({a, b});
  }
  return pairs;
}

std::vector<double> first_ranges(const Tensor& w) {
  const int64_t c = w.dim(0), inner = w.numel() / c;
  std::vector<double> r(static_cast<size_t>(c), 0.0);
  const float* d = w.data<float>();
  for (int64_t i = 0; i < c; ++i)
    for (int64_t k = 0; k < inner; ++k) r[i] = std::max(r[i], double(std::fabs(d[i * inner + k])));
  return r;
}

std::vector<double> second_ranges(const Tensor& w, int64_t group) {
  std::vector<double> r(static_cast<size_t>(w.dim(1) * group), 0.0);
  const float* d = w.data<float>();
  for_input_channel(w, group, [&](int64_t c, int64_t at, int64_t n) {
    for (int64_t k = 0; k < n; ++k) r[c] = std::max(r[c], double(std::fabs(d[at + k])));
  });
  return r;
}

// One pair: returns the largest |log s_i| applied (0 when already equal).
double equalize_pair(Graph& g, const Pair& p) {
  const auto& na = g.node(p.first);
  const auto& nb = g.node(p.second);
  const int64_t group = attr_int(nb, "group", 1);
  Tensor wa = g.initializer_tensor(na.input(1)).clone();
  Tensor wb = g.initializer_tensor(nb.input(1)).clone();
  const std::vector<double> r1 = first_ranges(wa), r2 = second_ranges(wb, group);
  std::vector<float> s(r1.size(), 1.0f);
  double moved = 0;
  for (size_t i = 0; i < s.size(); ++i)
    if (r1[i] > 0 && r2[i] > 0) {
      s[i] = static_cast<float>(std::sqrt(r1[i] * r2[i]) / r2[i]);
      moved = std::max(moved, std::fabs(std::log(double(s[i]))));
    }
  if (moved == 0) return 0;
  const int64_t inner = wa.numel() / wa.dim(0);
  float* da = wa.data<float>();
  for (int64_t i = 0; i < wa.dim(0); ++i)
    for (int64_t k = 0; k < inner; ++k) da[i * inner + k] /= s[i];
  float* db = wb.data<float>();
  for_input_channel(wb, group, [&](int64_t c, int64_t at, int64_t n) {
    for (int64_t k = 0; k < n; ++k) db[at + k] *= s[c];
  });
  g.set_initializer(na.input(1), wa);
  g.set_initializer(nb.input(1), wb);
  if (na.input_size() >= 3 && !na.input(2).empty()) {
    Tensor b = g.initializer_tensor(na.input(2)).clone();
    if (b.numel() == static_cast<int64_t>(s.size())) {
      for (size_t i = 0; i < s.size(); ++i) b.data<float>()[i] /= s[i];
    } else {  // one value broadcast to every channel: becomes one per channel
      std::vector<float> v(s.size());
      for (size_t i = 0; i < s.size(); ++i) v[i] = b.data<float>()[0] / s[i];
      b = Tensor::from_vector<float>({static_cast<int64_t>(s.size())}, v);
    }
    g.set_initializer(na.input(2), b);
  }
  return moved;
}

}  // namespace

EqualizationReport equalize_cross_layer(Graph& g, int max_rounds) {
  EqualizationReport r;
  const std::vector<Pair> pairs = find_pairs(g);
  r.pairs = static_cast<int>(pairs.size());
  // Converged when no channel scale moves by more than 0.1 %.
  constexpr double kSettled = 1e-3;
  for (bool moving = !pairs.empty(); moving && r.rounds < max_rounds; ++r.rounds) {
    moving = false;
    for (const Pair& p : pairs) moving = equalize_pair(g, p) > kSettled || moving;
  }
  return r;
}

double equalization_objective(const Graph& g) {
  double total = 0;
  for (const Pair& p : find_pairs(g)) {
    const std::vector<double> r1 = first_ranges(g.initializer_tensor(g.node(p.first).input(1)));
    const std::vector<double> r2 =
        second_ranges(g.initializer_tensor(g.node(p.second).input(1)), attr_int(g.node(p.second), "group", 1));
    const double m1 = *std::max_element(r1.begin(), r1.end()), m2 = *std::max_element(r2.begin(), r2.end());
    if (m1 <= 0 || m2 <= 0) continue;
    for (size_t i = 0; i < r1.size(); ++i) total += (r1[i] / m1) * (r2[i] / m2);
  }
  return total;
}

}  // namespace qtool::quantize
