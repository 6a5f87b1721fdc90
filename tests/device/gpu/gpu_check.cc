// On a machine with a CUDA device: the "cuda" observer backend against the CPU backend, bit for bit (min/max,
// NaN/inf counts, histogram and histc counts, per-channel min/max), on the sizes the emulated test uses and on a
// large batch. Exit 77 (CTest's skip) when no device is present, 1 on a mismatch. Built only with QTOOL_CUDA.
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "calib/histogram_observer.h"
#include "calib/kernels.h"
#include "device/device.h"

using namespace qtool;
using namespace qtool::calib;

namespace {

int failures = 0;

void check(bool ok, const char* what, size_t n) {
  if (!ok) {
    std::printf("FAIL: %s (n = %zu)\n", what, n);
    ++failures;
  }
}

}  // namespace

int main() {
  const device::CudaProbe probe = device::probe_cuda();
  if (probe.count == 0) {
    std::printf("no CUDA device (%s): skipped\n", probe.why.c_str());
    return 77;
  }
  device::select_device({device::DeviceKind::Cuda, 0});
  const ObserverBackend &cpu = observer_backend(BackendKind::Cpu), &gpu = observer_backend(BackendKind::Cuda);
  for (const size_t n : {size_t{17}, size_t{1000}, size_t{300001}, size_t{1} << 26}) {
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::normal_distribution<float> nd(0.2f, 2.5f);
    std::vector<float> x(n);
    for (float& v : x) v = nd(rng);
    if (n > 16) {
      x[3] = std::numeric_limits<float>::quiet_NaN();
      x[n / 2] = std::numeric_limits<float>::infinity();
      x[5] = -0.0f;
    }
    const BatchSummary a = cpu.summarize(x, 4), b = gpu.summarize(x, 1);
    check(a.count == b.count && a.nan_count == b.nan_count && a.inf_count == b.inf_count, "summary counts", n);
    check(a.min == b.min && a.max == b.max, "summary min/max", n);
    const int e = histogram_exponent(a.min, a.max, kDefaultHistogramBins);
    const GridWindow g{e, static_cast<int64_t>(std::floor(std::ldexp(double(a.min), -e))), kDefaultHistogramBins};
    const GridWindow wide{-14, static_cast<int64_t>(std::floor(std::ldexp(double(a.min), 14))), 30000};
    for (const GridWindow& w : {g, wide}) {
      std::vector<uint64_t> ca(static_cast<size_t>(w.bins), 0), cb = ca;
      cpu.histogram_add(x, w, ca, 4);
      gpu.histogram_add(x, w, cb, 1);
      check(ca == cb, "histogram counts", n);
    }
    std::vector<double> ha(2048, 0), hb = ha;
    cpu.histc_add(x, -2.0f, 3.0f, ha, 4);
    gpu.histc_add(x, -2.0f, 3.0f, hb, 1);
    check(ha == hb, "histc counts", n);
    const int64_t outer = 3, channels = 7, inner = static_cast<int64_t>(n) / 21;
    const std::span<const float> xs(x.data(), static_cast<size_t>(outer * channels * inner));
    std::vector<float> mina(7, INFINITY), maxa(7, -INFINITY), minb = mina, maxb = maxa;
    cpu.channel_minmax(xs, outer, channels, inner, mina, maxa, 4);
    gpu.channel_minmax(xs, outer, channels, inner, minb, maxb, 1);
    check(mina == minb && maxa == maxb, "channel min/max", n);
  }
  std::printf(failures == 0 ? "ok: CUDA observers equal the CPU\n" : "%d mismatches\n", failures);
  return failures == 0 ? 0 : 1;
}
