// Normalization kernels, float32.
//
// BatchNormalization (inference): Y = (X - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + B[c], folded
//   per channel to Y = a[c] * X + b[c]; training_mode = 1 is unsupported.
// InstanceNormalization: per (n, c) over the spatial axes: Y = (X - mean) / sqrt(var + epsilon) * scale[c] + B[c]
//   (population variance).
// LayerNormalization (opset 17): over axes [axis, rank): Y = (X - mean) * InvStdDev * Scale + B, with
//   InvStdDev = 1 / sqrt(var + epsilon); Scale and B broadcast to the normalised shape. Optional outputs
//   Mean and InvStdDev have X's shape with the normalised axes set to 1. Computed in float (stash_type 1).
//   The same kernel runs ONNX Runtime's contrib LayerNormalization, which ORT registers in the default domain for
//   opsets 1-16 (models written by its transformer optimizer before ONNX had the op).
// RMSNormalization (opset 23; also the node runtime/fuse_rmsnorm.h forms, which may omit Scale): over axes
//   [axis, rank): Y = X · 1/sqrt(mean(X²) + epsilon) · Scale, Scale broadcast to the normalised shape, in float.
//   ORT's SimplifiedLayerNormalization (default domain, contrib) is the same op with an optional second output
//   inv_std_var = 1/sqrt(mean(X²) + epsilon), shaped as LayerNormalization's InvStdDev.
// SkipLayerNormalization / SkipSimplifiedLayerNormalization (com.microsoft): over the last axis of
//   s = input + skip (+ bias), input [B,S,H] or [T,H], skip of input's shape or, for a 3-D input, [1,S,H] or
//   [S,H] broadcast over the batch; gamma/beta/bias of [H]: output = LayerNorm(s)·gamma + beta (RMSNorm(s)·gamma for Simplified).
//   Optional outputs: 1 mean and 2 inv_std_var as LayerNormalization's (ORT 1.30's CPU kernel leaves them empty:
//   a graph output there fails in ORT, here it is filled), 3 input_skip_bias_sum = s.
// EmbedLayerNormalization (com.microsoft, BERT's embeddings): inputs 0 input_ids [B, S] int32, 1 segment_ids
//   (optional), 2 word_embedding [V, H], 3 position_embedding [P, H], 4 segment_embedding (optional), 5 gamma,
//   6 beta, 7 mask [B, S] int32 (optional), 8 position_ids [B, S] or [1, S] (optional; else s).
//   e = word[id] + position[pos] (+ segment[seg]); output = LayerNorm(e)·gamma + beta over H (epsilon 1e-12);
//   mask_index [B] = how many mask values of the row are 1 (0 without mask); embedding_sum = e. An index outside its
//   table is a one-line error, as ORT's.
// GroupNormalization (opset 18, 21): X [N, C, ...] with C split into num_groups groups of C/G consecutive
//   channels; per (n, group) over its channels and spatial positions: Y = (X - mean) / sqrt(var + epsilon) · scale
//   + bias (population variance, in double). Opset 18: scale and bias hold one value per group; opset 21: one per
//   channel (stash_type 1 only: statistics in float or wider).
// LpNormalization: Y = X / ||X||_p along axis (p 1 or 2); a zero norm gives Y = 0 (ONNX Runtime's answer).
// MeanVarianceNormalization (opset 9, 13): over `axes` (default [0, 2, 3]): Y = (X - mean) / (sqrt(var) + 1e-9),
//   population variance (the op's function body: Sqrt(E[X²] - E[X]²) + 1e-9; computed here as the mean squared
//   deviation, which cannot go negative).
// LRN: Y = X / (bias + alpha / size * sum_{c' in window(c)} X[c']^2)^beta, window [c - (size-1)/2, c +
// ceil((size-1)/2)].
#include <algorithm>
#include <cmath>

#include "core/checked.h"
#include "core/limits.h"
#include "runtime/kernels/blas.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {
using namespace compute;

