// lib/core limits and checked arithmetic: the tensor allocator refuses sizes over --max-memory before taking
// memory (and counts live bytes), ScopedTensorLimit narrows it, checked_* catch int64 overflow and MIN / -1.
#include "core/limits.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>

#include "core/checked.h"
#include "core/tensor.h"

using namespace qtool;

namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// Restores the process-wide limits after a test changes them.
struct LimitsGuard {
  RuntimeLimits saved = runtime_limits();
  ~LimitsGuard() { set_runtime_limits(saved); }
};
}  // namespace

TEST_CASE("limits: checked arithmetic throws BadInputError on overflow, division by zero and MIN / -1") {
  CHECK(checked_add(kMax - 1, 1, "x") == kMax);
  CHECK_THROWS_WITH(checked_add(kMax, 1, "padded size"), Catch::Contains("padded size: integer overflow"));
  CHECK_THROWS_AS(checked_sub(kMin, 1, "x"), BadInputError);
  CHECK_THROWS_AS(checked_mul(int64_t{1} << 32, int64_t{1} << 31, "x"), BadInputError);
  CHECK(checked_mul(int64_t{1} << 31, int64_t{1} << 31, "x") == int64_t{1} << 62);
  CHECK_THROWS_WITH(checked_div(5, 0, "q"), Catch::Contains("q: division by zero"));
  CHECK_THROWS_AS(checked_div(kMin, -1, "q"), BadInputError);
  CHECK(checked_floor_div(-7, 2, "q") == -4);
  CHECK(checked_ceil_div(7, 2, "q") == 4);
  CHECK(checked_ceil_div(-7, 2, "q") == -3);
  CHECK(checked_to_int64(1e10, "n") == 10000000000);
  CHECK_THROWS_AS(checked_to_int64(1e19, "n"), BadInputError);
  CHECK_THROWS_AS(checked_to_int64(std::numeric_limits<double>::quiet_NaN(), "n"), BadInputError);
  CHECK_THROWS_AS(storage_bytes(DType::Float64, int64_t{1} << 61), BadInputError);
}

TEST_CASE("limits: tensors over --max-memory are refused before allocation, live bytes are counted") {
  LimitsGuard guard;
  RuntimeLimits l = runtime_limits();
  l.max_memory_bytes = int64_t{1} << 20;  // 1 MiB
  set_runtime_limits(l);
  const int64_t before = live_tensor_bytes();
  {
    Tensor a(DType::Float32, {1024, 128});  // 512 KiB
    CHECK(live_tensor_bytes() - before == 512 * 1024);
    CHECK_THROWS_WITH(Tensor(DType::Float32, {1024, 1024}),
                      Catch::Contains("float tensor of shape [1024,1024] needs 4.0 MiB") &&
                          Catch::Contains("--max-memory"));
    // Fits alone, not beside `a`: the total counts.
    CHECK_THROWS_WITH(Tensor(DType::Float32, {1024, 160}), Catch::Contains("while tensors already hold"));
    Tensor shared = a;  // copies share storage: no new bytes
    CHECK(live_tensor_bytes() - before == 512 * 1024);
  }
  CHECK(live_tensor_bytes() == before);
  // An absurd shape is refused without trying to allocate (65536 x 65536 int64 = 32 GiB).
  CHECK_THROWS_AS(Tensor(DType::Int64, {65536, 65536}), LimitError);
}

TEST_CASE("limits: ScopedTensorLimit narrows the largest tensor while alive") {
  {
    const ScopedTensorLimit small(4096, "for a constant-folding result");
    CHECK_NOTHROW(Tensor(DType::Float32, {1024}));
    CHECK_THROWS_WITH(Tensor(DType::Float32, {2048}), Catch::Contains("over the 4.0 KiB limit for a constant-folding"));
  }
  CHECK_NOTHROW(Tensor(DType::Float32, {2048}));
}

TEST_CASE("limits: Loop iterations and byte sizes") {
  LimitsGuard guard;
  RuntimeLimits l = runtime_limits();
  l.max_loop_iterations = 10;
  set_runtime_limits(l);
  CHECK_NOTHROW(check_loop_iteration(9));
  CHECK_THROWS_WITH(check_loop_iteration(10), Catch::Contains("--max-loop-iterations"));
  CHECK(default_runtime_limits().max_memory_bytes <= int64_t{16} << 30);
  CHECK(default_runtime_limits().max_loop_iterations == 1000000);
  CHECK(parse_byte_size("8G") == int64_t{8} << 30);
  CHECK(parse_byte_size("512MiB") == int64_t{512} << 20);
  CHECK(parse_byte_size("64k") == 65536);
  CHECK(parse_byte_size("100") == 100);
  CHECK_THROWS_AS(parse_byte_size("lots"), UsageError);
  CHECK_THROWS_AS(parse_byte_size("99999999999T"), UsageError);
  CHECK_THROWS_AS(parse_byte_size("0"), UsageError);
  CHECK(format_bytes(1536) == "1.5 KiB");
}
