#include "runtime/fuse_conv.h"

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/conv_fold.h"
#include "runtime/fuse_match.h"
#include "runtime/graph.h"

namespace qtool::runtime {
namespace {

using fusion::onnx_op;

// The constant float tensor of input i with only finite values; nullptr otherwise.
const Tensor* finite_const(const GraphNode& n, size_t i) {
  const Tensor* t = i < n.info.const_inputs.size() ? n.info.const_inputs[i] : nullptr;
  if (!t || t->dtype() != DType::Float32 || t->numel() == 0) return nullptr;
  for (float v : t->span<float>())
    if (!std::isfinite(v)) return nullptr;
  return t;
}

// ---- 1. Pad -> Conv ------------------------------------------------------------------------------------------

// The Pad's pads over all axes when it is a zero constant pad the Conv can take over (conv_fold::pads_with_pad
// checks the amounts).
std::optional<std::vector<int64_t>> zero_pad_amounts(const GraphNode& pad) {
  if (!onnx_op(pad, "Pad") || pad.outputs.size() != 1 || pad.inputs.empty() || pad.inputs[0] < 0) return std::nullopt;
  if (pad.info.attrs.get_string("mode", "constant") != "constant") return std::nullopt;
  if (pad.info.opset < 11) {
    if (pad.info.attrs.get_float("value", 0.f) != 0.f) return std::nullopt;
    return pad.info.attrs.get_ints("pads");
  }
  if (pad.inputs.size() > 3 && pad.inputs[3] >= 0) return std::nullopt;  // axes (opset 18)
  if (pad.inputs.size() > 2 && pad.inputs[2] >= 0) {
    const auto v = fusion::const_scalar(pad, 2);
    if (!v || *v != 0.f) return std::nullopt;
  }
  const Tensor* p = pad.inputs.size() > 1 ? pad.info.const_inputs[1] : nullptr;
  if (!p || p->dtype() != DType::Int64) return std::nullopt;
  return std::vector<int64_t>(p->data<int64_t>(), p->data<int64_t>() + p->numel());
}

// ---- 2. Conv -> per-channel affine -----------------------------------------------------------------------------

// y = t·s[m] + h[m] per output channel m.
struct ChannelAffine {
  std::vector<float> s, h;
};

// The affine node n applies to t (a Conv output of rank `rank` with `channels` output channels), if it is one.
std::optional<ChannelAffine> affine_of(const GraphNode& n, int t, int64_t rank, int64_t channels) {
  if (n.outputs.size() != 1 || !n.implicit_inputs.empty() || n.inputs.empty()) return std::nullopt;
  const auto M = static_cast<size_t>(channels);
  ChannelAffine a{std::vector<float>(M, 1.f), std::vector<float>(M, 0.f)};
  if (onnx_op(n, "BatchNormalization")) {
    if (n.inputs.size() != 5 || n.inputs[0] != t || n.info.attrs.get_int("training_mode", 0) != 0 ||
        n.info.attrs.get_int("spatial", 1) != 1)
      return std::nullopt;
    const Tensor* p[4];
    for (size_t i = 0; i < 4; ++i) {
      p[i] = finite_const(n, i + 1);
      if (!p[i] || p[i]->numel() != channels) return std::nullopt;
    }
    const float eps = n.info.attrs.get_float("epsilon", 1e-5f);
    for (size_t m = 0; m < M; ++m) {
      a.s[m] = p[0]->data<float>()[m] / std::sqrt(p[3]->data<float>()[m] + eps);
      a.h[m] = p[1]->data<float>()[m] - p[2]->data<float>()[m] * a.s[m];
    }
    return a;
  }
  if (n.inputs.size() != 2) return std::nullopt;
  const int i = n.inputs[0] == t ? 0 : n.inputs[1] == t ? 1 : -1;
  const bool mul = onnx_op(n, "Mul"), add = onnx_op(n, "Add"), sub = onnx_op(n, "Sub") && i == 0;
  if (i < 0 || !(mul || add || sub)) return std::nullopt;
  const Tensor* c = finite_const(n, static_cast<size_t>(1 - i));
  if (!c || !conv_fold::per_channel(c->shape(), rank, channels)) return std::nullopt;
  for (size_t m = 0; m < M; ++m) {
    const float v = conv_fold::channel_value(*c, static_cast<int64_t>(m));
    (mul ? a.s[m] : a.h[m]) = sub ? -v : v;  // t - v is t + (-v) exactly
  }
  return a;
}

// ---- 3. Conv -> activation -> per-channel clamps and affine --------------------------------------------------

// The per-channel bounds [lo, hi] a clamp node n applies to t: Relu, Clip with constant bounds, Min or Max with a
// finite constant of one value or one per channel (either operand order).
std::optional<std::pair<std::vector<float>, std::vector<float>>> clamp_of(const GraphNode& n, int t, int64_t rank,
                                                                          int64_t channels) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  if (n.outputs.size() != 1 || !n.implicit_inputs.empty() || n.inputs.empty()) return std::nullopt;
  const auto M = static_cast<size_t>(channels);
  std::vector<float> lo(M, -inf), hi(M, inf);
  if (onnx_op(n, "Relu") && n.inputs[0] == t) {
    lo.assign(M, 0.f);
  } else if (onnx_op(n, "Clip") && n.inputs[0] == t) {
    const auto b = fusion::clip_bounds(n);
    if (!b) return std::nullopt;
    lo.assign(M, b->first);
    hi.assign(M, b->second);
  } else if ((onnx_op(n, "Min") || onnx_op(n, "Max")) && n.inputs.size() == 2) {
    const int i = n.inputs[0] == t ? 0 : n.inputs[1] == t ? 1 : -1;
    const Tensor* c = i < 0 ? nullptr : finite_const(n, static_cast<size_t>(1 - i));
    if (!c || !conv_fold::per_channel(c->shape(), rank, channels)) return std::nullopt;
    auto& bound = onnx_op(n, "Min") ? hi : lo;
    for (size_t m = 0; m < M; ++m) bound[m] = conv_fold::channel_value(*c, static_cast<int64_t>(m));
  } else {
    return std::nullopt;
  }
  return std::pair{std::move(lo), std::move(hi)};
}

}  // namespace

