// GPTQ for Conv weights. Error it minimises: the conv's output error over the calibration inputs,
// sum over output positions and channels of (p^T (w_o - q_o))^2, p the im2col patch the conv reads at a position
// (its group's input channels x kernel taps, zero padding included) and w_o, q_o output channel o's float and
// rounded weights. A conv is a MatMul of its patches: group g is X_g W_g^T with X_g the patches (rows = positions
// of all samples, K = C/group * taps columns) and W_g the group's [O/group, K] weights, so gptq.cc's core runs
// unchanged on each group with H_g = X_g^T X_g.
// Depthwise convs have one 9 x 9 Hessian per channel, pinned by thousands of positions; a 1 x 1 conv at the end
// of a CNN may see fewer positions than it has inputs. Below kConvGptqRowsPerColumn rows per column the conv is
// rounded to nearest (conv_gptq.h says why).
#include "quantize/weights/conv_gptq.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "quantize/graph.h"
#include "quantize/op_roles.h"
#include "runtime/session.h"

namespace qtool::quantize {
namespace {

// What a 2-D Conv reads: its input [N, C, H, W] through kernel [kh, kw] with strides, dilations and pads.
struct ConvShape {
  std::string weight;
  int64_t group = 1, out = 0, local = 0, kh = 0, kw = 0;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1;
  std::string auto_pad;
  std::vector<int64_t> pads;  // top, left, bottom, right
};

// Pads of one spatial axis for an input of length n: explicit, or as auto_pad places them.
std::pair<int64_t, int64_t> axis_pads(const ConvShape& c, int64_t n, int64_t k, int64_t s, int64_t d, int axis) {
  if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
    const int64_t out = (n + s - 1) / s, total = std::max<int64_t>(0, (out - 1) * s + (k - 1) * d + 1 - n);
    const int64_t small = total / 2, big = total - small;
    return c.auto_pad == "SAME_UPPER" ? std::pair{small, big} : std::pair{big, small};
  }
  if (c.auto_pad == "VALID" || c.pads.size() != 4) return {0, 0};
  return {c.pads[static_cast<size_t>(axis)], c.pads[static_cast<size_t>(axis + 2)]};
}

// Adds p p^T of every patch of x (one sample batch) to the conv's per-group Hessians.
void add_patches(const ConvShape& c, const Tensor& x, LayerHessian& h) {
  if (x.dtype() != DType::Float32 || x.rank() != 4 || x.dim(1) != c.local * c.group) return;
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), K = c.local * c.kh * c.kw;
  const auto [pt, pb] = axis_pads(c, H, c.kh, c.sh, c.dh, 0);
  const auto [pl, pr] = axis_pads(c, W, c.kw, c.sw, c.dw, 1);
  const int64_t oh = (H + pt + pb - (c.kh - 1) * c.dh - 1) / c.sh + 1,
                ow = (W + pl + pr - (c.kw - 1) * c.dw - 1) / c.sw + 1;
  if (oh <= 0 || ow <= 0) return;
  if (h.k == 0) h.k = K, h.groups = c.group, h.h.assign(static_cast<size_t>(c.group * K * K), 0.0);
  if (h.k != K || h.groups != c.group) return;
  const float* d = x.data<float>();
  std::vector<double> p(static_cast<size_t>(K));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < c.group; ++g) {
      double* hg = h.h.data() + g * K * K;
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          // patch in the weight's order: local channel, kernel row, kernel column
          for (int64_t j = 0; j < c.local; ++j)
            for (int64_t a = 0; a < c.kh; ++a)
              for (int64_t b = 0; b < c.kw; ++b) {
                const int64_t iy = y * c.sh - pt + a * c.dh, ix = xo * c.sw - pl + b * c.dw;
                const bool in = iy >= 0 && iy < H && ix >= 0 && ix < W;
                p[static_cast<size_t>((j * c.kh + a) * c.kw + b)] =
                    in ? d[((n * C + g * c.local + j) * H + iy) * W + ix] : 0.0;
              }
          for (int64_t r = 0; r < K; ++r) {
            const double v = p[static_cast<size_t>(r)];
            if (v == 0) continue;
            double* hr = hg + r * K;
            for (int64_t s = 0; s < K; ++s) hr[s] += v * p[static_cast<size_t>(s)];
          }
        }
    }
  h.rows += N * oh * ow;
}

}  // namespace

std::vector<std::string> conv_gptq_weights(const onnx::ModelProto& model, const QConfig& config) {
  std::set<std::string> inits;
  for (const auto& t : model.graph().initializer()) inits.insert(t.name());
  std::vector<std::string> out;
  for (const auto& node : model.graph().node()) {
    if (node.op_type() != "Conv" || node.input_size() < 2 || !inits.count(node.input(1))) continue;
    const NodeQuant q = config.resolve(node.name(), node.op_type());
    const std::optional<TensorSettings> w = q.quantized ? weight_settings(config, q, node.input(1)) : std::nullopt;
    if (w && w->algorithm == WeightAlgorithm::Gptq && std::find(out.begin(), out.end(), node.input(1)) == out.end())
      out.push_back(node.input(1));
  }
  return out;
}

