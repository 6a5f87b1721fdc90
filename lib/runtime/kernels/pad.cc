#include "runtime/kernels/pad.h"

#include <cstring>

#include "core/checked.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {

int64_t pad_source(const PadPlan& p, const Shape& in_shape, size_t d, int64_t o) {
  const int64_t dim = in_shape[d];
  int64_t i = o - p.before[d];
  if (i >= 0 && i < dim) return i;
  switch (p.mode) {
    case PadMode::Constant:
      return -1;
    case PadMode::Edge:
      return i < 0 ? 0 : dim - 1;
    case PadMode::Wrap:
      return ((i % dim) + dim) % dim;
    case PadMode::Reflect: {
      if (dim == 1) return 0;
      const int64_t period = 2 * (dim - 1);
      i = ((i % period) + period) % period;
      return i < dim ? i : period - i;
    }
  }
  return -1;
}

void pad_reference(const PadPlan& p, const Tensor& x, Tensor& y, const NodeInfo& node) {
  const auto xs = strides_of(x.shape());
  const int64_t rank = x.rank();
  dispatch_bits(element_size(x.dtype(), node), node, [&]<class U>() {
    const U* src = reinterpret_cast<const U*>(x.raw());
    U* dst = reinterpret_cast<U*>(y.raw());
    U fv;
    std::memcpy(&fv, p.fill.data(), sizeof(U));
    for (int64_t i = 0; i < y.numel(); ++i) {
      int64_t rem = i, off = 0;
      bool constant = false;
      for (int64_t d = rank - 1; d >= 0 && !constant; --d) {
        const int64_t o = rem % p.out_shape[d];
        rem /= p.out_shape[d];
        const int64_t s = pad_source(p, x.shape(), static_cast<size_t>(d), o);
        constant = s < 0;
        off += s * xs[d];
      }
      dst[i] = constant ? fv : src[off];
    }
  });
}

void pad_rows(const PadPlan& p, const Tensor& x, Tensor& y, const NodeInfo& node, int threads) {
  const int64_t rank = x.rank();
  if (y.numel() == 0) return;
  if (rank == 0) {
    std::memcpy(y.raw(), x.raw(), x.nbytes());
    return;
  }
  const auto xs = strides_of(x.shape());
  const size_t last = static_cast<size_t>(rank - 1);
  const int64_t out_w = p.out_shape[last], in_w = x.shape()[last];
  const int64_t rows = y.numel() / out_w;
  // Interior of a row: output columns [lo, hi) copy input columns [lo - before, hi - before).
  const int64_t lo = std::clamp<int64_t>(p.before[last], 0, out_w);
  const int64_t hi = std::clamp<int64_t>(p.before[last] + in_w, lo, out_w);
  dispatch_bits(element_size(x.dtype(), node), node, [&]<class U>() {
    const U* src = reinterpret_cast<const U*>(x.raw());
    U* dst = reinterpret_cast<U*>(y.raw());
    U fv;
    std::memcpy(&fv, p.fill.data(), sizeof(U));
    parallel_range(
        rows, threads,
        [&](int64_t b, int64_t e) {
          for (int64_t r = b; r < e; ++r) {
            U* out = dst + r * out_w;
            int64_t rem = r, off = 0;
            bool constant = false;
            for (int64_t d = rank - 2; d >= 0 && !constant; --d) {
              const int64_t o = rem % p.out_shape[d];
              rem /= p.out_shape[d];
              const int64_t s = pad_source(p, x.shape(), static_cast<size_t>(d), o);
              constant = s < 0;
              off += s * xs[d];
            }
            if (constant) {
              std::fill(out, out + out_w, fv);
              continue;
            }
            const U* in = src + off;
            for (int64_t j = 0; j < lo; ++j) {
              const int64_t s = pad_source(p, x.shape(), last, j);
              out[j] = s < 0 ? fv : in[s];
            }
            if (hi > lo) std::memcpy(out + lo, in + (lo - p.before[last]), sizeof(U) * (hi - lo));
            for (int64_t j = hi; j < out_w; ++j) {
              const int64_t s = pad_source(p, x.shape(), last, j);
              out[j] = s < 0 ? fv : in[s];
            }
          }
        },
        std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, out_w)));
  });
}

