// ONNX Runtime's contrib activations (domain com.microsoft), float32, as ORT 1.30's CPU kernels compute them. The
// optional bias has one value per element of input 0's last axis and is added before the activation.
//
// Gelu:      y = x/2 · (1 + erf(x/√2))                      (compute::gelu_approx, as the ONNX Gelu)
// BiasGelu:  y = Gelu(A + B), B of [last axis]               (input B required)
// FastGelu:  y = x/2 · (1 + tanh(√(2/π)·(x + 0.044715·x³))), x = X (+ bias)
// QuickGelu: y = x · sigmoid(alpha·x), alpha default 1.702
// (BiasAdd has no CPU kernel in ORT 1.30, only a CUDA one: not registered, there is no CPU reference for it.)
#include <algorithm>
#include <cmath>

#include "runtime/kernels/blas.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/vector_math.h"

namespace qtool::runtime::kernels {
namespace {
using namespace compute;

enum class ContribAct { Gelu, BiasGelu, FastGelu, QuickGelu };

ContribAct contrib_act(const NodeInfo& n) {
  if (n.op_type == "Gelu") return ContribAct::Gelu;
  if (n.op_type == "BiasGelu") return ContribAct::BiasGelu;
  if (n.op_type == "FastGelu") return ContribAct::FastGelu;
  if (n.op_type == "QuickGelu") return ContribAct::QuickGelu;
  throw InternalError("contrib activation kernel registered for " + n.op_type);
}

class ContribActivationKernel final : public Kernel {
 public:
  explicit ContribActivationKernel(const NodeInfo& n)
      : op_(contrib_act(n)), alpha_(op_ == ContribAct::QuickGelu ? n.attrs.get_float("alpha", 1.702f) : 0.f) {}

  void run(KernelContext& ctx) override {
    const Tensor& X = float_input(ctx, 0);
    const int64_t C = X.rank() ? X.dim(X.rank() - 1) : 1;
    const Tensor* bias = ctx.has_input(1) && op_ != ContribAct::Gelu && op_ != ContribAct::QuickGelu
                             ? &float_input(ctx, 1)
                             : nullptr;
    if (op_ == ContribAct::BiasGelu && !bias) throw BadInputError(ctx.node.label() + ": input 1 (bias) is required");
    if (bias && (bias->rank() != 1 || bias->numel() != C))
      throw BadInputError(ctx.node.label() + ": bias " + shape_str(bias->shape()) + " must be 1-D with one value per " +
                          "element of the input's last axis (" + std::to_string(C) + ")");
    Tensor Y(DType::Float32, X.shape());
    const float* x = X.data<float>();
    const float* b = bias ? bias->data<float>() : nullptr;
    float* y = Y.data<float>();
    const int64_t n = X.numel();
    parallel_range(n, threads_for(n * kTranscendentalCost, ctx.threads), [&](int64_t lo, int64_t hi) {
      if (b)
        for (int64_t i = lo; i < hi; ++i) y[i] = x[i] + b[i % C];
      else
        std::copy(x + lo, x + hi, y + lo);
      apply(y + lo, hi - lo);
    });
    ctx.outputs[0] = std::move(Y);
  }

 private:
  void apply(float* y, int64_t n) const {
    switch (op_) {
      case ContribAct::Gelu:
      case ContribAct::BiasGelu:
        return gelu_approx(y, y, n);
      case ContribAct::FastGelu:
        for (int64_t i = 0; i < n; ++i) {
          const float v = y[i];
          y[i] = 0.5f * v * (1.f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        }
        return;
      case ContribAct::QuickGelu:
        for (int64_t i = 0; i < n; ++i) y[i] = y[i] / (1.f + exp_approx(-alpha_ * y[i]));
        return;
    }
  }

  ContribAct op_;
  float alpha_;
};

}  // namespace

std::unique_ptr<Kernel> make_contrib_activation(const NodeInfo& node) {
  return std::make_unique<ContribActivationKernel>(node);
}

}  // namespace qtool::runtime::kernels
