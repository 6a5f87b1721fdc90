// ONNX Runtime's contrib Attention (com.microsoft), the BERT / GPT-2 form its transformer optimizer writes, float32,
// as ORT 1.30's CPU kernel computes it.
//
// Inputs: 0 input [B, S, Hin]; 1 weights [Hin, Hq + Hk + Hv] (Hq = Hk = Hv = hidden unless qkv_hidden_sizes);
// 2 bias [Hq + Hk + Hv] (optional); 3 mask_index int32 (optional); 4 past [2, B, N, P, h] (optional);
// 5 attention_bias [B or 1, N or 1, S, T] (optional). Attributes num_heads N, unidirectional, qkv_hidden_sizes,
// mask_filter_value (-10000), scale (1/√h).
//   QKV = input·weights + bias, split into Q, K, V and into N heads (h = Hq/N, hv = Hv/N);
//   K, V of each head are past's followed by the current ones (T = P + S keys); present = [K; V] [2, B, N, T, h];
//   scores = scale·Q·Kᵀ + mask [S, T] (+ attention_bias), output = softmax(scores)·V, heads concatenated [B, S, Hv]
//   (compute::attend_head, attention_core.h).
// mask[s, j] is 0, mask_filter_value or the lowest float: mask_index [B] masks keys j >= end[b]; [2B] also j <
// start[b]; [B, T] (raw mask) and [B, S, T] mask where the value is 0; unidirectional sets j > P + s to the lowest
// float (as ORT: a query whose every key mask_index masks still attends to its causal keys only). Refused (as ORT's CPU
// kernel, or not written by the optimizer): a 4-D mask_index, past_present_share_buffer, do_rotary, and
// past_sequence_length (input 6).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/checked.h"
#include "runtime/kernels/attention_core.h"
#include "core/limits.h"
#include "runtime/kernels/blas.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {
using namespace compute;

class AttentionKernel final : public Kernel {
 public:
  explicit AttentionKernel(const NodeInfo& node)
      : node_(node),
        heads_(node.attrs.require_int("num_heads")),
        causal_(node.attrs.get_int("unidirectional", 0) != 0),
        filter_(node.attrs.get_float("mask_filter_value", -10000.f)),
        scale_(node.attrs.get_float("scale", 0.f)),
        qkv_sizes_(node.attrs.get_ints("qkv_hidden_sizes")) {
    if (heads_ <= 0) throw BadInputError(node.label() + ": num_heads must be positive, got " + std::to_string(heads_));
    if (!qkv_sizes_.empty() &&
        (qkv_sizes_.size() != 3 || qkv_sizes_[0] != qkv_sizes_[1] ||
         std::any_of(qkv_sizes_.begin(), qkv_sizes_.end(), [&](int64_t v) { return v <= 0 || v % heads_ != 0; })))
      throw BadInputError(node.label() + ": qkv_hidden_sizes must be 3 positive multiples of num_heads with Q's " +
                          "equal to K's");
    for (const char* a : {"past_present_share_buffer", "do_rotary"})
      if (node.attrs.get_int(a, 0) != 0)
        throw UnsupportedError(node.label() + ": attribute " + a + " = 1 is not supported; export the model " +
                               "without it (ORT's optimizer writes neither for BERT or GPT-2)");
    if (node.inputs.size() > 6 && !node.inputs[6].empty())
      throw UnsupportedError(node.label() + ": input past_sequence_length is not supported (it goes with " +
                             "past_present_share_buffer)");
  }

