// Factory declarations for every kernel; the registry (registry.cc) lists them with their op and
// opset range. Each factory lives in the kernels/*.cc file of its family.
#pragma once

#include "runtime/kernel.h"

namespace qtool::runtime::kernels {

// --- core: elementwise, shape, tensor manipulation, control flow, QDQ (runtime core) ---

// --- compute: GEMM/conv, pooling, normalization, reductions, resize, recurrent (runtime kernels) ---

}  // namespace qtool::runtime::kernels
