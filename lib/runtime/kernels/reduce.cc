// Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare and ArgMax/ArgMin.
// Types: float, double, int32, int64 (Max/Min/ArgMax/ArgMin also int8, uint8).
//
// Reduce*: axes from the `axes` attribute (before opset 18; before 13 for ReduceSum) or the optional
//   second input (later opsets); no axes = all axes unless noop_with_empty_axes = 1 (then Y = X).
//   keepdims (default 1) keeps reduced axes as 1. Sums accumulate in double and round once.
//   L1 = sum|x|, L2 = sqrt(sum x^2), LogSum = log(sum x), LogSumExp = m + log(sum exp(x - m)) with m = max,
//   SumSquare = sum x^2, Mean = sum / count. An empty reduction gives the op's identity (0, 1, -inf, +inf).
// ArgMax/ArgMin: int64 index along `axis` of the first extreme value (the last with select_last_index = 1).
#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/kernels/blas.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {
using namespace compute;

enum class ReduceOp { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

// Input axes grouped into runs of kept / reduced axes (adjacent axes of one kind merged).
struct ReducePlan {
  std::vector<int64_t> kept_dims, kept_strides, red_dims, red_strides;
  int64_t out_count = 1, red_count = 1;
};

ReducePlan make_plan(const Shape& shape, const std::vector<bool>& reduced) {
  ReducePlan p;
  const auto st = strides_of(shape);
  for (size_t i = 0; i < shape.size(); ++i) {
    auto& dims = reduced[i] ? p.red_dims : p.kept_dims;
    auto& strides = reduced[i] ? p.red_strides : p.kept_strides;
    const bool merge = i > 0 && reduced[i] == reduced[i - 1] && !dims.empty();
    if (merge) {
      dims.back() *= shape[i];
      strides.back() = st[i];
    } else {
      dims.push_back(shape[i]);
      strides.push_back(st[i]);
    }
    (reduced[i] ? p.red_count : p.out_count) *= shape[i];
  }
  return p;
}

// Calls fn(offset) for every input element reduced into output `o`.
template <class F>
void for_each_reduced(const ReducePlan& p, int64_t o, F&& fn) {
  int64_t base = 0;
  for (size_t k = p.kept_dims.size(); k-- > 0;) {
    base += (o % p.kept_dims[k]) * p.kept_strides[k];
    o /= p.kept_dims[k];
  }
  if (p.red_count == 0) return;
  const size_t nr = p.red_dims.size();
  if (nr == 0) return fn(base);
  const int64_t inner = p.red_dims[nr - 1], inner_stride = p.red_strides[nr - 1];
  std::vector<int64_t> idx(nr, 0);
  for (;;) {
    int64_t off = base;
    for (size_t k = 0; k + 1 < nr; ++k) off += idx[k] * p.red_strides[k];
    for (int64_t j = 0; j < inner; ++j) fn(off + j * inner_stride);
    size_t k = nr - 1;
    for (;;) {
      if (k == 0) return;
      --k;
      if (++idx[k] < p.red_dims[k]) break;
      idx[k] = 0;
    }
  }
}

template <class T>
T reduce_one(ReduceOp op, const ReducePlan& p, const T* x, int64_t o) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  Acc acc = 0;
  switch (op) {
    case ReduceOp::Max: {
      T m =
          std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
      for_each_reduced(p, o, [&](int64_t i) { m = std::max(m, x[i]); });
      return m;
    }
    case ReduceOp::Min: {
      T m = std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
      for_each_reduced(p, o, [&](int64_t i) { m = std::min(m, x[i]); });
      return m;
    }
    case ReduceOp::Prod:
      acc = 1;
      for_each_reduced(p, o, [&](int64_t i) { acc *= x[i]; });
      return static_cast<T>(acc);
    case ReduceOp::LogSumExp: {
      double m = -INFINITY;
      for_each_reduced(p, o, [&](int64_t i) { m = std::max(m, static_cast<double>(x[i])); });
      if (std::isinf(m)) return static_cast<T>(m);
      double s = 0;
      for_each_reduced(p, o, [&](int64_t i) { s += std::exp(static_cast<double>(x[i]) - m); });
      return static_cast<T>(m + std::log(s));
    }
    default:
      break;
  }
  for_each_reduced(p, o, [&](int64_t i) {
    const Acc v = static_cast<Acc>(x[i]);
    switch (op) {
      case ReduceOp::L1:
        acc += v < 0 ? -v : v;
        break;
      case ReduceOp::L2:
      case ReduceOp::SumSquare:
        acc += v * v;
        break;
      default:
        acc += v;
    }
  });
  switch (op) {
    case ReduceOp::Mean:
      return static_cast<T>(p.red_count ? acc / static_cast<Acc>(p.red_count) : acc);
    case ReduceOp::L2:
      return static_cast<T>(std::sqrt(static_cast<double>(acc)));
    case ReduceOp::LogSum:
      return static_cast<T>(std::log(static_cast<double>(acc)));
    default:
      return static_cast<T>(acc);
  }
}

class ReduceKernel final : public Kernel {
 public:
  ReduceKernel(const NodeInfo& node, ReduceOp op) : node_(node), op_(op) {
    const int axes_input_since = node.op_type == "ReduceSum" ? 13 : 18;
    axes_from_input_ = node.opset >= axes_input_since;
    keepdims_ = node.attrs.get_int("keepdims", 1) != 0;
    noop_ = node.attrs.get_int("noop_with_empty_axes", 0) != 0;
    if (!axes_from_input_) axes_ = node.attrs.get_ints("axes");
  }

