#include "quantize/slice_spread.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "calib/softmax_inputs.h"
#include "quantize/op_roles.h"
#include "runtime/session.h"

namespace qtool::quantize {
namespace {

// Per-slice minimum and maximum of one axis, over every sample seen.
struct AxisRanges {
  int64_t length = 0;
  bool valid = true;  // false once a sample had another length on this axis
  std::vector<float> lo, hi;
};

}  // namespace

std::vector<std::string> elementwise_tensors(const Graph& g, const QConfig& config) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  // A Softmax input's grid follows its rows' maxima, not its range (docs/accuracy.md, "Softmax inputs"): a mask fill
  // there spreads the key slices far apart and costs nothing. Not a candidate.
  for (const auto& [t, axis] : calib::find_softmax_inputs(g.model())) seen.insert(t);
  for (int i = 0; i < g.node_count(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (!is_elementwise_arithmetic(n)) continue;
    if (const NodeQuant q = config.resolve(n.name(), n.op_type()); !q.quantized || !q.activation) continue;
    std::vector<std::string> acts;
    for (const std::string& t : n.input())
      if (!t.empty() && !g.is_initializer(t)) acts.push_back(t);
    if (acts.empty()) continue;
    for (const std::string& t : n.output()) acts.push_back(t);
    for (const std::string& t : acts)
      if (!t.empty() && seen.insert(t).second) out.push_back(t);
  }
  return out;
}

std::map<std::string, SliceSpread> slice_spreads(const onnx::ModelProto& model, const std::vector<std::string>& tensors,
                                                 const std::vector<std::map<std::string, Tensor>>& samples,
                                                 int threads) {
  std::map<std::string, SliceSpread> out;
  if (tensors.empty() || samples.empty()) return out;
  const std::set<std::string> observed(tensors.begin(), tensors.end());
  const runtime::Session session(model, {.threads = threads, .observed = observed});
  std::map<std::string, std::vector<AxisRanges>> stats;  // per tensor, per axis (index 0 unused: the batch)
  runtime::RunOptions ro;
  ro.tap = [&](const std::string& name, const Tensor& v) {
    if (!observed.count(name) || v.dtype() != DType::Float32 || v.rank() < 2 || v.numel() == 0) return;
    std::vector<AxisRanges>& axes = stats[name];
    if (axes.empty()) axes.resize(static_cast<size_t>(v.rank()));
    if (static_cast<int64_t>(axes.size()) != v.rank()) {  // the rank changed: nothing to compare
      for (AxisRanges& a : axes) a.valid = false;
      return;
    }
    const float* d = v.data<float>();
    for (int64_t a = 1; a < v.rank(); ++a) {
      AxisRanges& r = axes[static_cast<size_t>(a)];
      const int64_t len = v.dim(a);
      if (!r.valid) continue;
      if (r.length == 0) {
        r.length = len;
        r.lo.assign(static_cast<size_t>(len), std::numeric_limits<float>::infinity());
        r.hi.assign(static_cast<size_t>(len), -std::numeric_limits<float>::infinity());
      } else if (r.length != len) {
        r.valid = false;
        continue;
      }
      int64_t outer = 1, inner = 1;
      for (int64_t k = 0; k < a; ++k) outer *= v.dim(k);
      for (int64_t k = a + 1; k < v.rank(); ++k) inner *= v.dim(k);
      for (int64_t m = 0; m < outer; ++m)
        for (int64_t c = 0; c < len; ++c) {
          const float* p = d + (m * len + c) * inner;
          float lo = r.lo[static_cast<size_t>(c)], hi = r.hi[static_cast<size_t>(c)];
          for (int64_t j = 0; j < inner; ++j) {
            if (!std::isfinite(p[j])) continue;  // ±inf / NaN: held_non_finite keeps such a tensor float anyway
            lo = std::min(lo, p[j]);
            hi = std::max(hi, p[j]);
          }
          r.lo[static_cast<size_t>(c)] = lo;
          r.hi[static_cast<size_t>(c)] = hi;
        }
    }
  };
  for (size_t i = 0; i < samples.size() && i < kSpreadSamples; ++i) session.run(samples[i], ro);

  for (const auto& [name, axes] : stats) {
    SliceSpread best;
    for (size_t a = 1; a < axes.size(); ++a) {
      const AxisRanges& r = axes[a];
      if (!r.valid || r.length < kMinSlices) continue;
      // Ranges widened to hold 0, as a grid's does: a slice that is nearly constant (a squeeze-excite gate seen on
      // a few samples) counts by its magnitude, which is what the grid's step is small or large against.
      auto span = [](float lo, float hi) { return static_cast<double>(std::max(hi, 0.0f)) - std::min(lo, 0.0f); };
      const double range =
          span(*std::min_element(r.lo.begin(), r.lo.end()), *std::max_element(r.hi.begin(), r.hi.end()));
      if (!(range > 0) || !std::isfinite(range)) continue;
      // Slices that are all zero (a closed gate, a dead channel) are exact on any grid with a zero point: not counted.
      std::vector<double> shares;
      for (size_t c = 0; c < r.lo.size(); ++c)
        if (r.hi[c] >= r.lo[c] && span(r.lo[c], r.hi[c]) > 0) shares.push_back(span(r.lo[c], r.hi[c]) / range);
      if (static_cast<int64_t>(shares.size()) < kMinSlices) continue;
      const auto mid = shares.begin() + static_cast<std::ptrdiff_t>(shares.size() / 2);
      std::nth_element(shares.begin(), mid, shares.end());
      if (*mid < best.share) best = {static_cast<int64_t>(a), r.length, *mid};
    }
    if (best.axis > 0) out[name] = best;
  }
  return out;
}

}  // namespace qtool::quantize
