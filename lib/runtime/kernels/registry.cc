// The one explicit list of kernels: op type, opset range, factory. Nothing registers itself.
// A node whose (domain, op, opset) has no row here is reported before the model runs.
#include <array>

#include "runtime/kernels/kernels.h"

namespace qtool::runtime {

using namespace kernels;

namespace {
constexpr int kMaxOpset = 21;
// clang-format off
const KernelDef kKernels[] = {
  // --- core: elementwise, shape, tensor manipulation, control flow, QDQ ---

  // --- compute: GEMM/conv, pooling, normalization, reductions, resize, recurrent ---
  {"", "Conv", 1, kMaxOpset, make_conv},
  {"", "ConvTranspose", 1, kMaxOpset, make_conv_transpose},
  {"", "Gemm", 1, kMaxOpset, make_gemm},
  {"", "MatMul", 1, kMaxOpset, make_matmul},

  // sentinel, never matched (keeps the array non-empty while families are added)
  {"qtool.internal", "", 0, -1, nullptr},
};
// clang-format on
}  // namespace

std::span<const KernelDef> registered_kernels() { return kKernels; }

}  // namespace qtool::runtime