void check_channel_vector(const KernelContext& ctx, size_t i, int64_t c, const char* what) {
  const Tensor& t = float_input(ctx, i);
  if (t.numel() != c)
    throw BadInputError(ctx.node.label() + ": input '" + what + "' has " + std::to_string(t.numel()) +
                        " values, expected one per channel (" + std::to_string(c) + ")");
}

class BatchNormKernel final : public Kernel {
 public:
  explicit BatchNormKernel(const NodeInfo& node) : node_(node), eps_(node.attrs.get_float("epsilon", 1e-5f)) {
    if (node.attrs.get_int("training_mode", 0) != 0)
      throw UnsupportedError(node.label() + ": training_mode = 1 is not supported (inference only)");
  }
  void run(KernelContext& ctx) override {
    const Tensor& X = float_input(ctx, 0);
    if (X.rank() < 2) throw BadInputError(node_.label() + ": X must have rank >= 2, got " + shape_str(X.shape()));
    const int64_t N = X.dim(0), C = X.dim(1), S = X.numel() / std::max<int64_t>(1, N * C);
    const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
    for (size_t i = 1; i < 5; ++i) check_channel_vector(ctx, i, C, names[i]);
    std::vector<float> a(C), b(C);
    for (int64_t c = 0; c < C; ++c) {
      a[c] = ctx.input(1).data<float>()[c] / std::sqrt(ctx.input(4).data<float>()[c] + eps_);
      b[c] = ctx.input(2).data<float>()[c] - ctx.input(3).data<float>()[c] * a[c];
    }
    Tensor Y(DType::Float32, X.shape());
    const float* x = X.data<float>();
    float* y = Y.data<float>();
    parallel_for(N * C, threads_for(X.numel(), ctx.threads),
                 [&](int64_t i) { scale_shift(x + i * S, a[i % C], b[i % C], y + i * S, S); });
    ctx.outputs[0] = std::move(Y);
  }

 private:
  NodeInfo node_;
  float eps_;
};

// X [N, C, ...] in N·G blocks of `per` = C/G consecutive channels of S values: per block, Y = (X - mean) /
// sqrt(var + eps) · scale[p] + bias[p] (population variance, in double), p the channel (per_channel) or the group.
// InstanceNormalization is G = C; GroupNormalization has per-group (18) or per-channel (21) parameters.
void normalize_groups(const Tensor& X, int64_t G, bool per_channel, const float* scale, const float* bias, double eps,
                      Tensor& Y, int threads) {
  const int64_t N = X.dim(0), C = X.dim(1), S = X.numel() / std::max<int64_t>(1, N * C), per = C / G, len = per * S;
  const float* x = X.data<float>();
  float* y = Y.data<float>();
  parallel_for(N * G, threads_for(X.numel() * 3, threads), [&](int64_t i) {  // 3 passes: mean, variance, y
    const int64_t g = i % G;
    const float* xs = x + i * len;
    double sum = 0, sq = 0;
    for (int64_t j = 0; j < len; ++j) sum += xs[j];
    const double mean = len ? sum / static_cast<double>(len) : 0;
    for (int64_t j = 0; j < len; ++j) sq += (xs[j] - mean) * (xs[j] - mean);
    const double inv = 1.0 / std::sqrt((len ? sq / static_cast<double>(len) : 0) + eps);
    for (int64_t k = 0; k < per; ++k) {
      const int64_t p = per_channel ? g * per + k : g;
      const float a = static_cast<float>(scale[p] * inv), b = bias[p] - static_cast<float>(mean) * a;
      scale_shift(xs + k * S, a, b, y + i * len + k * S, S);
    }
  });
}

void instance_norm(KernelContext& ctx) {
  const Tensor& X = float_input(ctx, 0);
  if (X.rank() < 3) throw BadInputError(ctx.node.label() + ": X must have rank >= 3, got " + shape_str(X.shape()));
  const int64_t C = X.dim(1);
  check_channel_vector(ctx, 1, C, "scale");
  check_channel_vector(ctx, 2, C, "B");
  Tensor Y(DType::Float32, X.shape());
  if (C > 0)
    normalize_groups(X, C, true, ctx.input(1).data<float>(), ctx.input(2).data<float>(),
                     ctx.node.attrs.get_float("epsilon", 1e-5f), Y, ctx.threads);
  ctx.outputs[0] = std::move(Y);
}