  void run(KernelContext& ctx) override {
    const Tensor& X = float_input(ctx, 0);
    const Tensor& W = float_input(ctx, 1);
    if (X.rank() != 3 || W.rank() != 2 || W.dim(0) != X.dim(2))
      throw BadInputError(node_.label() + ": input " + shape_str(X.shape()) + " and weights " + shape_str(W.shape()) +
                          " must be [B, S, Hin] and [Hin, 3·hidden]");
    const int64_t B = X.dim(0), S = X.dim(1), Hin = X.dim(2), Htot = W.dim(1);
    if (Htot == 0)
      throw BadInputError(node_.label() + ": weights " + shape_str(W.shape()) + " have no columns; they must be " +
                          "[Hin, 3·hidden] with hidden a positive multiple of num_heads");
    if (qkv_sizes_.empty() && (Htot % 3 != 0 || Htot / 3 % heads_ != 0))
      throw BadInputError(node_.label() + ": weights " + shape_str(W.shape()) + " must have 3 · hidden columns, " +
                          "hidden a multiple of num_heads " + std::to_string(heads_));
    const int64_t Hq = qkv_sizes_.empty() ? Htot / 3 : qkv_sizes_[0], Hv = qkv_sizes_.empty() ? Htot / 3 : qkv_sizes_[2];
    if (checked_add(checked_mul(2, Hq, "qkv_hidden_sizes"), Hv, "qkv_hidden_sizes") != Htot)
      throw BadInputError(node_.label() + ": weights " + shape_str(W.shape()) + " do not have qkv_hidden_sizes' " +
                          std::to_string(2 * Hq + Hv) + " columns");
    const int64_t N = heads_, h = Hq / N, hv = Hv / N;
    const float scale = scale_ != 0.f ? scale_ : 1.f / std::sqrt(static_cast<float>(h));

    // Past: [2, B, N, P, h] (K and V heads share h: ORT's present layout needs Hk = Hv).
    const Tensor* past = ctx.has_input(4) ? &float_input(ctx, 4) : nullptr;
    int64_t P = 0;
    if (past) {
      if (past->rank() != 5 || past->dim(0) != 2 || past->dim(1) != B || past->dim(2) != N || past->dim(4) != h ||
          hv != h)
        throw BadInputError(node_.label() + ": past " + shape_str(past->shape()) + " must be [2, " + std::to_string(B) +
                            ", " + std::to_string(N) + ", past_sequence, " + std::to_string(h) +
                            "] with equal Q/K and V head sizes");
      P = past->dim(3);
    }
    const int64_t T = checked_add(P, S, node_.label());

    // QKV = input·W + bias, [B·S, Htot].
    Tensor qkv(DType::Float32, {checked_mul(B, S, node_.label()), Htot});
    float* qkvd = qkv.data<float>();
    const bool has_bias = ctx.has_input(2);
    if (has_bias && !gemm_fill_c(float_input(ctx, 2), 1.f, B * S, Htot, qkvd))
      throw BadInputError(node_.label() + ": bias " + shape_str(ctx.input(2).shape()) + " must be [" +
                          std::to_string(Htot) + "]");
    sgemm(false, false, B * S, Htot, Hin, 1.f, X.data<float>(), Hin, W.data<float>(), Htot, has_bias ? 1.f : 0.f, qkvd,
          Htot, ctx.threads);

    // K and V of every head with past first, [B, N, T, h] then [B, N, T, hv]: present [2, B, N, T, h] when h = hv.
    const int64_t BN = checked_mul(B, N, node_.label());
    const int64_t k_size = checked_mul(checked_mul(BN, T, node_.label()), h, node_.label());
    Tensor kv(DType::Float32, {checked_add(k_size, checked_mul(BN * T, hv, node_.label()), node_.label())});
    float* kd = kv.data<float>();
    float* vd = kd + k_size;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t n = 0; n < N; ++n) {
        float* kbn = kd + (b * N + n) * T * h;
        float* vbn = vd + (b * N + n) * T * hv;
        if (past) {
          const float* pk = past->data<float>() + (b * N + n) * P * h;
          std::copy_n(pk, P * h, kbn);
          std::copy_n(pk + B * N * P * h, P * h, vbn);
        }
        for (int64_t s = 0; s < S; ++s) {
          const float* row = qkvd + (b * S + s) * Htot;
          std::copy_n(row + Hq + n * h, h, kbn + (P + s) * h);
          std::copy_n(row + 2 * Hq + n * hv, hv, vbn + (P + s) * hv);
        }
      }

    check_attention_scratch(node_, BN, S, T, ctx.threads);
    const int64_t per_head = S * T;  // checked by check_attention_scratch
    const std::vector<float> mask =
        contrib_attention_mask(node_, ctx.has_input(3) ? &ctx.input(3) : nullptr, causal_, filter_, B, S, P, T);
    const Tensor* abias = ctx.has_input(5) ? &ctx.input(5) : nullptr;
    if (abias) attention_bias_term(node_, *abias, B, N, S, T, 0, 0);  // checks the shape before the heads run