namespace {

// Pad-2..10: pads and value attributes; Pad-11+: pads (input 1), constant_value (input 2);
// Pad-18+: axes (input 3) restrict which dims the pads apply to.
class PadKernel final : public Kernel {
 public:
  explicit PadKernel(const NodeInfo& n) : opset_(n.opset) {
    const std::string mode = n.attrs.get_string("mode", "constant");
    if (mode == "constant")
      mode_ = PadMode::Constant;
    else if (mode == "reflect")
      mode_ = PadMode::Reflect;
    else if (mode == "edge")
      mode_ = PadMode::Edge;
    else if (mode == "wrap")
      mode_ = PadMode::Wrap;
    else
      throw BadInputError("unknown pad mode '" + mode + "'");
    if (opset_ < 11) {
      pads_attr_ = n.attrs.get_ints("pads");
      value_attr_ = n.attrs.get_float("value", 0.0f);
    }
  }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const PadPlan p = plan(ctx, x);
    Tensor y(x.dtype(), p.out_shape);
    if (p.mode == PadMode::Constant && x.rank() > 1) {
      // Trailing unpadded dims fold into the last padded one (exact for a constant fill), so rows
      // are long: NHWC padding of H and W copies whole W*C rows.
      PadPlan c = p;
      Shape in_shape = x.shape();
      while (in_shape.size() > 1 && c.before.back() == 0 && c.after.back() == 0) {
        const int64_t inner = in_shape.back();
        in_shape.pop_back();
        c.before.pop_back();
        c.after.pop_back();
        c.out_shape.pop_back();
        in_shape.back() *= inner;
        c.out_shape.back() *= inner;
        c.before.back() *= inner;
        c.after.back() *= inner;
      }
      Tensor yv = y.reshaped(c.out_shape);
      pad_rows(c, x.reshaped(in_shape), yv, ctx.node, ctx.threads);
    } else {
      pad_rows(p, x, y, ctx.node, ctx.threads);
    }
    ctx.outputs[0] = std::move(y);
  }

 private:
  PadPlan plan(const KernelContext& ctx, const Tensor& x) const {
    const int64_t rank = x.rank();
    PadPlan p;
    p.mode = mode_;
    const std::vector<int64_t> pads = opset_ < 11 ? pads_attr_ : read_ints(ctx.input(1), ctx.node, "pads");
    std::vector<int64_t> axes;
    if (opset_ >= 18 && ctx.has_input(3)) {
      for (int64_t a : read_ints(ctx.input(3), ctx.node, "axes")) axes.push_back(normalize_axis(a, rank, ctx.node));
    } else {
      for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
    }
    const size_t na = axes.size();
    if (pads.size() != 2 * na)
      throw BadInputError(ctx.node.label() + ": pads has " + std::to_string(pads.size()) + " values, expected " +
                          std::to_string(2 * na));
    p.before.assign(rank, 0);
    p.after.assign(rank, 0);
    for (size_t i = 0; i < na; ++i) {
      p.before[axes[i]] = pads[i];
      p.after[axes[i]] = pads[i + na];
    }
    p.out_shape.resize(rank);
    for (int64_t d = 0; d < rank; ++d) {
      p.out_shape[d] = checked_add(checked_add(x.shape()[d], p.before[d], "padded size"), p.after[d], "padded size");
      if (p.out_shape[d] < 0) throw BadInputError(ctx.node.label() + ": pads remove more than the whole dim");
      if (mode_ != PadMode::Constant && x.shape()[d] == 0 && p.out_shape[d] > 0)
        throw BadInputError(ctx.node.label() + ": cannot pad an empty dim in this mode");
    }
    const size_t es = element_size(x.dtype(), ctx.node);
    p.fill.assign(es, std::byte{0});
    Tensor v;
    if (opset_ < 11)
      v = Tensor::scalar<float>(value_attr_);
    else if (ctx.has_input(2) && ctx.input(2).numel() > 0)
      v = ctx.input(2);
    if (mode_ == PadMode::Constant && !v.empty()) {
      const Tensor c = cast_tensor(v.reshaped({}), x.dtype(), ctx.node, 1);
      std::memcpy(p.fill.data(), c.raw(), es);
    }
    return p;
  }

  int opset_;
  PadMode mode_ = PadMode::Constant;
  std::vector<int64_t> pads_attr_;
  float value_attr_ = 0;
};

}  // namespace

std::unique_ptr<Kernel> make_pad(const NodeInfo& n) { return std::make_unique<PadKernel>(n); }

}  // namespace qtool::runtime::kernels