// Values of `t` broadcast (numpy rules, right-aligned) to `shape`, materialised.
std::vector<float> broadcast_to(const NodeInfo& node, const Tensor& t, const Shape& shape, const char* what) {
  const size_t r = shape.size();
  if (static_cast<size_t>(t.rank()) > r)
    throw BadInputError(node.label() + ": input '" + what + "' " + shape_str(t.shape()) + " does not broadcast to " +
                        shape_str(shape));
  std::vector<int64_t> str(r, 0);
  int64_t s = 1;
  for (size_t i = r; i-- > r - t.rank();) {
    const int64_t d = t.shape()[i - (r - t.rank())];
    if (d != 1 && d != shape[i])
      throw BadInputError(node.label() + ": input '" + what + "' " + shape_str(t.shape()) + " does not broadcast to " +
                          shape_str(shape));
    str[i] = d == 1 ? 0 : s;
    s *= d;
  }
  const int64_t n = shape_numel(shape);
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, off = 0;
    for (size_t k = r; k-- > 0;) {
      off += (rem % shape[k]) * str[k];
      rem /= shape[k];
    }
    out[i] = t.data<float>()[off];
  }
  return out;
}

// Sum of (x - shift)² over x[0..D) in 8 partial sums, so that it vectorises (LayerNorm's variance, RMSNorm's
// mean of squares with shift 0: (x - 0)² is x² exactly).
inline float sum_sq_dev(const float* x, int64_t D, float shift) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= D; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += (x[i + k] - shift) * (x[i + k] - shift);
  float sq = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < D; ++i) sq += (x[i] - shift) * (x[i] - shift);
  return sq;
}

// LayerNormalization's and RMSNormalization's rows: the normalised axes [axis, rank) of X.
struct NormRows {
  float eps;
  Shape norm_shape;  // X's shape from axis on
  int64_t D, rows;   // values per row, rows
};
NormRows norm_rows(const KernelContext& ctx, const Tensor& X) {
  const int64_t axis = normalize_axis(ctx.node.attrs.get_int("axis", -1), X.rank(), ctx.node);
  NormRows r{ctx.node.attrs.get_float("epsilon", 1e-5f), Shape(X.shape().begin() + axis, X.shape().end()), 0, 0};
  r.D = shape_numel(r.norm_shape);
  r.rows = r.D ? X.numel() / r.D : 0;
  return r;
}

// One row of LayerNormalization: mean, mean of squared deviations (two passes, each summed in 8 partial sums as
// compute::sum_of does, so both vectorise), then y = (x - mean)·inv·scale + bias. A serial sum per row was most of
// the op's time on transformer rows of 64 values (10.6 % of digits-vit's 1-thread samples).
QTOOL_HOT_LOOP
static void layer_norm_row(const float* x, int64_t D, float eps, const float* scale, const float* bias, float* y,
                           float& mean_out, float& inv_out) {
  const float mean = sum_of(x, D) / static_cast<float>(D);
  const float inv = 1.f / std::sqrt(sum_sq_dev(x, D, mean) / static_cast<float>(D) + eps);
  for (int64_t j = 0; j < D; ++j) y[j] = (x[j] - mean) * inv * scale[j] + bias[j];
  mean_out = mean;
  inv_out = inv;
}

// The shape of the per-row statistics (Mean, InvStdDev): X's shape with the last `norm_axes` axes set to 1.
Shape stat_shape(const Tensor& X, size_t norm_axes) {
  Shape s = X.shape();
  for (size_t i = s.size() - norm_axes; i < s.size(); ++i) s[i] = 1;
  return s;
}

