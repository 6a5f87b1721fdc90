// Pooling, float32 (MaxPool also int8/uint8/double), 1-D/2-D/3-D (shorter ranks run as 3-D with unit axes).
//
// MaxPool:     Y = max over the window of taps inside the input; Indices (optional) = flat index of the
//              max in X (row-major over [N,C,spatial], or column-major spatial when storage_order = 1).
// AveragePool: Y = sum over taps inside the input / divisor; divisor = taps inside the input, or with
//              count_include_pad = 1 the taps inside the padded input (begin pad .. size + end pad).
// LpPool:      Y = (sum over taps inside the input of |x|^p)^(1/p).
// Windows: kernel_shape, strides, dilations, pads, auto_pad, ceil_mode (a window that would start
// past the end pad is dropped). GlobalAveragePool / GlobalMaxPool / GlobalLpPool reduce all spatial axes to 1
// (GlobalLpPool: Y = (sum over the plane of |x|^p)^(1/p), summed in double like LpPool; p a float attribute at
// opset 1, an int from opset 2, default 2).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/checked.h"
#include "runtime/kernels/blas.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {
using namespace compute;

enum class PoolKind { Max, Average, Lp };

// Geometry padded to 3 spatial axes.
struct Pool3 {
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
};

Pool3 to_pool3(const std::vector<int64_t>& in, const std::vector<int64_t>& out, const Window& w,
               const std::vector<int64_t>& pads) {
  Pool3 p;
  const size_t nd = in.size(), off = 3 - nd;
  for (size_t i = 0; i < 3; ++i) {
    const bool real = i >= off;
    const size_t j = i - off;
    p.in[i] = real ? in[j] : 1;
    p.out[i] = real ? out[j] : 1;
    p.k[i] = real ? w.kernel[j] : 1;
    p.s[i] = real ? w.strides[j] : 1;
    p.d[i] = real ? w.dilations[j] : 1;
    p.pb[i] = real ? pads[j] : 0;
    p.pe[i] = real ? pads[j + nd] : 0;
  }
  return p;
}

template <class T>
void max_plane(const Pool3& p, const T* x, T* y, int64_t* idx, int64_t idx_base, bool col_major) {
  for (int64_t od = 0; od < p.out[0]; ++od)
    for (int64_t oh = 0; oh < p.out[1]; ++oh)
      for (int64_t ow = 0; ow < p.out[2]; ++ow) {
        T best = std::numeric_limits<T>::lowest();
        int64_t bi = -1, bd = 0, bh = 0, bw = 0;
        for (int64_t kd = 0; kd < p.k[0]; ++kd) {
          const int64_t id = od * p.s[0] - p.pb[0] + kd * p.d[0];
          if (id < 0 || id >= p.in[0]) continue;
          for (int64_t kh = 0; kh < p.k[1]; ++kh) {
            const int64_t ih = oh * p.s[1] - p.pb[1] + kh * p.d[1];
            if (ih < 0 || ih >= p.in[1]) continue;
            for (int64_t kw = 0; kw < p.k[2]; ++kw) {
              const int64_t iw = ow * p.s[2] - p.pb[2] + kw * p.d[2];
              if (iw < 0 || iw >= p.in[2]) continue;
              const int64_t i = (id * p.in[1] + ih) * p.in[2] + iw;
              if (bi < 0 || x[i] > best) best = x[i], bi = i, bd = id, bh = ih, bw = iw;
            }
          }
        }
        const int64_t o = (od * p.out[1] + oh) * p.out[2] + ow;
        y[o] = best;
        if (idx) idx[o] = idx_base + (col_major ? (bw * p.in[1] + bh) * p.in[0] + bd : bi);
      }
}

