// FP8 / float16 / bfloat16 conversions: every code against the ONNX spec formula (golden file from
// scripts/golden/gen_fp8_codes.py), float -> narrow against a brute-force nearest-value search, round trips.
#include "core/float_formats.h"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "test_paths.h"

using namespace qtool;

namespace {

struct Fp8 {
  DType dtype;
  const char* name;
  float (*decode)(uint8_t);
  uint8_t (*encode)(float, bool);
};
const Fp8 kFp8[] = {
    {DType::Float8E4M3FN, "float8e4m3fn", float8e4m3fn_to_float, float_to_float8e4m3fn},
    {DType::Float8E4M3FNUZ, "float8e4m3fnuz", float8e4m3fnuz_to_float, float_to_float8e4m3fnuz},
    {DType::Float8E5M2, "float8e5m2", float8e5m2_to_float, float_to_float8e5m2},
    {DType::Float8E5M2FNUZ, "float8e5m2fnuz", float8e5m2fnuz_to_float, float_to_float8e5m2fnuz},
};

// The spec's rounding, found by search: the nearest finite code value, ties to the even code (mantissa LSB 0).
float nearest_code_value(const Fp8& f, float x) {
  float best = 0;
  double best_err = INFINITY;
  int best_code = -1;
  for (int c = 0; c < 256; ++c) {
    const float v = f.decode(static_cast<uint8_t>(c));
    if (!std::isfinite(v)) continue;
    const double err = std::fabs(static_cast<double>(v) - static_cast<double>(x));
    if (err < best_err || (err == best_err && (c & 1) == 0 && (best_code & 1) == 1)) {
      best_err = err;
      best = v;
      best_code = c;
    }
  }
  return best;
}

}  // namespace

TEST_CASE("all 256 codes of each FP8 type decode to the ONNX spec's values") {
  std::ifstream in(test::source_dir() / "tests/numerics/golden/fp8_codes.json");
  REQUIRE(in.good());
  const auto golden = nlohmann::json::parse(in);
  for (const Fp8& f : kFp8) {
    INFO(f.name);
    const auto& values = golden.at(f.name);
    REQUIRE(values.size() == 256);
    int nans = 0;
    for (int c = 0; c < 256; ++c) {
      INFO("code " << c);
      const std::string want = values[static_cast<size_t>(c)];
      const float got = f.decode(static_cast<uint8_t>(c));
      // The dtype table's load pointer gives the same value.
      const std::byte b{static_cast<uint8_t>(c)};
      const float via_table = dtype_info(f.dtype).load(&b, 0);
      if (want == "nan") {
        CHECK(std::isnan(got));
        CHECK(std::isnan(via_table));
        ++nans;
      } else {
        const double w = std::stod(want);
        CHECK(got == static_cast<float>(w));
        CHECK(std::signbit(got) == std::signbit(w));
        CHECK(std::bit_cast<uint32_t>(via_table) == std::bit_cast<uint32_t>(got));
      }
    }
    CHECK(nans == (f.dtype == DType::Float8E4M3FN ? 2 : f.dtype == DType::Float8E5M2 ? 6 : 1));
    CHECK(f.decode(f.encode(1e9f, true)) == static_cast<float>(dtype_info(f.dtype).float_max));
  }
}

