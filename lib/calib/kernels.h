// The hot loops of the observers, behind one table per backend.
//
// Observers never loop over tensor data themselves: they call an ObserverBackend. The list of
// backends is in calib/backends.cc (one entry each: "cpu" = OpenMP, "reference" = plain loops that
// tests compare the fast ones against, "cuda-emulated" = the CUDA kernels' per-thread code run on the host through
// an emulated launch grid, and in CUDA builds "cuda").
//
// Threading is owned by the caller: each kernel gets `threads` and uses at most that many.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "device/portable.h"

namespace qtool::calib {

// What one pass over a batch learns: element count, NaN and ±inf counts, and the min/max of the
// finite values (min > max when there is no finite value). A zero extreme is +0: which of -0 and +0 a chain of
// comparisons keeps depends on its order (threads, vector width), and the calibration file's bytes must not.
// -0 -> +0; every other value unchanged.
QTOOL_HD inline float unsigned_zero(float v) { return v == 0 ? 0.0f : v; }

struct BatchSummary {
  int64_t count = 0;
  int64_t nan_count = 0;
  int64_t inf_count = 0;
  float min = 0;
  float max = 0;
  bool has_finite() const { return count > nan_count + inf_count; }
};

// A window of the power-of-two histogram grid: bin i covers [(first + i)·2^exponent, (first + i + 1)·2^exponent).
struct GridWindow {
  int exponent = 0;
  int64_t first = 0;
  int64_t bins = 0;
};

enum class BackendKind : uint8_t { Cpu, Reference, CudaEmulated, Cuda };

// The x86 vector instruction sets the CPU backend's hand-written loops (batch summary, float bin indices) are
// written for; each computes exactly what the baseline loop computes. The widest the CPU has is used, unless
// lowered: tests lower it to check every path the machine can run.
enum class CpuIsa : uint8_t { Baseline, Avx2, Avx512 };
CpuIsa cpu_isa();                           // what the loops use now
CpuIsa set_cpu_isa_limit(CpuIsa max);       // use at most `max` (never more than the CPU has); returns cpu_isa()
std::string_view cpu_isa_name(CpuIsa isa);  // "baseline", "avx2", "avx512"
std::optional<CpuIsa> cpu_isa_from_name(std::string_view name);  // the inverse; nullopt for another name

struct ObserverBackend {
  BackendKind kind;
  std::string_view name;

  // Contract: count = x.size(); nan_count = #NaN; inf_count = #±inf; min/max over finite values only.
  BatchSummary (*summarize)(std::span<const float> x, int threads);

  // Contract: for every finite v in x, counts[floor(v·2^-exponent) - first] += 1. The caller sizes the
  // window so that every finite value falls inside it; values outside it (a caller bug) are skipped.
  // NaN and ±inf are skipped. The floor is exact: v·2^-e is computed in double.
  void (*histogram_add)(std::span<const float> x, const GridWindow& grid, std::span<uint64_t> counts, int threads);

  // Contract: x is [outer, channels, inner] in C order; for each channel c, mins[c] = min(mins[c], finite
  // values of channel c) and likewise maxs[c] (mins/maxs are running values, updated in place); zero is +0.
  void (*channel_minmax)(std::span<const float> x, int64_t outer, int64_t channels, int64_t inner,
                         std::span<float> mins, std::span<float> maxs, int threads);

  // torch.histc(x, bins, min=lo, max=hi) on CPU (PyTorch 1.13), accumulated into hist:
  // values outside [lo, hi] (and NaN) are ignored; bin = (int64)((v - lo) · bins / (hi - lo)) computed in
  // float, the last edge is inclusive (bin == bins -> bins - 1). Requires lo < hi.
  void (*histc_add)(std::span<const float> x, float lo, float hi, std::span<double> hist, int threads);
};

// The explicit list of backends (calib/backends.cc).
std::span<const ObserverBackend> observer_backends();
const ObserverBackend& observer_backend(BackendKind kind);

// Each backend's row, defined beside its kernels and listed in backends.cc.
ObserverBackend cpu_observer_backend();
ObserverBackend reference_observer_backend();
ObserverBackend cuda_emulated_observer_backend();  // kernels_emulated.cc
ObserverBackend cuda_observer_backend();           // kernels_cuda.cu (CUDA builds only)

}  // namespace qtool::calib