  void run(KernelContext& ctx) override {
    const Tensor& X = ctx.input(0);
    std::vector<int64_t> axes = axes_;
    if (axes_from_input_ && ctx.has_input(1)) axes = read_ints(ctx.input(1), node_, "axes");
    const int64_t rank = X.rank();
    if (axes.empty() && noop_) {
      ctx.outputs[0] = X;
      return;
    }
    std::vector<bool> reduced(rank, axes.empty());
    for (int64_t a : axes) reduced[normalize_axis(a, rank, node_)] = true;
    Shape ys;
    for (int64_t i = 0; i < rank; ++i)
      if (!reduced[i])
        ys.push_back(X.dim(i));
      else if (keepdims_)
        ys.push_back(1);
    const ReducePlan plan = make_plan(X.shape(), reduced);
    Tensor Y(X.dtype(), ys);
    auto run_typed = [&](auto tag) {
      using T = decltype(tag);
      const T* x = X.data<T>();
      T* y = Y.data<T>();
      parallel_for(plan.out_count, threads_for(X.numel(), ctx.threads),
                   [&](int64_t o) { y[o] = reduce_one<T>(op_, plan, x, o); });
    };
    const bool extreme = op_ == ReduceOp::Max || op_ == ReduceOp::Min;
    if (extreme)
      visit_dtype(node_, X.dtype(),
                  {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Int8, DType::UInt8}, run_typed);
    else
      visit_dtype(node_, X.dtype(), {DType::Float32, DType::Float64, DType::Int32, DType::Int64}, run_typed);
    ctx.outputs[0] = std::move(Y);
  }

 private:
  NodeInfo node_;
  ReduceOp op_;
  bool axes_from_input_ = false, keepdims_ = true, noop_ = false;
  std::vector<int64_t> axes_;
};

template <bool Max>
void arg_extreme(KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  const int64_t axis = normalize_axis(ctx.node.attrs.get_int("axis", 0), X.rank(), ctx.node);
  const bool keep = ctx.node.attrs.get_int("keepdims", 1) != 0;
  const bool last = ctx.node.attrs.get_int("select_last_index", 0) != 0;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= X.dim(i);
  for (int64_t i = axis + 1; i < X.rank(); ++i) inner *= X.dim(i);
  const int64_t len = X.dim(axis);
  if (len == 0) throw BadInputError(ctx.node.label() + ": cannot take an arg-extreme over an empty axis");
  Shape ys = X.shape();
  if (keep)
    ys[axis] = 1;
  else
    ys.erase(ys.begin() + axis);
  Tensor Y(DType::Int64, ys);
  auto run_typed = [&](auto tag) {
    using T = decltype(tag);
    const T* x = X.data<T>();
    int64_t* y = Y.data<int64_t>();
    parallel_for(outer * inner, threads_for(X.numel(), ctx.threads), [&](int64_t r) {
      const int64_t o = r / inner, in = r % inner;
      const T* xs = x + o * len * inner + in;
      int64_t best = 0;
      for (int64_t j = 1; j < len; ++j) {
        const T v = xs[j * inner], b = xs[best * inner];
        const bool better = Max ? (last ? v >= b : v > b) : (last ? v <= b : v < b);
        if (better) best = j;
      }
      y[r] = best;
    });
  };
  visit_dtype(ctx.node, X.dtype(),
              {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Int8, DType::UInt8}, run_typed);
  ctx.outputs[0] = std::move(Y);
}

template <ReduceOp Op>
std::unique_ptr<Kernel> make_reduce(const NodeInfo& node) {
  return std::make_unique<ReduceKernel>(node, Op);
}

}  // namespace

std::unique_ptr<Kernel> make_reduce_sum(const NodeInfo& n) { return make_reduce<ReduceOp::Sum>(n); }
std::unique_ptr<Kernel> make_reduce_mean(const NodeInfo& n) { return make_reduce<ReduceOp::Mean>(n); }
std::unique_ptr<Kernel> make_reduce_max(const NodeInfo& n) { return make_reduce<ReduceOp::Max>(n); }
std::unique_ptr<Kernel> make_reduce_min(const NodeInfo& n) { return make_reduce<ReduceOp::Min>(n); }
std::unique_ptr<Kernel> make_reduce_prod(const NodeInfo& n) { return make_reduce<ReduceOp::Prod>(n); }
std::unique_ptr<Kernel> make_reduce_l1(const NodeInfo& n) { return make_reduce<ReduceOp::L1>(n); }
std::unique_ptr<Kernel> make_reduce_l2(const NodeInfo& n) { return make_reduce<ReduceOp::L2>(n); }
std::unique_ptr<Kernel> make_reduce_log_sum(const NodeInfo& n) { return make_reduce<ReduceOp::LogSum>(n); }
std::unique_ptr<Kernel> make_reduce_log_sum_exp(const NodeInfo& n) { return make_reduce<ReduceOp::LogSumExp>(n); }
std::unique_ptr<Kernel> make_reduce_sum_square(const NodeInfo& n) { return make_reduce<ReduceOp::SumSquare>(n); }
std::unique_ptr<Kernel> make_arg_max(const NodeInfo& n) { return make_function_kernel<arg_extreme<true>>(n); }
std::unique_ptr<Kernel> make_arg_min(const NodeInfo& n) { return make_function_kernel<arg_extreme<false>>(n); }

}  // namespace qtool::runtime::kernels
