// Shape-only kernels: Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Expand, Tile,
// ConstantOfShape, Range. Reshape-like ops return a view sharing the input's storage.
#include <cmath>
#include <cstring>

#include "core/checked.h"
#include "runtime/kernels/broadcast.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {

Tensor int64_vector(const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
}

// Shape (opset 15: start/end slice the dims, clamped like Python slicing).
class ShapeKernel final : public Kernel {
 public:
  explicit ShapeKernel(const NodeInfo& n)
      : start_(n.attrs.get_int("start", 0)), end_(n.attrs.get_int("end", INT64_MAX)) {}
  void run(KernelContext& ctx) override {
    const Shape& s = ctx.input(0).shape();
    const int64_t r = static_cast<int64_t>(s.size());
    auto clamp = [r](int64_t v) { return std::clamp(v < 0 ? v + r : v, int64_t{0}, r); };
    const int64_t b = clamp(start_), e = clamp(end_);
    ctx.outputs[0] = int64_vector(b < e ? std::vector<int64_t>(s.begin() + b, s.begin() + e) : std::vector<int64_t>{});
  }

 private:
  int64_t start_, end_;
};

void size_kernel(KernelContext& ctx) { ctx.outputs[0] = Tensor::scalar<int64_t>(ctx.input(0).numel()); }

// Reshape: 0 copies the input dim (unless allowzero=1), one -1 is inferred.
class ReshapeKernel final : public Kernel {
 public:
  explicit ReshapeKernel(const NodeInfo& n) : allowzero_(n.attrs.get_int("allowzero", 0) != 0) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    std::vector<int64_t> spec = read_ints(ctx.input(1), ctx.node, "shape");
    int64_t known = 1, infer = -1;
    for (size_t i = 0; i < spec.size(); ++i) {
      if (spec[i] == 0 && !allowzero_) {
        if (static_cast<int64_t>(i) >= x.rank())
          throw BadInputError(ctx.node.label() + ": shape " + shape_str(spec) + " copies dim " + std::to_string(i) +
                              " of an input of rank " + std::to_string(x.rank()));
        spec[i] = x.shape()[i];
      }
      if (spec[i] == -1) {
        if (infer >= 0) throw BadInputError(ctx.node.label() + ": shape " + shape_str(spec) + " has two -1 dims");
        infer = static_cast<int64_t>(i);
      } else if (spec[i] < 0) {
        throw BadInputError(ctx.node.label() + ": invalid shape " + shape_str(spec));
      } else {
        known *= spec[i];
      }
    }
    if (infer >= 0) {
      if (known == 0 || x.numel() % known != 0)
        throw BadInputError(ctx.node.label() + ": cannot reshape " + shape_str(x.shape()) + " to " + shape_str(spec));
      spec[infer] = x.numel() / known;
    }
    if (shape_numel(spec) != x.numel())
      throw BadInputError(ctx.node.label() + ": cannot reshape " + shape_str(x.shape()) + " to " + shape_str(spec));
    ctx.outputs[0] = x.reshaped(spec);
  }

 private:
  bool allowzero_;
};

class FlattenKernel final : public Kernel {
 public:
  explicit FlattenKernel(const NodeInfo& n) : axis_(n.attrs.get_int("axis", 1)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t a = axis_ < 0 ? axis_ + x.rank() : axis_;
    if (a < 0 || a > x.rank()) throw BadInputError(ctx.node.label() + ": axis out of range");
    int64_t outer = 1;
    for (int64_t i = 0; i < a; ++i) outer *= x.shape()[i];
    ctx.outputs[0] = x.reshaped({outer, outer == 0 ? 0 : x.numel() / outer});
  }

 private:
  int64_t axis_;
};

// Axes from the attribute (opset < 13) or the optional second input (opset >= 13).
std::optional<std::vector<int64_t>> axes_of(const KernelContext& ctx, const std::vector<int64_t>& attr,
                                            bool from_input) {
  if (from_input) {
    if (!ctx.has_input(1)) return std::nullopt;
    return read_ints(ctx.input(1), ctx.node, "axes");
  }
  if (attr.empty() && !ctx.node.attrs.has("axes")) return std::nullopt;
  return attr;
}

