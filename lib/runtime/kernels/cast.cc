// Cast, CastLike, Identity and inference-mode Dropout.
#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/kernels/common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {

// Float -> integer: truncation toward zero; NaN gives 0 and out-of-range values saturate (ONNX leaves
// these undefined; C++ makes them undefined behaviour, so they are pinned here).
template <class To, class From>
To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From{0};
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(v)) return To{0};
    if (v <= static_cast<From>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (v >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace

Tensor cast_tensor(const Tensor& x, DType to, const NodeInfo& node, int threads) {
  if (x.dtype() == to) return x;
  Tensor y(to, x.shape());
  dispatch_numeric_bool(x.dtype(), node, [&]<class From>() {
    dispatch_numeric_bool(to, node, [&]<class To>() {
      const From* in = x.data<From>();
      To* out = y.data<To>();
      parallel_range(x.numel(), threads, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) out[i] = convert<To>(in[i]);
      });
    });
  });
  return y;
}

namespace {

class CastKernel final : public Kernel {
 public:
  explicit CastKernel(const NodeInfo& n) {
    const int64_t to = n.attrs.require_int("to");
    const DTypeInfo* info = dtype_info_or_null(static_cast<int32_t>(to));
    if (!info) throw BadInputError("attribute 'to' is not a known dtype (" + std::to_string(to) + ")");
    to_ = info->dtype;
  }
  void run(KernelContext& ctx) override { ctx.outputs[0] = cast_tensor(ctx.input(0), to_, ctx.node, ctx.threads); }

 private:
  DType to_ = DType::Float32;
};

void castlike_kernel(KernelContext& ctx) {
  ctx.outputs[0] = cast_tensor(ctx.input(0), ctx.input(1).dtype(), ctx.node, ctx.threads);
}

// Identity shares the input's storage (tensors are immutable once produced).
void identity_kernel(KernelContext& ctx) { ctx.outputs[0] = ctx.input(0); }

// Dropout in inference: y = x; the optional mask output is all true.
void dropout_kernel(KernelContext& ctx) {
  ctx.outputs[0] = ctx.input(0);
  if (ctx.has_input(2) && read_scalar(ctx.input(2), ctx.node, "training_mode") != 0)
    throw UnsupportedError(ctx.node.label() + ": Dropout in training mode is not supported (inference only)");
  if (ctx.outputs.size() > 1 && !ctx.node.outputs[1].empty()) {
    Tensor mask(DType::Bool, ctx.input(0).shape());
    std::memset(mask.raw(), 1, mask.nbytes());
    ctx.outputs[1] = std::move(mask);
  }
}

}  // namespace

std::unique_ptr<Kernel> make_cast(const NodeInfo& n) { return std::make_unique<CastKernel>(n); }
std::unique_ptr<Kernel> make_castlike(const NodeInfo& n) { return make_function_kernel<castlike_kernel>(n); }
std::unique_ptr<Kernel> make_identity(const NodeInfo& n) { return make_function_kernel<identity_kernel>(n); }
std::unique_ptr<Kernel> make_dropout(const NodeInfo& n) { return make_function_kernel<dropout_kernel>(n); }

}  // namespace qtool::runtime::kernels
