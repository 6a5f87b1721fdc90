// attend_head: the score rule of attention_core.h, on the GEMM of blas.h and the row softmax of vector_math.h.
#include "runtime/kernels/attention_core.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/checked.h"
#include "core/error.h"
#include "core/limits.h"
#include "runtime/kernels/blas.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/vector_math.h"

namespace qtool::runtime::kernels::compute {

void check_attention_scratch(const NodeInfo& node, int64_t heads, int64_t S, int64_t T, int threads) {
  const int64_t per_head = checked_add(checked_mul(S, T, node.label()), T, node.label());  // attend_head's x and p
  const int64_t busy = std::clamp<int64_t>(heads, 1, std::max(threads, 1));  // threads holding scores at once
  check_tensor_allocation(
      checked_mul(checked_mul(per_head, busy, "attention scores"), int64_t{sizeof(float)}, "attention scores"),
      node.label() + ": attention scores of " + std::to_string(busy) + " thread(s) (" +
          std::to_string(S) + " queries x " + std::to_string(T) + " keys each)");
}

void attend_head(const AttentionHead& head, int64_t S, int64_t T, int64_t dk, int64_t dv, const AttentionScores& rule) {
  if (S == 0 || dv == 0) return;
  if (T == 0) {  // nothing to attend to: the weighted sum is empty
    for (int64_t s = 0; s < S; ++s) std::fill_n(head.y + s * head.y_stride, dv, 0.f);
    return;
  }
  std::vector<float> x(static_cast<size_t>(S * T)), p(static_cast<size_t>(T));
  sgemm(false, true, S, T, dk, rule.scale, head.q, head.q_stride, head.k, head.k_stride, 0.f, x.data(), T, 1);
  const auto emit = [&](int stage) {
    if (rule.qk_out && rule.qk_stage == stage) std::copy(x.begin(), x.end(), rule.qk_out);
  };
  emit(0);
  if (rule.softcap > 0.f)
    for (float& v : x) v = rule.softcap * std::tanh(v / rule.softcap);
  emit(1);
  constexpr float kLowest = std::numeric_limits<float>::lowest();
  for (int64_t s = 0; s < S; ++s) {
    float* row = x.data() + s * T;
    for (const auto& a : rule.add)
      if (a.p)
        for (int64_t j = 0; j < T; ++j) row[j] += a.at(s, j);
    if (rule.keep.p)
      for (int64_t j = 0; j < T; ++j)
        if (!rule.keep.at(s, j)) row[j] = kLowest;
    if (rule.key_end >= 0) std::fill(row + std::min(rule.key_end, T), row + T, kLowest);
    if (rule.causal) {
      const int64_t last = s + rule.causal_offset;  // the newest key row s may see
      std::fill(row + std::clamp<int64_t>(last + 1, 0, T), row + T, kLowest);
      if (rule.window > 0) std::fill(row, row + std::clamp<int64_t>(last - rule.window + 1, 0, T), kLowest);
    }
  }
  emit(2);
  for (int64_t s = 0; s < S; ++s) {
    float* row = x.data() + s * T;
    if (rule.masked_row_zero && *std::max_element(row, row + T) <= kLowest) {
      std::fill_n(row, T, 0.f);
      continue;
    }
    if (rule.has_sink) {
      const float m = std::max(*std::max_element(row, row + T), rule.sink);
      double sum = std::exp(static_cast<double>(rule.sink - m));
      for (int64_t j = 0; j < T; ++j) sum += row[j] = std::exp(row[j] - m);
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < T; ++j) row[j] *= inv;
      continue;
    }
    softmax_rows(row, p.data(), 1, T);
    std::copy(p.begin(), p.end(), row);
  }
  emit(3);
  sgemm(false, false, S, dv, T, 1.f, x.data(), T, head.v, head.v_stride, 0.f, head.y, head.y_stride, 1);
}

int64_t past_length(const NodeInfo& node, const Tensor* pk, const Tensor* pv, int64_t B, int64_t N, int64_t h,
                    int64_t hv) {
  if (!pk != !pv) throw BadInputError(node.label() + ": past_key and past_value go together; give both or neither");
  if (!pk) return 0;
  const int64_t P = pk->rank() == 4 ? pk->dim(2) : -1;
  if (pk->shape() != Shape{B, N, P, h} || pv->shape() != Shape{B, N, P, hv})
    throw BadInputError(node.label() + ": past_key " + shape_str(pk->shape()) + " and past_value " +
                        shape_str(pv->shape()) + " must be [" + std::to_string(B) + ", " + std::to_string(N) +
                        ", past, " + std::to_string(h) + " / " + std::to_string(hv) + "]");
  return P;
}

ScoreTerm<float> attention_bias_term(const NodeInfo& node, const Tensor& bias, int64_t B, int64_t N, int64_t S,
                                     int64_t T, int64_t b, int64_t n) {
  if (bias.dtype() != DType::Float32 || bias.rank() != 4 || (bias.dim(0) != 1 && bias.dim(0) != B) ||
      (bias.dim(1) != 1 && bias.dim(1) != N) || bias.dim(2) != S || bias.dim(3) != T)
    throw BadInputError(node.label() + ": attention_bias " + shape_str(bias.shape()) + " must be float32 [B or 1, " +
                        "N or 1, " + std::to_string(S) + ", " + std::to_string(T) + "]");
  const int64_t head = (bias.dim(0) == 1 ? 0 : b) * bias.dim(1) + (bias.dim(1) == 1 ? 0 : n);
  return {bias.data<float>() + head * S * T, T, 1};
}

HeadLayout head_layout(bool four_d, int64_t N, int64_t rows, int64_t d) {
  if (four_d) return {N * rows * d, rows * d, d};
  return {rows * N * d, d, N * d};
}

void append_heads(const float* past, const float* x, const HeadLayout& xl, const float* bias, float* dst, int64_t B,
                  int64_t N, int64_t P, int64_t L, int64_t d) {
  for (int64_t bn = 0; bn < B * N; ++bn) {
    float* head = dst + bn * (P + L) * d;
    if (past) std::copy_n(past + bn * P * d, P * d, head);
    const int64_t n = bn % N;
    const float* xh = x + (bn / N) * xl.batch + n * xl.head;
    for (int64_t l = 0; l < L; ++l) {
      float* row = head + (P + l) * d;
      std::copy_n(xh + l * xl.row, d, row);
      if (bias)
        for (int64_t i = 0; i < d; ++i) row[i] += bias[n * d + i];
    }
  }
}

}  // namespace qtool::runtime::kernels::compute
