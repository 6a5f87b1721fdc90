// Device memory for the CUDA backends (included by .cu sources only): a buffer owned by scope, and the one check
// that turns a CUDA error into an InternalError naming what failed. Transfers are explicit: upload/download.
#pragma once

#include <cuda_runtime.h>

#include <span>
#include <string>

#include "core/error.h"

namespace qtool::device {

inline void cuda_check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw InternalError(std::string("CUDA: ") + what + ": " + cudaGetErrorString(err));
}

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n_ > 0) cuda_check(cudaMalloc(reinterpret_cast<void**>(&p_), n_ * sizeof(T)), "cudaMalloc");
  }
  // A copy of `host` on the device.
  explicit DeviceBuffer(std::span<const T> host) : DeviceBuffer(host.size()) { upload(host.data()); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(p_); }

  T* get() const { return p_; }
  size_t size() const { return n_; }
  void upload(const T* host) {
    if (n_ > 0) cuda_check(cudaMemcpy(p_, host, n_ * sizeof(T), cudaMemcpyHostToDevice), "copy to device");
  }
  void download(T* host) const {
    if (n_ > 0) cuda_check(cudaMemcpy(host, p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "copy to host");
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

}  // namespace qtool::device
