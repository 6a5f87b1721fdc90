// The CUDA observer kernels' per-thread code (calib/kernels_device.h), run through the emulated launch grid
// ("cuda-emulated" backend), against the CPU backend: min/max equal, NaN/inf counts equal, histogram counts equal.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "calib/calibrator.h"
#include "calib/histogram_observer.h"
#include "calib/kernels_device.h"
#include "device/emulate.h"

using namespace qtool;
using namespace qtool::calib;

namespace {

const ObserverBackend& cpu() { return observer_backend(BackendKind::Cpu); }
const ObserverBackend& emulated() { return observer_backend(BackendKind::CudaEmulated); }

// Normal values around 0.2 with NaN, ±inf, -0 and +0 sprinkled in.
std::vector<float> values(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.2f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  if (n > 16) {
    v[3] = std::numeric_limits<float>::quiet_NaN();
    v[n / 2] = std::numeric_limits<float>::infinity();
    v[n - 2] = -std::numeric_limits<float>::infinity();
    v[5] = -0.0f;
    v[9] = 0.0f;
  }
  return v;
}

}  // namespace

TEST_CASE("emulated launch: phases are separated by a block barrier, shared memory is per block and not zeroed") {
  // Phase 1 writes shared[thread]; phase 2 reads a neighbour's slot (valid only after the barrier) and the sum of
  // all slots of its own block.
  const int64_t blocks = 3, threads = 4;
  std::vector<int64_t> out(static_cast<size_t>(blocks * threads), -1);
  device::emulate_launch<int64_t>(
      blocks, threads, threads, [](device::ThreadCoord t, std::span<int64_t> sh) { sh[t.thread] = t.first(); },
      [&](device::ThreadCoord t, std::span<int64_t> sh) {
        out[static_cast<size_t>(t.first())] = sh[(t.thread + 1) % t.block_threads];
      });
  CHECK(out == std::vector<int64_t>{1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8});
  uint32_t seen = 0;
  device::emulate_launch<uint32_t>(1, 1, 1, [&](device::ThreadCoord, std::span<uint32_t> sh) { seen = sh[0]; });
  CHECK(seen == 0xA5A5A5A5u);  // garbage, as on the device: kernels zero what they use
}

TEST_CASE("CUDA observer kernels (emulated launch grid) equal the CPU backend bit for bit") {
  // 17: fewer values than one block; 1000: a partial grid; 300001: more than kMaxBlocks * kBlockThreads values,
  // so threads take several grid-stride steps.
  for (const size_t n : {size_t{17}, size_t{1000}, size_t{300001}}) {
    INFO("n " << n);
    const std::vector<float> x = values(n, 3 + static_cast<uint32_t>(n), 2.5f);
    const BatchSummary a = cpu().summarize(x, 2), b = emulated().summarize(x, 1);
    CHECK(a.count == b.count);
    CHECK(a.nan_count == b.nan_count);
    CHECK(a.inf_count == b.inf_count);
    CHECK(a.min == b.min);
    CHECK(a.max == b.max);
    CHECK(std::signbit(a.min) == std::signbit(b.min));

    // The window a histogram observer picks, one that holds part of the values, and one wider than the shared
    // counters (several counting passes over bins).
    const int e = histogram_exponent(a.min, a.max, kDefaultHistogramBins);
    const GridWindow fitted{e, static_cast<int64_t>(std::floor(std::ldexp(double(a.min), -e))), kDefaultHistogramBins};
    const GridWindow wide{-14, static_cast<int64_t>(std::floor(std::ldexp(double(a.min), 14))),
                          3 * device_kernels::kSharedBins + 5};
    for (const GridWindow& g : {fitted, GridWindow{-6, 10, 100}, wide}) {
      INFO("window e " << g.exponent << " first " << g.first << " bins " << g.bins);
      std::vector<uint64_t> ca(static_cast<size_t>(g.bins), 0), cb = ca;
      cpu().histogram_add(x, g, ca, 2);
      emulated().histogram_add(x, g, cb, 1);
      CHECK(ca == cb);
    }

    std::vector<double> ha(2048, 1.0), hb = ha;  // accumulated onto existing counts
    cpu().histc_add(x, -2.0f, 3.0f, ha, 2);
    emulated().histc_add(x, -2.0f, 3.0f, hb, 1);
    CHECK(ha == hb);

    const int64_t outer = 3, channels = 7, inner = static_cast<int64_t>(n) / 21;
    const std::span<const float> xs(x.data(), static_cast<size_t>(outer * channels * inner));
    std::vector<float> mina(7, INFINITY), maxa(7, -INFINITY);
    mina[0] = -100.0f;  // running values from an earlier batch win where they should
    std::vector<float> minb = mina, maxb = maxa;
    cpu().channel_minmax(xs, outer, channels, inner, mina, maxa, 2);
    emulated().channel_minmax(xs, outer, channels, inner, minb, maxb, 1);
    CHECK(mina == minb);
    CHECK(maxa == maxb);
  }
}

TEST_CASE("calibration through the emulated CUDA observers equals the CPU's table") {
  auto table = [](const ObserverBackend& backend) {
    CalibratorOptions opt;
    opt.exec = {&backend, 1};
    Calibrator cal(opt);
    for (uint32_t s = 0; s < 4; ++s) {
      // The spread grows batch after batch: the histogram window coarsens on the way.
      std::vector<float> v = values(2 * 8 * 40, 50 + s, 0.5f * float(s + 1));
      cal.observe("x", Tensor::from_vector<float>({2, 8, 40}, v));
    }
    return cal.finish();
  };
  const CalibrationTable a = table(cpu()), b = table(emulated());
  const TensorCalibration &ta = a.at("x"), &tb = b.at("x");
  CHECK(ta.count == tb.count);
  CHECK(ta.nan_count == tb.nan_count);
  CHECK(ta.inf_count == tb.inf_count);
  CHECK(ta.histogram.lo == tb.histogram.lo);
  CHECK(ta.histogram.width == tb.histogram.width);
  CHECK(ta.histogram.counts == tb.histogram.counts);
  CHECK(ta.histogram.counts.size() > 100);
  CHECK(ta.ranges == tb.ranges);
}
