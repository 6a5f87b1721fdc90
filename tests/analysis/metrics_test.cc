// analysis::compare_tensors / MetricsAccumulator against values computed by hand (formulas in analysis/metrics.h).
#include "analysis/metrics.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "analysis/clear_top1.h"

using qtool::Shape;
using qtool::Tensor;
using namespace qtool::analysis;

namespace {
Tensor t(Shape s, std::vector<float> v) { return Tensor::from_vector<float>(std::move(s), v); }
}  // namespace

TEST_CASE("metrics: a signal with 1/10 of its amplitude as noise has SQNR 20 dB") {
  // f = [1,-1,1,-1], q = 1.1 f: sum f^2 = 4, sum (f-q)^2 = 4 * 0.01 -> 10 log10(100) = 20 dB. q is a scaled f:
  // cosine 1. |f - q| = 0.1 everywhere.
  const auto m = compare_tensors(t({4}, {1, -1, 1, -1}), t({4}, {1.1f, -1.1f, 1.1f, -1.1f}));
  CHECK(m.elements == 4);
  CHECK(m.sqnr_db == Approx(20.0).epsilon(1e-6));
  CHECK(m.cosine == Approx(1.0).epsilon(1e-12));
  CHECK(m.max_abs_error == Approx(0.1).epsilon(1e-6));
  CHECK(m.mean_abs_error == Approx(0.1).epsilon(1e-6));
  CHECK(m.rows == 1);
  CHECK(*m.argmax_agreement == 1.0);  // first maximum: index 0 in both
}

TEST_CASE("metrics: swapped logits [3,4] -> [4,3]") {
  // sum f^2 = 25, noise = 1 + 1 = 2: SQNR = 10 log10(12.5) = 10.9691 dB; cosine = (12 + 12) / 25 = 0.96;
  // argmax 1 vs 0: agreement 0. softmax(3,4) = (a, b) with b / a = e, softmax(4,3) = (b, a):
  // KL = a ln(a/b) + b ln(b/a) = b - a = (e - 1) / (e + 1) = tanh(1/2) = 0.462117.
  const auto m = compare_tensors(t({1, 2}, {3, 4}), t({1, 2}, {4, 3}));
  CHECK(m.sqnr_db == Approx(10.0 * std::log10(12.5)).epsilon(1e-9));
  CHECK(m.sqnr_db == Approx(10.9691).epsilon(1e-5));
  CHECK(m.cosine == Approx(0.96).epsilon(1e-9));
  CHECK(m.max_abs_error == 1.0);
  CHECK(m.mean_abs_error == 1.0);
  CHECK(*m.argmax_agreement == 0.0);
  CHECK(m.distribution == Distribution::Logits);
  CHECK(*m.kl_divergence == Approx(std::tanh(0.5)).epsilon(1e-9));
  CHECK(*m.kl_divergence == Approx(0.462117).epsilon(1e-5));
}

TEST_CASE("metrics: rows that are probabilities are taken as they are, not softmaxed") {
  // Row 0: p = (0.5, 0.5), q = (0.25, 0.75): KL = 0.5 ln 2 + 0.5 ln(2/3) = 0.5 ln(4/3) = 0.143841.
  // Row 1: identical: 0. Mean over rows: 0.0719205. Argmax: row 0 ties at 0 in f, 1 in q; row 1 agrees: 1/2.
  const auto m = compare_tensors(t({2, 2}, {0.5f, 0.5f, 0.9f, 0.1f}), t({2, 2}, {0.25f, 0.75f, 0.9f, 0.1f}));
  CHECK(m.distribution == Distribution::Probabilities);
  CHECK(*m.kl_divergence == Approx(0.25 * std::log(4.0 / 3.0)).epsilon(1e-6));
  CHECK(*m.kl_divergence == Approx(0.0719205).epsilon(1e-5));
  CHECK(m.rows == 2);
  CHECK(*m.argmax_agreement == 0.5);
}

TEST_CASE("metrics: a quantized probability row is renormalised and a zero where p > 0 is floored at 1e-12") {
  // q = (0.5, 0.5) scaled by 2 -> renormalised back to (0.5, 0.5): KL 0.
  CHECK(*compare_tensors(t({2}, {0.5f, 0.5f}), t({2}, {1.0f, 1.0f})).kl_divergence == Approx(0.0).margin(1e-12));
  // p = (0.5, 0.5), q = (1, 0): 0.5 ln(0.5 / 1) + 0.5 ln(0.5 / 1e-12).
  const double want = 0.5 * std::log(0.5) + 0.5 * std::log(0.5 / 1e-12);
  CHECK(*compare_tensors(t({2}, {0.5f, 0.5f}), t({2}, {1.0f, 0.0f})).kl_divergence == Approx(want).epsilon(1e-9));
}

TEST_CASE("metrics: identical tensors: SQNR at the cap, cosine 1, no error, full agreement, KL 0") {
  const Tensor a = t({2, 3}, {0.1f, -2.5f, 3.0f, 7.0f, 1e-3f, -4.0f});
  const auto m = compare_tensors(a, a);
  CHECK(m.sqnr_db == kMaxSqnrDb);
  CHECK(m.cosine == 1.0);
  CHECK(m.max_abs_error == 0.0);
  CHECK(m.mean_abs_error == 0.0);
  CHECK(*m.argmax_agreement == 1.0);
  CHECK(*m.kl_divergence == 0.0);
  const Tensor zeros = t({3}, {0, 0, 0});
  CHECK(compare_tensors(zeros, zeros).cosine == 1.0);
  CHECK(compare_tensors(zeros, t({3}, {0, 1, 0})).cosine == 0.0);
  CHECK(compare_tensors(zeros, t({3}, {0, 1, 0})).sqnr_db == -INFINITY);
}

