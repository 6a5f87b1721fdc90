// The "cuda" observer backend: the per-thread code of calib/kernels_device.h in __global__ kernels, one
// __syncthreads() between phases. Each call copies the batch to the device, runs the kernels and copies back only
// the fixed-size statistics (block partials, bin counts, channel min/max). Results equal the CPU backend's exactly
// (kernels_device.h says why); tests/calib/device_kernels_test.cc checks the same code through the emulated grid,
// tests/device/gpu/gpu_check.cc on a GPU when one is present.
#include <cuda_runtime.h>

#include <vector>

#include "calib/kernels.h"
#include "calib/kernels_device.h"
#include "device/cuda_buffer.h"
#include "device/device.h"

namespace qtool::calib {
namespace {

namespace dk = device_kernels;
using qtool::device::ThreadCoord;

__device__ ThreadCoord coord() {
  return {static_cast<int64_t>(blockIdx.x), static_cast<int64_t>(threadIdx.x), static_cast<int64_t>(gridDim.x),
          static_cast<int64_t>(blockDim.x)};
}

__global__ void summarize_kernel(const float* x, int64_t n, dk::SummaryPartial* partials) {
  __shared__ dk::SummaryPartial shared[dk::kBlockThreads];
  dk::summarize_fold(coord(), x, n, shared);
  __syncthreads();
  dk::summarize_block(coord(), shared, partials);
}

template <class Bin>
__global__ void count_kernel(const float* x, int64_t n, Bin bin, int64_t base, int64_t span, uint64_t* counts) {
  __shared__ uint32_t shared[dk::kSharedBins];
  dk::bins_zero(coord(), span, shared);
  __syncthreads();
  dk::bins_count(coord(), x, n, bin, base, span, shared);
  __syncthreads();
  dk::bins_flush(coord(), base, span, shared, counts);
}

__global__ void channel_kernel(const float* x, int64_t outer, int64_t channels, int64_t inner, float* mins,
                               float* maxs) {
  __shared__ dk::MinMax shared[dk::kBlockThreads];
  dk::channel_fold(coord(), x, outer, channels, inner, shared);
  __syncthreads();
  dk::channel_update(coord(), shared, mins, maxs);
}

using qtool::device::cuda_check;
using qtool::device::DeviceBuffer;

BatchSummary summarize(std::span<const float> x, int /*threads*/) {
  qtool::device::bind_selected_device();
  const auto n = static_cast<int64_t>(x.size());
  const int64_t blocks = dk::blocks_for(n);
  const DeviceBuffer<float> dx(x);
  DeviceBuffer<dk::SummaryPartial> dp(static_cast<size_t>(blocks));
  summarize_kernel<<<static_cast<unsigned>(blocks), dk::kBlockThreads>>>(dx.get(), n, dp.get());
  cuda_check(cudaGetLastError(), "summarize kernel");
  std::vector<dk::SummaryPartial> partials(static_cast<size_t>(blocks));
  dp.download(partials.data());
  return dk::summary_of(partials, n);
}

// Adds the counts of x's values per bin to counts (bins entries).
template <class Bin>
void count(std::span<const float> x, Bin bin, int64_t bins, uint64_t* counts) {
  qtool::device::bind_selected_device();
  const DeviceBuffer<float> dx(x);
  DeviceBuffer<uint64_t> dc(static_cast<size_t>(bins));
  cuda_check(cudaMemset(dc.get(), 0, static_cast<size_t>(bins) * sizeof(uint64_t)), "cudaMemset");
  dk::for_each_count_pass(static_cast<int64_t>(x.size()), bins, [&](int64_t offset, int64_t n, int64_t base,
                                                                     int64_t span) {
    count_kernel<<<static_cast<unsigned>(dk::blocks_for(n)), dk::kBlockThreads>>>(dx.get() + offset, n, bin, base,
                                                                                  span, dc.get());
    cuda_check(cudaGetLastError(), "histogram kernel");
  });
  std::vector<uint64_t> host(static_cast<size_t>(bins));
  dc.download(host.data());
  for (size_t i = 0; i < host.size(); ++i) counts[i] += host[i];
}

void histogram_add(std::span<const float> x, const GridWindow& grid, std::span<uint64_t> counts, int /*threads*/) {
  count(x, dk::grid_bin(grid), grid.bins, counts.data());
}

void histc_add(std::span<const float> x, float lo, float hi, std::span<double> hist, int /*threads*/) {
  dk::histc_add_counted([](auto&&... a) { count(a...); }, x, lo, hi, hist);
}

void channel_minmax(std::span<const float> x, int64_t outer, int64_t channels, int64_t inner, std::span<float> mins,
                    std::span<float> maxs, int /*threads*/) {
  if (channels == 0) return;
  qtool::device::bind_selected_device();
  const DeviceBuffer<float> dx(x);
  DeviceBuffer<float> dmin(mins.size()), dmax(maxs.size());
  dmin.upload(mins.data());
  dmax.upload(maxs.data());
  channel_kernel<<<static_cast<unsigned>(channels), dk::kBlockThreads>>>(dx.get(), outer, channels, inner, dmin.get(),
                                                                         dmax.get());
  cuda_check(cudaGetLastError(), "channel min/max kernel");
  dmin.download(mins.data());
  dmax.download(maxs.data());
}

}  // namespace

ObserverBackend cuda_observer_backend() {
  return {BackendKind::Cuda, "cuda", summarize, histogram_add, channel_minmax, histc_add};
}

}  // namespace qtool::calib
