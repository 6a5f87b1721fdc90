#include "core/dtype.h"

#include <array>
#include <cctype>
#include <string>

#include "core/error.h"

namespace qtool {
namespace {

// clang-format off
constexpr std::array kDTypeTable = {
  //        dtype                  name             short       class               bits signed qmin     qmax        epb numpy
  DTypeInfo{DType::Undefined,      "undefined",     "?",        DTypeClass::None,     0, false, 0,       0,          1, ""},
  DTypeInfo{DType::Float32,        "float",         "f32",      DTypeClass::Float,   32, true,  0,       0,          1, "<f4"},
  DTypeInfo{DType::UInt8,          "uint8",         "u8",       DTypeClass::Integer,  8, false, 0,       255,        1, "|u1"},
  DTypeInfo{DType::Int8,           "int8",          "i8",       DTypeClass::Integer,  8, true,  -128,    127,        1, "|i1"},
  DTypeInfo{DType::UInt16,         "uint16",        "u16",      DTypeClass::Integer, 16, false, 0,       65535,      1, "<u2"},
  DTypeInfo{DType::Int16,          "int16",         "i16",      DTypeClass::Integer, 16, true,  -32768,  32767,      1, "<i2"},
  DTypeInfo{DType::Int32,          "int32",         "i32",      DTypeClass::Integer, 32, true,  INT32_MIN, INT32_MAX, 1, "<i4"},
  DTypeInfo{DType::Int64,          "int64",         "i64",      DTypeClass::Integer, 64, true,  INT64_MIN, INT64_MAX, 1, "<i8"},
  DTypeInfo{DType::String,         "string",        "str",      DTypeClass::String,   0, false, 0,       0,          1, ""},
  DTypeInfo{DType::Bool,           "bool",          "bool",     DTypeClass::Bool,     8, false, 0,       1,          1, "|b1"},
  DTypeInfo{DType::Float16,        "float16",       "f16",      DTypeClass::Float,   16, true,  0,       0,          1, "<f2"},
  DTypeInfo{DType::Float64,        "double",        "f64",      DTypeClass::Float,   64, true,  0,       0,          1, "<f8"},
  DTypeInfo{DType::UInt32,         "uint32",        "u32",      DTypeClass::Integer, 32, false, 0,       UINT32_MAX, 1, "<u4"},
  DTypeInfo{DType::UInt64,         "uint64",        "u64",      DTypeClass::Integer, 64, false, 0,       INT64_MAX,  1, "<u8"},
  DTypeInfo{DType::BFloat16,       "bfloat16",      "bf16",     DTypeClass::Float,   16, true,  0,       0,          1, ""},
  DTypeInfo{DType::Float8E4M3FN,   "float8e4m3fn",  "fp8e4m3",  DTypeClass::Float,    8, true,  0,       0,          1, ""},
  DTypeInfo{DType::Float8E4M3FNUZ, "float8e4m3fnuz","fp8e4m3uz",DTypeClass::Float,    8, true,  0,       0,          1, ""},
  DTypeInfo{DType::Float8E5M2,     "float8e5m2",    "fp8e5m2",  DTypeClass::Float,    8, true,  0,       0,          1, ""},
  DTypeInfo{DType::Float8E5M2FNUZ, "float8e5m2fnuz","fp8e5m2uz",DTypeClass::Float,    8, true,  0,       0,          1, ""},
  DTypeInfo{DType::UInt4,          "uint4",         "u4",       DTypeClass::Integer,  4, false, 0,       15,         2, ""},
  DTypeInfo{DType::Int4,           "int4",          "i4",       DTypeClass::Integer,  4, true,  -8,      7,          2, ""},
};
// clang-format on

constexpr const DTypeInfo* find(int32_t e) {
  for (const auto& d : kDTypeTable)
    if (static_cast<int32_t>(d.dtype) == e) return &d;
  return nullptr;
}
static_assert(find(17)->bits == 8 && find(22)->elems_per_byte == 2, "dtype table out of order");

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

size_t storage_bytes(DType t, int64_t count) {
  const DTypeInfo& d = dtype_info(t);
  if (d.cls == DTypeClass::String || d.cls == DTypeClass::None)
    throw InternalError("storage_bytes: no fixed size for dtype " + std::string(d.name));
  if (d.elems_per_byte == 2) return static_cast<size_t>((count + 1) / 2);
  return static_cast<size_t>(count) * static_cast<size_t>(d.bits / 8);
}

}  // namespace qtool
