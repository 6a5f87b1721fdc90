// A dense, C-ordered tensor: dtype, shape and a shared, 64-byte aligned byte buffer.
// Copies share storage (cheap views for Reshape/Identity); use clone() for a deep copy.
// 4-bit types are packed two per byte, low nibble first (ONNX's layout).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace qtool {

using Shape = std::vector<int64_t>;

// Product of dims; 1 for a scalar (empty shape). Throws BadInputError on negative dims or overflow.
int64_t shape_numel(const Shape& shape);
// "[1,3,224,224]"
std::string shape_str(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  // Allocates uninitialized storage for dtype/shape (String is not supported).
  Tensor(DType dtype, Shape shape);
  static Tensor zeros(DType dtype, Shape shape);
  // Wraps a copy of `bytes`, which must be exactly storage_bytes(dtype, numel).
  static Tensor from_bytes(DType dtype, Shape shape, std::span<const std::byte> bytes);
  template <class T>
  static Tensor from_vector(Shape shape, const std::vector<T>& values);
  // Takes `storage`, which already holds storage_bytes(dtype, numel) bytes at a 64-byte aligned address (a file
  // mapping: InputFile::map_private). Counted against the tensor memory limit like an allocation, while it lives.
  static Tensor from_storage(DType dtype, Shape shape, std::shared_ptr<std::byte[]> storage);
  template <class T>
  static Tensor scalar(T value) { return from_vector<T>({}, std::vector<T>{value}); }

  bool empty() const { return dtype_ == DType::Undefined; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_.at(static_cast<size_t>(i < 0 ? i + rank() : i)); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return nbytes_; }

  std::byte* raw() { return data_; }
  const std::byte* raw() const { return data_; }
  std::span<const std::byte> bytes() const { return {data_, nbytes_}; }

  // Typed access; throws InternalError if T does not match the dtype.
  template <class T> T* data() { check_type(dtype_of_v<T>); return reinterpret_cast<T*>(data_); }
  template <class T> const T* data() const { check_type(dtype_of_v<T>); return reinterpret_cast<const T*>(data_); }
  template <class T> std::span<T> span() { return {data<T>(), static_cast<size_t>(numel_)}; }
  template <class T> std::span<const T> span() const { return {data<T>(), static_cast<size_t>(numel_)}; }

  // Same storage, new shape with the same element count.
  Tensor reshaped(Shape shape) const;
  Tensor clone() const;
  // True when both tensors have the same dtype, shape and bytes.
  bool same_as(const Tensor& other) const;

 private:
  void check_type(DType want) const;

  DType dtype_ = DType::Undefined;
  Shape shape_;
  int64_t numel_ = 0;
  size_t nbytes_ = 0;
  std::shared_ptr<std::byte[]> storage_;
  std::byte* data_ = nullptr;
};

// A float32 copy of a numeric tensor (floats of other widths exactly, integers as dtype_info's load converts them).
Tensor to_float32(const Tensor& t);

template <class T>
Tensor Tensor::from_vector(Shape shape, const std::vector<T>& values) {
  static_assert(!std::is_same_v<T, bool>, "use from_bytes for bool tensors");
  Tensor t(dtype_of_v<T>, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.numel())
    throw InternalError("Tensor::from_vector: " + std::to_string(values.size()) + " values for shape " +
                        shape_str(t.shape()));
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

}  // namespace qtool
