// The one softmax(Q·Kᵀ)·V routine behind every attention kernel: ai.onnx Attention-23/24 (attention_onnx.cc) and
// ONNX Runtime's contrib Attention, MultiHeadAttention and GroupQueryAttention (attention.cc, attention_mha.cc,
// attention_gqa.cc). The kernels differ only in how they lay out heads, fill caches and build masks; the score rule
// below is written once.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/kernel.h"

namespace qtool::runtime::kernels::compute {

// One (batch, head) pair: S query rows of dk values, T key rows of dk and T value rows of dv, y S rows of dv, each
// row `*_stride` floats after the previous one (heads of a [B, S, N·h] tensor are strided views, no copies).
struct AttentionHead {
  const float* q;
  int64_t q_stride;
  const float* k;
  int64_t k_stride;
  const float* v;
  int64_t v_stride;
  float* y;
  int64_t y_stride;
};

// A strided [S, T] view of an additive bias or keep mask (stride 0 broadcasts that axis).
template <class T>
struct ScoreTerm {
  const T* p = nullptr;
  int64_t row = 0, col = 0;
  T at(int64_t s, int64_t j) const { return p[s * row + j * col]; }
};

// Scores of one head, in this order (ORT 1.30 CPU's, for every op here):
//   x[s, j] = scale · q[s]·k[j]                          (stage 0)
//   x = softcap · tanh(x / softcap)        if softcap > 0 (stage 1)
//   x += add[0][s, j] + add[1][s, j]                     (additive masks and attention biases)
//   x = lowest float where keep[s, j] is false, where j >= key_end (key_end >= 0), and with `causal` where
//       j > s + causal_offset or j <= s + causal_offset - window (window > 0: a sliding window of `window` keys)
//       (stage 2)
//   p = softmax over j (stage 3), with `sink` (when has_sink) one more logit in the denominator that takes no value:
//       p[j] = exp(x[j]) / (Σ_k exp(x[k]) + exp(sink)); a row whose every key is set to the lowest float gets p = 0
//       when `masked_row_zero` (ai.onnx Attention in ORT 1.30), else the plain softmax (uniform, as the contrib ops);
//   y[s] = Σ_j p[s, j] · v[j].
// `qk_out` (optional, [S, T] with row stride T) receives x as it stands after stage `qk_stage`.
struct AttentionScores {
  float scale = 1.f;
  float softcap = 0.f;
  ScoreTerm<float> add[2];
  ScoreTerm<bool> keep;
  int64_t key_end = -1;
  bool causal = false;
  int64_t causal_offset = 0;
  int64_t window = 0;
  bool has_sink = false;
  float sink = 0.f;
  bool masked_row_zero = false;
  float* qk_out = nullptr;
  int qk_stage = 0;
};

// y = softmax(scores)·v for one head (single-threaded: callers parallelise over heads). Holds S·T floats of scores.
void attend_head(const AttentionHead& head, int64_t S, int64_t T, int64_t dk, int64_t dv, const AttentionScores& rule);

// Layout of a Q, K, V or output tensor: element (b, n, s, i) of head n at b·batch + n·head + s·row + i.
struct HeadLayout {
  int64_t batch, head, row;
};
// [B, N, rows, d] (four_d, BNSH) or [B, rows, N·d] (BSH).
HeadLayout head_layout(bool four_d, int64_t N, int64_t rows, int64_t d);

// A key or value cache: dst [B, N, P + L, d] = past [B, N, P, d] (optional) followed by the L rows of each head of x
// (layout xl), plus bias[n·d + i] when bias is given.
void append_heads(const float* past, const float* x, const HeadLayout& xl, const float* bias, float* dst, int64_t B,
                  int64_t N, int64_t P, int64_t L, int64_t d);

// The past length P of past_key [B, N, P, h] and past_value [B, N, P, hv] (optional, both or neither; 0 without
// them); a BadInputError naming the node for other shapes or only one of them.
int64_t past_length(const NodeInfo& node, const Tensor* past_key, const Tensor* past_value, int64_t B, int64_t N,
                    int64_t h, int64_t hv);

// attention_bias [B or 1, N or 1, S, T] (contrib Attention, MultiHeadAttention) as the score term of head (b, n);
// a BadInputError naming the node unless it has that shape.
ScoreTerm<float> attention_bias_term(const NodeInfo& node, const Tensor& bias, int64_t B, int64_t N, int64_t S,
                                     int64_t T, int64_t b, int64_t n);

// Checks the scratch attend_head holds beyond the tensors against --max-memory: one head's scores [S, T] and a
// row [T] per thread, for at most min(heads, threads) threads at once (quadratic in the sequence length, so
// a long one is refused by the limit as a tensor would be). `heads` counts batch x heads. Written in
// attention_core.cc.
void check_attention_scratch(const NodeInfo& node, int64_t heads, int64_t S, int64_t T, int threads);

// The additive mask [B, S, T] of ORT's contrib Attention and MultiHeadAttention CPU kernels (empty: nothing masked)
// from mask_index (int32, optional): [B] masks keys j >= end[b] and [2B] also j < start[b], [B, T] and [B, S, T]
// mask where the value is 0, each with `filter` (mask_filter_value); `causal` sets j > P + s to the lowest float.
// Other mask shapes are an UnsupportedError naming the node. Written in attention.cc.
std::vector<float> contrib_attention_mask(const NodeInfo& node, const Tensor* mask_index, bool causal, float filter,
                                          int64_t B, int64_t S, int64_t P, int64_t T);

}  // namespace qtool::runtime::kernels::compute
