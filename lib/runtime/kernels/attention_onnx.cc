// Attention (ai.onnx opsets 23 and 24), float32, as ONNX Runtime 1.30's CPU kernel computes it: what PyTorch's
// newer exporters write for scaled_dot_product_attention.
//
// Inputs: Q [B, Hq, S, h] or [B, S, Hq·h]; K [B, Hkv, L, h] or [B, L, Hkv·h]; V [B, Hkv, L, hv] or [B, L, Hkv·hv]
// (3-D needs attributes q_num_heads and kv_num_heads); attn_mask (optional) bool (true = attend) or float (added),
// broadcast to [B, Hq, S, T]; past_key [B, Hkv, P, h] and past_value [B, Hkv, P, hv] (optional, together).
// Outputs: Y [B, Hq, S, hv] (or [B, S, Hq·hv] for 3-D Q); present_key / present_value = past followed by K / V
// along the sequence, [B, Hkv, T = P + L, h|hv]; qk_matmul_output [B, Hq, S, T].
// Query head n reads key/value head n / (Hq / Hkv) (grouped-query attention when Hkv < Hq).
// Scores as compute::attend_head (attention_core.h) with scale (default 1/√h), softcap, the float mask added and
// the bool mask and is_causal setting masked scores to the lowest float; is_causal hides key j from query s when
// j > s + P (ORT 1.30 offsets the causal diagonal by the past length, the spec speaks of the upper-left
// alignment); a query whose every key is masked gets Y = 0 (ORT 1.30). qk_matmul_output_mode 0-3 picks the stage:
// scaled Q·Kᵀ, after softcap, after the masks, after softmax.
// Refused by name: other dtypes, a mask that does not broadcast or whose last axis is not T.
// qtool is wider than ORT 1.30 here: ORT refuses a mask of rank 1 or one broadcast along S ([B, 1, 1, T]); qtool
// broadcasts them as the spec says.
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "core/checked.h"
#include "runtime/kernels/attention_core.h"
#include "runtime/kernels/blas.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {
using namespace compute;

class OnnxAttentionKernel final : public Kernel {
 public:
  explicit OnnxAttentionKernel(const NodeInfo& node)
      : node_(node),
        causal_(node.attrs.get_int("is_causal", 0) != 0),
        q_heads_(node.attrs.get_int("q_num_heads", 0)),
        kv_heads_(node.attrs.get_int("kv_num_heads", 0)),
        mode_(node.attrs.get_int("qk_matmul_output_mode", 0)),
        scale_(node.attrs.get_float("scale", 0.f)),
        softcap_(node.attrs.get_float("softcap", 0.f)) {
    if (mode_ < 0 || mode_ > 3)
      throw BadInputError(node.label() + ": qk_matmul_output_mode must be 0-3, got " + std::to_string(mode_));
    if (scale_ < 0.f || softcap_ < 0.f) throw BadInputError(node.label() + ": scale and softcap must not be negative");
  }

