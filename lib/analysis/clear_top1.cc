#include "analysis/clear_top1.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace qtool::analysis {
namespace {

// First maximum; -1 when the row holds NaN (no top-1 to keep).
int64_t top1(const float* x, int64_t c) {
  int64_t best = 0;
  for (int64_t k = 0; k < c; ++k) {
    if (std::isnan(x[k])) return -1;
    if (x[k] > x[best]) best = k;
  }
  return best;
}

}  // namespace

ClearRows clear_rows(const Tensor& reference, Distribution d, double allowed_noise_ratio) {
  if (reference.dtype() != DType::Float32)
    throw UnsupportedError("clear top-1 rows: the reference is " + std::string(dtype_name(reference.dtype())) +
                           ", expected float32");
  ClearRows out;
  if (d == Distribution::None || reference.rank() == 0 || reference.dim(-1) < 2) return out;
  const int64_t c = reference.dim(-1);
  out.classes = c;
  out.rows = reference.numel() / c;
  const float* f = reference.data<float>();
  std::vector<double> p(static_cast<size_t>(c));
  const double k = std::sqrt(2.0 * allowed_noise_ratio);
  for (int64_t r = 0; r < out.rows; ++r) {
    row_as_distribution(f + r * c, c, d, p);
    double p1 = -1, p2 = -1, energy = 0;
    int64_t best = 0;
    for (int64_t j = 0; j < c; ++j) {
      energy += p[j] * p[j];
      if (p[j] > p1) {
        p2 = p1, p1 = p[j], best = j;
      } else if (p[j] > p2) {
        p2 = p[j];
      }
    }
    if (!std::isfinite(energy) || p1 - p2 <= k * std::sqrt(energy)) continue;
    out.row.push_back(r);
    out.top1.push_back(best);
  }
  return out;
}

int64_t clear_top1_flips(const ClearRows& clear, const Tensor& test) {
  const int64_t c = clear.classes;
  if (test.dtype() != DType::Float32 || test.rank() == 0 || test.dim(-1) != c || test.numel() != clear.rows * c)
    return static_cast<int64_t>(clear.row.size());
  const float* q = test.data<float>();
  int64_t flips = 0;
  for (size_t i = 0; i < clear.row.size(); ++i) flips += top1(q + clear.row[i] * c, c) != clear.top1[i];
  return flips;
}

}  // namespace qtool::analysis