TEST_CASE("float -> FP8 rounds to the nearest code, ties to even, and round-trips every code") {
  std::mt19937 rng(42);
  for (const Fp8& f : kFp8) {
    INFO(f.name);
    const float fmax = static_cast<float>(dtype_info(f.dtype).float_max);
    // Every finite code survives decode -> encode, in both saturation modes.
    for (int c = 0; c < 256; ++c) {
      const float v = f.decode(static_cast<uint8_t>(c));
      if (std::isnan(v) || std::isinf(v)) continue;
      INFO("code " << c);
      const uint8_t want = (v == 0.0f && (f.dtype == DType::Float8E4M3FNUZ || f.dtype == DType::Float8E5M2FNUZ))
                               ? 0
                               : static_cast<uint8_t>(c);
      CHECK(f.encode(v, true) == want);
      CHECK(f.encode(v, false) == want);
    }
    // Random values inside the range (including subnormals and exact midpoints): nearest, ties to even.
    std::uniform_real_distribution<float> mag(-20.0f, std::log2(fmax));
    for (int i = 0; i < 4000; ++i) {
      float x = std::exp2(mag(rng)) * ((rng() & 1) ? -1.0f : 1.0f);
      if (i % 4 == 0) {  // midpoint between two adjacent codes
        const int c = static_cast<int>(rng() % 0x7E);
        const float a = f.decode(static_cast<uint8_t>(c)), b = f.decode(static_cast<uint8_t>(c + 1));
        if (std::isfinite(a) && std::isfinite(b)) x = (a + b) / 2;
      }
      INFO("x = " << x);
      const float want = nearest_code_value(f, x);
      CHECK(f.decode(f.encode(x, true)) == want);
      if (std::fabs(x) <= fmax) CHECK(f.decode(f.encode(x, false)) == want);
    }
  }
}

TEST_CASE("FP8 saturation, infinities and NaN follow the ONNX table") {
  const float inf = INFINITY, nan = NAN;
  // E4M3FN: no inf; saturate -> +-448, otherwise NaN (S.1111.111).
  CHECK(float_to_float8e4m3fn(inf, true) == 0x7E);
  CHECK(float_to_float8e4m3fn(-inf, true) == 0xFE);
  CHECK(float_to_float8e4m3fn(inf, false) == 0x7F);
  CHECK(float_to_float8e4m3fn(-inf, false) == 0xFF);
  CHECK(float_to_float8e4m3fn(1000.0f, true) == 0x7E);
  CHECK(float_to_float8e4m3fn(1000.0f, false) == 0x7F);
  CHECK(float_to_float8e4m3fn(464.0f, false) == 0x7E);  // tie between 448 and 480 -> even (448)
  CHECK(float_to_float8e4m3fn(470.0f, false) == 0x7F);  // rounds past 448
  CHECK(float_to_float8e4m3fn(488.0f, false) == 0x7E);  // ONNX reference / ORT quirk, see float_formats.h
  CHECK(float_to_float8e4m3fn(nan, true) == 0x7F);
  CHECK(float_to_float8e4m3fn(-nan, true) == 0xFF);
  CHECK(float_to_float8e4m3fn(-0.0f, true) == 0x80);
  CHECK(float_to_float8e4m3fn(std::ldexp(1.0f, -10), true) == 0x00);  // half the smallest subnormal: tie -> 0
  CHECK(float_to_float8e4m3fn(std::ldexp(1.5f, -10), true) == 0x01);
  // E5M2: has inf.
  CHECK(float_to_float8e5m2(inf, true) == 0x7B);
  CHECK(float_to_float8e5m2(inf, false) == 0x7C);
  CHECK(float_to_float8e5m2(-inf, false) == 0xFC);
  CHECK(float_to_float8e5m2(1e6f, false) == 0x7C);
  CHECK(float_to_float8e5m2(1e6f, true) == 0x7B);
  CHECK(float_to_float8e5m2(62000.0f, false) == 0x7F);  // ONNX reference / ORT: NaN below 2^16
  CHECK(float_to_float8e5m2(nan, false) == 0x7F);
  // FNUZ: one NaN (0x80), no -0.
  CHECK(float_to_float8e4m3fnuz(nan, true) == 0x80);
  CHECK(float_to_float8e4m3fnuz(-0.0f, true) == 0x00);
  CHECK(float_to_float8e4m3fnuz(inf, false) == 0x80);
  CHECK(float_to_float8e4m3fnuz(-inf, true) == 0xFF);
  CHECK(float_to_float8e5m2fnuz(-1e-30f, true) == 0x00);
  CHECK(float_to_float8e5m2fnuz(1e9f, false) == 0x80);
}