// Per output index along one axis: the taps [lo, hi) whose input index lies inside the input (indices grow with the
// tap) and how many taps lie before the end pad's end (the divisor with count_include_pad).
struct TapRange {
  int64_t lo, hi, padded;
};
std::vector<TapRange> tap_ranges(const Pool3& p, int axis) {
  std::vector<TapRange> r(static_cast<size_t>(p.out[axis]));
  for (int64_t o = 0; o < p.out[axis]; ++o) {
    TapRange t{0, 0, 0};
    const int64_t first = o * p.s[axis] - p.pb[axis];
    while (t.lo < p.k[axis] && first + t.lo * p.d[axis] < 0) ++t.lo;
    t.hi = t.lo;
    while (t.hi < p.k[axis] && first + t.hi * p.d[axis] < p.in[axis]) ++t.hi;
    for (int64_t k = 0; k < p.k[axis]; ++k) t.padded += first + k * p.d[axis] < p.in[axis] + p.pe[axis];
    r[static_cast<size_t>(o)] = t;
  }
  return r;
}

// AveragePool of one plane: avg_lp_plane's sums (the same taps added in the same order, in double) and divisors,
// with the in-bounds tap ranges computed once per output row and column instead of tested per tap, and runs of 8
// outputs with the same column taps summed side by side (8 independent chains of additions instead of one).
// ppocrv4-rec's [1,480,3,80] pool with a 3x2 window: 0.43 ms with the per-tap tests (~3% of the model at one
// thread), 0.18 ms with the ranges alone.
void avg_plane(const Pool3& p, const std::vector<TapRange> (&ranges)[3], bool include_pad, const float* x, float* y) {
  constexpr int64_t kRun = 8;
  auto divisor = [&](const TapRange& rd, const TapRange& rh, const TapRange& rw) {
    const int64_t inside = (rd.hi - rd.lo) * (rh.hi - rh.lo) * (rw.hi - rw.lo);
    return static_cast<double>(std::max<int64_t>(1, include_pad ? rd.padded * rh.padded * rw.padded : inside));
  };
  for (int64_t od = 0; od < p.out[0]; ++od) {
    const TapRange& rd = ranges[0][static_cast<size_t>(od)];
    for (int64_t oh = 0; oh < p.out[1]; ++oh) {
      const TapRange& rh = ranges[1][static_cast<size_t>(oh)];
      float* yr = y + (od * p.out[1] + oh) * p.out[2];
      // x at (kd, kh) and output column ow's first tap
      auto at = [&](int64_t kd, int64_t kh, int64_t ow) {
        const int64_t id = od * p.s[0] - p.pb[0] + kd * p.d[0], ih = oh * p.s[1] - p.pb[1] + kh * p.d[1];
        return x + (id * p.in[1] + ih) * p.in[2] + ow * p.s[2] - p.pb[2];
      };
      for (int64_t ow = 0; ow < p.out[2];) {
        const TapRange& rw = ranges[2][static_cast<size_t>(ow)];
        const TapRange& last = ranges[2][static_cast<size_t>(std::min(ow + kRun, p.out[2]) - 1)];
        if (ow + kRun <= p.out[2] && last.lo == rw.lo && last.hi == rw.hi && last.padded == rw.padded) {
          double acc[kRun] = {};
          for (int64_t kd = rd.lo; kd < rd.hi; ++kd)
            for (int64_t kh = rh.lo; kh < rh.hi; ++kh) {
              const float* r = at(kd, kh, ow);
              for (int64_t kw = rw.lo; kw < rw.hi; ++kw)
                for (int64_t j = 0; j < kRun; ++j) acc[j] += r[j * p.s[2] + kw * p.d[2]];
            }
          const double div = divisor(rd, rh, rw);
          for (int64_t j = 0; j < kRun; ++j) yr[ow + j] = static_cast<float>(acc[j] / div);
          ow += kRun;
          continue;
        }
        double acc = 0;
        for (int64_t kd = rd.lo; kd < rd.hi; ++kd)
          for (int64_t kh = rh.lo; kh < rh.hi; ++kh) {
            const float* r = at(kd, kh, ow);
            for (int64_t kw = rw.lo; kw < rw.hi; ++kw) acc += r[kw * p.d[2]];
          }
        yr[ow] = static_cast<float>(acc / divisor(rd, rh, rw));
        ++ow;
      }
    }
  }
}

