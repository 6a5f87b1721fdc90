// compute::sgemm_direct (runtime/kernels/gemm_direct.h) against its reference twin sgemm_ref, through sgemm's
// dispatch: the attention and projection shapes it is meant for, the tails of its row strips (6 rows with 8-float
// vectors: 3-row groups, 32-, 16- and 8-column tiles; 12 rows with AVX-512's 16-float vectors: groups of up to 6,
// 32- and 16-column tiles; the zero-padded last columns), every alpha/beta form the MatMul epilogue uses, and
// 1 against 2 and 3 threads bit for bit (each thread takes a different cut of the rows).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "kernel_harness.h"
#include "runtime/kernels/blas.h"
#include "runtime/kernels/gemm_direct.h"

using namespace qtool;
using namespace qtool::test;
using namespace qtool::runtime::kernels::compute;

TEST_CASE("sgemm_direct matches sgemm_ref on transformer shapes and tile tails, the same with 1, 2 and 3 threads") {
  struct Case {
    int64_t M, N, K;
  };
  // [128,16]·[16,128] (llama2c QK^T per head), [17,16]·[16,17] and [17,17]·[17,16] (digits-vit), llama2c's
  // [256,64]·[64,172] (16-, 8- and padded 4-column tiles) and [256,172]·[172,64] projections, tails and odd M
  // (1-5 rows after the last strip).
  for (const Case c : {Case{128, 128, 16}, Case{17, 17, 16}, Case{17, 16, 17}, Case{5, 77, 3}, Case{1, 9, 1},
                       Case{33, 31, 12}, Case{256, 172, 64}, Case{256, 64, 172}, Case{40, 45, 33}, Case{4, 100, 20}, Case{23, 50, 9}}) {
    REQUIRE(use_sgemm_direct(false, false, c.M, c.N, c.K));
    const Tensor A = random_tensor({c.M, c.K}, 21), B = random_tensor({c.K, c.N}, 22);
    for (const auto& [alpha, beta] : {std::pair{1.f, 0.f}, std::pair{0.25f, 1.f}, std::pair{-0.5f, 2.f}}) {
      INFO("M " << c.M << " N " << c.N << " K " << c.K << " alpha " << alpha << " beta " << beta);
      const Tensor C0 = random_tensor({c.M, c.N}, 23);
      Tensor C1 = C0.clone(), C2 = C0.clone(), C3 = C0.clone(), want = C0.clone();
      sgemm(false, false, c.M, c.N, c.K, alpha, A.data<float>(), c.K, B.data<float>(), c.N, beta, C1.data<float>(),
            c.N, 1);
      sgemm(false, false, c.M, c.N, c.K, alpha, A.data<float>(), c.K, B.data<float>(), c.N, beta, C2.data<float>(),
            c.N, 2);
      sgemm(false, false, c.M, c.N, c.K, alpha, A.data<float>(), c.K, B.data<float>(), c.N, beta, C3.data<float>(),
            c.N, 3);
      sgemm_ref(false, false, c.M, c.N, c.K, alpha, A.data<float>(), c.K, B.data<float>(), c.N, beta,
                want.data<float>(), c.N);
      CHECK(max_abs_diff(C1, want) < 1e-5 * std::sqrt(static_cast<double>(c.K)));
      CHECK(std::memcmp(C1.data<float>(), C2.data<float>(), C1.nbytes()) == 0);
      CHECK(std::memcmp(C1.data<float>(), C3.data<float>(), C1.nbytes()) == 0);
    }
  }
  // Leading dimensions larger than the row (a block of a bigger matrix).
  const Tensor A = random_tensor({9, 20}, 31), B = random_tensor({8, 40}, 32);
  Tensor C(DType::Float32, {9, 50}), want(DType::Float32, {9, 50});
  std::memset(C.data<float>(), 0, C.nbytes());
  std::memset(want.data<float>(), 0, want.nbytes());
  sgemm_direct(9, 33, 8, 1.f, A.data<float>(), 20, B.data<float>(), 40, 0.f, C.data<float>(), 50);
  sgemm_ref(false, false, 9, 33, 8, 1.f, A.data<float>(), 20, B.data<float>(), 40, 0.f, want.data<float>(), 50);
  CHECK(max_abs_diff(C, want) < 1e-5);
  // Products with a large B and transposed operands stay on OpenBLAS.
  CHECK(use_sgemm_direct(false, false, 256, 64, 64));
  CHECK_FALSE(use_sgemm_direct(false, false, 1024, 1024, 64));
  CHECK_FALSE(use_sgemm_direct(false, false, 256, 512, 512));
  CHECK_FALSE(use_sgemm_direct(true, false, 17, 17, 16));
}

