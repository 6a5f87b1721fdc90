// The one table of element types. Every fact about a dtype (ONNX enum, name, bits, signedness,
// integer range, packing) lives in kDTypeTable; code asks the table instead of switching on dtypes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace qtool {

// Values are ONNX TensorProto.DataType numbers, so a proto's data_type converts by cast.
enum class DType : int32_t {
  Undefined = 0,
  Float32 = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Float64 = 11,
  UInt32 = 12,
  UInt64 = 13,
  BFloat16 = 16,
  Float8E4M3FN = 17,
  Float8E4M3FNUZ = 18,
  Float8E5M2 = 19,
  Float8E5M2FNUZ = 20,
  UInt4 = 21,
  Int4 = 22,
};

enum class DTypeClass : uint8_t { None, Float, Integer, Bool, String };

struct DTypeInfo {
  DType dtype;
  std::string_view name;       // ONNX spelling, lower case: "float", "int8", "float8e4m3fn"
  std::string_view short_name; // torch/numpy-like: "f32", "i8", "fp8e4m3"
  DTypeClass cls;
  int bits;                    // bits per element (4 for int4/uint4)
  bool is_signed;
  int64_t qmin;                // integer types: representable range (0,0 otherwise)
  int64_t qmax;
  int elems_per_byte;          // 2 for 4-bit types (low nibble first, as ONNX packs them), else 1
  std::string_view numpy_descr;  // NumPy dtype.str, e.g. "<f4"; empty if NumPy has no such type
  double float_max;              // float types: largest finite value (448 for E4M3FN, 57344 for E5M2); else 0
  // Element conversions (nullptr for undefined/string). load: element i of a buffer as float (exact except
  // for 32/64-bit integers beyond 2^24 and float64). store: v into element i; floats round to nearest even
  // (`saturate` applies to FP8, see core/float_formats.h); integers round half to even, saturate to
  // [qmin, qmax], NaN -> 0. 4-bit types address nibbles (low nibble = even element).
  float (*load)(const std::byte* base, int64_t i);
  void (*store)(std::byte* base, int64_t i, float v, bool saturate);
};

// The table, indexed by position; use dtype_info() to look up by DType.
const DTypeInfo& dtype_info(DType t);
// nullptr when the ONNX enum number is not a known dtype.
const DTypeInfo* dtype_info_or_null(int32_t onnx_enum);
// Parses a name in either spelling ("int8", "i8", "float8e4m3fn", "fp8e4m3", "f32"...).
std::optional<DType> dtype_from_name(std::string_view name);
std::string_view dtype_name(DType t);
// Throws for an ONNX data type number without a row in the table, naming `what` (a tensor, an input, an
// attribute): UnsupportedError for the ONNX types qtool does not hold (complex64/128, float4e2m1 and float8e8m0 of
// opsets 23/24, uint2/int2 of opset 25), BadInputError ("the model is corrupt") for numbers ONNX does not define.
[[noreturn]] void throw_unknown_dtype(int32_t onnx_enum, const std::string& what);

inline bool is_float(DType t) { return dtype_info(t).cls == DTypeClass::Float; }
inline bool is_integer(DType t) { return dtype_info(t).cls == DTypeClass::Integer; }
inline bool is_packed4(DType t) { return dtype_info(t).elems_per_byte == 2; }
// Element i of a packed 4-bit tensor (two per byte, low nibble first, as ONNX packs them), sign-extended if signed.
inline int nibble_at(const std::byte* b, int64_t i, bool is_signed) {
  const int nib = (std::to_integer<int>(b[i >> 1]) >> ((i & 1) * 4)) & 0xF;
  return is_signed && nib >= 8 ? nib - 16 : nib;
}
inline bool is_float8(DType t) { return is_float(t) && dtype_info(t).bits == 8; }

// Bytes needed to hold `count` elements (rounds up for 4-bit packing). Not valid for String.
size_t storage_bytes(DType t, int64_t count);

// C++ element types used for typed access to tensor storage.
struct Float16 { uint16_t bits; };
struct BFloat16 { uint16_t bits; };
struct Float8E4M3FN { uint8_t bits; };
struct Float8E4M3FNUZ { uint8_t bits; };
struct Float8E5M2 { uint8_t bits; };
struct Float8E5M2FNUZ { uint8_t bits; };
static_assert(sizeof(Float16) == 2 && sizeof(BFloat16) == 2 && sizeof(Float8E4M3FN) == 1);

template <class T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::Float32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::Float64; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::Int8; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct DTypeOf<int16_t> { static constexpr DType value = DType::Int16; };
template <> struct DTypeOf<uint16_t> { static constexpr DType value = DType::UInt16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct DTypeOf<uint32_t> { static constexpr DType value = DType::UInt32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct DTypeOf<uint64_t> { static constexpr DType value = DType::UInt64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::Bool; };
template <> struct DTypeOf<Float16> { static constexpr DType value = DType::Float16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct DTypeOf<Float8E4M3FN> { static constexpr DType value = DType::Float8E4M3FN; };
template <> struct DTypeOf<Float8E4M3FNUZ> { static constexpr DType value = DType::Float8E4M3FNUZ; };
template <> struct DTypeOf<Float8E5M2> { static constexpr DType value = DType::Float8E5M2; };
template <> struct DTypeOf<Float8E5M2FNUZ> { static constexpr DType value = DType::Float8E5M2FNUZ; };
template <class T> inline constexpr DType dtype_of_v = DTypeOf<T>::value;

}  // namespace qtool
