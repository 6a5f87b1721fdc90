#include "core/float_formats.h"

#include <bit>
#include <cmath>
#include <limits>

namespace qtool {
namespace {

// A binary floating-point format with 1 sign bit, `ebits` exponent bits and `mbits` mantissa bits.
struct Format {
  int ebits;
  int mbits;
  int bias;
  bool has_inf;       // IEEE-like: all-ones exponent is inf (mantissa 0) or NaN
  bool fnuz;          // "unsigned zero": 0x80 is the only NaN, no -0, no inf
  uint32_t nan_code;  // NaN code without the sign (FNUZ: the full code 0x80)
  uint32_t max_code;  // largest finite magnitude, without the sign
  uint32_t inf_code;  // inf without the sign (has_inf only)
  double max_finite;
};

constexpr Format kF16{5, 10, 15, true, false, 0x7E00, 0x7BFF, 0x7C00, 65504.0};
constexpr Format kE4M3FN{4, 3, 7, false, false, 0x7F, 0x7E, 0, 448.0};
constexpr Format kE4M3FNUZ{4, 3, 8, false, true, 0x80, 0x7F, 0, 240.0};
constexpr Format kE5M2{5, 2, 15, true, false, 0x7F, 0x7B, 0x7C, 57344.0};
constexpr Format kE5M2FNUZ{5, 2, 16, false, true, 0x80, 0x7F, 0, 57344.0};

constexpr int total_bits(const Format& f) { return 1 + f.ebits + f.mbits; }

// Exact decode of a code of format f.
float decode(const Format& f, uint32_t code) {
  const int nbits = total_bits(f);
  const uint32_t sign = (code >> (nbits - 1)) & 1u;
  const uint32_t mag = code & ((1u << (nbits - 1)) - 1u);
  const uint32_t e = mag >> f.mbits;
  const uint32_t m = mag & ((1u << f.mbits) - 1u);
  const uint32_t emax_field = (1u << f.ebits) - 1u;
  const float s = sign ? -1.0f : 1.0f;
  if (f.fnuz) {
    if (code == 0x80u) return std::numeric_limits<float>::quiet_NaN();
  } else if (f.has_inf) {
    if (e == emax_field)
      return m == 0 ? s * std::numeric_limits<float>::infinity()
                    : std::copysign(std::numeric_limits<float>::quiet_NaN(), s);
  } else if (mag == f.nan_code) {  // E4M3FN: S.1111.111
    return std::copysign(std::numeric_limits<float>::quiet_NaN(), s);
  }
  double v;
  if (e == 0)
    v = std::ldexp(static_cast<double>(m), 1 - f.bias - f.mbits);
  else
    v = std::ldexp(static_cast<double>(m | (1u << f.mbits)), static_cast<int>(e) - f.bias - f.mbits);
  return static_cast<float>(sign ? -v : v);
}

// Round-to-nearest-even encode of x into format f (see the contract in float_formats.h), on the float32 bits:
// normal results round the mantissa at bit 23 - mbits and rebias the exponent (a carry moves into the exponent);
// subnormal results are |x| in units of the smallest subnormal, rounded (an exact power-of-two scaling).
inline uint32_t encode(const Format& f, float x, bool saturate) {
  const int nbits = total_bits(f);
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (bits >> 31) << (nbits - 1);
  const uint32_t a = bits & 0x7FFFFFFFu;
  auto overflow = [&]() -> uint32_t {
    if (saturate) return sign | f.max_code;
    if (f.fnuz) return 0x80u;
    return sign | (f.has_inf ? f.inf_code : f.nan_code);
  };
  if (a > 0x7F800000u) return f.fnuz ? 0x80u : (sign | f.nan_code);  // NaN
  if (a == 0x7F800000u) return overflow();                            // inf
  const uint32_t min_normal_bits = static_cast<uint32_t>(127 + 1 - f.bias) << 23;
  uint32_t code;
  if (a >= min_normal_bits) {
    const int shift = 23 - f.mbits;
    const uint32_t rounded = a + ((1u << (shift - 1)) - 1u) + ((a >> shift) & 1u);
    code = (rounded >> shift) - (static_cast<uint32_t>(127 - f.bias) << f.mbits);
    if (code > f.max_code) return overflow();
  } else {
    // |x| / 2^(1 - bias - mbits) < 2^mbits: exact, and the magic constant rounds it half to even.
    constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
    const float unit_inv = std::bit_cast<float>(static_cast<uint32_t>(127 + f.bias - 1 + f.mbits) << 23);
    const float units = std::bit_cast<float>(a) * unit_inv;
    code = static_cast<uint32_t>((units + kMagic) - kMagic);
  }
  if (code == 0) return f.fnuz ? 0u : sign;
  return sign | code;
}

}  // namespace

float float16_to_float(uint16_t bits) { return decode(kF16, bits); }
float bfloat16_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

uint16_t float_to_float16(float v) { return static_cast<uint16_t>(encode(kF16, v, false)); }

uint16_t float_to_bfloat16(float v) {
  const uint32_t b = std::bit_cast<uint32_t>(v);
  if (std::isnan(v)) return static_cast<uint16_t>((b >> 16) & 0x8000u) | 0x7FC0u;
  // Round to nearest even on the low 16 bits; overflow carries into the exponent and gives inf.
  const uint32_t rounded = b + 0x7FFFu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

float float8e4m3fn_to_float(uint8_t bits) { return decode(kE4M3FN, bits); }
float float8e4m3fnuz_to_float(uint8_t bits) { return decode(kE4M3FNUZ, bits); }
float float8e5m2_to_float(uint8_t bits) { return decode(kE5M2, bits); }
float float8e5m2fnuz_to_float(uint8_t bits) { return decode(kE5M2FNUZ, bits); }

// Without saturation, ONNX's reference implementation (onnx/numpy_helper.py) and ONNX Runtime map
// 480 <= |v| < 496 to +-448 rather than NaN: the truncated code would be the NaN code S.1111.111, which they
// replace by S.1111.110 before rounding. Kept for bit-exactness with both; everything else is plain RNE.
uint8_t float_to_float8e4m3fn(float v, bool saturate) {
  if (!saturate && std::fabs(v) >= 480.0f && std::fabs(v) < 496.0f) return std::signbit(v) ? 0xFE : 0x7E;
  return static_cast<uint8_t>(encode(kE4M3FN, v, saturate));
}
uint8_t float_to_float8e4m3fnuz(float v, bool saturate) { return static_cast<uint8_t>(encode(kE4M3FNUZ, v, saturate)); }
// Without saturation, ONNX's reference implementation and ONNX Runtime give NaN (not inf) when a finite value
// below 2^16 rounds past 57344 (61440 <= |v| < 65536); values from 2^16 up and inf give inf.
uint8_t float_to_float8e5m2(float v, bool saturate) {
  if (!saturate && std::fabs(v) >= 61440.0f && std::fabs(v) < 65536.0f) return std::signbit(v) ? 0xFF : 0x7F;
  return static_cast<uint8_t>(encode(kE5M2, v, saturate));
}
uint8_t float_to_float8e5m2fnuz(float v, bool saturate) { return static_cast<uint8_t>(encode(kE5M2FNUZ, v, saturate)); }

}  // namespace qtool