int fold_pad_into_conv(Graph& g, const std::set<std::string>& keep) {
  const fusion::Uses u = fusion::uses_of(g, keep);
  std::vector<bool> removed(g.nodes.size(), false);
  int fused = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const GraphNode& pad = g.nodes[k];
    const auto amounts = zero_pad_amounts(pad);
    if (!amounts || !u.single_hidden_use(pad.outputs[0])) continue;
    GraphNode& conv = g.nodes[u.consumers[pad.outputs[0]][0]];
    if (!onnx_op(conv, "Conv") || conv.inputs[0] != pad.outputs[0] ||
        conv.info.attrs.get_string("auto_pad", "NOTSET") != "NOTSET")
      continue;
    const auto pads = conv_fold::pads_with_pad(*amounts, conv.info.attrs.get_ints("pads"));
    if (!pads) continue;
    Attribute a;
    a.kind = Attribute::Kind::Ints;
    a.ints = *pads;
    conv.info.attrs.values["pads"] = std::move(a);
    conv.inputs[0] = pad.inputs[0];
    conv.info.inputs[0] = pad.info.inputs[0];
    conv.info.const_inputs[0] = pad.info.const_inputs[0];
    removed[k] = true;
    ++fused;
  }
  if (fused > 0) fusion::erase_nodes(g, removed);
  return fused;
}

