// Overflow-checked integer arithmetic for sizes and shape math computed from untrusted numbers (model
// attributes, constant tensors, dims). Every helper throws BadInputError on overflow, division by zero or
// INT64_MIN / -1; `what` names the quantity ("output dimension 2", "Range element count"). The interpreter
// prefixes the node's label to errors thrown inside a kernel, so kernels pass only the quantity.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "core/error.h"

namespace qtool {

[[noreturn]] inline void throw_overflow(std::string_view what, std::string_view op, int64_t a, int64_t b) {
  throw BadInputError(std::string(what) + ": integer overflow computing " + std::to_string(a) + " " + std::string(op) +
                      " " + std::to_string(b) + " (a dimension or attribute is absurdly large)");
}

inline int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw_overflow(what, "+", a, b);
  return r;
}
inline int64_t checked_sub(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) throw_overflow(what, "-", a, b);
  return r;
}
inline int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw_overflow(what, "*", a, b);
  return r;
}
// Truncating division as C++ defines it; b == 0 and INT64_MIN / -1 are errors.
inline int64_t checked_div(int64_t a, int64_t b, std::string_view what) {
  if (b == 0) throw BadInputError(std::string(what) + ": division by zero");
  if (a == std::numeric_limits<int64_t>::min() && b == -1) throw_overflow(what, "/", a, b);
  return a / b;
}
// Floor division (Python's //), b == 0 and INT64_MIN / -1 are errors.
inline int64_t checked_floor_div(int64_t a, int64_t b, std::string_view what) {
  const int64_t q = checked_div(a, b, what);
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
// Ceiling division (output sizes with ceil_mode), b == 0 and INT64_MIN / -1 are errors.
inline int64_t checked_ceil_div(int64_t a, int64_t b, std::string_view what) {
  const int64_t q = checked_div(a, b, what);
  return (q * b != a && ((a < 0) == (b < 0))) ? q + 1 : q;
}

// A size or count computed in floating point (Resize output sizes, Range's element count) as int64:
// NaN, infinities and values outside int64's range are errors instead of undefined behaviour.
inline int64_t checked_to_int64(double v, std::string_view what) {
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
    throw BadInputError(std::string(what) + ": value " + std::to_string(v) + " does not fit a 64-bit integer");
  return static_cast<int64_t>(v);
}

}  // namespace qtool
