#include "runtime/kernels/conv_cudnn_plan.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "runtime/kernels/compute_common.h"

namespace qtool::runtime::kernels::cudnn_conv {
namespace {

constexpr int64_t kIntMax = std::numeric_limits<int>::max();

// True when the product of dims is at most INT_MAX (cuDNN's element counts and strides are int).
bool numel_fits_int(const std::array<int, 4>& dims) {
  int64_t n = 1;
  for (int d : dims)
    if (d < 0 || (n = n * d) > kIntMax) return false;
  return true;
}

template <size_t K>
bool all_fit_int(const std::array<int64_t, K>& values) {
  return std::all_of(values.begin(), values.end(), [](int64_t v) { return v >= 0 && v <= kIntMax; });
}

// The algorithms that sum x * w products directly, as the CPU kernel does (in another order).
bool sums_directly(Algo a) {
  return a == Algo::ImplicitGemm || a == Algo::ImplicitPrecompGemm || a == Algo::Gemm || a == Algo::Direct;
}

}  // namespace

int64_t cudnn_output_dim(int64_t in, int64_t pad, int64_t stride, int64_t dilation, int64_t kernel) {
  const int64_t span = in + 2 * pad - (kernel - 1) * dilation - 1;
  return span < 0 ? 0 : 1 + span / stride;  // a window that does not fit: no output (cuDNN rejects it)
}

Decision plan_conv(const NodeInfo& node, const Shape& x, const Shape& w, const Shape* b) {
  auto on_cpu = [](std::string why) { return Decision{std::nullopt, std::move(why)}; };
  if (x.size() < 3 || w.size() != x.size()) return on_cpu("X and W are not of one rank >= 3");
  const size_t nd = x.size() - 2;
  if (nd > 2) return on_cpu(std::to_string(nd) + "-D Conv (the cuDNN path takes 1-D and 2-D)");
  const int64_t group = node.attrs.get_int("group", 1);
  const int64_t N = x[0], C = x[1], M = w[0];
  int64_t wc = 0, bn = 1;
  if (b)
    for (int64_t d : *b) bn *= d;
  if (group < 1 || __builtin_mul_overflow(w[1], group, &wc) || wc != C || M % group != 0 || (b && bn != M))
    return on_cpu("the channels of X, W and B do not agree with group");  // the CPU kernel names the mismatch
  const compute::Window win = compute::Window::parse(node, nd, {w.begin() + 2, w.end()});
  const std::vector<int64_t> in_nd(x.begin() + 2, x.end());
  std::vector<int64_t> pads;
  const std::vector<int64_t> out_nd = win.output_dims(node, in_nd, pads);
  if (N == 0 || C == 0 || M == 0 || std::count(in_nd.begin(), in_nd.end(), 0) ||
      std::count(out_nd.begin(), out_nd.end(), 0))
    return on_cpu("empty tensor");

  // Spatial axes as 2-D (height 1 for a 1-D Conv): input, kernel, strides, dilations, ONNX pads, output.
  const size_t o = 2 - nd;  // first 2-D axis that holds an ONNX axis
  std::array<int64_t, 2> in{1, 1}, k{1, 1}, s{1, 1}, d{1, 1}, begin{0, 0}, end{0, 0}, out{1, 1};
  for (size_t i = 0; i < nd; ++i) {
    in[o + i] = in_nd[i];
    k[o + i] = win.kernel[i];
    s[o + i] = win.strides[i];
    d[o + i] = win.dilations[i];
    begin[o + i] = pads[i];
    end[o + i] = pads[nd + i];
    out[o + i] = out_nd[i];
  }
  // Every value below 2^31 first: cuDNN takes int, and the sums below then cannot overflow int64.
  const std::array<int64_t, 18> given = {N,    C,    M,    group,    in[0],    in[1],  k[0],   k[1],   s[0],
                                         s[1], d[0], d[1], begin[0], begin[1], end[0], end[1], out[0], out[1]};
  if (!all_fit_int(given)) return on_cpu("a dimension over 2^31 (cuDNN's int)");
  Plan p;
  p.in = in;
  std::array<int64_t, 2> padded{}, sym{};
  for (size_t i = 0; i < 2; ++i) {
    int64_t before = 0, after = 0;
    sym[i] = begin[i];
    if (cudnn_output_dim(in[i], begin[i], s[i], d[i], k[i]) != out[i]) {
      sym[i] = std::min(begin[i], end[i]);
      before = begin[i] - sym[i];
      after = end[i] - sym[i];
    }
    padded[i] = in[i] + before + after;
    p.pad_begin[i] = before;
    p.pad_step = p.pad_step || before > 0 || after > 0;
    if (cudnn_output_dim(padded[i], sym[i], s[i], d[i], k[i]) != out[i])
      throw InternalError(node.label() + ": cuDNN plan gives another output size than the CPU Conv on axis " +
                          std::to_string(i));
  }
  if (!all_fit_int(padded)) return on_cpu("a dimension over 2^31 (cuDNN's int)");
  auto i32 = [](int64_t v) { return static_cast<int>(v); };
  p.x = {i32(N), i32(C), i32(padded[0]), i32(padded[1])};
  p.w = {i32(M), i32(C / group), i32(k[0]), i32(k[1])};
  p.y = {i32(N), i32(M), i32(out[0]), i32(out[1])};
  p.pad = {i32(sym[0]), i32(sym[1])};
  p.stride = {i32(s[0]), i32(s[1])};
  p.dilation = {i32(d[0]), i32(d[1])};
  p.groups = i32(group);
  // X itself is no larger than the padded x cuDNN reads.
  if (!numel_fits_int(p.x) || !numel_fits_int(p.w) || !numel_fits_int(p.y))
    return on_cpu("a tensor over 2^31 elements (cuDNN's int)");
  p.y_shape = {N, M};
  p.y_shape.insert(p.y_shape.end(), out_nd.begin(), out_nd.end());
  return {std::move(p), {}};
}

std::string_view algo_name(Algo a) {
  switch (a) {
    case Algo::ImplicitGemm:
      return "implicit_gemm";
    case Algo::ImplicitPrecompGemm:
      return "implicit_precomp_gemm";
    case Algo::Gemm:
      return "gemm";
    case Algo::Direct:
      return "direct";
    case Algo::Fft:
      return "fft";
    case Algo::FftTiling:
      return "fft_tiling";
    case Algo::Winograd:
      return "winograd";
    case Algo::WinogradNonfused:
      return "winograd_nonfused";
  }
  return "?";
}

AlgoCandidate choose_algo(std::span<const AlgoCandidate> ranked, size_t max_workspace) {
  for (const AlgoCandidate& c : ranked)
    if (c.ok && c.deterministic && c.fp32_fma && sums_directly(c.algo) && c.workspace <= max_workspace) return c;
  return {Algo::ImplicitGemm, true, true, true, 0};
}

}  // namespace qtool::runtime::kernels::cudnn_conv