class SqueezeKernel final : public Kernel {
 public:
  explicit SqueezeKernel(const NodeInfo& n) : from_input_(n.opset >= 13), attr_(n.attrs.get_ints("axes")) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    auto axes = axes_of(ctx, attr_, from_input_);
    std::vector<bool> drop(x.shape().size(), false);
    if (!axes) {
      for (size_t i = 0; i < drop.size(); ++i) drop[i] = x.shape()[i] == 1;
    } else {
      for (int64_t a : *axes) {
        const int64_t k = normalize_axis(a, x.rank(), ctx.node);
        if (x.shape()[k] != 1)
          throw BadInputError(ctx.node.label() + ": cannot squeeze axis " + std::to_string(a) + " of shape " +
                              shape_str(x.shape()));
        drop[k] = true;
      }
    }
    Shape out;
    for (size_t i = 0; i < drop.size(); ++i)
      if (!drop[i]) out.push_back(x.shape()[i]);
    ctx.outputs[0] = x.reshaped(out);
  }

 private:
  bool from_input_;
  std::vector<int64_t> attr_;
};

class UnsqueezeKernel final : public Kernel {
 public:
  explicit UnsqueezeKernel(const NodeInfo& n) : from_input_(n.opset >= 13), attr_(n.attrs.get_ints("axes")) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    auto axes = axes_of(ctx, attr_, from_input_);
    if (!axes) throw BadInputError(ctx.node.label() + ": axes are required");
    const int64_t out_rank = x.rank() + static_cast<int64_t>(axes->size());
    std::vector<bool> added(out_rank, false);
    for (int64_t a : *axes) {
      const int64_t k = normalize_axis(a, out_rank, ctx.node);
      if (added[k]) throw BadInputError(ctx.node.label() + ": axis " + std::to_string(a) + " appears twice");
      added[k] = true;
    }
    Shape out;
    size_t src = 0;
    for (int64_t i = 0; i < out_rank; ++i) out.push_back(added[i] ? 1 : x.shape()[src++]);
    ctx.outputs[0] = x.reshaped(out);
  }

 private:
  bool from_input_;
  std::vector<int64_t> attr_;
};

// Expand: broadcast x to (x.shape, shape) bidirectionally.
void expand_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Shape target = read_ints(ctx.input(1), ctx.node, "shape");
  const BroadcastPlan p = plan_broadcast({&x.shape(), &target}, ctx.node);
  Tensor y(x.dtype(), p.out_shape);
  strided_copy(y, x, 0, p.full_strides[0], ctx.node, ctx.threads);
  ctx.outputs[0] = std::move(y);
}

// Tile: out[i] = x[i mod x.shape] per dim.
void tile_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::vector<int64_t> reps = read_ints(ctx.input(1), ctx.node, "repeats");
  if (static_cast<int64_t>(reps.size()) != x.rank())
    throw BadInputError(ctx.node.label() + ": repeats has " + std::to_string(reps.size()) + " values for rank " +
                        std::to_string(x.rank()));
  Shape out_shape(x.shape());
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] < 0) throw BadInputError(ctx.node.label() + ": negative repeat");
    out_shape[i] = checked_mul(out_shape[i], reps[i], "tiled dimension");
  }
  Tensor y(x.dtype(), out_shape);
  // Tile each dim as a broadcast over a doubled-rank view: [r0, d0, r1, d1, ...] with stride 0 on r.
  Shape view_shape;
  std::vector<int64_t> view_strides;
  const auto xs = strides_of(x.shape());
  for (size_t i = 0; i < reps.size(); ++i) {
    view_shape.push_back(reps[i]);
    view_shape.push_back(x.shape()[i]);
    view_strides.push_back(0);
    view_strides.push_back(xs[i]);
  }
  Tensor view = y.reshaped(view_shape);
  strided_copy(view, x, 0, view_strides, ctx.node, ctx.threads);
  ctx.outputs[0] = std::move(y);
}

class ConstantOfShapeKernel final : public Kernel {
 public:
  explicit ConstantOfShapeKernel(const NodeInfo& n) {
    if (n.attrs.has("value")) {
      value_ = n.attrs.require_tensor("value");
      if (value_.numel() != 1) throw BadInputError("attribute 'value' must hold one element");
    } else {
      value_ = Tensor::scalar<float>(0.0f);
    }
  }
  void run(KernelContext& ctx) override {
    const Shape shape = read_ints(ctx.input(0), ctx.node, "shape");
    Tensor y(value_.dtype(), shape);
    const size_t es = element_size(value_.dtype(), ctx.node);
    for (int64_t i = 0; i < y.numel(); ++i) std::memcpy(y.raw() + i * es, value_.raw(), es);
    ctx.outputs[0] = std::move(y);
  }

