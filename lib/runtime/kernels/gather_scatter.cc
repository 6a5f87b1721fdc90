// Index-driven kernels: Gather, GatherElements, GatherND, ScatterElements (and the old Scatter),
// ScatterND, OneHot, NonZero, Compress. Negative indices count from the end; out-of-range indices
// are a BadInputError naming the node.
#include <cstring>
#include <limits>

#include "core/checked.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {

int64_t fix_index(int64_t i, int64_t dim, const NodeInfo& node) {
  const int64_t k = i < 0 ? i + dim : i;
  if (k < 0 || k >= dim)
    throw BadInputError(node.label() + ": index " + std::to_string(i) + " is out of range for a dim of " +
                        std::to_string(dim));
  return k;
}

class GatherKernel final : public Kernel {
 public:
  explicit GatherKernel(const NodeInfo& n) : axis_(n.attrs.get_int("axis", 0)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const std::vector<int64_t> idx = read_ints(ctx.input(1), ctx.node, "indices");
    const Shape& ishape = ctx.input(1).shape();
    const int64_t axis = normalize_axis(axis_, x.rank(), ctx.node);
    Shape out_shape(x.shape().begin(), x.shape().begin() + axis);
    out_shape.insert(out_shape.end(), ishape.begin(), ishape.end());
    out_shape.insert(out_shape.end(), x.shape().begin() + axis + 1, x.shape().end());
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
    for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape()[d];
    const int64_t dim = x.shape()[axis];
    const size_t es = element_size(x.dtype(), ctx.node);
    const size_t block = static_cast<size_t>(inner) * es;
    std::vector<int64_t> fixed(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) fixed[i] = fix_index(idx[i], dim, ctx.node);
    Tensor y(x.dtype(), out_shape);
    const int64_t n = static_cast<int64_t>(fixed.size());
    const int64_t bs = static_cast<int64_t>(block);
    for (int64_t i = 0; i < n; ++i)
      copy_rows(y.raw() + i * bs, n * bs, x.raw() + fixed[i] * bs, dim * bs, outer, block);
    ctx.outputs[0] = std::move(y);
  }

 private:
  int64_t axis_;
};

// Offsets of every element of a tensor of `shape` in a tensor with strides `base`, replacing the
// coordinate along `axis` by `idx[i]` (GatherElements / ScatterElements addressing).
template <class Fn>
void for_each_axis_index(const Shape& shape, const std::vector<int64_t>& base, int64_t axis,
                         const std::vector<int64_t>& idx, int64_t axis_dim, const NodeInfo& node, Fn&& fn) {
  const int64_t n = shape_numel(shape);
  const int64_t rank = static_cast<int64_t>(shape.size());
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, off = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t c = rem % shape[d];
      rem /= shape[d];
      off += (d == axis ? fix_index(idx[i], axis_dim, node) : c) * base[d];
    }
    fn(i, off);
  }
}

class GatherElementsKernel final : public Kernel {
 public:
  explicit GatherElementsKernel(const NodeInfo& n) : axis_(n.attrs.get_int("axis", 0)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& it = ctx.input(1);
    const std::vector<int64_t> idx = read_ints(it, ctx.node, "indices");
    if (it.rank() != x.rank()) throw BadInputError(ctx.node.label() + ": indices must have the data's rank");
    const int64_t axis = normalize_axis(axis_, x.rank(), ctx.node);
    Tensor y(x.dtype(), it.shape());
    const auto xs = strides_of(x.shape());
    dispatch_bits(element_size(x.dtype(), ctx.node), ctx.node, [&]<class U>() {
      const U* src = reinterpret_cast<const U*>(x.raw());
      U* dst = reinterpret_cast<U*>(y.raw());
      for_each_axis_index(it.shape(), xs, axis, idx, x.shape()[axis], ctx.node,
                          [&](int64_t i, int64_t off) { dst[i] = src[off]; });
    });
    ctx.outputs[0] = std::move(y);
  }

 private:
  int64_t axis_;
};

enum class Reduction { None, Add, Mul, Max, Min };

