// How far a tensor is from a reference: the per-output figures `qtool inspect QUANT --against FLOAT` prints.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace qtool::analysis {

// How the rows of the last axis were read as distributions for the KL divergence.
enum class Distribution {
  None,           // not a class-score-like output (rank > 3 and not probabilities): no KL
  Probabilities,  // every reference row is non-negative and sums to 1 (within 1e-3): taken as they are
  Logits,         // anything else of rank <= 3 ([C], [N,C], [N,T,V]): softmax first
};
std::string_view distribution_name(Distribution d);

struct TensorMetrics {
  int64_t elements = 0;
  double sqnr_db = 0;
  double cosine = 0;
  double max_abs_error = 0;
  double mean_abs_error = 0;
  int64_t rows = 0;                        // rows of the last axis compared by argmax
  std::optional<double> argmax_agreement;  // when the last axis has >= 2 entries
  Distribution distribution = Distribution::None;
  std::optional<double> kl_divergence;  // nats per row, when distribution != None
};

// SQNR cap: identical tensors (no noise) report this many dB rather than infinity.
constexpr double kMaxSqnrDb = 200.0;

// Metrics of a test tensor q against a reference f of the same shape (float32), over all n elements:
//   SQNR_dB  = 10 * log10( sum f^2 / sum (f - q)^2 )      kMaxSqnrDb when the noise is 0, -inf when only f is 0
//   cosine   = sum f*q / sqrt( sum f^2 * sum q^2 )        1 when f == q (all zeros included), 0 when only one is 0
//   max_abs  = max |f - q|,   mean_abs = sum |f - q| / n
// Along the last axis (C = its length, rows = n / C), when C >= 2:
//   argmax agreement = (rows where argmax f_row == argmax q_row) / rows    (the first maximum on ties)
//   KL = (1 / rows) * sum over rows of  sum_c p_c * ln( p_c / max(q_c, 1e-12) )    (nats; terms with p_c = 0 add 0)
//        where p, q are the rows as distributions: as they are (q clamped at 0 and renormalised to sum 1) when every
//        row of f is non-negative and sums to 1 within 1e-3; else, for rank <= 3 (class scores [N,C], token logits
//        [N,T,V]), p = softmax(f_row), q = softmax(q_row); else (feature maps, images) no KL.
// Over several samples (MetricsAccumulator) every sum, max and row count runs over all of them: the SQNR is the
// total signal over the total noise, not a mean of per-sample figures. NaN in q makes SQNR, cosine and the
// abs errors NaN.
class MetricsAccumulator {
 public:
  // Throws BadInputError when shapes differ, UnsupportedError for a dtype other than float32.
  void add(const Tensor& reference, const Tensor& test);
  TensorMetrics result() const;

 private:
  int64_t n_ = 0, rows_ = 0, agree_ = 0, kl_rows_ = 0;
  double signal_ = 0, noise_ = 0, test_energy_ = 0, dot_ = 0, abs_sum_ = 0, max_abs_ = 0, kl_sum_ = 0;
  Distribution distribution_ = Distribution::None;
};

// The metrics of one pair: MetricsAccumulator with a single add().
TensorMetrics compare_tensors(const Tensor& reference, const Tensor& test);

// One row of C entries as the KL above reads it under `d` (!= None): Probabilities clamped at 0 and renormalised,
// Logits through softmax. `out` must hold C entries.
void row_as_distribution(const float* row, int64_t c, Distribution d, std::vector<double>& out);

}  // namespace qtool::analysis