int fold_conv_affine(Graph& g, const std::set<std::string>& keep) {
  const fusion::Uses u = fusion::uses_of(g, keep);
  std::vector<bool> removed(g.nodes.size(), false);
  std::vector<int> replaced;  // ids of weights and biases the folded Convs no longer read
  int fused = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    GraphNode& p = g.nodes[k];
    if (!onnx_op(p, "Conv") || p.outputs.size() != 1 || p.info.activation.kind != FusedActivation::Kind::None) continue;
    const Tensor* w = p.inputs.size() > 1 ? p.info.const_inputs[1] : nullptr;
    if (!w || w->dtype() != DType::Float32 || w->rank() < 3) continue;
    const bool has_bias = p.inputs.size() > 2 && p.inputs[2] >= 0;
    const Tensor* b = has_bias ? p.info.const_inputs[2] : nullptr;
    const int64_t M = w->dim(0);
    if (has_bias && (!b || b->dtype() != DType::Float32 || b->numel() != M)) continue;
    // Follow the chain, composing y = (t·s1 + h1)·s2 + h2 ... into one scale and bias per channel.
    std::vector<float> scale(static_cast<size_t>(M), 1.f), bias(static_cast<size_t>(M), 0.f);
    if (b) bias.assign(b->data<float>(), b->data<float>() + M);
    int steps = 0;
    while (const auto ci = fusion::sole_reader(u, p, removed)) {
      const GraphNode& c = g.nodes[*ci];
      const auto a = affine_of(c, p.outputs[0], w->rank(), M);
      if (!a) break;
      for (size_t m = 0; m < scale.size(); ++m) {
        scale[m] *= a->s[m];
        bias[m] = bias[m] * a->s[m] + a->h[m];
      }
      fusion::take_output(p, c);
      removed[*ci] = true;
      ++steps;
    }
    if (steps == 0) continue;
    fused += steps;
    bool scaled = false;
    for (float s : scale) scaled = scaled || s != 1.f;
    if (scaled) {
      Tensor w2 = w->clone();
      conv_fold::scale_channels(w2, 0, 1, scale);
      replaced.push_back(p.inputs[1]);
      p.inputs[1] = fusion::add_constant(g, p.info.inputs[1] + "/folded", std::move(w2));
      p.info.inputs[1] = g.value_names[p.inputs[1]];
      p.info.const_inputs[1] = &g.constants.at(p.inputs[1]);
    }
    const int bid = fusion::add_constant(g, p.info.outputs[0] + "/bias", Tensor::from_vector<float>({M}, bias));
    if (has_bias) {
      replaced.push_back(p.inputs[2]);
      p.inputs[2] = bid;
      p.info.inputs[2] = g.value_names[bid];
      p.info.const_inputs[2] = &g.constants.at(bid);
    } else {
      p.inputs.resize(2);
      p.info.inputs.resize(2);
      p.info.const_inputs.resize(2);
      p.inputs.push_back(bid);
      p.info.inputs.push_back(g.value_names[bid]);
      p.info.const_inputs.push_back(&g.constants.at(bid));
    }
  }
  if (fused == 0) return 0;
  fusion::erase_nodes(g, removed);
  fusion::drop_unread_constants(g, replaced);
  return fused;
}

int fuse_conv_epilogue(Graph& g, const std::set<std::string>& keep) {
  const fusion::Uses u = fusion::uses_of(g, keep);
  std::vector<bool> removed(g.nodes.size(), false);
  int fused = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    GraphNode& p = g.nodes[k];
    const Tensor* w =
        onnx_op(p, "Conv") && p.outputs.size() == 1 && p.inputs.size() > 1 ? p.info.const_inputs[1] : nullptr;
    if (!w || w->dtype() != DType::Float32 || w->rank() < 3 || p.info.activation.channels) continue;
    const int64_t M = w->dim(0);
    const auto Ms = static_cast<size_t>(M);
    constexpr float inf = std::numeric_limits<float>::infinity();
    FusedActivation::Channels e{std::vector<float>(Ms, -inf), std::vector<float>(Ms, inf), std::vector<float>(Ms, 1.f),
                                std::vector<float>(Ms, 0.f)};
    bool affine = false;  // a clamp after an affine step is not of the form clamp-then-affine: the chain ends there
    int steps = 0;
    while (const auto ci = fusion::sole_reader(u, p, removed)) {
      const GraphNode& c = g.nodes[*ci];
      const int t = p.outputs[0];
      if (const auto a = affine_of(c, t, w->rank(), M); a) {
        for (size_t m = 0; m < Ms; ++m) {
          e.scale[m] *= a->s[m];
          e.shift[m] = e.shift[m] * a->s[m] + a->h[m];
        }
        affine = true;
      } else if (const auto b = affine ? std::nullopt : clamp_of(c, t, w->rank(), M)) {
        // clamp(clamp(y, lo, hi), a, b) = clamp(y, clamp(lo, a, b), clamp(hi, a, b)) for any bounds: both sides
        // are the monotone map that is constant outside [lo, hi].
        for (size_t m = 0; m < Ms; ++m) {
          e.lo[m] = std::min(std::max(e.lo[m], b->first[m]), b->second[m]);
          e.hi[m] = std::min(std::max(e.hi[m], b->first[m]), b->second[m]);
        }
      } else {
        break;
      }
      fusion::take_output(p, c);
      removed[*ci] = true;
      ++steps;
    }
    if (steps == 0) continue;
    p.info.activation.channels = std::make_shared<const FusedActivation::Channels>(std::move(e));
    fused += steps;
  }
  if (fused > 0) fusion::erase_nodes(g, removed);
  return fused;
}

}  // namespace qtool::runtime
