// Helpers shared by the core kernels: dtype dispatch, axis handling, integer inputs, parallel loops.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/tensor.h"
#include "runtime/kernel.h"
#include "runtime/kernels/threading.h"
#include "runtime/kernels/work_sharing.h"

namespace qtool::runtime::kernels {

// Below this many elements a kernel runs on one thread: a parallel region costs a thread wake-up
// (threading.h). Kernels whose elements cost more than a cheap operation pass a smaller grain.
constexpr int64_t kParallelGrain = kParallelMinWork;

// Calls f.template operator()<T>() with the C++ element type of `t`, for the numeric types listed.
// Anything else is an UnsupportedError naming the node.
template <class F>
void dispatch_numeric(DType t, const NodeInfo& node, F&& f) {
  switch (t) {
    case DType::Float32:
      f.template operator()<float>();
      return;
    case DType::Float64:
      f.template operator()<double>();
      return;
    case DType::Int8:
      f.template operator()<int8_t>();
      return;
    case DType::UInt8:
      f.template operator()<uint8_t>();
      return;
    case DType::Int16:
      f.template operator()<int16_t>();
      return;
    case DType::UInt16:
      f.template operator()<uint16_t>();
      return;
    case DType::Int32:
      f.template operator()<int32_t>();
      return;
    case DType::UInt32:
      f.template operator()<uint32_t>();
      return;
    case DType::Int64:
      f.template operator()<int64_t>();
      return;
    case DType::UInt64:
      f.template operator()<uint64_t>();
      return;
    default:
      throw UnsupportedError(node.label() + ": dtype " + std::string(dtype_name(t)) + " is not supported by this op");
  }
}
template <class F>
void dispatch_float(DType t, const NodeInfo& node, F&& f) {
  switch (t) {
    case DType::Float32:
      f.template operator()<float>();
      return;
    case DType::Float64:
      f.template operator()<double>();
      return;
    default:
      throw UnsupportedError(node.label() + ": dtype " + std::string(dtype_name(t)) +
                             " is not supported by this op (float and double are)");
  }
}
// Numeric types plus bool.
template <class F>
void dispatch_numeric_bool(DType t, const NodeInfo& node, F&& f) {
  if (t == DType::Bool) {
    f.template operator()<bool>();
    return;
  }
  dispatch_numeric(t, node, std::forward<F>(f));
}

// Calls f.template operator()<U>() with an unsigned integer type of `bytes` size: kernels that only
// move elements (shape ops) handle every dtype of 1, 2, 4 or 8 bytes this way.
template <class F>
void dispatch_bits(size_t bytes, const NodeInfo& node, F&& f) {
  switch (bytes) {
    case 1:
      f.template operator()<uint8_t>();
      return;
    case 2:
      f.template operator()<uint16_t>();
      return;
    case 4:
      f.template operator()<uint32_t>();
      return;
    case 8:
      f.template operator()<uint64_t>();
      return;
    default:
      throw UnsupportedError(node.label() + ": unsupported element size " + std::to_string(bytes));
  }
}

// Copies `rows` blocks of `bytes` bytes from src + r * src_stride to dst + r * dst_stride (strides in bytes).
// Concat, Split and Gather along an inner axis move many tiny blocks (llama2c's rotary step: one float per
// block, 8192 blocks per node); a memcpy call per block cost more than the copy, so blocks of 4, 8, 16 and 32
// bytes are moved with fixed-size copies the compiler turns into single loads and stores.
inline void copy_rows(std::byte* dst, int64_t dst_stride, const std::byte* src, int64_t src_stride, int64_t rows,
                      size_t bytes) {
  auto fixed = [&]<size_t B>() {
    for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * dst_stride, src + r * src_stride, B);
  };
  switch (bytes) {
    case 4:
      return fixed.template operator()<4>();
    case 8:
      return fixed.template operator()<8>();
    case 16:
      return fixed.template operator()<16>();
    case 32:
      return fixed.template operator()<32>();
    default:
      for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * dst_stride, src + r * src_stride, bytes);
  }
}

// out (shape `shape`, C order) = in[offset + sum(idx[d] * in_strides[d])]: the one gather loop behind
// Transpose, Slice, Expand and DepthToSpace. Strides are in elements and may be 0 or negative.
void strided_copy(Tensor& out, const Tensor& in, int64_t offset, const std::vector<int64_t>& in_strides,
                  const NodeInfo& node, int threads);

// Bytes per element for byte-moving kernels (shape ops); 4-bit packed types are unsupported there.
size_t element_size(DType t, const NodeInfo& node);

// Normalizes a possibly negative axis into [0, rank); BadInputError naming the node otherwise.
int64_t normalize_axis(int64_t axis, int64_t rank, const NodeInfo& node);

// Reads an int32/int64 tensor (a shape, axes, indices input) as int64 values.
std::vector<int64_t> read_ints(const Tensor& t, const NodeInfo& node, const char* what);
// Reads a scalar (or 1-element) numeric tensor as double.
double read_scalar(const Tensor& t, const NodeInfo& node, const char* what);

// Row-major strides in elements.
std::vector<int64_t> strides_of(const Shape& shape);

// Runs f(begin, end) over [0, n) in contiguous ranges of at least `grain` (serial when n is small or threads == 1),
// up to 8 per thread, shared between the calling thread and up to threads - 1 helpers (work_sharing.h). f must not
// depend on where the ranges are cut, nor throw.
template <class F>
void parallel_range(int64_t n, int threads, F&& f, int64_t grain = kParallelGrain) {
  if (threads <= 1 || n < grain) {
    if (n > 0) f(int64_t{0}, n);
    return;
  }
  struct Loop {
    std::remove_reference_t<F>* f;
    int64_t n, chunks;
  } loop{&f, n, std::clamp<int64_t>(n / std::max<int64_t>(grain / 8, 1), threads, int64_t{8} * threads)};
  share_chunks(
      loop.chunks, threads,
      [](void* p, int64_t c) noexcept {  // a throw ends the program, as it did out of an OpenMP region
        const Loop& l = *static_cast<const Loop*>(p);
        const int64_t b = l.n * c / l.chunks, e = l.n * (c + 1) / l.chunks;
        if (b < e) (*l.f)(b, e);
      },
      &loop);
}

}  // namespace qtool::runtime::kernels
