#include "quantize/saturation.h"

#include <algorithm>
#include <functional>

#include "quantize/graph.h"

namespace qtool::quantize {
namespace {

// Largest same-sign sum over the pairs (0,1), (2,3), ... of a reduction vector (an odd tail pairs with zero).
double worst_pair(const std::vector<float>& k) {
  double worst = 0;
  for (size_t j = 0; j < k.size(); j += 2) {
    const double a = k[j], b = j + 1 < k.size() ? k[j + 1] : 0.0;
    worst = std::max({worst, std::max(a, 0.0) + std::max(b, 0.0), std::max(-a, 0.0) + std::max(-b, 0.0)});
  }
  return worst;
}

}  // namespace

std::optional<std::vector<double>> u8s8_pair_sums(const onnx::NodeProto& node, const Tensor& w, int64_t channel_axis) {
  if (w.dtype() != DType::Float32) return std::nullopt;
  const float* d = w.data<float>();
  // Each output channel's reduction vector in kernel order, as a function (m, position) -> element index.
  int64_t outs = 0, len = 0;
  std::function<int64_t(int64_t, int64_t)> at;
  int64_t out_axis = -1;
  if (node.op_type() == "Conv" && w.rank() >= 3) {
    const int64_t group = attr_int(node, "group", 1);
    const int64_t cin = w.dim(1);
    int64_t taps = 1;
    for (int64_t k = 2; k < w.rank(); ++k) taps *= w.dim(k);
    outs = w.dim(0), len = cin * taps, out_axis = 0;
    if (cin == 1 && group > 1 && outs == group) return std::vector<double>(static_cast<size_t>(channel_axis == 0 ? outs : 1), 0.0);
    at = [=](int64_t m, int64_t p) { return (m * cin + p % cin) * taps + p / cin; };  // taps major, channels minor
  } else if ((node.op_type() == "MatMul" || node.op_type() == "Gemm") && w.rank() == 2) {
    const bool trans = node.op_type() == "Gemm" && attr_int(node, "transB", 0) != 0;
    const int64_t K = trans ? w.dim(1) : w.dim(0), N = trans ? w.dim(0) : w.dim(1);
    outs = N, len = K, out_axis = trans ? 0 : 1;
    at = [=](int64_t n, int64_t k) { return trans ? n * K + k : k * N + n; };
  } else {
    return std::nullopt;
  }
  if (channel_axis >= 0 && channel_axis != out_axis) return std::nullopt;
  std::vector<double> sums(static_cast<size_t>(channel_axis >= 0 ? outs : 1), 0.0);
  std::vector<float> k(static_cast<size_t>(len));
  for (int64_t m = 0; m < outs; ++m) {
    for (int64_t p = 0; p < len; ++p) k[static_cast<size_t>(p)] = d[at(m, p)];
    double& s = sums[static_cast<size_t>(channel_axis >= 0 ? m : 0)];
    s = std::max(s, worst_pair(k));
  }
  return sums;
}

}  // namespace qtool::quantize