TEST_CASE("metrics: opposite signal has cosine -1 and SQNR -6.02 dB") {
  // q = -f: noise = sum (2f)^2 = 4 sum f^2 -> 10 log10(1/4) = -6.0206 dB.
  const auto m = compare_tensors(t({3}, {1, 2, 3}), t({3}, {-1, -2, -3}));
  CHECK(m.cosine == -1.0);
  CHECK(m.sqnr_db == Approx(-6.0206).epsilon(1e-4));
  CHECK(m.max_abs_error == 6.0);
  CHECK(m.mean_abs_error == 4.0);
}

TEST_CASE("metrics: rank-4 feature maps get argmax but no KL and a last axis of 1 gets neither") {
  const Tensor a = t({1, 1, 2, 2}, {1, 2, 4, 3});
  const auto m = compare_tensors(a, t({1, 1, 2, 2}, {2, 1, 4, 3}));
  CHECK(m.distribution == Distribution::None);
  CHECK(!m.kl_divergence);
  CHECK(m.rows == 2);
  CHECK(*m.argmax_agreement == 0.5);
  const auto col = compare_tensors(t({3, 1}, {1, 2, 3}), t({3, 1}, {1, 2, 3}));
  CHECK(!col.argmax_agreement);
  CHECK(!col.kl_divergence);
}

TEST_CASE("metrics: over several samples, sums run over all of them") {
  // Sample 1: f = (1, 0), q = (1, 0): no noise, argmax agrees. Sample 2: f = (0, 3), q = (0, 2): noise 1, agrees.
  // Total: signal 10, noise 1 -> 10 dB (not the mean of 200 and 9.54); mean |err| = 1 / 4; max 1.
  MetricsAccumulator acc;
  acc.add(t({1, 2}, {1, 0}), t({1, 2}, {1, 0}));
  acc.add(t({1, 2}, {0, 3}), t({1, 2}, {0, 2}));
  const auto m = acc.result();
  CHECK(m.elements == 4);
  CHECK(m.sqnr_db == Approx(10.0).epsilon(1e-9));
  CHECK(m.mean_abs_error == 0.25);
  CHECK(m.max_abs_error == 1.0);
  CHECK(m.rows == 2);
  CHECK(*m.argmax_agreement == 1.0);
  // cosine = (1 + 6) / sqrt(10 * 5)
  CHECK(m.cosine == Approx(7.0 / std::sqrt(50.0)).epsilon(1e-12));
}

TEST_CASE("metrics: different shapes or a non-float dtype are refused") {
  CHECK_THROWS_AS(compare_tensors(t({2}, {1, 2}), t({1, 2}, {1, 2})), qtool::BadInputError);
  const Tensor i = Tensor::from_vector<int32_t>({2}, {1, 2});
  CHECK_THROWS_AS(compare_tensors(i, i), qtool::UnsupportedError);
}

TEST_CASE("clear top-1: a row is a clear winner when no noise within the SQNR budget of that row can flip it") {
  // At 10 dB (r = 0.1) the bound is m > sqrt(0.2) |p| = 0.4472 |p|.
  //   [0.9, 0.05, 0.05]: |p| = 0.9028, bound 0.4037, m = 0.85: clear.
  //   [0.5, 0.45, 0.05]: m = 0.05: a near-tie, not clear.
  //   [0.6, 0.3, 0.1]:   |p| = 0.6782, bound 0.3033, m = 0.30: not clear (just below).
  //   [0.1, 0.1, 0.8]:   |p| = 0.8124, bound 0.3633, m = 0.70: clear, top-1 index 2.
  const Tensor f = t({4, 3}, {0.9f, 0.05f, 0.05f, 0.5f, 0.45f, 0.05f, 0.6f, 0.3f, 0.1f, 0.1f, 0.1f, 0.8f});
  const ClearRows c = clear_rows(f, Distribution::Probabilities, 0.1);
  CHECK(c.classes == 3);
  CHECK(c.rows == 4);
  CHECK(c.row == std::vector<int64_t>{0, 3});
  CHECK(c.top1 == std::vector<int64_t>{0, 2});
  // Near-ties flipping count for nothing; a clear winner flipping counts.
  const Tensor q = t({4, 3}, {0.9f, 0.05f, 0.05f, 0.4f, 0.55f, 0.05f, 0.3f, 0.6f, 0.1f, 0.5f, 0.1f, 0.4f});
  CHECK(clear_top1_flips(c, q) == 1);
  CHECK(clear_top1_flips(c, f) == 0);
  CHECK(clear_top1_flips(c, t({2, 3}, {1, 0, 0, 1, 0, 0})) == 2);  // another shape: every clear row lost
  // Logits go through softmax: [4, 0, 0] -> p = (0.9647, 0.0177, 0.0177), m = 0.947 > 0.4315; [1, 0.8, 0] not clear.
  const ClearRows l = clear_rows(t({2, 3}, {4, 0, 0, 1, 0.8f, 0}), Distribution::Logits, 0.1);
  CHECK(l.row == std::vector<int64_t>{0});
  // A stricter threshold (30 dB, r = 0.001: bound 0.0447 |p|) makes the near-tie [0.5, 0.45, 0.05] clear.
  CHECK(clear_rows(f, Distribution::Probabilities, 0.001).row.size() == 4);
}
