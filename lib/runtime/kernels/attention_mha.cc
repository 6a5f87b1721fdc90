// ONNX Runtime's contrib MultiHeadAttention (com.microsoft), float32, as ORT 1.30's CPU kernel computes it: what
// ORT's transformer optimizer writes for BERT-like and encoder-decoder attention once the projections are separate.
//
// Inputs: 0 query [B, S, N·h]; 1 key [B, L, N·h] or [B, N, L, h]; 2 value [B, L, N·hv] or [B, N, L, hv];
// 3 bias [N·h + N·h + N·hv] (optional, added to query, key, value; with 4-D key and value ORT 1.30 adds only the
// query's part, and so does qtool); 4 key_padding_mask int32 (optional: [B] key
// lengths, [2B], [B, T] or [B, S, T], as the contrib Attention's mask_index); 5 attention_bias [B or 1, N or 1, S, T];
// 6 past_key [B, N, P, h] and 7 past_value [B, N, P, hv] (optional, together).
// Attributes num_heads N, scale (1/√h), mask_filter_value (-10000), unidirectional (causal, j > P + s masked with the
// lowest float).
// Outputs: output [B, S, N·hv]; present_key / present_value = past followed by the new keys / values [B, N, T, h|hv].
// Scores: compute::attend_head (attention_core.h) with the mask of contrib_attention_mask and attention_bias added.
// Refused by name: packed QKV or KV (query 5-D or key absent, key 5-D; ORT's CPU kernel has none either), a 4-D key
// with past, past_sequence_length and cache_indirection (decoder-masked variant), output_qk.
#include <cmath>
#include <string>

#include "core/checked.h"
#include "runtime/kernels/attention_core.h"
#include "runtime/kernels/blas.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {
using namespace compute;

class MultiHeadAttentionKernel final : public Kernel {
 public:
  explicit MultiHeadAttentionKernel(const NodeInfo& node)
      : node_(node),
        heads_(node.attrs.require_int("num_heads")),
        causal_(node.attrs.get_int("unidirectional", 0) != 0),
        filter_(node.attrs.get_float("mask_filter_value", -10000.f)),
        scale_(node.attrs.get_float("scale", 0.f)) {
    if (heads_ <= 0) throw BadInputError(node.label() + ": num_heads must be positive, got " + std::to_string(heads_));
    if (node.inputs.size() < 2 || node.inputs[1].empty() || node.inputs.size() < 3 || node.inputs[2].empty())
      throw UnsupportedError(node.label() + ": packed QKV / KV (no key or value input) is not supported; give " +
                             "query, key and value separately");
    for (size_t i : {8u, 9u})
      if (node.inputs.size() > i && !node.inputs[i].empty())
        throw UnsupportedError(node.label() + ": input " + (i == 8 ? "past_sequence_length" : "cache_indirection") +
                               " is not supported (decoder-masked attention with a shared buffer or beam search)");
    if (node.outputs.size() > 3 && !node.outputs[3].empty())
      throw UnsupportedError(node.label() + ": output qk is not supported");
  }

