// What one OpenMP parallel region costs the interpreter, under the wait policy the environment sets.
//
// usage: bench_omp_wake [--threads T] [--gap-us G,G] [--work N,N] [--iters I] [--batches B]
//
// Models the interpreter's pattern: a serial stretch of G microseconds on the calling thread (kernel
// dispatch, a small node), then one parallel region over N elements of an elementwise loop
// (y = x * a + b, ~1 multiply-add per element), again and again. For each (G, N) it times I iterations
// serial (everything on the calling thread) and with T threads, medians over B batches, and prints one
// JSON line per pair: microseconds per iteration for both and the difference (the region's net cost:
// positive = threads lose). N = 0 is an empty region, i.e. the pure fork/join (wake-up) cost.
// No adopt_thread_environment here: the caller sets OMP_WAIT_POLICY / GOMP_SPINCOUNT per run to compare
// them (scripts/bench_omp_wake.sh).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) v.push_back(std::stoll(x));
  return v;
}

// Spins the calling thread for `us` microseconds (the serial stretch between regions).
void serial_stretch(double us) {
  const auto end = Clock::now() + std::chrono::nanoseconds(static_cast<int64_t>(us * 1000));
  while (Clock::now() < end) {
  }
}

void axpb(const float* x, float* y, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) y[i] = x[i] * 1.0001f + 0.5f;
}

double run_batch(int threads, double gap_us, int64_t n, int iters, const float* x, float* y) {
  const auto t0 = Clock::now();
  for (int it = 0; it < iters; ++it) {
    serial_stretch(gap_us);
    if (threads <= 1) {
      axpb(x, y, 0, n);
      continue;
    }
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      axpb(x, y, n * t / nt, n * (t + 1) / nt);
    }
  }
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, iters = 2000, batches = 7;
  std::vector<int64_t> gaps = {5, 50}, works = {0, 1024, 4096, 16384, 65536, 262144};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--threads") threads = std::atoi(argv[i + 1]);
    else if (k == "--gap-us") gaps = parse_list(argv[i + 1]);
    else if (k == "--work") works = parse_list(argv[i + 1]);
    else if (k == "--iters") iters = std::atoi(argv[i + 1]);
    else if (k == "--batches") batches = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "bench_omp_wake: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  const int64_t max_n = *std::max_element(works.begin(), works.end());
  std::vector<float> x(static_cast<size_t>(std::max<int64_t>(max_n, 1)), 1.f), y(x.size());
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  run_batch(threads, 0, 0, 100, x.data(), y.data());  // start the team
  for (int64_t gap : gaps)
    for (int64_t n : works) {
      std::vector<double> ser, par;
      for (int b = 0; b < batches; ++b) {  // alternate so drifting load hits both alike
        ser.push_back(run_batch(1, static_cast<double>(gap), n, iters, x.data(), y.data()));
        par.push_back(run_batch(threads, static_cast<double>(gap), n, iters, x.data(), y.data()));
      }
      const double s = median(ser), p = median(par);
      std::printf(
          "{\"policy\": \"%s\", \"spincount\": \"%s\", \"threads\": %d, \"gap_us\": %lld, \"work\": %lld, "
          "\"serial_us\": %.2f, \"parallel_us\": %.2f, \"net_us\": %.2f}\n",
          policy ? policy : "unset", spin ? spin : "unset", threads, static_cast<long long>(gap),
          static_cast<long long>(n), s, p, p - s);
      std::fflush(stdout);
    }
  return 0;
}
