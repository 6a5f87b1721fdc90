// The CUDA runtime's view of the machine (CUDA builds; cuda_probe_none.cc otherwise).
#include <cuda_runtime_api.h>

#include <atomic>

#include "core/error.h"
#include "device/device.h"

namespace qtool::device {

CudaProbe probe_cuda() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return {0, std::string("the CUDA runtime reports ") + cudaGetErrorString(err)};
  if (count == 0) return {0, "the CUDA runtime sees no GPU"};
  return {count, ""};
}

namespace {
std::atomic<int> g_selected{0};  // set once, at the edge, by select_device
}  // namespace

void make_current(int cuda_index) {
  if (const cudaError_t err = cudaSetDevice(cuda_index); err != cudaSuccess)
    throw InternalError("cudaSetDevice(" + std::to_string(cuda_index) + "): " + cudaGetErrorString(err));
  g_selected.store(cuda_index);
}

void bind_selected_device() { make_current(g_selected.load()); }

}  // namespace qtool::device
