// The OpenBLAS qtool runs on: no worker threads of its own in the process (core/omp_wait.h re-executes the program
// with OPENBLAS_NUM_THREADS=1 when it is unset; test_main.cc does as the CLI does), and products called from several
// threads at once, as the kernels' parallel loops call them, give each caller the bits it gets alone.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernel_harness.h"
#include "runtime/kernels/blas.h"
#include "runtime/kernels/gemm_direct.h"

using namespace qtool;
using namespace qtool::test;
using namespace qtool::runtime::kernels::compute;

// OpenBLAS's count of threads it has started, the caller included (pthread build; internal but exported).
extern "C" [[gnu::weak]] int blas_num_threads;
// 0 serial build, 1 pthread build, 2 OpenMP build.
extern "C" int openblas_get_parallel(void);

TEST_CASE("the program runs OpenBLAS without worker threads (OPENBLAS_NUM_THREADS=1 before it loaded)") {
  if (sysconf(_SC_NPROCESSORS_ONLN) <= 1) return;  // OpenBLAS starts no worker on one core
  const char* v = std::getenv("OPENBLAS_NUM_THREADS");
  REQUIRE(v != nullptr);  // set by adopt_thread_environment when the caller had not
  if (std::string(v) == "1" && openblas_get_parallel() == 1) {
    REQUIRE(&blas_num_threads != nullptr);
    CHECK(blas_num_threads == 1);
  }
}

TEST_CASE("OpenBLAS products on two threads at once equal each product run alone") {
  // Transposed B keeps sgemm off sgemm_direct: each call is cblas_sgemm on every block.
  struct Product {
    int64_t M, N, K;
    Tensor A, B, alone;
  };
  std::vector<Product> products;
  for (auto [M, N, K] : {std::array<int64_t, 3>{96, 80, 72}, std::array<int64_t, 3>{40, 200, 130}}) {
    REQUIRE_FALSE(use_sgemm_direct(false, true, M, N, K));
    Product p{M, N, K, random_tensor({M, K}, 31), random_tensor({N, K}, 32), random_tensor({M, N}, 33)};
    Tensor want = p.alone.clone();
    sgemm(false, true, M, N, K, 1.f, p.A.data<float>(), K, p.B.data<float>(), K, 0.f, p.alone.data<float>(), N, 1);
    sgemm_ref(false, true, M, N, K, 1.f, p.A.data<float>(), K, p.B.data<float>(), K, 0.f, want.data<float>(), N);
    REQUIRE(max_abs_diff(p.alone, want) < 1e-4);
    products.push_back(std::move(p));
  }
  // Debian's serial OpenBLAS (libopenblas0-serial) fails this about one run in ten.
  std::vector<int> mismatches(products.size(), 0);
  std::vector<std::thread> workers;
  for (size_t t = 0; t < products.size(); ++t)
    workers.emplace_back([&, t] {
      const Product& p = products[t];
      Tensor C = p.alone.clone();
      for (int round = 0; round < 200; ++round) {
        sgemm(false, true, p.M, p.N, p.K, 1.f, p.A.data<float>(), p.K, p.B.data<float>(), p.K, 0.f, C.data<float>(),
              p.N, 1);
        if (std::memcmp(C.data<float>(), p.alone.data<float>(), p.M * p.N * sizeof(float)) != 0) ++mismatches[t];
      }
    });
  for (auto& w : workers) w.join();
  for (int m : mismatches) CHECK(m == 0);
}
