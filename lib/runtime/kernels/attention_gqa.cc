// ONNX Runtime's contrib GroupQueryAttention (com.microsoft), float32, as ORT 1.30's CPU kernel computes it: what
// ORT's transformer optimizer and onnxruntime-genai write into decoder LLMs (KV cache, rotary, sliding window).
//
// Inputs: 0 query [B, S, Hq·h] (or packed QKV [B, S, (Hq + 2·Hkv)·h] with key and value absent); 1 key and 2 value
// [B, S, Hkv·h]; 3 past_key / 4 past_value [B, Hkv, P, h] (optional, BNSH); 5 seqlens_k int32 [B] (keys of batch b
// after this step, minus one); 6 total_sequence_length int32 scalar; 7 cos_cache / 8 sin_cache [max_pos, r/2]
// (with do_rotary); 9 position_ids int64 [B, S] (optional); 10 attention_bias [B or 1, Hq or 1, S,
// total_sequence_length] (optional, added after softcap); 11 head_sink [Hq] (optional).
// Attributes num_heads Hq, kv_num_heads Hkv, scale (1/√h), softcap, local_window_size (-1: none), do_rotary,
// rotary_interleaved, smooth_softmax (a sink logit of 0 for every head: head_sink's rule with sink 0).
// Per batch b: t = seqlens_k[b] + 1 keys; a first prompt (S > 1 and S = total_sequence_length) has no past
// (p = 0), otherwise p = t - S keys come from past_key's first p rows. do_rotary rotates Q and the new K
// (compute::rotate_head) at positions position_ids[b, s], or p + s. present_key / present_value [B, Hkv, Tp, h],
// Tp = max(P, total_sequence_length), hold the p past rows, then the S new ones, then zeros.
// Query s of head n attends to keys j <= p + s of kv head n / (Hq / Hkv) (causal), and with local_window_size w > 0
// only to the w newest of them, j > p + s - w (ORT 1.30's CPU kernel: w keys, not w + 1); scores as
// compute::attend_head (attention_core.h): scale, softcap, attention_bias, softmax with the sink.
// Refused by name: qk_output, other dtypes, seqlens_k that does not fit S, P and total_sequence_length.
#include <algorithm>
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

class GroupQueryAttentionKernel final : public Kernel {
 public:
  explicit GroupQueryAttentionKernel(const NodeInfo& node)
      : node_(node),
        heads_(node.attrs.require_int("num_heads")),
        kv_heads_(node.attrs.require_int("kv_num_heads")),
        window_(node.attrs.get_int("local_window_size", -1)),
        rotary_(node.attrs.get_int("do_rotary", 0) != 0),
        interleaved_(node.attrs.get_int("rotary_interleaved", 0) != 0),
        smooth_(node.attrs.get_int("smooth_softmax", 0) != 0),
        scale_(node.attrs.get_float("scale", 0.f)),
        softcap_(node.attrs.get_float("softcap", 0.f)) {
    const std::string& label = node.label();
    if (heads_ <= 0 || kv_heads_ <= 0 || heads_ % kv_heads_ != 0)
      throw BadInputError(label + ": num_heads " + std::to_string(heads_) + " must be a positive multiple of " +
                          "kv_num_heads " + std::to_string(kv_heads_));
    if (node.attrs.get_int("qk_output", 0) != 0)
      throw UnsupportedError(label + ": attribute qk_output is not supported (an ORT debugging output)");
    if (node.inputs.size() < 7 || node.inputs[5].empty() || node.inputs[6].empty())
      throw BadInputError(label + ": inputs seqlens_k and total_sequence_length are required");
  }