Reduction parse_reduction(const NodeInfo& n) {
  const std::string r = n.attrs.get_string("reduction", "none");
  if (r == "none") return Reduction::None;
  if (r == "add") return Reduction::Add;
  if (r == "mul") return Reduction::Mul;
  if (r == "max") return Reduction::Max;
  if (r == "min") return Reduction::Min;
  throw BadInputError("unknown reduction '" + r + "'");
}

template <class T>
T reduce(Reduction r, T a, T b) {
  switch (r) {
    case Reduction::None:
      return b;
    case Reduction::Add:
      return static_cast<T>(a + b);
    case Reduction::Mul:
      return static_cast<T>(a * b);
    case Reduction::Max:
      return a < b ? b : a;
    case Reduction::Min:
      return b < a ? b : a;
  }
  return b;
}

// Scatter with a reduction: numeric dtypes; without: any element size (bool included).
template <class Apply>
void scatter_dispatch(Reduction r, DType dt, const NodeInfo& node, Apply&& apply) {
  if (r == Reduction::None) {
    dispatch_bits(element_size(dt, node), node, [&]<class U>() { apply.template operator()<U>(); });
  } else {
    dispatch_numeric(dt, node, [&]<class T>() { apply.template operator()<T>(); });
  }
}

class ScatterElementsKernel final : public Kernel {
 public:
  explicit ScatterElementsKernel(const NodeInfo& n) : axis_(n.attrs.get_int("axis", 0)), red_(parse_reduction(n)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& it = ctx.input(1);
    const Tensor& upd = ctx.input(2);
    const std::vector<int64_t> idx = read_ints(it, ctx.node, "indices");
    if (upd.shape() != it.shape() || upd.dtype() != x.dtype())
      throw BadInputError(ctx.node.label() + ": updates must match the indices' shape and the data's dtype");
    const int64_t axis = normalize_axis(axis_, x.rank(), ctx.node);
    Tensor y = x.clone();
    const auto xs = strides_of(x.shape());
    const Reduction red = red_;
    scatter_dispatch(red, x.dtype(), ctx.node, [&]<class T>() {
      const T* u = reinterpret_cast<const T*>(upd.raw());
      T* dst = reinterpret_cast<T*>(y.raw());
      for_each_axis_index(it.shape(), xs, axis, idx, x.shape()[axis], ctx.node,
                          [&](int64_t i, int64_t off) { dst[off] = reduce(red, dst[off], u[i]); });
    });
    ctx.outputs[0] = std::move(y);
  }

 private:
  int64_t axis_;
  Reduction red_;
};

// GatherND / ScatterND address slices by the last dim of `indices` (after batch_dims leading dims).
struct NdPlan {
  int64_t batch = 1, batch_dims = 0, n_idx = 0, k = 0, slice = 1;
  std::vector<int64_t> slice_offsets;  // per index tuple, element offset inside its batch item
  int64_t batch_stride = 0;            // elements per batch item of data
};

NdPlan plan_nd(const Tensor& x, const Tensor& it, int64_t batch_dims, const NodeInfo& node) {
  NdPlan p;
  p.batch_dims = batch_dims;
  const std::vector<int64_t> idx = read_ints(it, node, "indices");
  if (it.rank() < 1) throw BadInputError(node.label() + ": indices must have rank >= 1");
  p.k = it.shape().back();
  if (p.k > x.rank() - batch_dims) throw BadInputError(node.label() + ": indices' last dim is too large");
  for (int64_t d = 0; d < batch_dims; ++d) p.batch *= x.shape()[d];
  for (int64_t d = batch_dims + p.k; d < x.rank(); ++d) p.slice *= x.shape()[d];
  p.batch_stride = 1;
  for (int64_t d = batch_dims; d < x.rank(); ++d) p.batch_stride *= x.shape()[d];
  p.n_idx = p.k == 0 ? it.numel() : static_cast<int64_t>(idx.size()) / p.k;
  if (p.k == 0) p.n_idx = shape_numel(Shape(it.shape().begin(), it.shape().end() - 1));
  const auto xs = strides_of(x.shape());
  p.slice_offsets.resize(p.n_idx);
  for (int64_t i = 0; i < p.n_idx; ++i) {
    int64_t off = 0;
    for (int64_t j = 0; j < p.k; ++j)
      off += fix_index(idx[i * p.k + j], x.shape()[batch_dims + j], node) * xs[batch_dims + j];
    p.slice_offsets[i] = off;
  }
  return p;
}

