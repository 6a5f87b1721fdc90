// Unique (opset 11): the distinct elements of X (flattened), or with `axis` the distinct slices along it. Outputs:
// Y (the distinct values, ascending when sorted = 1 — slices compared lexicographically — else in order of first
// occurrence), indices (int64: the first position of each in X), inverse_indices (int64: for each position of X,
// its entry in Y) and counts (int64). Numeric and bool dtypes; values compare with their type's ==/<.
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "core/checked.h"
#include "core/limits.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {

class UniqueKernel final : public Kernel {
 public:
  explicit UniqueKernel(const NodeInfo& n)
      : has_axis_(n.attrs.has("axis")), axis_(n.attrs.get_int("axis", 0)), sorted_(n.attrs.get_int("sorted", 1) != 0) {}
  void run(KernelContext& ctx) override {
    const Tensor& X = ctx.input(0);
    int64_t outer = 1, D = X.numel(), inner = 1, axis = 0;
    if (has_axis_) {
      axis = normalize_axis(axis_, X.rank(), ctx.node);
      D = X.dim(axis);
      outer = shape_numel(Shape(X.shape().begin(), X.shape().begin() + axis));
      inner = shape_numel(Shape(X.shape().begin() + axis + 1, X.shape().end()));
    }
    // Working arrays: order, inverse, run_of, rank and counts hold up to D int64 each, 40 bytes per slice: for a
    // byte tensor 40 times its size, so checked against --max-memory like tensors.
    check_tensor_allocation(checked_mul(D, int64_t{5 * sizeof(int64_t)}, "working arrays"),
                            "working arrays for " + std::to_string(D) + " slices");
    std::vector<int64_t> order(D), unique_first;  // slice positions; the first position of each distinct slice
    std::vector<int64_t> inverse(D), counts;
    Tensor Y;
    dispatch_numeric_bool(X.dtype(), ctx.node, [&]<class T>() {
      const T* x = X.data<T>();
      // Lexicographic comparison of slices a and b: elements (o, a, i) in (o, i) order.
      auto cmp = [&](int64_t a, int64_t b) {
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i) {
            const T va = x[(o * D + a) * inner + i], vb = x[(o * D + b) * inner + i];
            if (va < vb) return -1;
            if (vb < va) return 1;
          }
        return 0;
      };
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
      // Runs of equal slices: the first of each run is its first occurrence (stable sort).
      std::vector<int64_t> run_of(D);
      for (int64_t k = 0; k < D; ++k) {
        if (k == 0 || cmp(order[k - 1], order[k]) != 0) unique_first.push_back(order[k]);
        run_of[order[k]] = static_cast<int64_t>(unique_first.size()) - 1;
      }
      std::vector<int64_t> rank(unique_first.size());  // run -> position in Y
      std::iota(rank.begin(), rank.end(), 0);
      if (!sorted_) {
        std::vector<int64_t> by_first(unique_first.size());
        std::iota(by_first.begin(), by_first.end(), 0);
        std::sort(by_first.begin(), by_first.end(),
                  [&](int64_t a, int64_t b) { return unique_first[a] < unique_first[b]; });
        std::vector<int64_t> firsts(unique_first.size());
        for (size_t k = 0; k < by_first.size(); ++k)
          rank[by_first[k]] = static_cast<int64_t>(k), firsts[k] = unique_first[by_first[k]];
        unique_first = firsts;
      }
      counts.assign(unique_first.size(), 0);
      for (int64_t k = 0; k < D; ++k) {
        inverse[k] = rank[run_of[k]];
        ++counts[inverse[k]];
      }
      const int64_t U = static_cast<int64_t>(unique_first.size());
      Shape ys = has_axis_ ? X.shape() : Shape{U};
      if (has_axis_) ys[axis] = U;
      Y = Tensor(X.dtype(), ys);
      T* y = Y.data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t u = 0; u < U; ++u)
          for (int64_t i = 0; i < inner; ++i) y[(o * U + u) * inner + i] = x[(o * D + unique_first[u]) * inner + i];
    });
    auto ints = [](const std::vector<int64_t>& v) {
      return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
    };
    ctx.outputs[0] = std::move(Y);
    if (ctx.outputs.size() > 1) ctx.outputs[1] = ints(unique_first);
    if (ctx.outputs.size() > 2) ctx.outputs[2] = ints(inverse);
    if (ctx.outputs.size() > 3) ctx.outputs[3] = ints(counts);
  }

 private:
  bool has_axis_;
  int64_t axis_;
  bool sorted_;
};

}  // namespace

std::unique_ptr<Kernel> make_unique_op(const NodeInfo& n) { return std::make_unique<UniqueKernel>(n); }

}  // namespace qtool::runtime::kernels
