#include "analysis/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"

namespace qtool::analysis {
namespace {

constexpr double kProbabilitySumTolerance = 1e-3;
constexpr double kMinProbability = 1e-12;

bool rows_are_probabilities(const float* f, int64_t rows, int64_t c) {
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t k = 0; k < c; ++k) {
      const float v = f[r * c + k];
      if (!(v >= 0)) return false;
      sum += v;
    }
    if (std::abs(sum - 1.0) > kProbabilitySumTolerance) return false;
  }
  return true;
}

void softmax(const float* x, int64_t c, std::vector<double>& out) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t k = 0; k < c; ++k) mx = std::max(mx, static_cast<double>(x[k]));
  double sum = 0;
  for (int64_t k = 0; k < c; ++k) sum += out[k] = std::exp(static_cast<double>(x[k]) - mx);
  for (int64_t k = 0; k < c; ++k) out[k] /= sum;
}

// Clamped at 0 and renormalised to sum 1 (a quantized probability row rarely sums to 1 exactly).
void as_probabilities(const float* x, int64_t c, std::vector<double>& out) {
  double sum = 0;
  for (int64_t k = 0; k < c; ++k) sum += out[k] = std::max(0.0, static_cast<double>(x[k]));
  if (sum > 0)
    for (int64_t k = 0; k < c; ++k) out[k] /= sum;
}

int64_t argmax(const float* x, int64_t c) {
  int64_t best = 0;
  for (int64_t k = 1; k < c; ++k)
    if (x[k] > x[best]) best = k;
  return best;
}

}  // namespace

std::string_view distribution_name(Distribution d) {
  switch (d) {
    case Distribution::None:
      return "none";
    case Distribution::Probabilities:
      return "probabilities";
    case Distribution::Logits:
      return "logits";
  }
  return "none";
}

void MetricsAccumulator::add(const Tensor& reference, const Tensor& test) {
  if (reference.dtype() != DType::Float32 || test.dtype() != DType::Float32)
    throw UnsupportedError("metrics compare float32 tensors, not " + std::string(dtype_name(reference.dtype())) +
                           " and " + std::string(dtype_name(test.dtype())));
  if (reference.shape() != test.shape())
    throw BadInputError("shapes differ: " + shape_str(reference.shape()) + " and " + shape_str(test.shape()));
  const float* f = reference.data<float>();
  const float* q = test.data<float>();
  const int64_t n = reference.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double a = f[i], b = q[i], d = std::abs(a - b);
    signal_ += a * a;
    test_energy_ += b * b;
    dot_ += a * b;
    noise_ += d * d;
    abs_sum_ += d;
    max_abs_ = std::isnan(d) ? d : std::max(max_abs_, d);
  }
  n_ += n;

  const int64_t c = reference.rank() > 0 ? reference.dim(-1) : 1;
  if (c < 2 || n == 0) return;
  const int64_t rows = n / c;
  for (int64_t r = 0; r < rows; ++r) agree_ += argmax(f + r * c, c) == argmax(q + r * c, c);
  rows_ += rows;

  const bool probabilities = rows_are_probabilities(f, rows, c);
  const Distribution d = probabilities           ? Distribution::Probabilities
                         : reference.rank() <= 3 ? Distribution::Logits
                                                 : Distribution::None;
  if (d == Distribution::None) return;
  if (distribution_ == Distribution::None) distribution_ = d;
  std::vector<double> p(static_cast<size_t>(c)), s(static_cast<size_t>(c));
  for (int64_t r = 0; r < rows; ++r) {
    if (probabilities) {
      as_probabilities(f + r * c, c, p);
      as_probabilities(q + r * c, c, s);
    } else {
      softmax(f + r * c, c, p);
      softmax(q + r * c, c, s);
    }
    double kl = 0;
    for (int64_t k = 0; k < c; ++k)
      if (p[k] > 0) kl += p[k] * std::log(p[k] / std::max(s[k], kMinProbability));
    kl_sum_ += kl;
  }
  kl_rows_ += rows;
}

TensorMetrics MetricsAccumulator::result() const {
  TensorMetrics m;
  m.elements = n_;
  if (std::isnan(noise_))
    m.sqnr_db = noise_;
  else if (noise_ == 0)
    m.sqnr_db = kMaxSqnrDb;
  else if (signal_ == 0)
    m.sqnr_db = -std::numeric_limits<double>::infinity();
  else
    m.sqnr_db = std::min(kMaxSqnrDb, 10.0 * std::log10(signal_ / noise_));
  if (noise_ == 0)  // identical: exactly 1, whatever the rounding of the sums
    m.cosine = 1;
  else if (signal_ == 0 || test_energy_ == 0)
    m.cosine = 0;
  else
    m.cosine = std::clamp(dot_ / std::sqrt(signal_ * test_energy_), -1.0, 1.0);
  m.max_abs_error = max_abs_;
  m.mean_abs_error = n_ > 0 ? abs_sum_ / static_cast<double>(n_) : 0;
  m.rows = rows_;
  if (rows_ > 0) m.argmax_agreement = static_cast<double>(agree_) / static_cast<double>(rows_);
  m.distribution = distribution_;
  if (kl_rows_ > 0) m.kl_divergence = kl_sum_ / static_cast<double>(kl_rows_);
  return m;
}

void row_as_distribution(const float* row, int64_t c, Distribution d, std::vector<double>& out) {
  if (d == Distribution::Probabilities)
    as_probabilities(row, c, out);
  else
    softmax(row, c, out);
}

TensorMetrics compare_tensors(const Tensor& reference, const Tensor& test) {
  MetricsAccumulator acc;
  acc.add(reference, test);
  return acc.result();
}

}  // namespace qtool::analysis