class GatherNDKernel final : public Kernel {
 public:
  explicit GatherNDKernel(const NodeInfo& n) : batch_dims_(n.attrs.get_int("batch_dims", 0)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& it = ctx.input(1);
    const NdPlan p = plan_nd(x, it, batch_dims_, ctx.node);
    Shape out_shape(it.shape().begin(), it.shape().end() - 1);
    out_shape.insert(out_shape.end(), x.shape().begin() + batch_dims_ + p.k, x.shape().end());
    Tensor y(x.dtype(), out_shape);
    const size_t es = element_size(x.dtype(), ctx.node);
    const int64_t per_batch = p.batch ? p.n_idx / p.batch : 0;
    for (int64_t i = 0; i < p.n_idx; ++i) {
      const int64_t b = per_batch ? i / per_batch : 0;
      std::memcpy(y.raw() + i * p.slice * es, x.raw() + (b * p.batch_stride + p.slice_offsets[i]) * es, p.slice * es);
    }
    ctx.outputs[0] = std::move(y);
  }

 private:
  int64_t batch_dims_;
};

class ScatterNDKernel final : public Kernel {
 public:
  explicit ScatterNDKernel(const NodeInfo& n) : red_(parse_reduction(n)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& upd = ctx.input(2);
    const NdPlan p = plan_nd(x, ctx.input(1), 0, ctx.node);
    if (upd.numel() != p.n_idx * p.slice || upd.dtype() != x.dtype())
      throw BadInputError(ctx.node.label() + ": updates do not match indices and data");
    Tensor y = x.clone();
    const Reduction red = red_;
    scatter_dispatch(red, x.dtype(), ctx.node, [&]<class T>() {
      const T* u = reinterpret_cast<const T*>(upd.raw());
      T* dst = reinterpret_cast<T*>(y.raw());
      for (int64_t i = 0; i < p.n_idx; ++i)
        for (int64_t j = 0; j < p.slice; ++j) {
          T& d = dst[p.slice_offsets[i] + j];
          d = reduce(red, d, u[i * p.slice + j]);
        }
    });
    ctx.outputs[0] = std::move(y);
  }

 private:
  Reduction red_;
};

// OneHot(indices, depth, values=[off, on]): a new axis of size depth; negative indices wrap once,
// out-of-range indices give an all-off row.
class OneHotKernel final : public Kernel {
 public:
  explicit OneHotKernel(const NodeInfo& n) : axis_(n.attrs.get_int("axis", -1)) {}
  void run(KernelContext& ctx) override {
    const Tensor& it = ctx.input(0);
    const int64_t depth = checked_to_int64(read_scalar(ctx.input(1), ctx.node, "depth"), "depth");
    const Tensor& values = ctx.input(2);
    if (values.numel() != 2) throw BadInputError(ctx.node.label() + ": values must hold [off, on]");
    // Indices as int64; one outside int64's range matches no position (an all-off row).
    std::vector<int64_t> idx(static_cast<size_t>(it.numel()));
    dispatch_numeric(it.dtype(), ctx.node, [&]<class T>() {
      for (int64_t i = 0; i < it.numel(); ++i) {
        const double v = static_cast<double>(it.data<T>()[i]);
        idx[i] = v >= -9.2e18 && v < 9.2e18 ? static_cast<int64_t>(v) : std::numeric_limits<int64_t>::min();
      }
    });
    const int64_t out_rank = it.rank() + 1;
    const int64_t axis = normalize_axis(axis_, out_rank, ctx.node);
    Shape out_shape(it.shape());
    out_shape.insert(out_shape.begin() + axis, depth);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= it.shape()[d];
    for (int64_t d = axis; d < it.rank(); ++d) inner *= it.shape()[d];
    Tensor y(values.dtype(), out_shape);
    dispatch_bits(element_size(values.dtype(), ctx.node), ctx.node, [&]<class U>() {
      const U off = reinterpret_cast<const U*>(values.raw())[0], on = reinterpret_cast<const U*>(values.raw())[1];
      U* dst = reinterpret_cast<U*>(y.raw());
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t d = 0; d < depth; ++d)
          for (int64_t i = 0; i < inner; ++i) {
            int64_t v = idx[o * inner + i];
            if (v < 0 && v >= -depth) v += depth;
            dst[(o * depth + d) * inner + i] = v == d ? on : off;
          }
    });
    ctx.outputs[0] = std::move(y);
  }

 private:
  int64_t axis_;
};