void layer_norm(KernelContext& ctx) {
  const Tensor& X = float_input(ctx, 0);
  const auto [eps, norm_shape, D, rows] = norm_rows(ctx, X);
  const std::vector<float> scale = broadcast_to(ctx.node, float_input(ctx, 1), norm_shape, "Scale");
  const std::vector<float> bias =
      ctx.has_input(2) ? broadcast_to(ctx.node, float_input(ctx, 2), norm_shape, "B") : std::vector<float>(D, 0.f);
  Tensor Y(DType::Float32, X.shape());
  Tensor mean_t(DType::Float32, stat_shape(X, norm_shape.size())), inv_t(DType::Float32, stat_shape(X, norm_shape.size()));
  const float* x = X.data<float>();
  float* y = Y.data<float>();
  float* means = mean_t.data<float>();
  float* invs = inv_t.data<float>();
  parallel_for(rows, threads_for(X.numel() * 3, ctx.threads), [&](int64_t r) {  // mean, variance, y
    layer_norm_row(x + r * D, D, eps, scale.data(), bias.data(), y + r * D, means[r], invs[r]);
  });
  ctx.outputs[0] = std::move(Y);
  if (ctx.outputs.size() > 1) ctx.outputs[1] = std::move(mean_t);
  if (ctx.outputs.size() > 2) ctx.outputs[2] = std::move(inv_t);
}

// One row of RMSNormalization: the mean of squares in 8 partial sums (vectorised), then y = x·inv·scale.
QTOOL_HOT_LOOP
static float rms_norm_row(const float* x, int64_t D, float eps, const float* scale, float* y) {
  const float inv = 1.f / std::sqrt(sum_sq_dev(x, D, 0.f) / static_cast<float>(D) + eps);
  if (scale)
    for (int64_t j = 0; j < D; ++j) y[j] = x[j] * inv * scale[j];
  else
    for (int64_t j = 0; j < D; ++j) y[j] = x[j] * inv;
  return inv;
}

void rms_norm(KernelContext& ctx) {
  const Tensor& X = float_input(ctx, 0);
  const auto [eps, norm_shape, D, rows] = norm_rows(ctx, X);
  // The fused RMSNorm (runtime/fuse_rmsnorm.h) may have no scale; the ONNX op always has one.
  const std::vector<float> scale =
      ctx.has_input(1) ? broadcast_to(ctx.node, float_input(ctx, 1), norm_shape, "scale") : std::vector<float>{};
  Tensor Y(DType::Float32, X.shape());
  Tensor inv_t(DType::Float32, stat_shape(X, norm_shape.size()));
  const float* x = X.data<float>();
  float* y = Y.data<float>();
  float* invs = inv_t.data<float>();
  parallel_for(rows, threads_for(X.numel(), ctx.threads), [&](int64_t r) {
    invs[r] = rms_norm_row(x + r * D, D, eps, scale.empty() ? nullptr : scale.data(), y + r * D);
  });
  ctx.outputs[0] = std::move(Y);
  if (ctx.outputs.size() > 1) ctx.outputs[1] = std::move(inv_t);  // SimplifiedLayerNormalization's inv_std_var
}