 private:
  Tensor value_;
};

// Range: n = max(ceil((limit - start) / delta), 0); out[i] = start + i * delta.
void range_kernel(KernelContext& ctx) {
  const Tensor& s = ctx.input(0);
  dispatch_numeric(s.dtype(), ctx.node, [&]<class T>() {
    const T start = s.data<T>()[0];
    const T limit = ctx.input(1).data<T>()[0];
    const T delta = ctx.input(2).data<T>()[0];
    if (delta == T{0}) throw BadInputError(ctx.node.label() + ": delta must not be 0");
    const double count =
        std::ceil((static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta));
    const int64_t n = std::max<int64_t>(0, checked_to_int64(count, "Range element count"));
    Tensor y(s.dtype(), {n});  // checked against --max-memory before anything is written
    T* out = y.data<T>();
    if constexpr (std::is_integral_v<T>) {  // two's-complement wrap instead of signed-overflow UB at the ends
      for (int64_t i = 0; i < n; ++i)
        out[i] = static_cast<T>(static_cast<uint64_t>(start) + static_cast<uint64_t>(i) * static_cast<uint64_t>(delta));
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    }
    ctx.outputs[0] = std::move(y);
  });
}

// EyeLike: a 2-D tensor shaped like the input with ones on diagonal k, of dtype `dtype` (default: the input's).
class EyeLikeKernel final : public Kernel {
 public:
  explicit EyeLikeKernel(const NodeInfo& n) : k_(n.attrs.get_int("k", 0)) {
    if (n.attrs.has("dtype")) {
      const int64_t dtype = n.attrs.get_int("dtype", 1);
      const DTypeInfo* info = dtype_info_or_null(static_cast<int32_t>(dtype));
      if (!info) throw_unknown_dtype(static_cast<int32_t>(dtype), n.label() + ": attribute 'dtype'");
      dtype_ = info->dtype;
    }
  }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 2) throw BadInputError(ctx.node.label() + ": input must be 2-D");
    const DType dt = dtype_ == DType::Undefined ? x.dtype() : dtype_;
    Tensor y = Tensor::zeros(dt, x.shape());
    dispatch_numeric_bool(dt, ctx.node, [&]<class T>() {
      T* p = y.data<T>();
      const int64_t rows = x.dim(0), cols = x.dim(1);
      for (int64_t i = 0; i < rows; ++i)
        if (i + k_ >= 0 && i + k_ < cols) p[i * cols + i + k_] = T(1);
    });
    ctx.outputs[0] = std::move(y);
  }

 private:
  int64_t k_;
  DType dtype_ = DType::Undefined;
};

}  // namespace

std::unique_ptr<Kernel> make_eyelike(const NodeInfo& n) { return std::make_unique<EyeLikeKernel>(n); }
std::unique_ptr<Kernel> make_shape(const NodeInfo& n) { return std::make_unique<ShapeKernel>(n); }
std::unique_ptr<Kernel> make_size(const NodeInfo& n) { return make_function_kernel<size_kernel>(n); }
std::unique_ptr<Kernel> make_reshape(const NodeInfo& n) { return std::make_unique<ReshapeKernel>(n); }
std::unique_ptr<Kernel> make_flatten(const NodeInfo& n) { return std::make_unique<FlattenKernel>(n); }
std::unique_ptr<Kernel> make_squeeze(const NodeInfo& n) { return std::make_unique<SqueezeKernel>(n); }
std::unique_ptr<Kernel> make_unsqueeze(const NodeInfo& n) { return std::make_unique<UnsqueezeKernel>(n); }
std::unique_ptr<Kernel> make_expand(const NodeInfo& n) { return make_function_kernel<expand_kernel>(n); }
std::unique_ptr<Kernel> make_tile(const NodeInfo& n) { return make_function_kernel<tile_kernel>(n); }
std::unique_ptr<Kernel> make_constant_of_shape(const NodeInfo& n) { return std::make_unique<ConstantOfShapeKernel>(n); }
std::unique_ptr<Kernel> make_range(const NodeInfo& n) { return make_function_kernel<range_kernel>(n); }

}  // namespace qtool::runtime::kernels