// NonZero: int64 [rank, count] coordinates of non-zero elements in C order.
void nonzero_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> hits;
  dispatch_numeric_bool(x.dtype(), ctx.node, [&]<class T>() {
    const T* p = x.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i)
      if (p[i] != T{0}) hits.push_back(i);
  });
  const int64_t rank = x.rank(), n = static_cast<int64_t>(hits.size());
  Tensor y(DType::Int64, {rank, n});
  int64_t* out = y.data<int64_t>();
  for (int64_t j = 0; j < n; ++j) {
    int64_t rem = hits[j];
    for (int64_t d = rank - 1; d >= 0; --d) {
      out[d * n + j] = rem % x.shape()[d];
      rem /= x.shape()[d];
    }
  }
  ctx.outputs[0] = std::move(y);
}

// Compress: keep slices along axis (or of the flattened input) where condition is true.
class CompressKernel final : public Kernel {
 public:
  explicit CompressKernel(const NodeInfo& n) : has_axis_(n.attrs.has("axis")), axis_(n.attrs.get_int("axis", 0)) {}
  void run(KernelContext& ctx) override {
    Tensor x = ctx.input(0);
    const Tensor& c = ctx.input(1);
    if (c.dtype() != DType::Bool) throw BadInputError(ctx.node.label() + ": condition must be bool");
    if (!has_axis_) x = x.reshaped({x.numel()});
    const int64_t axis = has_axis_ ? normalize_axis(axis_, x.rank(), ctx.node) : 0;
    const int64_t dim = x.shape()[axis];
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < std::min(dim, c.numel()); ++i)
      if (c.data<bool>()[i]) keep.push_back(i);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
    for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape()[d];
    Shape out_shape = x.shape();
    out_shape[axis] = static_cast<int64_t>(keep.size());
    Tensor y(x.dtype(), out_shape);
    const size_t block = static_cast<size_t>(inner) * element_size(x.dtype(), ctx.node);
    const int64_t k = static_cast<int64_t>(keep.size());
    const int64_t bs = static_cast<int64_t>(block);
    for (int64_t i = 0; i < k; ++i)
      copy_rows(y.raw() + i * bs, k * bs, x.raw() + keep[i] * bs, dim * bs, outer, block);
    ctx.outputs[0] = std::move(y);
  }

 private:
  bool has_axis_;
  int64_t axis_;
};

}  // namespace

std::unique_ptr<Kernel> make_gather(const NodeInfo& n) { return std::make_unique<GatherKernel>(n); }
std::unique_ptr<Kernel> make_gather_elements(const NodeInfo& n) { return std::make_unique<GatherElementsKernel>(n); }
std::unique_ptr<Kernel> make_gather_nd(const NodeInfo& n) { return std::make_unique<GatherNDKernel>(n); }
std::unique_ptr<Kernel> make_scatter_elements(const NodeInfo& n) { return std::make_unique<ScatterElementsKernel>(n); }
std::unique_ptr<Kernel> make_scatter_nd(const NodeInfo& n) { return std::make_unique<ScatterNDKernel>(n); }
std::unique_ptr<Kernel> make_onehot(const NodeInfo& n) { return std::make_unique<OneHotKernel>(n); }
std::unique_ptr<Kernel> make_nonzero(const NodeInfo& n) { return make_function_kernel<nonzero_kernel>(n); }
std::unique_ptr<Kernel> make_compress(const NodeInfo& n) { return std::make_unique<CompressKernel>(n); }

}  // namespace qtool::runtime::kernels