void avg_lp_plane(const Pool3& p, PoolKind kind, bool include_pad, float lp, const float* x, float* y) {
  for (int64_t od = 0; od < p.out[0]; ++od)
    for (int64_t oh = 0; oh < p.out[1]; ++oh)
      for (int64_t ow = 0; ow < p.out[2]; ++ow) {
        double acc = 0;
        int64_t inside = 0, padded = 0;
        for (int64_t kd = 0; kd < p.k[0]; ++kd) {
          const int64_t id = od * p.s[0] - p.pb[0] + kd * p.d[0];
          if (id >= p.in[0] + p.pe[0]) continue;
          for (int64_t kh = 0; kh < p.k[1]; ++kh) {
            const int64_t ih = oh * p.s[1] - p.pb[1] + kh * p.d[1];
            if (ih >= p.in[1] + p.pe[1]) continue;
            for (int64_t kw = 0; kw < p.k[2]; ++kw) {
              const int64_t iw = ow * p.s[2] - p.pb[2] + kw * p.d[2];
              if (iw >= p.in[2] + p.pe[2]) continue;
              ++padded;
              if (id < 0 || id >= p.in[0] || ih < 0 || ih >= p.in[1] || iw < 0 || iw >= p.in[2]) continue;
              const float v = x[(id * p.in[1] + ih) * p.in[2] + iw];
              acc += kind == PoolKind::Lp ? std::pow(std::fabs(static_cast<double>(v)), lp) : v;
              ++inside;
            }
          }
        }
        const int64_t o = (od * p.out[1] + oh) * p.out[2] + ow;
        if (kind == PoolKind::Lp)
          y[o] = static_cast<float>(std::pow(acc, 1.0 / lp));
        else
          y[o] = static_cast<float>(acc / std::max<int64_t>(1, include_pad ? padded : inside));
      }
}

class PoolKernel final : public Kernel {
 public:
  PoolKernel(const NodeInfo& node, PoolKind kind) : node_(node), kind_(kind) {
    if (!node.attrs.has("kernel_shape"))
      throw BadInputError(node.label() + ": required attribute 'kernel_shape' is missing");
    include_pad_ = node.attrs.get_int("count_include_pad", 0) != 0;
    storage_order_ = node.attrs.get_int("storage_order", 0);
    if (kind == PoolKind::Lp)
      p_ = node.opset < 2 ? node.attrs.get_float("p", 2.f) : static_cast<float>(node.attrs.get_int("p", 2));
  }

  void run(KernelContext& ctx) override {
    const Tensor& X = ctx.input(0);
    if (X.rank() < 3 || X.rank() > 5)
      throw UnsupportedError(node_.label() + ": X " + shape_str(X.shape()) + " must have 1 to 3 spatial axes");
    const size_t nd = static_cast<size_t>(X.rank() - 2);
    const Window win = Window::parse(node_, nd, {});
    const std::vector<int64_t> in(X.shape().begin() + 2, X.shape().end());
    std::vector<int64_t> pads;
    const std::vector<int64_t> out = win.output_dims(node_, in, pads);
    const Pool3 p = to_pool3(in, out, win, pads);
    Shape ys{X.dim(0), X.dim(1)};
    ys.insert(ys.end(), out.begin(), out.end());
    const int64_t planes = X.dim(0) * X.dim(1), iv = shape_numel(in), ov = shape_numel(out);
    const int threads = threads_for(planes * ov * shape_numel(win.kernel), ctx.threads);
    if (kind_ != PoolKind::Max) {
      float_input(ctx, 0);
      Tensor Y(DType::Float32, ys);
      if (kind_ == PoolKind::Average) {
        const std::vector<TapRange> ranges[3] = {tap_ranges(p, 0), tap_ranges(p, 1), tap_ranges(p, 2)};
        parallel_for(planes, threads, [&](int64_t i) {
          avg_plane(p, ranges, include_pad_, X.data<float>() + i * iv, Y.data<float>() + i * ov);
        });
      } else {
        parallel_for(planes, threads, [&](int64_t i) {
          avg_lp_plane(p, kind_, include_pad_, p_, X.data<float>() + i * iv, Y.data<float>() + i * ov);
        });
      }
      ctx.outputs[0] = std::move(Y);
      return;
    }
    Tensor Y(X.dtype(), ys);
    const bool want_idx = ctx.outputs.size() > 1 && !ctx.node.outputs[1].empty();
    Tensor I = want_idx ? Tensor(DType::Int64, ys) : Tensor();
    auto run_typed = [&](auto tag) {
      using T = decltype(tag);
      parallel_for(planes, threads, [&](int64_t i) {
        max_plane<T>(p, X.data<T>() + i * iv, Y.data<T>() + i * ov, want_idx ? I.data<int64_t>() + i * ov : nullptr,
                     i * iv, storage_order_ == 1);
      });
    };
    visit_dtype(node_, X.dtype(), {DType::Float32, DType::Float64, DType::Int8, DType::UInt8}, run_typed);
    ctx.outputs[0] = std::move(Y);
    if (want_idx) ctx.outputs[1] = std::move(I);
  }

