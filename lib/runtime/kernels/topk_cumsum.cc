// TopK (opset 1: k attribute; 10+: K input; 11+: largest/sorted) and CumSum (exclusive, reverse).
#include <algorithm>
#include <numeric>

#include "runtime/kernels/common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {

// Values and int64 indices of the k largest (or smallest) elements along axis; ties keep the lower
// index first, as ONNX specifies. sorted=0 still returns them sorted (allowed by the spec).
class TopKKernel final : public Kernel {
 public:
  explicit TopKKernel(const NodeInfo& n)
      : opset_(n.opset),
        k_attr_(n.attrs.get_int("k", -1)),
        axis_(n.attrs.get_int("axis", -1)),
        largest_(n.attrs.get_int("largest", 1) != 0) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t k = opset_ >= 10 ? read_ints(ctx.input(1), ctx.node, "K").at(0) : k_attr_;
    const int64_t axis = normalize_axis(axis_, x.rank(), ctx.node);
    const int64_t dim = x.shape()[axis];
    if (k < 0 || k > dim)
      throw BadInputError(ctx.node.label() + ": k=" + std::to_string(k) + " for a dim of " + std::to_string(dim));
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
    for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape()[d];
    Shape out_shape = x.shape();
    out_shape[axis] = k;
    Tensor values(x.dtype(), out_shape), indices(DType::Int64, out_shape);
    dispatch_numeric(x.dtype(), ctx.node, [&]<class T>() {
      const T* src = x.data<T>();
      T* vo = values.data<T>();
      int64_t* io = indices.data<int64_t>();
      std::vector<int64_t> order(dim);
      const bool largest = largest_;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const T* base = src + o * dim * inner + i;
          std::iota(order.begin(), order.end(), 0);
          auto better = [&](int64_t a, int64_t b) {
            const T va = base[a * inner], vb = base[b * inner];
            if (va != vb) return largest ? va > vb : va < vb;
            return a < b;
          };
          std::partial_sort(order.begin(), order.begin() + k, order.end(), better);
          for (int64_t j = 0; j < k; ++j) {
            const int64_t off = (o * k + j) * inner + i;
            vo[off] = base[order[j] * inner];
            io[off] = order[j];
          }
        }
    });
    ctx.outputs[0] = std::move(values);
    if (ctx.outputs.size() > 1) ctx.outputs[1] = std::move(indices);
  }

 private:
  int opset_;
  int64_t k_attr_, axis_;
  bool largest_;
};

class CumSumKernel final : public Kernel {
 public:
  explicit CumSumKernel(const NodeInfo& n)
      : exclusive_(n.attrs.get_int("exclusive", 0) != 0), reverse_(n.attrs.get_int("reverse", 0) != 0) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t axis =
        normalize_axis(static_cast<int64_t>(read_scalar(ctx.input(1), ctx.node, "axis")), x.rank(), ctx.node);
    const int64_t dim = x.shape()[axis];
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
    for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape()[d];
    Tensor y(x.dtype(), x.shape());
    dispatch_numeric(x.dtype(), ctx.node, [&]<class T>() {
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          T acc = 0;
          for (int64_t s = 0; s < dim; ++s) {
            const int64_t j = reverse_ ? dim - 1 - s : s;
            const int64_t off = (o * dim + j) * inner + i;
            if (exclusive_) {
              dst[off] = acc;
              acc = static_cast<T>(acc + src[off]);
            } else {
              acc = static_cast<T>(acc + src[off]);
              dst[off] = acc;
            }
          }
        }
    });
    ctx.outputs[0] = std::move(y);
  }

 private:
  bool exclusive_, reverse_;
};

}  // namespace

std::unique_ptr<Kernel> make_topk(const NodeInfo& n) { return std::make_unique<TopKKernel>(n); }
std::unique_ptr<Kernel> make_cumsum(const NodeInfo& n) { return std::make_unique<CumSumKernel>(n); }

}  // namespace qtool::runtime::kernels
