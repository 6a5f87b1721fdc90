// Factory declarations for every kernel; the registry (registry.cc) lists them with their op and
// opset range. Each factory lives in the kernels/*.cc file of its family.
#pragma once

#include "runtime/kernel.h"

namespace qtool::runtime::kernels {

// --- core: elementwise, shape, tensor manipulation, control flow, QDQ (runtime core) ---

// --- compute: GEMM/conv, pooling, normalization, reductions, resize, recurrent (runtime kernels) ---
std::unique_ptr<Kernel> make_conv(const NodeInfo& node);            // conv.cc
std::unique_ptr<Kernel> make_conv_transpose(const NodeInfo& node);  // conv_transpose.cc
std::unique_ptr<Kernel> make_gemm(const NodeInfo& node);            // gemm.cc
std::unique_ptr<Kernel> make_matmul(const NodeInfo& node);          // gemm.cc

}  // namespace qtool::runtime::kernels
