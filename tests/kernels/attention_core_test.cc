// compute::attend_head (runtime/kernels/attention_core.h), the one softmax(Q·Kᵀ)·V of every attention kernel,
// against a plain double-precision twin of its score rule, and its corner cases: a query with no visible key,
// sliding windows, causal diagonals before the first key, sinks, empty key sets, qk_out stages, strided heads.
// tests/runtime/attention_ops.py checks the kernels built on it against ONNX Runtime 1.30.
#include "runtime/kernels/attention_core.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

using qtool::runtime::kernels::compute::attend_head;
using qtool::runtime::kernels::compute::AttentionHead;
using qtool::runtime::kernels::compute::AttentionScores;

namespace {

std::vector<float> seeded(size_t n, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(step * static_cast<float>(i + 1)) * 1.5f;
  return v;
}

// The rule of attention_core.h written plainly in double: probabilities [S, T] of one head (q, k dense).
std::vector<double> reference_probs(const std::vector<float>& q, const std::vector<float>& k, int64_t S, int64_t T,
                                    int64_t dk, const AttentionScores& r) {
  std::vector<double> p(S * T);
  for (int64_t s = 0; s < S; ++s) {
    std::vector<double> x(T);
    std::vector<bool> masked(T, false);
    for (int64_t j = 0; j < T; ++j) {
      double d = 0;
      for (int64_t i = 0; i < dk; ++i) d += static_cast<double>(q[s * dk + i]) * k[j * dk + i];
      x[j] = r.scale * d;
      if (r.softcap > 0) x[j] = r.softcap * std::tanh(x[j] / r.softcap);
      for (const auto& a : r.add)
        if (a.p) x[j] += a.at(s, j);
      masked[j] = (r.keep.p && !r.keep.at(s, j)) || (r.key_end >= 0 && j >= r.key_end) ||
                  (r.causal && (j > s + r.causal_offset || (r.window > 0 && j <= s + r.causal_offset - r.window)));
    }
    double m = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t j = 0; j < T; ++j)
      if (!masked[j]) m = std::max(m, x[j]);
    if (std::isinf(m)) {  // no visible key
      for (int64_t j = 0; j < T; ++j) p[s * T + j] = r.masked_row_zero ? 0.0 : 1.0 / static_cast<double>(T);
      continue;
    }
    if (r.has_sink) m = std::max(m, static_cast<double>(r.sink));
    for (int64_t j = 0; j < T; ++j) sum += masked[j] ? 0.0 : std::exp(x[j] - m);
    if (r.has_sink) sum += std::exp(r.sink - m);
    for (int64_t j = 0; j < T; ++j) p[s * T + j] = masked[j] ? 0.0 : std::exp(x[j] - m) / sum;
  }
  return p;
}

// Runs attend_head with its probabilities captured (qk_out at stage 3) and checks them and y against the twin.
void check_against_reference(int64_t S, int64_t T, int64_t dk, int64_t dv, AttentionScores rule) {
  const auto q = seeded(S * dk, 0.37f), k = seeded(T * dk, 0.53f), v = seeded(T * dv, 0.71f);
  std::vector<float> y(S * dv, -1.f), probs(S * T, -1.f);
  rule.qk_out = probs.data();
  rule.qk_stage = 3;
  attend_head({q.data(), dk, k.data(), dk, v.data(), dv, y.data(), dv}, S, T, dk, dv, rule);
  const auto want = reference_probs(q, k, S, T, dk, rule);
  for (int64_t i = 0; i < S * T; ++i) CHECK(probs[i] == Approx(want[i]).margin(1e-6));
  for (int64_t s = 0; s < S; ++s)
    for (int64_t c = 0; c < dv; ++c) {
      double acc = 0;
      for (int64_t j = 0; j < T; ++j) acc += want[s * T + j] * v[j * dv + c];
      CHECK(y[s * dv + c] == Approx(acc).margin(1e-5));
    }
}

}  // namespace

TEST_CASE("attend_head matches its plain twin: scale, softcap, additive terms, causal offset") {
  const int64_t S = 3, T = 5;
  const auto bias = seeded(S * T, 0.9f);
  AttentionScores r;
  r.scale = 0.4f;
  r.softcap = 1.5f;
  r.add[0] = {bias.data(), T, 1};
  r.causal = true;
  r.causal_offset = 2;
  check_against_reference(S, T, 4, 3, r);
}

TEST_CASE("attend_head: a query with no visible key gives zeros or the uniform average, as asked") {
  const int64_t S = 2, T = 4;
  bool keep[S * T] = {true, false, true, false, false, false, false, false};  // row 1 sees nothing
  for (bool zero : {true, false}) {
    INFO("masked_row_zero " << zero);
    AttentionScores r;
    r.keep = {keep, T, 1};
    r.masked_row_zero = zero;
    check_against_reference(S, T, 4, 2, r);
  }
}