 private:
  NodeInfo node_;
  PoolKind kind_;
  bool include_pad_ = false;
  int64_t storage_order_ = 0;
  float p_ = 2;
};

template <bool Max>
void global_pool(KernelContext& ctx) {
  const Tensor& X = float_input(ctx, 0);
  if (X.rank() < 3) throw BadInputError(ctx.node.label() + ": X " + shape_str(X.shape()) + " needs spatial axes");
  Shape ys(X.shape().begin(), X.shape().begin() + 2);
  ys.resize(X.shape().size(), 1);
  Tensor Y(DType::Float32, ys);
  const int64_t planes = X.dim(0) * X.dim(1), n = X.numel() / std::max<int64_t>(planes, 1);
  const float* x = X.data<float>();
  float* y = Y.data<float>();
  parallel_for(planes, threads_for(X.numel(), ctx.threads), [&](int64_t i) {
    const float* s = x + i * n;
    if constexpr (Max) {
      y[i] = n ? *std::max_element(s, s + n) : std::numeric_limits<float>::lowest();
    } else {
      y[i] = sum_of(s, n) / static_cast<float>(n);
    }
  });
  ctx.outputs[0] = std::move(Y);
}

class GlobalLpPoolKernel final : public Kernel {
 public:
  explicit GlobalLpPoolKernel(const NodeInfo& node)
      : p_(node.opset < 2 ? static_cast<double>(node.attrs.get_float("p", 2.f))
                          : static_cast<double>(node.attrs.get_int("p", 2))) {
    if (!(p_ > 0)) throw BadInputError(node.label() + ": p must be positive");
  }
  void run(KernelContext& ctx) override {
    const Tensor& X = float_input(ctx, 0);
    if (X.rank() < 3) throw BadInputError(ctx.node.label() + ": X " + shape_str(X.shape()) + " needs spatial axes");
    Shape ys(X.shape().begin(), X.shape().begin() + 2);
    ys.resize(X.shape().size(), 1);
    Tensor Y(DType::Float32, ys);
    const int64_t planes = X.dim(0) * X.dim(1), n = X.numel() / std::max<int64_t>(planes, 1);
    const float* x = X.data<float>();
    float* y = Y.data<float>();
    const double p = p_;
    parallel_for(planes, threads_for(X.numel(), ctx.threads), [&](int64_t i) {
      const float* s = x + i * n;
      double acc = 0;
      for (int64_t j = 0; j < n; ++j) acc += std::pow(std::fabs(static_cast<double>(s[j])), p);
      y[i] = static_cast<float>(std::pow(acc, 1.0 / p));
    });
    ctx.outputs[0] = std::move(Y);
  }

 private:
  double p_;
};

}  // namespace