  void run(KernelContext& ctx) override {
    const Tensor& Q = float_input(ctx, 0);
    const Tensor& K = float_input(ctx, 1);
    const Tensor& V = float_input(ctx, 2);
    const std::string& label = node_.label();
    const bool four_d = Q.rank() == 4;
    if ((Q.rank() != 3 && Q.rank() != 4) || K.rank() != Q.rank() || V.rank() != Q.rank() || K.dim(0) != Q.dim(0) ||
        V.dim(0) != Q.dim(0))
      throw BadInputError(label + ": Q, K and V " + shape_str(Q.shape()) + ", " + shape_str(K.shape()) + ", " +
                          shape_str(V.shape()) + " must all be 4-D [B, heads, seq, head] or all 3-D [B, seq, hidden]");
    const int64_t B = Q.dim(0);
    int64_t Hq, Hkv, S, L, h, hv;
    if (four_d) {
      Hq = Q.dim(1), Hkv = K.dim(1), S = Q.dim(2), L = K.dim(2), h = Q.dim(3), hv = V.dim(3);
      if (V.dim(1) != Hkv || V.dim(2) != L || K.dim(3) != h || (q_heads_ && q_heads_ != Hq) ||
          (kv_heads_ && kv_heads_ != Hkv))
        throw BadInputError(label + ": K " + shape_str(K.shape()) + " and V " + shape_str(V.shape()) +
                            " must share heads and length, K's head size must be Q's " + shape_str(Q.shape()) +
                            ", and q_num_heads / kv_num_heads (when given) must match");
    } else {
      Hq = q_heads_, Hkv = kv_heads_, S = Q.dim(1), L = K.dim(1);
      if (Hq <= 0 || Hkv <= 0 || Q.dim(2) % Hq != 0 || K.dim(2) % Hkv != 0 || V.dim(2) % Hkv != 0 || V.dim(1) != L)
        throw BadInputError(label + ": 3-D Q, K, V " + shape_str(Q.shape()) + ", " + shape_str(K.shape()) + ", " +
                            shape_str(V.shape()) + " need attributes q_num_heads and kv_num_heads dividing their " +
                            "hidden sizes, and K and V one length");
      h = Q.dim(2) / Hq, hv = V.dim(2) / Hkv;
      if (K.dim(2) / Hkv != h)
        throw BadInputError(label + ": K's head size " + std::to_string(K.dim(2) / Hkv) + " differs from Q's " +
                            std::to_string(h));
    }
    if (Hkv <= 0 || Hq % Hkv != 0)
      throw BadInputError(label + ": q_num_heads " + std::to_string(Hq) + " must be a multiple of kv_num_heads " +
                          std::to_string(Hkv));

    const Tensor* pk = ctx.has_input(4) ? &float_input(ctx, 4) : nullptr;
    const Tensor* pv = ctx.has_input(5) ? &float_input(ctx, 5) : nullptr;
    const int64_t P = past_length(node_, pk, pv, B, Hkv, h, hv);
    const int64_t T = checked_add(P, L, label);

    // Keys and values as [B, Hkv, T, d]: past followed by the new rows (the present outputs).
    Tensor Kp(DType::Float32, {B, Hkv, T, h}), Vp(DType::Float32, {B, Hkv, T, hv});
    append_heads(pk ? pk->data<float>() : nullptr, K.data<float>(), head_layout(four_d, Hkv, L, h), nullptr,
                 Kp.data<float>(), B, Hkv, P, L, h);
    append_heads(pv ? pv->data<float>() : nullptr, V.data<float>(), head_layout(four_d, Hkv, L, hv), nullptr,
                 Vp.data<float>(), B, Hkv, P, L, hv);

    // Mask strides over [B, Hq, S, T] (numpy broadcasting from the right).
    const Tensor* M = ctx.has_input(3) ? &ctx.input(3) : nullptr;
    std::array<int64_t, 4> ms{0, 0, 0, 0};
    if (M) {
      if (M->dtype() != DType::Bool && M->dtype() != DType::Float32)
        throw UnsupportedError(label + ": attn_mask must be bool or float32, got " +
                               std::string(dtype_name(M->dtype())));
      const std::array<int64_t, 4> full{B, Hq, S, T};
      if (M->rank() < 1 || M->rank() > 4 || M->dim(M->rank() - 1) != T)
        throw BadInputError(label + ": attn_mask " + shape_str(M->shape()) + " must broadcast to [" +
                            std::to_string(B) + ", " + std::to_string(Hq) + ", " + std::to_string(S) + ", " +
                            std::to_string(T) + "] with a last axis of T = past + kv length " + std::to_string(T));
      int64_t stride = 1;
      for (int64_t a = 0; a < static_cast<int64_t>(M->rank()); ++a) {
        const int64_t axis = static_cast<int64_t>(M->rank()) - 1 - a, to = 3 - a;
        const int64_t d = M->dim(axis);
        if (d != 1 && d != full[to])
          throw BadInputError(label + ": attn_mask " + shape_str(M->shape()) + " does not broadcast to [" +
                              std::to_string(B) + ", " + std::to_string(Hq) + ", " + std::to_string(S) + ", " +
                              std::to_string(T) + "]");
        ms[to] = d == 1 ? 0 : stride;
        stride *= d;
      }
    }

    // nonpad_kv_seqlen (opset 24) [B]: batch b's keys j >= nonpad[b] are padding.
    std::vector<int64_t> nonpad;
    if (ctx.has_input(6)) {
      nonpad = read_ints(ctx.input(6), node_, "nonpad_kv_seqlen");
      if (static_cast<int64_t>(nonpad.size()) != B)
        throw BadInputError(label + ": nonpad_kv_seqlen must hold " + std::to_string(B) + " values, got " +
                            std::to_string(nonpad.size()));
    }

    const HeadLayout ql = head_layout(four_d, Hq, S, h), yl = head_layout(four_d, Hq, S, hv);
    Tensor Y(DType::Float32, four_d ? Shape{B, Hq, S, hv} : Shape{B, S, Hq * hv});
    const bool want_qk = ctx.outputs.size() > 3 && !node_.outputs[3].empty();
    Tensor QK(DType::Float32, want_qk ? Shape{B, Hq, S, T} : Shape{0});
    const float scale = scale_ > 0.f ? scale_ : 1.f / std::sqrt(static_cast<float>(h));
    const int64_t group = Hq / Hkv;
    check_attention_scratch(node_, B * Hq, S, T, ctx.threads);
    parallel_for(B * Hq, threads_for_macs(B * Hq * S * T * (h + hv), ctx.threads), [&](int64_t bn) {
      const int64_t b = bn / Hq, n = bn % Hq, kvh = b * Hkv + n / group;
      AttentionScores rule;
      rule.scale = scale;
      rule.softcap = softcap_;
      rule.masked_row_zero = true;
      rule.causal = causal_;
      rule.causal_offset = P;
      if (!nonpad.empty()) {
        rule.key_end = std::max<int64_t>(nonpad[b], 0);
        rule.causal_offset = nonpad[b] - S;  // ORT 1.30: the diagonal ends at the last real key
      }
      if (M && M->dtype() == DType::Float32)
        rule.add[0] = {M->data<float>() + b * ms[0] + n * ms[1], ms[2], ms[3]};
      else if (M)
        rule.keep = {M->data<bool>() + b * ms[0] + n * ms[1], ms[2], ms[3]};
      if (want_qk) rule.qk_out = QK.data<float>() + bn * S * T, rule.qk_stage = static_cast<int>(mode_);
      attend_head({Q.data<float>() + b * ql.batch + n * ql.head, ql.row, Kp.data<float>() + kvh * T * h, h,
                   Vp.data<float>() + kvh * T * hv, hv, Y.data<float>() + b * yl.batch + n * yl.head, yl.row},
                  S, T, h, hv, rule);
    });
    ctx.outputs[0] = std::move(Y);
    if (ctx.outputs.size() > 1 && !node_.outputs[1].empty()) ctx.outputs[1] = std::move(Kp);
    if (ctx.outputs.size() > 2 && !node_.outputs[2].empty()) ctx.outputs[2] = std::move(Vp);
    if (want_qk) ctx.outputs[3] = std::move(QK);
  }

 private:
  NodeInfo node_;
  bool causal_;
  int64_t q_heads_, kv_heads_, mode_;
  float scale_, softcap_;
};

}  // namespace

std::unique_ptr<Kernel> make_onnx_attention(const NodeInfo& node) {
  return std::make_unique<OnnxAttentionKernel>(node);
}

}  // namespace qtool::runtime::kernels
