// The CUDA runtime's view of the machine (CUDA builds; cuda_probe_none.cc otherwise).
#include <cuda_runtime_api.h>

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

void make_current(int cuda_index) {
  if (const cudaError_t err = cudaSetDevice(cuda_index); err != cudaSuccess)
    throw InternalError("cudaSetDevice(" + std::to_string(cuda_index) + "): " + cudaGetErrorString(err));
}

}  // namespace qtool::device