  void run(KernelContext& ctx) override {
    const std::string& label = node_.label();
    const Tensor& Qx = float_input(ctx, 0);
    const bool packed = !ctx.has_input(1);
    const int64_t Hq = heads_, Hkv = kv_heads_, W = Qx.rank() == 3 ? Qx.dim(2) : 0;
    if (Qx.rank() != 3 || W % (packed ? Hq + 2 * Hkv : Hq) != 0)
      throw BadInputError(label + ": query " + shape_str(Qx.shape()) + " must be [B, S, num_heads·h]" +
                          (packed ? " + 2·kv_num_heads·h] (packed QKV)" : ""));
    const int64_t B = Qx.dim(0), S = Qx.dim(1), h = W / (packed ? Hq + 2 * Hkv : Hq);
    // Where Q, K and V rows live: separate tensors or one packed row of width W.
    const float *q = Qx.data<float>(), *k = q + Hq * h, *v = k + Hkv * h;
    HeadLayout ql = head_layout(false, Hq, S, h), kl{S * W, h, W};
    if (!packed) {
      const Tensor& Kx = float_input(ctx, 1);
      const Tensor& Vx = float_input(ctx, 2);
      if (Kx.shape() != Shape{B, S, Hkv * h} || Vx.shape() != Kx.shape())
        throw BadInputError(label + ": key " + shape_str(Kx.shape()) + " and value " + shape_str(Vx.shape()) +
                            " must be [" + std::to_string(B) + ", " + std::to_string(S) + ", " +
                            std::to_string(Hkv * h) + "]");
      k = Kx.data<float>(), v = Vx.data<float>(), kl = head_layout(false, Hkv, S, h);
    } else {
      ql = {S * W, h, W};
    }
    const Tensor* pk = ctx.has_input(3) ? &float_input(ctx, 3) : nullptr;
    const Tensor* pv = ctx.has_input(4) ? &float_input(ctx, 4) : nullptr;
    const int64_t P = past_length(node_, pk, pv, B, Hkv, h, h);
    const std::vector<int64_t> seqlens = read_ints(ctx.input(5), node_, "seqlens_k");
    const std::vector<int64_t> total = read_ints(ctx.input(6), node_, "total_sequence_length");
    if (static_cast<int64_t>(seqlens.size()) != B || total.size() != 1)
      throw BadInputError(label + ": seqlens_k must hold " + std::to_string(B) + " values and " +
                          "total_sequence_length one");
    const int64_t Tp = std::max(P, total[0]);
    const bool first_prompt = S > 1 && S == total[0];
    std::vector<int64_t> past(B), keys(B);
    for (int64_t b = 0; b < B; ++b) {
      keys[b] = seqlens[b] + 1;
      past[b] = first_prompt ? 0 : keys[b] - S;
      if (keys[b] > Tp || past[b] < 0 || past[b] > P || (first_prompt && keys[b] < 1))
        throw BadInputError(label + ": seqlens_k[" + std::to_string(b) + "] = " + std::to_string(seqlens[b]) +
                            " does not fit " + std::to_string(S) + " new tokens, " + std::to_string(P) +
                            " past rows and total_sequence_length " + std::to_string(total[0]));
    }

    // Q (rotated when do_rotary) as [B, Hq, S, h]; the new K rows likewise [B, Hkv, S, h].
    Tensor Q(DType::Float32, {B, Hq, S, h}), Kn(DType::Float32, {B, Hkv, S, h});
    append_heads(nullptr, q, ql, nullptr, Q.data<float>(), B, Hq, 0, S, h);
    append_heads(nullptr, k, kl, nullptr, Kn.data<float>(), B, Hkv, 0, S, h);
    if (rotary_) rotate(ctx, Q, Kn, past, B, S, h);

    Tensor Kp(DType::Float32, {B, Hkv, Tp, h}), Vp(DType::Float32, {B, Hkv, Tp, h});
    std::fill_n(Kp.data<float>(), Kp.numel(), 0.f);
    std::fill_n(Vp.data<float>(), Vp.numel(), 0.f);
    for (int64_t bn = 0; bn < B * Hkv; ++bn) {
      const int64_t b = bn / Hkv, n = bn % Hkv, p = past[b];
      float* kd = Kp.data<float>() + bn * Tp * h;
      float* vd = Vp.data<float>() + bn * Tp * h;
      if (pk) {
        std::copy_n(pk->data<float>() + bn * P * h, p * h, kd);
        std::copy_n(pv->data<float>() + bn * P * h, p * h, vd);
      }
      std::copy_n(Kn.data<float>() + bn * S * h, S * h, kd + p * h);
      const float* vs = v + b * kl.batch + n * kl.head;
      for (int64_t s = 0; s < S; ++s) std::copy_n(vs + s * kl.row, h, vd + (p + s) * h);
    }

    const Tensor* abias = ctx.has_input(10) ? &ctx.input(10) : nullptr;
    if (abias) {
      attention_bias_term(node_, *abias, B, Hq, S, total[0], 0, 0);  // checks the shape before the heads run
      if (*std::max_element(keys.begin(), keys.end()) > total[0])
        throw BadInputError(label + ": with attention_bias every batch's key count seqlens_k + 1 must be at most " +
                            "total_sequence_length " + std::to_string(total[0]));
    }
    const Tensor* sink = ctx.has_input(11) ? &float_input(ctx, 11) : nullptr;
    if (sink && sink->shape() != Shape{Hq})
      throw BadInputError(label + ": head_sink " + shape_str(sink->shape()) + " must be [num_heads " +
                          std::to_string(Hq) + "]");

    Tensor Y(DType::Float32, {B, S, Hq * h});
    const HeadLayout yl = head_layout(false, Hq, S, h);
    const float scale = scale_ != 0.f ? scale_ : 1.f / std::sqrt(static_cast<float>(h));
    const int64_t group = Hq / Hkv;
    check_attention_scratch(node_, B * Hq, S, Tp, ctx.threads);
    parallel_for(B * Hq, threads_for_macs(B * Hq * S * Tp * 2 * h, ctx.threads), [&](int64_t bn) {
      const int64_t b = bn / Hq, n = bn % Hq, kvh = b * Hkv + n / group;
      AttentionScores rule;
      rule.scale = scale;
      rule.softcap = softcap_;
      rule.causal = true;
      rule.causal_offset = past[b];
      rule.window = window_ > 0 ? window_ : 0;
      if (abias) rule.add[0] = attention_bias_term(node_, *abias, B, Hq, S, total[0], b, n);
      rule.has_sink = smooth_ || sink;
      if (sink) rule.sink = sink->data<float>()[n];
      attend_head({Q.data<float>() + bn * S * h, h, Kp.data<float>() + kvh * Tp * h, h, Vp.data<float>() + kvh * Tp * h,
                   h, Y.data<float>() + b * yl.batch + n * yl.head, yl.row},
                  S, keys[b], h, h, rule);
    });
    ctx.outputs[0] = std::move(Y);
    if (ctx.outputs.size() > 1 && !node_.outputs[1].empty()) ctx.outputs[1] = std::move(Kp);
    if (ctx.outputs.size() > 2 && !node_.outputs[2].empty()) ctx.outputs[2] = std::move(Vp);
  }