// SkipLayerNormalization (Simplified = false) and SkipSimplifiedLayerNormalization (true), com.microsoft.
template <bool Simplified>
void skip_layer_norm(KernelContext& ctx) {
  const Tensor& X = float_input(ctx, 0);
  const Tensor& skip = float_input(ctx, 1);
  if (X.rank() != 2 && X.rank() != 3)
    throw BadInputError(ctx.node.label() + ": input must be [batch, sequence, hidden] or [tokens, hidden], got " +
                        shape_str(X.shape()));
  // skip: input's shape, or for a 3-D input [1, S, H] or [S, H] (ORT's rule).
  const Shape& ss = skip.shape();
  const bool skip_ok = ss == X.shape() || (X.rank() == 3 && ((ss.size() == 3 && ss[0] == 1 && ss[1] == X.dim(1) &&
                                                              ss[2] == X.dim(2)) ||
                                                             (ss.size() == 2 && ss[0] == X.dim(1) && ss[1] == X.dim(2))));
  if (!skip_ok)
    throw BadInputError(ctx.node.label() + ": skip " + shape_str(ss) + " must have input's shape " +
                        shape_str(X.shape()) + ", or [1, S, H] / [S, H] for a 3-D input");
  const int64_t D = X.dim(X.rank() - 1), rows = D ? X.numel() / D : 0, skip_n = skip.numel();
  const float eps = ctx.node.attrs.get_float("epsilon", 1e-12f);
  const Shape hidden{D};
  // Inputs: input, skip, gamma, beta (not in Simplified), bias.
  const size_t bias_i = Simplified ? 3 : 4;
  const std::vector<float> gamma = broadcast_to(ctx.node, float_input(ctx, 2), hidden, "gamma");
  const std::vector<float> beta = !Simplified && ctx.has_input(3) ? broadcast_to(ctx.node, float_input(ctx, 3), hidden, "beta")
                                                                   : std::vector<float>(D, 0.f);
  const std::vector<float> bias =
      ctx.has_input(bias_i) ? broadcast_to(ctx.node, float_input(ctx, bias_i), hidden, "bias") : std::vector<float>{};
  Tensor Y(DType::Float32, X.shape()), sum_t(DType::Float32, X.shape());
  Tensor mean_t(DType::Float32, stat_shape(X, 1)), inv_t(DType::Float32, stat_shape(X, 1));
  const float *x = X.data<float>(), *sk = skip.data<float>();
  float *y = Y.data<float>(), *sum = sum_t.data<float>(), *means = mean_t.data<float>(), *invs = inv_t.data<float>();
  parallel_for(rows, threads_for(X.numel() * 4, ctx.threads), [&](int64_t r) {  // sum, mean, variance, y
    float* s = sum + r * D;
    const float* k = sk + (r * D) % skip_n;
    for (int64_t j = 0; j < D; ++j) s[j] = x[r * D + j] + k[j];
    if (!bias.empty())
      for (int64_t j = 0; j < D; ++j) s[j] += bias[j];
    if constexpr (Simplified) {
      means[r] = 0.f;
      invs[r] = rms_norm_row(s, D, eps, gamma.data(), y + r * D);
    } else {
      layer_norm_row(s, D, eps, gamma.data(), beta.data(), y + r * D, means[r], invs[r]);
    }
  });
  ctx.outputs[0] = std::move(Y);
  if (ctx.outputs.size() > 1) ctx.outputs[1] = std::move(mean_t);
  if (ctx.outputs.size() > 2) ctx.outputs[2] = std::move(inv_t);
  if (ctx.outputs.size() > 3) ctx.outputs[3] = std::move(sum_t);
}

// Row `idx` of an embedding table [rows, H], or a BadInputError naming the node, input and index.
const float* embedding_row(const KernelContext& ctx, size_t table, int64_t idx, const char* what) {
  const Tensor& t = float_input(ctx, table);
  if (idx < 0 || idx >= t.dim(0))
    throw BadInputError(ctx.node.label() + ": " + what + " " + std::to_string(idx) + " is outside the embedding " +
                        "table's " + std::to_string(t.dim(0)) + " rows");
  return t.data<float>() + idx * t.dim(1);
}

const int32_t* int32_input(const KernelContext& ctx, size_t i, const Shape& want, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DType::Int32 || (t.shape() != want && !(i == 8 && t.shape() == Shape{1, want[1]})))
    throw BadInputError(ctx.node.label() + ": " + what + " must be int32 " + shape_str(want) + ", got " +
                        std::string(dtype_name(t.dtype())) + " " + shape_str(t.shape()));
  return t.data<int32_t>();
}