  void run(KernelContext& ctx) override {
    const Tensor& Qx = float_input(ctx, 0);
    const Tensor& Kx = float_input(ctx, 1);
    const Tensor& Vx = float_input(ctx, 2);
    const std::string& label = node_.label();
    const int64_t N = heads_;
    if (Qx.rank() != 3 || Qx.dim(2) % N != 0 || (Kx.rank() != 3 && Kx.rank() != 4) || Vx.rank() != Kx.rank() ||
        Kx.dim(0) != Qx.dim(0) || Vx.dim(0) != Qx.dim(0))
      throw UnsupportedError(label + ": query " + shape_str(Qx.shape()) + ", key " + shape_str(Kx.shape()) +
                             ", value " + shape_str(Vx.shape()) + " are not supported: use [B, S, N·h] with keys and " +
                             "values [B, L, N·h] or [B, N, L, h] (num_heads " + std::to_string(N) + "; packed forms " +
                             "are not supported)");
    const bool kv4 = Kx.rank() == 4;
    const int64_t B = Qx.dim(0), S = Qx.dim(1), h = Qx.dim(2) / N, L = kv4 ? Kx.dim(2) : Kx.dim(1);
    const int64_t hv = kv4 ? Vx.dim(3) : Vx.dim(2) / N;
    const bool kv_ok = kv4 ? Kx.dim(1) == N && Kx.dim(3) == h && Vx.dim(1) == N && Vx.dim(2) == L
                           : Kx.dim(2) == N * h && Vx.dim(1) == L && Vx.dim(2) % N == 0;
    if (!kv_ok)
      throw BadInputError(label + ": key " + shape_str(Kx.shape()) + " and value " + shape_str(Vx.shape()) +
                          " do not fit query " + shape_str(Qx.shape()) + " with num_heads " + std::to_string(N));
    const Tensor* bias = ctx.has_input(3) ? &float_input(ctx, 3) : nullptr;
    const Tensor* pk = ctx.has_input(6) ? &float_input(ctx, 6) : nullptr;
    const Tensor* pv = ctx.has_input(7) ? &float_input(ctx, 7) : nullptr;
    if (kv4 && (pk || pv))
      throw UnsupportedError(label + ": a 4-D key / value (already split into heads) with past_key / past_value " +
                             "is not supported");
    if (bias && bias->shape() != Shape{2 * N * h + N * hv})
      throw BadInputError(label + ": bias " + shape_str(bias->shape()) + " must be [" +
                          std::to_string(2 * N * h + N * hv) + "] (query, key and value biases)");
    const int64_t P = past_length(node_, pk, pv, B, N, h, hv);
    const int64_t T = checked_add(P, L, label);
    const float* bd = bias ? bias->data<float>() : nullptr;

    // Q with its bias as [B, N, S, h]; K and V as caches [B, N, T, d] (the present outputs).
    Tensor Q(DType::Float32, {B, N, S, h}), Kp(DType::Float32, {B, N, T, h}), Vp(DType::Float32, {B, N, T, hv});
    append_heads(nullptr, Qx.data<float>(), head_layout(false, N, S, h), bd, Q.data<float>(), B, N, 0, S, h);
    const bool kv_bias = bd && !kv4;  // ORT 1.30 adds no key / value bias to 4-D keys and values
    append_heads(pk ? pk->data<float>() : nullptr, Kx.data<float>(), head_layout(kv4, N, L, h),
                 kv_bias ? bd + N * h : nullptr, Kp.data<float>(), B, N, P, L, h);
    append_heads(pv ? pv->data<float>() : nullptr, Vx.data<float>(), head_layout(kv4, N, L, hv),
                 kv_bias ? bd + 2 * N * h : nullptr, Vp.data<float>(), B, N, P, L, hv);

    const std::vector<float> mask =
        contrib_attention_mask(node_, ctx.has_input(4) ? &ctx.input(4) : nullptr, causal_, filter_, B, S, P, T);
    const Tensor* abias = ctx.has_input(5) ? &ctx.input(5) : nullptr;
    if (abias) attention_bias_term(node_, *abias, B, N, S, T, 0, 0);  // checks the shape before the heads run

    Tensor Y(DType::Float32, {B, S, N * hv});
    const HeadLayout yl = head_layout(false, N, S, hv);
    const float scale = scale_ != 0.f ? scale_ : 1.f / std::sqrt(static_cast<float>(h));
    check_attention_scratch(node_, B * N, S, T, ctx.threads);
    parallel_for(B * N, threads_for_macs(B * N * S * T * (h + hv), ctx.threads), [&](int64_t bn) {
      const int64_t b = bn / N, n = bn % N;
      AttentionScores rule;
      rule.scale = scale;
      if (!mask.empty()) rule.add[0] = {mask.data() + b * S * T, T, 1};
      if (abias) rule.add[1] = attention_bias_term(node_, *abias, B, N, S, T, b, n);
      attend_head({Q.data<float>() + bn * S * h, h, Kp.data<float>() + bn * T * h, h, Vp.data<float>() + bn * T * hv,
                   hv, Y.data<float>() + b * yl.batch + n * yl.head, yl.row},
                  S, T, h, hv, rule);
    });
    ctx.outputs[0] = std::move(Y);
    if (ctx.outputs.size() > 1 && !node_.outputs[1].empty()) ctx.outputs[1] = std::move(Kp);
    if (ctx.outputs.size() > 2 && !node_.outputs[2].empty()) ctx.outputs[2] = std::move(Vp);
  }

 private:
  NodeInfo node_;
  int64_t heads_;
  bool causal_;
  float filter_, scale_;
};

}  // namespace

std::unique_ptr<Kernel> make_multi_head_attention(const NodeInfo& node) {
  return std::make_unique<MultiHeadAttentionKernel>(node);
}

}  // namespace qtool::runtime::kernels