 private:
  // Rotary embedding of every head of Q and the new K rows, in place, at positions position_ids[b, s] or p + s.
  void rotate(const KernelContext& ctx, Tensor& Q, Tensor& Kn, const std::vector<int64_t>& past, int64_t B, int64_t S,
              int64_t h) const {
    const std::string& label = node_.label();
    if (!ctx.has_input(7) || !ctx.has_input(8))
      throw BadInputError(label + ": do_rotary = 1 needs inputs cos_cache and sin_cache");
    const Tensor& cos_t = float_input(ctx, 7);
    const Tensor& sin_t = float_input(ctx, 8);
    if (cos_t.rank() != 2 || sin_t.shape() != cos_t.shape() || 2 * cos_t.dim(1) > h || cos_t.dim(1) == 0)
      throw BadInputError(label + ": cos_cache " + shape_str(cos_t.shape()) + " and sin_cache " +
                          shape_str(sin_t.shape()) + " must be one [max_position, r/2] shape with r <= head size " +
                          std::to_string(h));
    std::vector<int64_t> pos;
    if (ctx.has_input(9)) {
      pos = read_ints(ctx.input(9), node_, "position_ids");
      if (static_cast<int64_t>(pos.size()) != B * S)
        throw BadInputError(label + ": position_ids must be [" + std::to_string(B) + ", " + std::to_string(S) + "]");
    } else {
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < S; ++s) pos.push_back(past[b] + s);
    }
    const int64_t half = cos_t.dim(1), rows = cos_t.dim(0);
    for (int64_t p : pos)
      if (p < 0 || p >= rows)
        throw BadInputError(label + ": position " + std::to_string(p) + " is outside the caches' " +
                            std::to_string(rows) + " rows");
    for (Tensor* t : {&Q, &Kn}) {
      const int64_t N = t->dim(1);
      float* d = t->data<float>();
      for (int64_t bn = 0; bn < B * N; ++bn)
        for (int64_t s = 0; s < S; ++s) {
          const int64_t p = pos[(bn / N) * S + s];
          float* x = d + (bn * S + s) * h;
          rotate_head(x, x, h, 2 * half, cos_t.data<float>() + p * half, sin_t.data<float>() + p * half, interleaved_);
        }
    }
  }

  NodeInfo node_;
  int64_t heads_, kv_heads_, window_;
  bool rotary_, interleaved_, smooth_;
  float scale_, softcap_;
};

}  // namespace

std::unique_ptr<Kernel> make_group_query_attention(const NodeInfo& node) {
  return std::make_unique<GroupQueryAttentionKernel>(node);
}

}  // namespace qtool::runtime::kernels
