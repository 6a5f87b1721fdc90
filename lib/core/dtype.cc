#include "core/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/float_formats.h"

namespace qtool {
namespace {

// Element access used by the table's load/store pointers.
template <class T>
float load_plain(const std::byte* b, int64_t i) {
  T v;
  std::memcpy(&v, b + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return static_cast<float>(v);
}
template <class T>
void store_float_plain(std::byte* b, int64_t i, float v, bool) {
  const T t = static_cast<T>(v);
  std::memcpy(b + i * static_cast<int64_t>(sizeof(T)), &t, sizeof(T));
}
// Integers: round half to even, saturate to the type's range, NaN -> 0.
template <class T>
void store_int(std::byte* b, int64_t i, float v, bool) {
  double d = std::isnan(v) ? 0.0 : std::nearbyint(static_cast<double>(v));
  // 64-bit maxima are not doubles; clamp to the largest double below them so the cast is defined.
  constexpr double hi = sizeof(T) < 8 ? static_cast<double>(std::numeric_limits<T>::max())
                                      : (std::is_signed_v<T> ? 9223372036854774784.0 : 18446744073709549568.0);
  d = std::clamp(d, static_cast<double>(std::numeric_limits<T>::min()), hi);
  const T t = static_cast<T>(d);
  std::memcpy(b + i * static_cast<int64_t>(sizeof(T)), &t, sizeof(T));
}
float load_bool(const std::byte* b, int64_t i) { return b[i] != std::byte{0} ? 1.0f : 0.0f; }
void store_bool(std::byte* b, int64_t i, float v, bool) { b[i] = std::byte{v != 0.0f}; }
template <class Bits, float (*Dec)(Bits)>
float load_bits(const std::byte* b, int64_t i) {
  Bits v;
  std::memcpy(&v, b + i * static_cast<int64_t>(sizeof(Bits)), sizeof(Bits));
  return Dec(v);
}
template <class Bits, Bits (*Enc)(float)>
void store_bits16(std::byte* b, int64_t i, float v, bool) {
  const Bits t = Enc(v);
  std::memcpy(b + i * static_cast<int64_t>(sizeof(Bits)), &t, sizeof(Bits));
}
template <uint8_t (*Enc)(float, bool)>
void store_fp8(std::byte* b, int64_t i, float v, bool saturate) {
  b[i] = std::byte{Enc(v, saturate)};
}
template <bool Signed>
float load_4bit(const std::byte* b, int64_t i) {
  return static_cast<float>(nibble_at(b, i, Signed));
}
template <bool Signed>
void store_4bit(std::byte* b, int64_t i, float v, bool) {
  double d = std::isnan(v) ? 0.0 : std::nearbyint(static_cast<double>(v));
  d = std::clamp(d, Signed ? -8.0 : 0.0, Signed ? 7.0 : 15.0);
  const int nib = static_cast<int>(d) & 0xF;
  const int shift = static_cast<int>(i & 1) * 4;
  const int old = std::to_integer<int>(b[i >> 1]);
  b[i >> 1] = static_cast<std::byte>((old & ~(0xF << shift)) | (nib << shift));
}

constexpr double kF32Max = 3.4028234663852886e38;

// clang-format off
constexpr std::array kDTypeTable = {
  //        dtype                  name             short       class               bits signed qmin     qmax        epb numpy  float_max  load / store
  DTypeInfo{DType::Undefined,      "undefined",     "?",        DTypeClass::None,     0, false, 0,       0,          1, "",    0, nullptr, nullptr},
  DTypeInfo{DType::Float32,        "float",         "f32",      DTypeClass::Float,   32, true,  0,       0,          1, "<f4", kF32Max, load_plain<float>, store_float_plain<float>},
  DTypeInfo{DType::UInt8,          "uint8",         "u8",       DTypeClass::Integer,  8, false, 0,       255,        1, "|u1", 0, load_plain<uint8_t>, store_int<uint8_t>},
  DTypeInfo{DType::Int8,           "int8",          "i8",       DTypeClass::Integer,  8, true,  -128,    127,        1, "|i1", 0, load_plain<int8_t>, store_int<int8_t>},
  DTypeInfo{DType::UInt16,         "uint16",        "u16",      DTypeClass::Integer, 16, false, 0,       65535,      1, "<u2", 0, load_plain<uint16_t>, store_int<uint16_t>},
  DTypeInfo{DType::Int16,          "int16",         "i16",      DTypeClass::Integer, 16, true,  -32768,  32767,      1, "<i2", 0, load_plain<int16_t>, store_int<int16_t>},
  DTypeInfo{DType::Int32,          "int32",         "i32",      DTypeClass::Integer, 32, true,  INT32_MIN, INT32_MAX, 1, "<i4", 0, load_plain<int32_t>, store_int<int32_t>},
  DTypeInfo{DType::Int64,          "int64",         "i64",      DTypeClass::Integer, 64, true,  INT64_MIN, INT64_MAX, 1, "<i8", 0, load_plain<int64_t>, store_int<int64_t>},
  DTypeInfo{DType::String,         "string",        "str",      DTypeClass::String,   0, false, 0,       0,          1, "",    0, nullptr, nullptr},
  DTypeInfo{DType::Bool,           "bool",          "bool",     DTypeClass::Bool,     8, false, 0,       1,          1, "|b1", 0, load_bool, store_bool},
  DTypeInfo{DType::Float16,        "float16",       "f16",      DTypeClass::Float,   16, true,  0,       0,          1, "<f2", 65504.0, load_bits<uint16_t, float16_to_float>, store_bits16<uint16_t, float_to_float16>},
  DTypeInfo{DType::Float64,        "double",        "f64",      DTypeClass::Float,   64, true,  0,       0,          1, "<f8", 1.7976931348623157e308, load_plain<double>, store_float_plain<double>},
  DTypeInfo{DType::UInt32,         "uint32",        "u32",      DTypeClass::Integer, 32, false, 0,       UINT32_MAX, 1, "<u4", 0, load_plain<uint32_t>, store_int<uint32_t>},
  DTypeInfo{DType::UInt64,         "uint64",        "u64",      DTypeClass::Integer, 64, false, 0,       INT64_MAX,  1, "<u8", 0, load_plain<uint64_t>, store_int<uint64_t>},
  DTypeInfo{DType::BFloat16,       "bfloat16",      "bf16",     DTypeClass::Float,   16, true,  0,       0,          1, "",    3.3895313892515355e38, load_bits<uint16_t, bfloat16_to_float>, store_bits16<uint16_t, float_to_bfloat16>},
  DTypeInfo{DType::Float8E4M3FN,   "float8e4m3fn",  "fp8e4m3",  DTypeClass::Float,    8, true,  0,       0,          1, "",    448.0, load_bits<uint8_t, float8e4m3fn_to_float>, store_fp8<float_to_float8e4m3fn>},
  DTypeInfo{DType::Float8E4M3FNUZ, "float8e4m3fnuz","fp8e4m3uz",DTypeClass::Float,    8, true,  0,       0,          1, "",    240.0, load_bits<uint8_t, float8e4m3fnuz_to_float>, store_fp8<float_to_float8e4m3fnuz>},
  DTypeInfo{DType::Float8E5M2,     "float8e5m2",    "fp8e5m2",  DTypeClass::Float,    8, true,  0,       0,          1, "",    57344.0, load_bits<uint8_t, float8e5m2_to_float>, store_fp8<float_to_float8e5m2>},
  DTypeInfo{DType::Float8E5M2FNUZ, "float8e5m2fnuz","fp8e5m2uz",DTypeClass::Float,    8, true,  0,       0,          1, "",    57344.0, load_bits<uint8_t, float8e5m2fnuz_to_float>, store_fp8<float_to_float8e5m2fnuz>},
  DTypeInfo{DType::UInt4,          "uint4",         "u4",       DTypeClass::Integer,  4, false, 0,       15,         2, "",    0, load_4bit<false>, store_4bit<false>},
  DTypeInfo{DType::Int4,           "int4",          "i4",       DTypeClass::Integer,  4, true,  -8,      7,          2, "",    0, load_4bit<true>, store_4bit<true>},
};
// clang-format on

constexpr const DTypeInfo* find(int32_t e) {
  for (const auto& d : kDTypeTable)
    if (static_cast<int32_t>(d.dtype) == e) return &d;
  return nullptr;
}
static_assert(find(17)->bits == 8 && find(22)->elems_per_byte == 2, "dtype table out of order");
static_assert(find(17)->float_max == 448.0 && find(19)->float_max == 57344.0 && find(18)->float_max == 240.0);

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const DTypeInfo* dtype_info_or_null(int32_t onnx_enum) { return find(onnx_enum); }

const DTypeInfo& dtype_info(DType t) {
  const DTypeInfo* d = find(static_cast<int32_t>(t));
  if (!d) throw InternalError("unknown dtype enum " + std::to_string(static_cast<int32_t>(t)));
  return *d;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  const std::string n = lower(name);
  for (const auto& d : kDTypeTable)
    if (d.dtype != DType::Undefined && (n == d.name || n == d.short_name)) return d.dtype;
  if (n == "float32") return DType::Float32;
  if (n == "float64") return DType::Float64;
  return std::nullopt;
}

std::string_view dtype_name(DType t) { return dtype_info(t).name; }

void throw_unknown_dtype(int32_t onnx_enum, const std::string& what) {
  struct Known {
    int32_t onnx_enum;
    const char* name;
  };
  static constexpr Known kWithoutRow[] = {{14, "complex64"},  {15, "complex128"}, {23, "float4e2m1"},
                                          {24, "float8e8m0"}, {25, "uint2"},      {26, "int2"}};
  for (const Known& k : kWithoutRow)
    if (k.onnx_enum == onnx_enum)
      throw UnsupportedError(what + " has ONNX data type " + k.name + " (" + std::to_string(onnx_enum) +
                             "), which qtool does not support; convert it to a supported type (float, float16, "
                             "int8, int4...) before qtool");
  throw BadInputError(what + ": data_type " + std::to_string(onnx_enum) +
                      (onnx_enum == 0 ? " (UNDEFINED)" : " is not an ONNX data type") + "; the model is corrupt");
}

size_t storage_bytes(DType t, int64_t count) {
  const DTypeInfo& d = dtype_info(t);
  if (d.cls == DTypeClass::String || d.cls == DTypeClass::None)
    throw InternalError("storage_bytes: no fixed size for dtype " + std::string(d.name));
  if (count < 0) throw BadInputError("negative element count " + std::to_string(count));
  if (d.elems_per_byte == 2) return static_cast<size_t>(count / 2 + count % 2);
  // Byte counts stay below 2^63 so they fit int64 and size_t alike.
  int64_t bytes;
  if (__builtin_mul_overflow(count, int64_t{d.bits / 8}, &bytes))
    throw BadInputError(std::to_string(count) + " elements of " + std::string(d.name) + " overflow a 64-bit byte count");
  return static_cast<size_t>(bytes);
}

}  // namespace qtool