    Tensor Y(DType::Float32, {B, S, Hv});
    float* y = Y.data<float>();
    const double macs = static_cast<double>(BN) * static_cast<double>(per_head) * static_cast<double>(h + hv);
    parallel_for(BN, threads_for_macs(static_cast<int64_t>(std::min(macs, 9e18)), ctx.threads), [&](int64_t bn) {
      const int64_t b = bn / N, n = bn % N;
      AttentionScores rule;
      rule.scale = scale;
      if (!mask.empty()) rule.add[0] = {mask.data() + b * per_head, T, 1};
      if (abias) rule.add[1] = attention_bias_term(node_, *abias, B, N, S, T, b, n);
      attend_head(
          {qkvd + b * S * Htot + n * h, Htot, kd + bn * T * h, h, vd + bn * T * hv, hv, y + b * S * Hv + n * hv, Hv}, S,
          T, h, hv, rule);
    });
    ctx.outputs[0] = std::move(Y);
    if (ctx.outputs.size() > 1 && !node_.outputs[1].empty()) {
      if (h != hv)
        throw UnsupportedError(node_.label() + ": output present needs equal K and V head sizes (qkv_hidden_sizes)");
      ctx.outputs[1] = kv.reshaped({2, B, N, T, h});
    }
  }

 private:
  NodeInfo node_;
  int64_t heads_;
  bool causal_;
  float filter_, scale_;
  std::vector<int64_t> qkv_sizes_;
};

}  // namespace

namespace compute {
std::vector<float> contrib_attention_mask(const NodeInfo& node, const Tensor* mi, bool causal, float filter, int64_t B,
                                          int64_t S, int64_t P, int64_t T) {
  if (!mi && !causal) return {};
  const int64_t cells = checked_mul(B, checked_mul(S, T, "attention mask"), "attention mask");
  check_tensor_allocation(checked_mul(cells, int64_t{sizeof(float)}, "attention mask"),
                          "attention mask [" + std::to_string(B) + ", " + std::to_string(S) + ", " +
                              std::to_string(T) + "]");
  std::vector<float> m(static_cast<size_t>(cells), 0.f);
  if (mi) {
    if (mi->dtype() != DType::Int32)
      throw UnsupportedError(node.label() + ": mask_index must be int32, got " + std::string(dtype_name(mi->dtype())));
    const int32_t* v = mi->data<int32_t>();
    const Shape& ms = mi->shape();
    if (ms.size() == 1 && (ms[0] == B || ms[0] == 2 * B)) {
      for (int64_t b = 0; b < B; ++b) {
        const int64_t end = std::clamp<int64_t>(v[b], 0, T);
        const int64_t start = ms[0] == 2 * B ? std::clamp<int64_t>(v[B + b], 0, T) : 0;
        for (int64_t s = 0; s < S; ++s) {
          float* row = m.data() + (b * S + s) * T;
          std::fill(row + end, row + T, filter);
          std::fill(row, row + start, filter);
        }
      }
    } else if ((ms.size() == 2 && ms[0] == B && ms[1] == T) ||
               (ms.size() == 3 && ms[0] == B && ms[1] == S && ms[2] == T)) {
      for (int64_t i = 0; i < B * S * T; ++i) {
        const int64_t b = i / (S * T), j = i % T, s = (i / T) % S;
        m[i] = v[ms.size() == 2 ? b * T + j : (b * S + s) * T + j] > 0 ? 0.f : filter;
      }
    } else {
      throw UnsupportedError(node.label() + ": mask_index " + shape_str(ms) + " is not supported: use [B], " +
                             "[2B], [B, T] or [B, S, T] with B " + std::to_string(B) + ", S " + std::to_string(S) +
                             ", T " + std::to_string(T) + " (ORT's CPU kernel runs no 4-D mask either)");
    }
  }
  if (causal)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s) {
        float* row = m.data() + (b * S + s) * T;
        std::fill(row + std::min(T, P + s + 1), row + T, std::numeric_limits<float>::lowest());
      }
  return m;
}
}  // namespace compute

std::unique_ptr<Kernel> make_attention(const NodeInfo& node) { return std::make_unique<AttentionKernel>(node); }

}  // namespace qtool::runtime::kernels