TEST_CASE("sgemm_direct_packed gives sgemm_direct's bits on every panel and strip tail, and starts from epilogue terms") {
  struct Case {
    int64_t M, N, K;
  };
  // Full 16-column panels, a last panel of 9-15 columns (two vectors) and of 1-8 (one), row tails of 1-5.
  for (const Case c : {Case{256, 64, 64}, Case{17, 17, 16}, Case{5, 77, 3}, Case{1, 9, 1}, Case{33, 31, 12},
                       Case{256, 172, 64}, Case{40, 45, 33}, Case{4, 100, 20}, Case{13, 24, 7}}) {
    INFO("M " << c.M << " N " << c.N << " K " << c.K);
    REQUIRE(use_packed_b(c.K, c.N));
    // B as a block of a wider matrix (ldb > N), packed once.
    const Tensor A = random_tensor({c.M, c.K}, 41), B = random_tensor({c.K, c.N + 3}, 42);
    const PackedB packed(c.K, c.N, B.data<float>(), c.N + 3);
    for (const auto& [alpha, beta] : {std::pair{1.f, 0.f}, std::pair{-0.5f, 1.f}}) {
      const Tensor C0 = random_tensor({c.M, c.N}, 43);
      Tensor direct = C0.clone(), got = C0.clone();
      sgemm_direct(c.M, c.N, c.K, alpha, A.data<float>(), c.K, B.data<float>(), c.N + 3, beta, direct.data<float>(),
                   c.N);
      sgemm_direct_packed(c.M, alpha, A.data<float>(), c.K, packed, beta, got.data<float>(), c.N);
      CHECK(std::memcmp(direct.data<float>(), got.data<float>(), got.nbytes()) == 0);
    }
    // Accumulators starting from an addend (rows N + 2 apart) and a bias: A·B + addend + bias, whatever the row cut.
    const Tensor addend = random_tensor({c.M, c.N + 2}, 44), bias = random_tensor({c.N}, 45);
    Tensor want(DType::Float32, {c.M, c.N}), got(DType::Float32, {c.M, c.N}), split(DType::Float32, {c.M, c.N});
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j)
        want.data<float>()[i * c.N + j] = addend.data<float>()[i * (c.N + 2) + j] + bias.data<float>()[j];
    sgemm_ref(false, false, c.M, c.N, c.K, 1.f, A.data<float>(), c.K, B.data<float>(), c.N + 3, 1.f,
              want.data<float>(), c.N);
    const Epilogue terms{addend.data<float>(), c.N + 2, bias.data<float>()};
    sgemm_direct_packed(c.M, 1.f, A.data<float>(), c.K, packed, 0.f, got.data<float>(), c.N, terms);
    CHECK(max_abs_diff(got, want) < 1e-5 * std::sqrt(static_cast<double>(c.K + 2)));
    const int64_t half = c.M / 2;  // two calls on a cut of the rows: the same bits
    sgemm_direct_packed(half, 1.f, A.data<float>(), c.K, packed, 0.f, split.data<float>(), c.N, terms);
    sgemm_direct_packed(c.M - half, 1.f, A.data<float>() + half * c.K, c.K, packed, 0.f,
                        split.data<float>() + half * c.N, c.N,
                        {addend.data<float>() + half * (c.N + 2), c.N + 2, bias.data<float>()});
    CHECK(std::memcmp(split.data<float>(), got.data<float>(), got.nbytes()) == 0);
  }
  CHECK_FALSE(use_packed_b(512, 512));
}

// One row against a B too large for the direct GEMM (a classifier at batch 1, a decoder step): sgemm's
// matrix-vector path reads B in place; it matches the reference, every alpha/beta form, the same bits at 1, 2 and 3
// threads (each a different cut of the columns), with a leading dimension larger than the row.
TEST_CASE("sgemm with one row and a large B matches sgemm_ref, the same with 1, 2 and 3 threads") {
  struct Case {
    int64_t N, K, ldb;
  };
  for (const Case c : {Case{1000, 1280, 1000}, Case{1500, 67, 1500}, Case{2100, 300, 2100}, Case{700, 257, 900}}) {
    REQUIRE_FALSE(use_sgemm_direct(false, false, 1, c.N, c.K));
    const Tensor A = random_tensor({1, c.K}, 41), B = random_tensor({c.K, c.ldb}, 42);
    for (const auto& [alpha, beta] : {std::pair{1.f, 0.f}, std::pair{0.25f, 1.f}, std::pair{-0.5f, 2.f}}) {
      INFO("N " << c.N << " K " << c.K << " ldb " << c.ldb << " alpha " << alpha << " beta " << beta);
      const Tensor C0 = random_tensor({1, c.N}, 43);
      Tensor want = C0.clone();
      sgemm_ref(false, false, 1, c.N, c.K, alpha, A.data<float>(), c.K, B.data<float>(), c.ldb, beta,
                want.data<float>(), c.N);
      Tensor first;
      for (int threads : {1, 2, 3}) {
        Tensor C = C0.clone();
        sgemm(false, false, 1, c.N, c.K, alpha, A.data<float>(), c.K, B.data<float>(), c.ldb, beta, C.data<float>(),
              c.N, threads);
        CHECK(max_abs_diff(C, want) < 1e-5 * std::sqrt(static_cast<double>(c.K)));
        if (threads == 1)
          first = C;
        else
          CHECK(std::memcmp(C.data<float>(), first.data<float>(), C.nbytes()) == 0);
      }
    }
  }
}