void embed_layer_norm(KernelContext& ctx) {
  const Tensor& ids_t = ctx.input(0);
  if (ids_t.rank() != 2)
    throw BadInputError(ctx.node.label() + ": input_ids must be [batch, sequence], got " + shape_str(ids_t.shape()));
  const Shape bs = ids_t.shape();
  const int64_t B = bs[0], S = bs[1];
  const int32_t* ids = int32_input(ctx, 0, bs, "input_ids");
  const int32_t* segs = ctx.has_input(1) && ctx.has_input(4) ? int32_input(ctx, 1, bs, "segment_ids") : nullptr;
  const int32_t* mask = ctx.has_input(7) ? int32_input(ctx, 7, bs, "mask") : nullptr;
  const int32_t* pos_ids = ctx.has_input(8) ? int32_input(ctx, 8, bs, "position_ids") : nullptr;
  const bool pos_shared = pos_ids && ctx.input(8).dim(0) == 1 && B != 1;
  for (size_t t : {size_t{2}, size_t{3}, size_t{4}})
    if (ctx.has_input(t) && (float_input(ctx, t).rank() != 2 || float_input(ctx, t).dim(1) != float_input(ctx, 2).dim(1)))
      throw BadInputError(ctx.node.label() + ": embedding tables must be 2-D with one hidden size, got " +
                          shape_str(ctx.input(t).shape()));
  const int64_t D = float_input(ctx, 2).dim(1);
  const Shape hidden{D};
  const std::vector<float> gamma = broadcast_to(ctx.node, float_input(ctx, 5), hidden, "gamma");
  const std::vector<float> beta = broadcast_to(ctx.node, float_input(ctx, 6), hidden, "beta");
  const float eps = ctx.node.attrs.get_float("epsilon", 1e-12f);
  Tensor Y(DType::Float32, {B, S, D}), sum_t(DType::Float32, {B, S, D}), mask_index(DType::Int32, {B});
  float *y = Y.data<float>(), *sum = sum_t.data<float>();
  for (int64_t r = 0; r < B * S; ++r) {  // serial: the index checks throw
    const int64_t s = r % S;
    const float* w = embedding_row(ctx, 2, ids[r], "input_ids value");
    const float* p = embedding_row(ctx, 3, pos_ids ? pos_ids[pos_shared ? s : r] : s, "position");
    const float* g = segs ? embedding_row(ctx, 4, segs[r], "segment_ids value") : nullptr;
    float* e = sum + r * D;
    for (int64_t j = 0; j < D; ++j) e[j] = w[j] + p[j];
    if (g)
      for (int64_t j = 0; j < D; ++j) e[j] += g[j];
    float mean, inv;
    layer_norm_row(e, D, eps, gamma.data(), beta.data(), y + r * D, mean, inv);
  }
  int32_t* mi = mask_index.data<int32_t>();
  for (int64_t b = 0; b < B; ++b) mi[b] = mask ? static_cast<int32_t>(std::count(mask + b * S, mask + (b + 1) * S, 1)) : 0;
  ctx.outputs[0] = std::move(Y);
  if (ctx.outputs.size() > 1) ctx.outputs[1] = std::move(mask_index);
  if (ctx.outputs.size() > 2) ctx.outputs[2] = std::move(sum_t);
}

void lrn(KernelContext& ctx) {
  const Tensor& X = float_input(ctx, 0);
  if (X.rank() < 3) throw BadInputError(ctx.node.label() + ": X must have rank >= 3, got " + shape_str(X.shape()));
  const int64_t size = ctx.node.attrs.require_int("size");
  const float alpha = ctx.node.attrs.get_float("alpha", 1e-4f), beta = ctx.node.attrs.get_float("beta", 0.75f),
              bias = ctx.node.attrs.get_float("bias", 1.f);
  const int64_t N = X.dim(0), C = X.dim(1), S = X.numel() / std::max<int64_t>(1, N * C);
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  Tensor Y(DType::Float32, X.shape());
  const float* x = X.data<float>();
  float* y = Y.data<float>();
  parallel_for(N * C, threads_for(X.numel() * size, ctx.threads), [&](int64_t i) {
    const int64_t n = i / C, c = i % C;
    for (int64_t j = 0; j < S; ++j) {
      float sq = 0;
      for (int64_t cc = std::max<int64_t>(0, c - lo); cc <= std::min(C - 1, c + hi); ++cc) {
        const float v = x[(n * C + cc) * S + j];
        sq += v * v;
      }
      y[i * S + j] = x[i * S + j] / std::pow(bias + alpha / static_cast<float>(size) * sq, beta);
    }
  });
  ctx.outputs[0] = std::move(Y);
}

