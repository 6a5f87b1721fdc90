// The explicit list of observer backends. A new backend adds its row here and nowhere else; the CUDA row exists
// in builds with QTOOL_CUDA on (lib/calib/CMakeLists.txt adds kernels_cuda.cu and defines QTOOL_HAVE_CUDA).
#include <array>

#include "calib/kernels.h"
#include "core/error.h"

namespace qtool::calib {

namespace {
#if defined(QTOOL_HAVE_CUDA)
const std::array kBackends = {cpu_observer_backend(), reference_observer_backend(), cuda_emulated_observer_backend(),
                              cuda_observer_backend()};
#else
const std::array kBackends = {cpu_observer_backend(), reference_observer_backend(), cuda_emulated_observer_backend()};
#endif
}  // namespace

std::span<const ObserverBackend> observer_backends() { return kBackends; }

const ObserverBackend& observer_backend(BackendKind kind) {
  for (const ObserverBackend& b : kBackends)
    if (b.kind == kind) return b;
  throw InternalError("observer backend " + std::to_string(static_cast<int>(kind)) + " is not registered");
}

}  // namespace qtool::calib
