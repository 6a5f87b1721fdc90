// The explicit list of observer backends. A new backend (e.g. CUDA, built when QTOOL_WITH_CUDA is on)
// adds its functions here and nowhere else.
#include <array>

#include "calib/kernels.h"
#include "core/error.h"

namespace qtool::calib {

namespace {
const std::array<ObserverBackend, 2> kBackends = {cpu_observer_backend(), reference_observer_backend()};
}  // namespace

std::span<const ObserverBackend> observer_backends() { return kBackends; }

const ObserverBackend& observer_backend(BackendKind kind) {
  for (const ObserverBackend& b : kBackends)
    if (b.kind == kind) return b;
  throw InternalError("observer backend " + std::to_string(static_cast<int>(kind)) + " is not registered");
}

}  // namespace qtool::calib
