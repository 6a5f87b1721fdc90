// A build without CUDA (QTOOL_CUDA=OFF): no device is ever present.
#include "core/error.h"
#include "device/device.h"

namespace qtool::device {

CudaProbe probe_cuda() { return {0, "this qtool was built without CUDA (QTOOL_CUDA=OFF)"}; }

void make_current(int) { throw InternalError("make_current: this qtool was built without CUDA"); }

void bind_selected_device() { throw InternalError("bind_selected_device: this qtool was built without CUDA"); }

}  // namespace qtool::device
