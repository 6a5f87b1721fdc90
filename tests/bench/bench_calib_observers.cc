// Throughput of the observer hot loops, in elements per second: the batch summary, the order-independent
// histogram update and PyTorch's histc, for the reference and the OpenMP backends (the latter once per vector
// instruction set the CPU has: baseline, avx2, avx512).
//   bench_calib_observers [--elements N] [--threads T] [--repeat R]
// Prints one JSON line per (kernel, backend, isa, threads).
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "calib/histogram_observer.h"
#include "calib/torch_histogram_observer.h"
#include "core/omp_wait.h"

using namespace qtool::calib;

namespace {

template <class F>
double best_seconds(int repeat, F&& f) {
  double best = 1e30;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  qtool::core::adopt_thread_environment(argv);
  int64_t n = 1 << 24;
  int threads = omp_get_max_threads(), repeat = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--elements"))
      n = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeat"))
      repeat = std::atoi(argv[i + 1]);
  }
  std::vector<float> x(static_cast<size_t>(n));
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.5f, 2.0f);
  for (float& v : x) v = nd(rng);
  const int64_t shape[] = {n};

  const CpuIsa widest = set_cpu_isa_limit(CpuIsa::Avx512);
  for (const ObserverBackend& backend : observer_backends()) {
    // The emulated CUDA kernels check logic, not speed; the CUDA backend has its own benchmark (scripts/bench_cuda.sh).
    if (backend.kind == BackendKind::CudaEmulated || backend.kind == BackendKind::Cuda) continue;
    for (int isa = 0; isa <= static_cast<int>(widest); ++isa) {
      if (backend.kind == BackendKind::Reference && isa > 0) break;
      set_cpu_isa_limit(static_cast<CpuIsa>(isa));
      for (int t : {1, threads}) {
        if (backend.kind == BackendKind::Reference && t != 1) continue;
        const ExecContext ctx{&backend, t};
        const double s_sum = best_seconds(repeat, [&] { (void)backend.summarize(x, t); });
        const Batch batch = Batch::make(x, shape, ctx);
        HistogramObserver h;
        h.observe(batch, ctx);  // sizes the window
        const double s_hist = best_seconds(repeat, [&] { h.observe(batch, ctx); });
        TorchHistogramObserver th;
        th.observe(batch, ctx);
        const double s_torch = best_seconds(repeat, [&] { th.observe(batch, ctx); });
        auto line = [&](const char* kernel, double s) {
          std::printf(
              "{\"kernel\": \"%s\", \"backend\": \"%s\", \"isa\": \"%s\", \"threads\": %d, \"elements\": %lld, "
              "\"seconds\": %.6f, \"elements_per_second\": %.4g}\n",
              kernel, std::string(backend.name).c_str(),
              backend.kind == BackendKind::Reference ? "-"
                                                     : std::string(cpu_isa_name(static_cast<CpuIsa>(isa))).c_str(),
              t, static_cast<long long>(n), s, double(n) / s);
        };
        line("summarize", s_sum);
        line("histogram_update", s_hist);
        line("torch_histogram_update", s_torch);
      }
    }
  }
  set_cpu_isa_limit(widest);
  return 0;
}