LayerHessians collect_conv_hessians(const onnx::ModelProto& model, const std::vector<std::string>& weights,
                                    const std::vector<std::map<std::string, Tensor>>& samples, int threads) {
  std::map<std::string, std::vector<ConvShape>> by_input;  // a tensor several convs read: one tap, each conv's sums
  std::map<std::string, std::vector<int64_t>> dims;
  for (const auto& t : model.graph().initializer())
    if (std::find(weights.begin(), weights.end(), t.name()) != weights.end())
      dims[t.name()] = std::vector<int64_t>(t.dims().begin(), t.dims().end());
  for (const auto& node : model.graph().node()) {
    if (node.op_type() != "Conv" || node.input_size() < 2 || !dims.count(node.input(1))) continue;
    const std::vector<int64_t>& wd = dims[node.input(1)];
    if (wd.size() != 4) continue;  // 2-D convs only; quantize_conv_gptq refuses the others
    ConvShape c;
    c.weight = node.input(1);
    c.group = attr_int(node, "group", 1);
    c.out = wd[0], c.local = wd[1], c.kh = wd[2], c.kw = wd[3];
    const std::vector<int64_t> st = attr_ints(node, "strides"), dl = attr_ints(node, "dilations");
    if (st.size() == 2) c.sh = st[0], c.sw = st[1];
    if (dl.size() == 2) c.dh = dl[0], c.dw = dl[1];
    c.pads = attr_ints(node, "pads");
    for (const auto& a : node.attribute())
      if (a.name() == "auto_pad") c.auto_pad = a.s();
    by_input[node.input(0)].push_back(c);
  }
  LayerHessians hs;
  if (by_input.empty()) return hs;
  const runtime::Session session(model, {.threads = threads});
  runtime::RunOptions ro;
  ro.tap = [&](const std::string& name, const Tensor& x) {
    auto it = by_input.find(name);
    if (it == by_input.end()) return;
    for (const ConvShape& c : it->second) add_patches(c, x, hs[c.weight]);
  };
  for (const auto& s : samples) session.run(s, ro);
  return hs;
}

WeightResult quantize_conv_gptq(const WeightInput& in) {
  const Tensor& w = in.w;
  const TensorSettings& s = in.settings;
  if (!in.hessian) throw InternalError("conv gptq: no Hessian for this weight");
  const LayerHessian& hs = *in.hessian;
  if (w.rank() != 4 || s.granularity != Granularity::PerChannel || in.axis != 0)
    throw BadInputError("gptq rounds 2-D Conv weights with per_channel scales on the output channel (axis 0), got " +
                        shape_str(w.shape()) + "; use \"rtn\" or \"clip_search\" for this weight");
  const int64_t O = w.dim(0), G = hs.groups, K = hs.k;
  if (G < 1 || O % G != 0 || K != w.numel() / O || static_cast<int64_t>(hs.h.size()) != G * K * K)
    throw InternalError("conv gptq: weight " + shape_str(w.shape()) + " does not match its " + std::to_string(G) +
                        " Hessians of size " + std::to_string(K));
  if (hs.rows < kConvGptqRowsPerColumn * K) return quantize_rtn(in);

  WeightResult r;
  r.params = weight_params(w, s, 0);
  r.codes = Tensor::zeros(r.params.dtype(), w.shape());
  r.metric = "output_sse";
  const int64_t per = O / G;
  const auto& info = dtype_info(r.params.dtype());
  float* scale = r.params.scale.data<float>();
  const float* wd = w.data<float>();
  for (int64_t g = 0; g < G; ++g) {
    // Group g as a Gemm weight with transB: [O/group, K], its rows the group's output channels.
    Tensor wg = Tensor::zeros(DType::Float32, {per, K});
    std::copy(wd + g * per * K, wd + (g + 1) * per * K, wg.data<float>());
    LayerHessian hg;
    hg.k = K;
    hg.rows = hs.rows;
    hg.h.assign(hs.h.begin() + g * K * K, hs.h.begin() + (g + 1) * K * K);
    const WeightResult rg = quantize_gptq(WeightInput{wg, s, 0, 1, &hg});
    for (int64_t o = 0; o < per; ++o) {
      scale[g * per + o] = rg.params.scale.data<float>()[o];
      info.store(r.params.zero_point.raw(), g * per + o,
                 dtype_info(rg.params.dtype()).load(rg.params.zero_point.raw(), o), true);
      for (int64_t k = 0; k < K; ++k)
        info.store(r.codes.raw(), (g * per + o) * K + k, info.load(rg.codes.raw(), o * K + k), true);
    }
    r.error += rg.error;
  }
  return r;
}

}  // namespace qtool::quantize