// MaxUnpool (opset 9, 11): Y = zeros of [N, C, out...], out[i] = (in[i] - 1)·stride[i] + kernel[i] - pad_begin[i] -
// pad_end[i], or the shape output_shape (input 2) gives; then Y.flat[I[j]] = X[j] for every j, I as MaxPool's
// Indices output (positions in the whole tensor, flattened; with output_shape, in that shape: ONNX Runtime 1.30
// and PyTorch's max_unpool, where the ONNX 1.12 vector keeps each position's coordinates of the inferred shape).
// An index outside Y is an error; a later j overwrites.
void max_unpool(KernelContext& ctx) {
  const NodeInfo& node = ctx.node;
  const Tensor& X = float_input(ctx, 0);
  const Tensor& I = ctx.input(1);
  if (X.rank() < 3) throw BadInputError(node.label() + ": X must have rank >= 3, got " + shape_str(X.shape()));
  if (I.shape() != X.shape())
    throw BadInputError(node.label() + ": indices " + shape_str(I.shape()) + " must have X's shape " +
                        shape_str(X.shape()));
  const size_t nd = static_cast<size_t>(X.rank()) - 2;
  const Window win = Window::parse(node, nd, {});
  Shape inferred = {X.dim(0), X.dim(1)};
  constexpr std::string_view what = "MaxUnpool output size (strides, kernel_shape, pads)";
  for (size_t i = 0; i < nd; ++i) {
    const int64_t d = checked_sub(checked_add(checked_mul(X.dim(2 + i) - 1, win.strides[i], what), win.kernel[i], what),
                                  checked_add(win.pads[i], win.pads[nd + i], what), what);
    if (d < 0) throw BadInputError(node.label() + ": the pads leave a negative output size");
    inferred.push_back(d);
  }
  Shape out = inferred;
  if (ctx.has_input(2) && ctx.input(2).numel()) {
    out = read_ints(ctx.input(2), node, "output_shape");
    if (out.size() != static_cast<size_t>(X.rank()) || out[0] != X.dim(0) || out[1] != X.dim(1))
      throw BadInputError(node.label() + ": output_shape must be [" + std::to_string(X.dim(0)) + ", " +
                          std::to_string(X.dim(1)) + ", ...] of rank " + std::to_string(X.rank()));
    for (int64_t d : out)
      if (d < 0) throw BadInputError(node.label() + ": output_shape has a negative dimension");
  }
  Tensor Y(DType::Float32, out);
  float* y = Y.data<float>();
  std::fill_n(y, Y.numel(), 0.f);
  const std::vector<int64_t> idx = read_ints(I, node, "I");
  for (int64_t j = 0; j < X.numel(); ++j) {
    if (idx[j] < 0 || idx[j] >= Y.numel())
      throw BadInputError(node.label() + ": index " + std::to_string(idx[j]) + " is outside the output " +
                          shape_str(out));
    y[idx[j]] = X.data<float>()[j];
  }
  ctx.outputs[0] = std::move(Y);
}

std::unique_ptr<Kernel> make_max_unpool(const NodeInfo& node) { return make_function_kernel<max_unpool>(node); }
std::unique_ptr<Kernel> make_max_pool(const NodeInfo& node) {
  return std::make_unique<PoolKernel>(node, PoolKind::Max);
}
std::unique_ptr<Kernel> make_average_pool(const NodeInfo& node) {
  return std::make_unique<PoolKernel>(node, PoolKind::Average);
}
std::unique_ptr<Kernel> make_lp_pool(const NodeInfo& node) { return std::make_unique<PoolKernel>(node, PoolKind::Lp); }
std::unique_ptr<Kernel> make_global_average_pool(const NodeInfo& node) {
  return make_function_kernel<global_pool<false>>(node);
}
std::unique_ptr<Kernel> make_global_max_pool(const NodeInfo& node) {
  return make_function_kernel<global_pool<true>>(node);
}
std::unique_ptr<Kernel> make_global_lp_pool(const NodeInfo& node) { return std::make_unique<GlobalLpPoolKernel>(node); }

}  // namespace qtool::runtime::kernels
