// What device code shares with the host: one macro, the coordinates of a thread in its launch grid, and the
// few atomics the kernels use.
//
// A kernel's per-thread logic is written once, as QTOOL_HD functions of a ThreadCoord, in a header that compiles
// with nvcc (called from a real __global__ kernel with blockIdx/threadIdx) and with the host compiler (called by
// the launch-grid emulation, device/emulate.h, which tests compare with the CPU backend). Between two phases of a
// kernel sits one block-wide barrier: on the device __syncthreads(), in the emulation the end of a loop over the
// block's threads. A phase may therefore only read shared memory written by an earlier phase.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define QTOOL_HD __host__ __device__
#else
#define QTOOL_HD
#endif

namespace qtool::device {

// blockIdx.x, threadIdx.x, gridDim.x and blockDim.x of a one-dimensional launch.
struct ThreadCoord {
  int64_t block = 0;
  int64_t thread = 0;
  int64_t blocks = 1;
  int64_t block_threads = 1;

  // The grid-stride loop's start and step: this thread visits i = first(), first() + stride(), ... < n.
  QTOOL_HD int64_t first() const { return block * block_threads + thread; }
  QTOOL_HD int64_t stride() const { return blocks * block_threads; }
};

// *p += v, atomically on the device. The emulation runs one thread at a time, so a plain add is exact there.
QTOOL_HD inline void atomic_add(uint32_t* p, uint32_t v) {
#if defined(__CUDA_ARCH__)
  atomicAdd(reinterpret_cast<unsigned int*>(p), v);
#else
  *p += v;
#endif
}

QTOOL_HD inline void atomic_add(uint64_t* p, uint64_t v) {
  static_assert(sizeof(unsigned long long) == sizeof(uint64_t));
#if defined(__CUDA_ARCH__)
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
#else
  *p += v;
#endif
}

}  // namespace qtool::device