class GroupNormKernel final : public Kernel {
 public:
  explicit GroupNormKernel(const NodeInfo& node)
      : groups_(node.attrs.require_int("num_groups")),
        eps_(node.attrs.get_float("epsilon", 1e-5f)),
        per_channel_(node.opset >= 21) {
    if (groups_ < 1) throw BadInputError(node.label() + ": num_groups must be >= 1, got " + std::to_string(groups_));
    const int64_t stash = node.attrs.get_int("stash_type", 1);
    if (stash != 1)
      throw UnsupportedError(node.label() + ": stash_type " + std::to_string(stash) +
                             " is not supported (1, statistics in float, is)");
  }
  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    const Tensor& X = float_input(ctx, 0);
    if (X.rank() < 2) throw BadInputError(node.label() + ": X must have rank >= 2, got " + shape_str(X.shape()));
    const int64_t C = X.dim(1);
    if (C % groups_ != 0)
      throw BadInputError(node.label() + ": " + std::to_string(C) +
                          " channels do not split into num_groups = " + std::to_string(groups_) + " groups");
    const int64_t G = groups_, params = per_channel_ ? C : G;
    check_channel_vector(ctx, 1, params, "scale");
    check_channel_vector(ctx, 2, params, "bias");
    Tensor Y(DType::Float32, X.shape());
    normalize_groups(X, G, per_channel_, ctx.input(1).data<float>(), ctx.input(2).data<float>(), eps_, Y, ctx.threads);
    ctx.outputs[0] = std::move(Y);
  }

 private:
  int64_t groups_;
  float eps_;
  bool per_channel_;
};

class LpNormKernel final : public Kernel {
 public:
  explicit LpNormKernel(const NodeInfo& node) : axis_(node.attrs.get_int("axis", -1)), p_(node.attrs.get_int("p", 2)) {
    if (p_ != 1 && p_ != 2) throw BadInputError(node.label() + ": p must be 1 or 2, got " + std::to_string(p_));
  }
  void run(KernelContext& ctx) override {
    const Tensor& X = float_input(ctx, 0);
    const int64_t axis = normalize_axis(axis_, X.rank(), ctx.node);
    const int64_t D = X.dim(axis), inner = shape_numel(Shape(X.shape().begin() + axis + 1, X.shape().end()));
    const int64_t outer = (D * inner) != 0 ? X.numel() / (D * inner) : 0;
    Tensor Y(DType::Float32, X.shape());
    const float* x = X.data<float>();
    float* y = Y.data<float>();
    parallel_for(outer * inner, threads_for(X.numel() * 2, ctx.threads), [&](int64_t r) {
      const int64_t base = (r / inner) * D * inner + r % inner;
      double norm = 0;
      for (int64_t j = 0; j < D; ++j) {
        const double v = x[base + j * inner];
        norm += p_ == 1 ? std::abs(v) : v * v;
      }
      if (p_ == 2) norm = std::sqrt(norm);
      const float inv = norm != 0 ? static_cast<float>(1.0 / norm) : 0.f;
      for (int64_t j = 0; j < D; ++j) y[base + j * inner] = x[base + j * inner] * inv;
    });
    ctx.outputs[0] = std::move(Y);
  }

 private:
  int64_t axis_, p_;
};

