// The "cuda-emulated" observer backend: the CUDA kernels' per-thread code (calib/kernels_device.h) run on the host
// through the launch-grid emulation (device/emulate.h), with the same grid, block and shared-memory sizes and the
// same host-side steps as kernels_cuda.cu. Tests compare it with the CPU backend bit for bit; it is how the device
// logic is checked on machines without a GPU. Single-threaded and slow: not for real calibration.
#include <vector>

#include "calib/kernels.h"
#include "calib/kernels_device.h"
#include "device/emulate.h"

namespace qtool::calib {
namespace {

namespace dk = device_kernels;
using qtool::device::emulate_launch;
using qtool::device::ThreadCoord;

BatchSummary summarize(std::span<const float> x, int /*threads*/) {
  const auto n = static_cast<int64_t>(x.size());
  const int64_t blocks = dk::blocks_for(n);
  std::vector<dk::SummaryPartial> partials(static_cast<size_t>(blocks));
  emulate_launch<dk::SummaryPartial>(
      blocks, dk::kBlockThreads, dk::kBlockThreads,
      [&](ThreadCoord t, std::span<dk::SummaryPartial> sh) { dk::summarize_fold(t, x.data(), n, sh.data()); },
      [&](ThreadCoord t, std::span<dk::SummaryPartial> sh) { dk::summarize_block(t, sh.data(), partials.data()); });
  return dk::summary_of(partials, n);
}

template <class Bin>
void count(std::span<const float> x, Bin bin, int64_t bins, uint64_t* counts) {
  dk::for_each_count_pass(static_cast<int64_t>(x.size()), bins, [&](int64_t offset, int64_t n, int64_t base,
                                                                     int64_t span) {
    const float* v = x.data() + offset;
    emulate_launch<uint32_t>(
        dk::blocks_for(n), dk::kBlockThreads, static_cast<size_t>(span),
        [&](ThreadCoord t, std::span<uint32_t> sh) { dk::bins_zero(t, span, sh.data()); },
        [&](ThreadCoord t, std::span<uint32_t> sh) { dk::bins_count(t, v, n, bin, base, span, sh.data()); },
        [&](ThreadCoord t, std::span<uint32_t> sh) { dk::bins_flush(t, base, span, sh.data(), counts); });
  });
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
  emulate_launch<dk::MinMax>(
      channels, dk::kBlockThreads, dk::kBlockThreads,
      [&](ThreadCoord t, std::span<dk::MinMax> sh) { dk::channel_fold(t, x.data(), outer, channels, inner, sh.data()); },
      [&](ThreadCoord t, std::span<dk::MinMax> sh) { dk::channel_update(t, sh.data(), mins.data(), maxs.data()); });
}

}  // namespace

ObserverBackend cuda_emulated_observer_backend() {
  return {BackendKind::CudaEmulated, "cuda-emulated", summarize, histogram_add, channel_minmax, histc_add};
}

}  // namespace qtool::calib
