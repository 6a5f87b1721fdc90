// Throughput of QuantizeLinear / DequantizeLinear (lib/numerics) on a large tensor, in elements per second.
// usage: bench_quant [--elements N] [--threads 1,2] [--repeat R]
// Prints one line per (operation, threads): the best of R runs. Not a test: see scripts/bench_quant.sh.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/omp_wait.h"
#include "numerics/qdq.h"

using namespace qtool;
using namespace qtool::numerics;

namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// Best wall time of `repeat` runs, and the process CPU time (all threads) of that run. On a shared machine the
// CPU time is the steadier figure: elements per CPU-second do not depend on other processes' load.
struct Timing {
  double wall = 1e30, cpu = 0;
};
Timing best_of(int repeat, const std::function<void()>& fn) {
  Timing best;
  for (int r = 0; r < repeat; ++r) {
    const double c0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (wall < best.wall) best = {wall, cpu_seconds() - c0};
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  qtool::core::adopt_thread_environment(argv);
  int64_t n = int64_t{64} << 20;
  std::vector<int> thread_counts{1, 2};
  int repeat = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--elements") {
      n = std::atoll(argv[i + 1]);
    } else if (k == "--repeat") {
      repeat = std::atoi(argv[i + 1]);
    } else if (k == "--threads") {
      thread_counts.clear();
      for (const char* p = argv[i + 1]; *p;) {
        thread_counts.push_back(std::atoi(p));
        while (*p && *p != ',') ++p;
        if (*p == ',') ++p;
      }
    } else {
      std::fprintf(stderr, "usage: bench_quant [--elements N] [--threads 1,2] [--repeat R]\n");
      return 1;
    }
  }
  const int64_t channels = 1024;
  Tensor x(DType::Float32, {channels, n / channels});
  {
    std::mt19937 rng(1);
    std::normal_distribution<float> d(0.0f, 3.0f);
    for (float& v : x.span<float>()) v = d(rng);
  }
  const Tensor s = Tensor::scalar<float>(0.05f);
  const Tensor zp8 = Tensor::scalar<int8_t>(3);
  const Tensor zpu8 = Tensor::scalar<uint8_t>(128);
  const Tensor zp_fp8 = Tensor::zeros(DType::Float8E4M3FN, {});
  std::vector<float> sc(static_cast<size_t>(channels), 0.05f);
  const Tensor s_axis = Tensor::from_vector<float>({channels}, sc);
  const Tensor zp_axis = Tensor::zeros(DType::Int8, {channels});
  const Tensor zp4 = Tensor::zeros(DType::Int4, {channels, n / channels / 128});
  const Tensor s_block = Tensor::from_vector<float>({channels, n / channels / 128},
                                                    std::vector<float>(static_cast<size_t>(zp4.numel()), 0.05f));

  struct Op {
    const char* name;
    std::function<Tensor(int)> run;
  };
  Tensor q8 = quantize_linear(x, s, &zp8, {});
  Tensor qfp8 = quantize_linear(x, s, &zp_fp8, {});
  const std::vector<Op> ops = {
      {"quantize int8 per-tensor", [&](int t) { return quantize_linear(x, s, &zp8, {}, t); }},
      {"quantize uint8 per-tensor", [&](int t) { return quantize_linear(x, s, &zpu8, {}, t); }},
      {"quantize int8 per-channel(axis 0)",
       [&](int t) { return quantize_linear(x, s_axis, &zp_axis, {.axis = 0}, t); }},
      {"quantize int4 blocked(128, axis 1)",
       [&](int t) { return quantize_linear(x, s_block, &zp4, {.axis = 1, .block_size = 128}, t); }},
      {"quantize fp8e4m3fn per-tensor", [&](int t) { return quantize_linear(x, s, &zp_fp8, {}, t); }},
      {"dequantize int8 per-tensor", [&](int t) { return dequantize_linear(q8, s, &zp8, {}, t); }},
      {"dequantize fp8e4m3fn per-tensor", [&](int t) { return dequantize_linear(qfp8, s, &zp_fp8, {}, t); }},
  };
  std::printf("bench_quant: %lld elements (float32 [%lld, %lld]), best of %d\n", static_cast<long long>(x.numel()),
              static_cast<long long>(channels), static_cast<long long>(n / channels), repeat);
  for (const Op& op : ops) {
    double base = 0;
    for (int t : thread_counts) {
      Tensor out;
      const Timing tm = best_of(repeat, [&] { out = op.run(t); });
      const double sec = tm.wall;
      if (base == 0) base = sec;
      std::printf("%-36s threads=%d  %8.1f ms  %7.3f Gelem/s  speedup x%.2f  (cpu %6.1f ms, %.3f Gelem/cpu-s)\n",
                  op.name, t, sec * 1e3, static_cast<double>(x.numel()) / sec / 1e9, base / sec, tm.cpu * 1e3,
                  static_cast<double>(x.numel()) / std::max(tm.cpu, 1e-6) / 1e9);
    }
  }
  return 0;
}
