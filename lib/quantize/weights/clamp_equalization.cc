// Clamp equalization. Error it reduces: the per-tensor activation grid between a convolution and a per-channel
// clamp Relu -> Min(., C_i) (a Relu6 whose bound was folded per channel, as in equalized TF exports) serves
// channels whose values end at very different C_i: a channel clamped at C_i uses only C_i / max(C) of the uint8
// steps. Rescaling channel i by max(C) / C_i puts every channel's values on [0, max(C)] with the float function
// unchanged, so each channel gets the whole grid. It also turns the Min into Clip(0, max(C)), which ONNX Runtime
// fuses into QLinearConv (a per-channel Min stays a separate uint8 kernel: 7 % of mobilenetv2's int8 time,
// docs/benchmarks.md).
#include "quantize/weights/clamp_equalization.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "quantize/weights/conv_channels.h"

namespace qtool::quantize {
namespace {

struct Chain {
  int first = -1, min = -1, second = -1;  // node indices: Conv A, Min, Conv B
  int bound = -1;                         // which input of the Min is the constant C
};

// C as one bound per channel of A: rank >= 2, dims[1] = channels, every other dim 1.
bool per_channel(const Tensor& c, int64_t channels) {
  if (c.rank() < 2 || c.dim(1) != channels) return false;
  for (int64_t k = 0; k < c.rank(); ++k)
    if (k != 1 && c.dim(k) != 1) return false;
  return true;
}

std::optional<Chain> match(const Graph& g, int m) {
  const auto& n = g.node(m);
  if (n.op_type() != "Min" || n.input_size() != 2 || n.output_size() != 1 || !g.has_single_reader(n.output(0)))
    return std::nullopt;
  Chain ch;
  ch.min = m;
  ch.bound = g.is_float_initializer(n.input(1)) ? 1 : g.is_float_initializer(n.input(0)) ? 0 : -1;
  if (ch.bound < 0 || g.consumers(n.input(ch.bound)).size() != 1 || g.is_graph_input(n.input(ch.bound)))
    return std::nullopt;
  const std::string& x = n.input(1 - ch.bound);
  const int relu = g.producer(x);
  if (relu < 0 || g.node(relu).op_type() != "Relu" || !g.has_single_reader(x) ||
      !g.has_single_reader(g.node(relu).input(0)))
    return std::nullopt;
  ch.first = g.producer(g.node(relu).input(0));
  ch.second = g.consumers(n.output(0))[0];
  if (!own_conv(g, ch.first) || !own_conv(g, ch.second) || g.node(ch.second).input(0) != n.output(0))
    return std::nullopt;
  const Tensor wa = g.initializer_tensor(g.node(ch.first).input(1));
  const Tensor wb = g.initializer_tensor(g.node(ch.second).input(1));
  const int64_t group = attr_int(g.node(ch.second), "group", 1);
  if (wa.rank() < 2 || wb.rank() < 2 || group < 1 || wa.dim(0) != wb.dim(1) * group || wb.dim(0) % group != 0)
    return std::nullopt;
  const Tensor c = g.initializer_tensor(n.input(ch.bound));
  if (!per_channel(c, wa.dim(0))) return std::nullopt;
  const auto v = c.span<float>();
  if (*std::min_element(v.begin(), v.end()) < 0 || *std::min_element(v.begin(), v.end()) == *std::max_element(v.begin(), v.end()))
    return std::nullopt;
  return ch;
}

void rewrite(Graph& g, const Chain& ch) {
  const auto& na = g.node(ch.first);
  const auto& nb = g.node(ch.second);
  const std::string bound = g.node(ch.min).input(ch.bound);
  const Tensor c = g.initializer_tensor(bound);
  const auto cv = c.span<float>();
  const float top = *std::max_element(cv.begin(), cv.end());
  // Channel scales: A's output channel i by k_a[i], B's input channel i by k_b[i].
  std::vector<float> k_a(cv.size()), k_b(cv.size());
  for (size_t i = 0; i < cv.size(); ++i) {
    k_a[i] = cv[i] > 0 ? top / cv[i] : 0.0f;  // C_i = 0: the channel is 0 whatever A computes
    k_b[i] = cv[i] > 0 ? cv[i] / top : 1.0f;
  }
  Tensor wa = g.initializer_tensor(na.input(1)).clone();
  const int64_t inner = wa.numel() / wa.dim(0);
  float* da = wa.data<float>();
  for (int64_t i = 0; i < wa.dim(0); ++i)
    for (int64_t k = 0; k < inner; ++k) da[i * inner + k] *= k_a[static_cast<size_t>(i)];
  g.set_initializer(na.input(1), wa);
  if (na.input_size() >= 3 && !na.input(2).empty()) {
    const Tensor b = g.initializer_tensor(na.input(2));
    std::vector<float> v(k_a.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = b.data<float>()[b.numel() == 1 ? 0 : i] * k_a[i];
    g.set_initializer(na.input(2), Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v));
  }
  Tensor wb = g.initializer_tensor(nb.input(1)).clone();
  float* db = wb.data<float>();
  for_input_channel(wb, attr_int(nb, "group", 1), [&](int64_t ch_in, int64_t at, int64_t n) {
    for (int64_t k = 0; k < n; ++k) db[at + k] *= k_b[static_cast<size_t>(ch_in)];
  });
  g.set_initializer(nb.input(1), wb);
  g.set_initializer(bound, Tensor::scalar<float>(top));
}

}  // namespace

int equalize_clamps(Graph& g) {
  int done = 0;
  for (int i = 0; i < g.node_count(); ++i)
    if (const auto ch = match(g, i)) {
      rewrite(g, *ch);
      ++done;
    }
  return done;
}

}  // namespace qtool::quantize