TEST_CASE("attend_head: a sliding window sees exactly its last `window` keys up to the diagonal") {
  const int64_t S = 4, T = 6, W = 2;
  AttentionScores r;
  r.causal = true;
  r.causal_offset = T - S;
  r.window = W;
  std::vector<float> probs(S * T);
  const auto q = seeded(S * 4, 0.3f), k = seeded(T * 4, 0.6f), v = seeded(T * 2, 0.2f);
  std::vector<float> y(S * 2);
  r.qk_out = probs.data();
  r.qk_stage = 3;
  attend_head({q.data(), 4, k.data(), 4, v.data(), 2, y.data(), 2}, S, T, 4, 2, r);
  for (int64_t s = 0; s < S; ++s) {
    int nonzero = 0;
    for (int64_t j = 0; j < T; ++j) {
      const bool inside = j <= s + T - S && j > s + T - S - W;
      CHECK((probs[s * T + j] > 0) == inside);
      nonzero += probs[s * T + j] > 0;
    }
    CHECK(nonzero == W);
  }
  check_against_reference(S, T, 4, 2, r);
}

TEST_CASE("attend_head: a causal diagonal before the first key (nonpad shorter than the queries) and key_end") {
  AttentionScores r;
  r.causal = true;
  r.causal_offset = -2;  // queries 0 and 1 see no key
  r.key_end = 3;
  r.masked_row_zero = true;
  check_against_reference(4, 5, 3, 3, r);
}

TEST_CASE("attend_head: a sink logit takes probability mass and no value") {
  AttentionScores r;
  r.has_sink = true;
  r.sink = 0.7f;
  check_against_reference(3, 4, 4, 2, r);
  r.sink = 0.f;  // smooth_softmax
  r.causal = true;
  check_against_reference(3, 4, 4, 2, r);
}

TEST_CASE("attend_head: no keys gives zeros: qk_out stages 0-2 hold the scores before softmax") {
  std::vector<float> y(6, 5.f);
  const auto q = seeded(6, 0.1f);
  attend_head({q.data(), 3, nullptr, 3, nullptr, 3, y.data(), 3}, 2, 0, 3, 3, AttentionScores{});
  for (float v : y) CHECK(v == 0.f);

  const int64_t S = 2, T = 3, d = 2;
  const auto qq = seeded(S * d, 0.4f), k = seeded(T * d, 0.8f), v = seeded(T * d, 0.5f);
  const float bias[S * T] = {1, 2, 3, 4, 5, 6};
  for (int stage = 0; stage < 3; ++stage) {
    INFO("stage " << stage);
    std::vector<float> qk(S * T), out(S * d);
    AttentionScores r;
    r.scale = 0.5f;
    r.softcap = 2.f;
    r.add[0] = {bias, T, 1};
    r.causal = true;
    r.qk_out = qk.data();
    r.qk_stage = stage;
    attend_head({qq.data(), d, k.data(), d, v.data(), d, out.data(), d}, S, T, d, d, r);
    for (int64_t s = 0; s < S; ++s)
      for (int64_t j = 0; j < T; ++j) {
        double x = 0.5 * (qq[s * d] * k[j * d] + qq[s * d + 1] * k[j * d + 1]);
        if (stage >= 1) x = 2.0 * std::tanh(x / 2.0);
        if (stage >= 2) x = j > s ? std::numeric_limits<float>::lowest() : x + bias[s * T + j];
        CHECK(qk[s * T + j] == Approx(x).margin(1e-5));
      }
  }
}

TEST_CASE("attend_head reads strided heads of a [S, N·d] tensor and writes its head of the output only") {
  // Two heads side by side in rows of 2·d; head 1 computed from the strided view equals head 1 computed dense.
  const int64_t S = 3, T = 4, d = 3, N = 2;
  const auto q = seeded(S * N * d, 0.25f), k = seeded(T * N * d, 0.45f), v = seeded(T * N * d, 0.65f);
  std::vector<float> y(S * N * d, 9.f);
  AttentionScores r;
  r.scale = 0.6f;
  attend_head({q.data() + d, N * d, k.data() + d, N * d, v.data() + d, N * d, y.data() + d, N * d}, S, T, d, d, r);
  std::vector<float> qd(S * d), kd(T * d), vd(T * d), yd(S * d);
  for (int64_t s = 0; s < S; ++s)
    for (int64_t i = 0; i < d; ++i) qd[s * d + i] = q[s * N * d + d + i];
  for (int64_t j = 0; j < T; ++j)
    for (int64_t i = 0; i < d; ++i) kd[j * d + i] = k[j * N * d + d + i], vd[j * d + i] = v[j * N * d + d + i];
  attend_head({qd.data(), d, kd.data(), d, vd.data(), d, yd.data(), d}, S, T, d, d, r);
  for (int64_t s = 0; s < S; ++s)
    for (int64_t i = 0; i < d; ++i) {
      CHECK(y[s * N * d + d + i] == Approx(yd[s * d + i]).margin(1e-6));
      CHECK(y[s * N * d + i] == 9.f);  // head 0 untouched
    }
}
