// sgemm_direct (runtime/kernels/gemm_direct.h) against single-threaded OpenBLAS on given shapes, one thread: the
// measurement behind use_sgemm_direct's rule (docs/interpreter.md, "Transformer models, third pass").
//
// usage: bench_gemm [MxNxK ...]     (default: the transformer and Conv-tile shapes of that table)
// Prints per shape the median of 7 timed batches (each about 2e7 multiply-adds) for both, multiply-adds per ns, the
// largest difference between the two results, and whether sgemm takes the direct kernel for that shape.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/omp_wait.h"
#include "runtime/kernels/blas.h"
#include "runtime/kernels/gemm_direct.h"

namespace {

template <class F>
double median_us(F&& f, int iters) {
  std::vector<double> t;
  for (int r = 0; r < 7; ++r) {
    const auto s = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) f();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s).count() / iters);
  }
  std::sort(t.begin(), t.end());
  return t[3];
}

}  // namespace

int main(int argc, char** argv) {
  qtool::core::adopt_thread_environment(argv);
  namespace c = qtool::runtime::kernels::compute;
  c::ensure_blas_single_threaded();
  std::vector<std::string> shapes(argv + 1, argv + argc);
  if (shapes.empty())
    shapes = {"256x64x64",  "256x172x64", "256x64x172",  "256x512x64",   "1088x256x64", "1088x64x256",
              "128x128x16", "128x16x128", "12544x32x27", "1024x1024x64", "256x1024x512"};
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::printf("%-14s %10s %8s %10s %8s %10s %8s %10s %s\n", "MxNxK", "openblas_us", "mac/ns", "direct_us", "mac/ns",
              "packed_us", "mac/ns", "max_diff", "sgemm takes");
  for (const std::string& s : shapes) {
    long long M = 0, N = 0, K = 0;
    if (std::sscanf(s.c_str(), "%lldx%lldx%lld", &M, &N, &K) != 3 || M <= 0 || N <= 0 || K <= 0) {
      std::fprintf(stderr, "bench_gemm: shape '%s' is not MxNxK with positive sizes (e.g. 256x64x64)\n", s.c_str());
      return 2;
    }
    std::vector<float> A(M * K), B(K * N), C1(M * N), C2(M * N);
    for (float& x : A) x = dist(gen);
    for (float& x : B) x = dist(gen);
    const int iters = std::max(1, static_cast<int>(2e7 / (double(M) * N * K)));
    const double blas = median_us(
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.f, A.data(), K, B.data(), N, 0.f, C1.data(),
                      N);
        },
        iters);
    const double direct =
        median_us([&] { c::sgemm_direct(M, N, K, 1.f, A.data(), K, B.data(), N, 0.f, C2.data(), N); }, iters);
    const c::PackedB packed(K, N, B.data(), N);
    std::vector<float> C3(M * N);
    const double direct_packed =
        median_us([&] { c::sgemm_direct_packed(M, 1.f, A.data(), K, packed, 0.f, C3.data(), N); }, iters);
    if (std::memcmp(C2.data(), C3.data(), C2.size() * sizeof(float)) != 0) {
      std::fprintf(stderr, "bench_gemm: %s: sgemm_direct_packed differs from sgemm_direct\n", s.c_str());
      return 1;
    }
    double diff = 0;
    for (size_t i = 0; i < C1.size(); ++i) diff = std::max(diff, double(std::fabs(C1[i] - C2[i])));
    const double macs = double(M) * N * K;
    std::printf("%-14s %10.1f %8.1f %10.1f %8.1f %10.1f %8.1f %10.2g %s\n", s.c_str(), blas, macs / blas / 1e3, direct,
                macs / direct / 1e3, direct_packed, macs / direct_packed / 1e3, diff, c::use_sgemm_direct(false, false, M, N, K) ? "direct" : "openblas");
  }
  return 0;
}