class MeanVarianceNormKernel final : public Kernel {
 public:
  explicit MeanVarianceNormKernel(const NodeInfo& node) : axes_(node.attrs.get_ints("axes", {0, 2, 3})) {}
  void run(KernelContext& ctx) override {
    const Tensor& X = float_input(ctx, 0);
    const int64_t rank = X.rank();
    std::vector<bool> reduced(rank, false);
    for (int64_t a : axes_) {
      const int64_t k = normalize_axis(a, rank, ctx.node);
      if (reduced[k]) throw BadInputError(ctx.node.label() + ": axis " + std::to_string(a) + " is repeated in axes");
      reduced[k] = true;
    }
    // Each element's statistics slot: its index over the kept axes (row-major), followed along as the elements are
    // visited in order (no per-element index array: that was 8 bytes per element, twice X, beyond --max-memory).
    int64_t groups = 1;
    for (int64_t d = 0; d < rank; ++d)
      if (!reduced[d]) groups *= X.dim(d);
    const int64_t n = X.numel();
    const Shape& shape = X.shape();
    auto for_each = [&](auto&& f) {  // f(element, slot) for every element in order
      std::vector<int64_t> idx(rank, 0);
      for (int64_t i = 0; i < n; ++i) {
        int64_t g = 0;
        for (int64_t d = 0; d < rank; ++d)
          if (!reduced[d]) g = g * shape[d] + idx[d];
        f(i, g);
        for (int64_t d = rank; d-- > 0;) {
          if (++idx[d] < shape[d]) break;
          idx[d] = 0;
        }
      }
    };
    // mean, sq, count and inv: 32 bytes per slot, up to one slot per element (axes = []).
    check_tensor_allocation(checked_mul(groups, int64_t{32}, "statistics"),
                            "statistics of " + std::to_string(groups) + " groups");
    const float* x = X.data<float>();
    std::vector<double> mean(groups, 0.0), sq(groups, 0.0);
    std::vector<int64_t> count(groups, 0);
    for_each([&](int64_t i, int64_t g) {
      mean[g] += x[i];
      ++count[g];
    });
    for (int64_t g = 0; g < groups; ++g) mean[g] /= std::max<int64_t>(count[g], 1);
    for_each([&](int64_t i, int64_t g) { sq[g] += (x[i] - mean[g]) * (x[i] - mean[g]); });
    std::vector<double> inv(groups);
    for (int64_t g = 0; g < groups; ++g) inv[g] = 1.0 / (std::sqrt(sq[g] / std::max<int64_t>(count[g], 1)) + 1e-9);
    Tensor Y(DType::Float32, shape);
    float* y = Y.data<float>();
    for_each([&](int64_t i, int64_t g) { y[i] = static_cast<float>((x[i] - mean[g]) * inv[g]); });
    ctx.outputs[0] = std::move(Y);
  }

 private:
  std::vector<int64_t> axes_;
};

}  // namespace

std::unique_ptr<Kernel> make_group_norm(const NodeInfo& node) { return std::make_unique<GroupNormKernel>(node); }
std::unique_ptr<Kernel> make_lp_norm(const NodeInfo& node) { return std::make_unique<LpNormKernel>(node); }
std::unique_ptr<Kernel> make_mean_variance_norm(const NodeInfo& node) {
  return std::make_unique<MeanVarianceNormKernel>(node);
}
std::unique_ptr<Kernel> make_batch_norm(const NodeInfo& node) { return std::make_unique<BatchNormKernel>(node); }
std::unique_ptr<Kernel> make_instance_norm(const NodeInfo& node) { return make_function_kernel<instance_norm>(node); }
std::unique_ptr<Kernel> make_layer_norm(const NodeInfo& node) { return make_function_kernel<layer_norm>(node); }
std::unique_ptr<Kernel> make_rms_norm(const NodeInfo& node) { return make_function_kernel<rms_norm>(node); }
std::unique_ptr<Kernel> make_skip_layer_norm(const NodeInfo& node) {
  return make_function_kernel<skip_layer_norm<false>>(node);
}
std::unique_ptr<Kernel> make_skip_simplified_layer_norm(const NodeInfo& node) {
  return make_function_kernel<skip_layer_norm<true>>(node);
}
std::unique_ptr<Kernel> make_embed_layer_norm(const NodeInfo& node) {
  return make_function_kernel<embed_layer_norm>(node);
}
std::unique_ptr<Kernel> make_lrn(const NodeInfo& node) { return make_function_kernel<lrn>(node); }

}  // namespace qtool::runtime::kernels
