#include "core/tensor.h"

#include <cstring>
#include <limits>
#include <new>

#include "core/limits.h"

namespace qtool {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw BadInputError("negative dimension in shape " + shape_str(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      throw BadInputError("shape " + shape_str(shape) + " has too many elements");
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {
constexpr size_t kAlign = 64;

// Checks the runtime limits (core/limits.h) before taking memory; `shape` and `dtype` describe the tensor in
// the message. Live bytes are counted until the last copy of the storage is gone.
std::shared_ptr<std::byte[]> allocate(size_t bytes, DType dtype, const Shape& shape) {
  const size_t n = (bytes + kAlign - 1) / kAlign * kAlign;
  const auto counted = static_cast<int64_t>(n == 0 ? kAlign : n);
  if (!tensor_allocation_fits(counted))
    throw_tensor_limit(counted, std::string(dtype_name(dtype)) + " tensor of shape " + shape_str(shape));
  auto* p = static_cast<std::byte*>(::operator new[](static_cast<size_t>(counted), std::align_val_t{kAlign}));
  note_tensor_allocated(counted);
  return std::shared_ptr<std::byte[]>(p, [counted](std::byte* q) {
    ::operator delete[](q, std::align_val_t{kAlign});
    note_tensor_freed(counted);
  });
}
}  // namespace

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  if (dtype == DType::String || dtype == DType::Undefined)
    throw UnsupportedError("tensors of dtype " + std::string(dtype_name(dtype)) + " are not supported");
  numel_ = shape_numel(shape_);
  if (static_cast<uint64_t>(numel_) > std::numeric_limits<size_t>::max() / 8)
    throw BadInputError("shape " + shape_str(shape_) + " is too large to allocate");
  nbytes_ = storage_bytes(dtype_, numel_);
  storage_ = allocate(nbytes_, dtype_, shape_);
  data_ = storage_.get();
}

Tensor Tensor::from_storage(DType dtype, Shape shape, std::shared_ptr<std::byte[]> storage) {
  if (!storage || reinterpret_cast<uintptr_t>(storage.get()) % kAlign != 0)
    throw InternalError("Tensor::from_storage: storage missing or not " + std::to_string(kAlign) + "-byte aligned");
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  t.nbytes_ = storage_bytes(dtype, t.numel_);
  const auto counted = static_cast<int64_t>(t.nbytes_);
  check_tensor_allocation(counted, std::string(dtype_name(dtype)) + " tensor of shape " + shape_str(t.shape_));
  note_tensor_allocated(counted);
  // The tensor's storage owns the mapping and gives its bytes back to the count when the last copy goes.
  std::byte* data = storage.get();
  t.storage_ = std::shared_ptr<std::byte[]>(data, [held = std::move(storage), counted](std::byte*) mutable {
    held.reset();
    note_tensor_freed(counted);
  });
  t.data_ = t.storage_.get();
  return t;
}

Tensor Tensor::zeros(DType dtype, Shape shape) {
  Tensor t(dtype, std::move(shape));
  std::memset(t.data_, 0, t.nbytes_);
  return t;
}

Tensor Tensor::from_bytes(DType dtype, Shape shape, std::span<const std::byte> bytes) {
  // Check the size before allocating: a corrupt header may declare an absurd shape.
  const size_t need = storage_bytes(dtype, shape_numel(shape));
  if (bytes.size() != need)
    throw BadInputError("tensor of dtype " + std::string(dtype_name(dtype)) + " and shape " + shape_str(shape) +
                        " needs " + std::to_string(need) + " bytes, got " + std::to_string(bytes.size()));
  Tensor t(dtype, std::move(shape));
  if (!bytes.empty()) std::memcpy(t.data_, bytes.data(), bytes.size());
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  if (shape_numel(shape) != numel_)
    throw BadInputError("cannot reshape " + shape_str(shape_) + " to " + shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  if (empty()) return {};
  return from_bytes(dtype_, shape_, bytes());
}

Tensor to_float32(const Tensor& t) {
  if (t.dtype() == DType::Float32) return t;
  const auto load = dtype_info(t.dtype()).load;
  if (t.dtype() == DType::String || !load)
    throw UnsupportedError("cannot convert a " + std::string(dtype_name(t.dtype())) + " tensor to float");
  Tensor out(DType::Float32, t.shape());
  float* o = out.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) o[i] = load(t.raw(), i);
  return out;
}

bool Tensor::same_as(const Tensor& o) const {
  return dtype_ == o.dtype_ && shape_ == o.shape_ && nbytes_ == o.nbytes_ &&
         (nbytes_ == 0 || std::memcmp(data_, o.data_, nbytes_) == 0);
}

void Tensor::check_type(DType want) const {
  if (want != dtype_)
    throw InternalError("tensor holds " + std::string(dtype_name(dtype_)) + ", accessed as " +
                        std::string(dtype_name(want)));
}

}  // namespace qtool