TEST_CASE("float16 and bfloat16 conversions are exact and round to nearest even") {
  // Every float16 code round-trips (NaNs stay NaN).
  for (uint32_t c = 0; c < 65536; ++c) {
    const float v = float16_to_float(static_cast<uint16_t>(c));
    if (std::isnan(v)) {
      CHECK(std::isnan(float16_to_float(float_to_float16(v))));
      continue;
    }
    if (float_to_float16(v) != c) FAIL("float16 code " << c << " does not round-trip");
    const float vb = bfloat16_to_float(static_cast<uint16_t>(c));
    if (!std::isnan(vb) && float_to_bfloat16(vb) != c) FAIL("bfloat16 code " << c << " does not round-trip");
  }
  CHECK(float16_to_float(0x3C00) == 1.0f);
  CHECK(float16_to_float(0x7BFF) == 65504.0f);
  CHECK(float16_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(float_to_float16(65520.0f) == 0x7C00);  // halfway to the next binade -> inf
  CHECK(float_to_float16(65519.0f) == 0x7BFF);
  CHECK(float_to_float16(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);  // tie -> even
  CHECK(float_to_float16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);
  CHECK(float_to_float16(std::ldexp(1.0f, -25)) == 0x0000);  // tie with the smallest subnormal -> even (0)
  CHECK(float_to_float16(-NAN) == 0xFE00);
  CHECK(float_to_bfloat16(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);  // tie -> even
  CHECK(float_to_bfloat16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);
  CHECK(float_to_bfloat16(NAN) == 0x7FC0);
  CHECK(float_to_bfloat16(INFINITY) == 0x7F80);
  CHECK(bfloat16_to_float(0x3F80) == 1.0f);
  CHECK(dtype_info(DType::BFloat16).float_max == static_cast<double>(bfloat16_to_float(0x7F7F)));
  CHECK(dtype_info(DType::Float16).float_max == 65504.0);
}

TEST_CASE("dtype table load/store: integers round half to even and saturate, 4-bit nibbles, NaN -> 0") {
  std::byte buf[16] = {};
  const DTypeInfo& i8 = dtype_info(DType::Int8);
  i8.store(buf, 0, 2.5f, false);
  i8.store(buf, 1, -3.5f, false);
  i8.store(buf, 2, 1e9f, false);
  i8.store(buf, 3, NAN, false);
  CHECK(i8.load(buf, 0) == 2.0f);
  CHECK(i8.load(buf, 1) == -4.0f);
  CHECK(i8.load(buf, 2) == 127.0f);
  CHECK(i8.load(buf, 3) == 0.0f);
  const DTypeInfo& u64 = dtype_info(DType::UInt64);
  u64.store(buf, 0, 1e30f, false);  // saturates without undefined behaviour
  CHECK(u64.load(buf, 0) > 1.8e19f);
  u64.store(buf, 1, -5.0f, false);
  CHECK(u64.load(buf, 1) == 0.0f);
  std::byte nib[2] = {};
  const DTypeInfo& i4 = dtype_info(DType::Int4);
  i4.store(nib, 0, -1.0f, false);
  i4.store(nib, 1, 9.0f, false);   // saturates to 7
  i4.store(nib, 2, -8.5f, false);  // -8 (half to even), then saturated range holds it
  CHECK(std::to_integer<int>(nib[0]) == 0x7F);
  CHECK(i4.load(nib, 0) == -1.0f);
  CHECK(i4.load(nib, 1) == 7.0f);
  CHECK(i4.load(nib, 2) == -8.0f);
  const DTypeInfo& u4 = dtype_info(DType::UInt4);
  u4.store(nib, 3, 15.4f, false);
  CHECK(u4.load(nib, 3) == 15.0f);
  CHECK(i4.load(nib, 2) == -8.0f);  // the neighbouring nibble is untouched
  const DTypeInfo& e4 = dtype_info(DType::Float8E4M3FN);
  e4.store(buf, 0, 1000.0f, true);
  e4.store(buf, 1, 1000.0f, false);
  CHECK(e4.load(buf, 0) == 448.0f);
  CHECK(std::isnan(e4.load(buf, 1)));
}
