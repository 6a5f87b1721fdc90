#include <catch2/catch.hpp>

#include "core/dtype.h"
#include "core/tensor.h"

using namespace qtool;

TEST_CASE("dtype table agrees with ONNX enum numbers and ranges") {
  CHECK(static_cast<int>(DType::Float8E4M3FN) == 17);
  CHECK(static_cast<int>(DType::Int4) == 22);
  CHECK(dtype_info(DType::Int8).qmin == -128);
  CHECK(dtype_info(DType::Int8).qmax == 127);
  CHECK(dtype_info(DType::UInt4).qmax == 15);
  CHECK(dtype_info(DType::Int4).qmin == -8);
  CHECK(storage_bytes(DType::Int4, 5) == 3);
  CHECK(storage_bytes(DType::Float16, 5) == 10);
  CHECK(dtype_from_name("fp8e4m3") == DType::Float8E4M3FN);
  CHECK(dtype_from_name("INT8") == DType::Int8);
  CHECK(dtype_from_name("float32") == DType::Float32);
  CHECK_FALSE(dtype_from_name("int7").has_value());
  CHECK(dtype_info_or_null(14) == nullptr);  // complex128: not supported
}

TEST_CASE("tensor storage, views and deep copies") {
  Tensor t = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(t.numel() == 6);
  CHECK(t.nbytes() == 24);
  CHECK(reinterpret_cast<uintptr_t>(t.raw()) % 64 == 0);
  Tensor v = t.reshaped({3, 2});
  CHECK(v.data<float>() == t.data<float>());  // shares storage
  Tensor c = t.clone();
  c.data<float>()[0] = 42;
  CHECK(t.data<float>()[0] == 1);
  CHECK(t.same_as(t.clone()));
  CHECK_FALSE(t.same_as(c));
  CHECK_THROWS_AS(t.data<int8_t>(), InternalError);
  CHECK_THROWS_AS(t.reshaped({4, 2}), BadInputError);
  CHECK_THROWS_AS(Tensor(DType::Float32, {-1, 2}), BadInputError);
  CHECK(Tensor::scalar<int64_t>(7).numel() == 1);
}

TEST_CASE("a declared shape is checked against the data before anything is allocated") {
  const std::vector<std::byte> four(4);
  // 2^40 float32 elements would need 4 TiB: must be a BadInputError, not bad_alloc.
  CHECK_THROWS_AS(Tensor::from_bytes(DType::Float32, {1 << 20, 1 << 20}, four), BadInputError);
  CHECK_THROWS_AS(Tensor(DType::Float32, {int64_t{1} << 62, 4}), BadInputError);
  CHECK(Tensor::from_bytes(DType::Float32, {1}, four).numel() == 1);
}
