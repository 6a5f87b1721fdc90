// Narrow floating-point formats <-> float32: float16, bfloat16 and the four ONNX FP8 formats.
//
// Contract (ONNX Cast / QuantizeLinear, opset 19+ "float 8 types" table; ONNX Runtime's float8.h):
// - float -> narrow rounds to nearest, ties to even, after the exact value (subnormals included).
// - A finite value whose rounded magnitude exceeds the format's largest finite value, and +-inf:
//     saturate = true  -> +-max finite (448 for E4M3FN, 57344 for E5M2, 240 for E4M3FNUZ, 57344 for E5M2FNUZ);
//     saturate = false -> +-inf where the format has inf (float16, bfloat16, E5M2), otherwise NaN.
//   Two exceptions follow ONNX's reference implementation and ONNX Runtime bit for bit (saturate = false):
//     E4M3FN: 480 <= |x| < 496 gives +-448 (not NaN); E5M2: 61440 <= |x| < 65536 gives NaN (not inf).
//   float16 and bfloat16 are IEEE-like and ignore `saturate` (overflow gives inf, as a C cast does).
// - NaN -> the format's NaN: sign | 0x7F for E4M3FN and E5M2, 0x80 for the FNUZ formats (which have no
//   -0 and no inf), sign | 0x7E00 for float16, sign | 0x7FC0 for bfloat16.
// - narrow -> float is exact; every NaN code decodes to a quiet float NaN with the code's sign.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace qtool {

float float16_to_float(uint16_t bits);
uint16_t float_to_float16(float v);
float bfloat16_to_float(uint16_t bits);
uint16_t float_to_bfloat16(float v);

float float8e4m3fn_to_float(uint8_t bits);
float float8e4m3fnuz_to_float(uint8_t bits);
float float8e5m2_to_float(uint8_t bits);
float float8e5m2fnuz_to_float(uint8_t bits);
uint8_t float_to_float8e4m3fn(float v, bool saturate = true);
uint8_t float_to_float8e4m3fnuz(float v, bool saturate = true);
uint8_t float_to_float8e5m2(float v, bool saturate = true);
uint8_t float_to_float8e5m2fnuz(float v, bool saturate = true);

// Largest finite value of a floating dtype (from the dtype table); 0 for non-float dtypes.
inline double float_max(DType t) { return dtype_info(t).float_max; }

}  // namespace qtool
