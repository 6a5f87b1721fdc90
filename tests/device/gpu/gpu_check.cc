// On a machine with a CUDA device: the "cuda" observer backend against the CPU backend, bit for bit (min/max,
// NaN/inf counts, histogram and histc counts, per-channel min/max), on the sizes the emulated test uses and on a
// large batch; and the cuDNN Conv row against the CPU Conv within float tolerance, on the attribute combinations of
// tests/kernels/conv_cudnn_test.cc (pad step, SAME pads, groups, depthwise, dilations, 1-D, fused activations).
// Exit 77 (CTest's skip) when no device is present, 1 on a mismatch. Built only with QTOOL_CUDA.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "calib/histogram_observer.h"
#include "calib/kernels.h"
#include "device/device.h"
#include "kernel_harness.h"

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

// The GPU Conv row against the CPU row: |gpu - cpu| <= 1e-4 * (1 + max |cpu|) (cuDNN sums in another order).
void check_conv() {
  using test::attr_int;
  using test::attr_ints;
  using test::attr_str;
  using Kind = runtime::FusedActivation::Kind;
  struct Case {
    const char* what;
    Shape x, w;
    int64_t group;
    std::vector<int64_t> strides, pads;
    const char* auto_pad;
    runtime::FusedActivation act;
  };
  // clang-format off
  const Case cases[] = {
      {"3x3 pads 1, Relu", {2, 5, 9, 11}, {7, 5, 3, 3}, 1, {1, 1}, {1, 1, 1, 1}, nullptr, {Kind::Relu}},
      {"pads 0,0,1,1 stride 2 (pad step), Relu6", {1, 3, 224, 224}, {32, 3, 3, 3}, 1, {2, 2}, {0, 0, 1, 1}, nullptr,
       {Kind::Clip, 0.f, 6.f}},
      {"SAME_UPPER stride 2", {1, 3, 8, 10}, {5, 3, 3, 3}, 1, {2, 2}, {}, "SAME_UPPER", {Kind::HardSwish}},
      {"SAME_LOWER even kernel", {1, 2, 7, 6}, {3, 2, 2, 2}, 1, {1, 1}, {}, "SAME_LOWER", {Kind::Silu}},
      {"grouped", {1, 6, 8, 8}, {9, 2, 3, 3}, 3, {1, 1}, {1, 1, 1, 1}, nullptr, {}},
      {"depthwise stride 2", {2, 96, 56, 56}, {96, 1, 3, 3}, 96, {2, 2}, {1, 1, 1, 1}, nullptr,
       {Kind::HardSigmoid, 0.2f, 0.5f}},
      {"pointwise", {1, 64, 40, 40}, {128, 64, 1, 1}, 1, {1, 1}, {0, 0, 0, 0}, nullptr, {}},
      {"1-D", {2, 3, 20}, {4, 3, 5}, 1, {2}, {1, 2}, nullptr, {}},
  };
  // clang-format on
  for (const Case& c : cases) {
    test::KernelCall call;
    call.op = "Conv";
    call.opset = 11;
    call.attrs.values["group"] = attr_int(c.group);
    call.attrs.values["strides"] = attr_ints(c.strides);
    if (!c.pads.empty()) call.attrs.values["pads"] = attr_ints(c.pads);
    if (c.auto_pad) call.attrs.values["auto_pad"] = attr_str(c.auto_pad);
    call.inputs = {test::random_tensor(c.x, 1, -2.f, 2.f), test::random_tensor(c.w, 2),
                   test::random_tensor({c.w[0]}, 3)};
    call.constant = {false, true, true};
    call.activation = c.act;
    const Tensor cpu = test::run_kernel(call).at(0);
    call.device = device::DeviceKind::Cuda;
    const Tensor gpu = test::run_kernel(call).at(0);
    double peak = 0;
    for (float v : cpu.span<float>()) peak = std::max(peak, static_cast<double>(std::fabs(v)));
    const bool ok = test::max_abs_diff(gpu, cpu) <= 1e-4 * (1 + peak);
    if (!ok) std::printf("FAIL: Conv %s: max |gpu - cpu| = %g\n", c.what, test::max_abs_diff(gpu, cpu));
    failures += ok ? 0 : 1;
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
  check_conv();
  std::printf(failures == 0 ? "ok: CUDA observers equal the CPU, cuDNN Conv within float tolerance\n"
                            : "%d mismatches\n",
              failures);
  return failures == 0 ? 0 : 1;
}
