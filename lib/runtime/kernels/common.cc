#include "runtime/kernels/common.h"

#include <cstring>

namespace qtool::runtime::kernels {

size_t element_size(DType t, const NodeInfo& node) {
  const DTypeInfo& info = dtype_info(t);
  if (info.elems_per_byte != 1 || info.bits == 0)
    throw UnsupportedError(node.label() + ": dtype " + std::string(info.name) + " is not supported by this op");
  return static_cast<size_t>(info.bits / 8);
}

int64_t normalize_axis(int64_t axis, int64_t rank, const NodeInfo& node) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    throw BadInputError(node.label() + ": axis " + std::to_string(axis) + " is out of range for rank " +
                        std::to_string(rank));
  return a;
}

std::vector<int64_t> read_ints(const Tensor& t, const NodeInfo& node, const char* what) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::Int64) {
    const int64_t* p = t.data<int64_t>();
    v.assign(p, p + t.numel());
  } else if (t.dtype() == DType::Int32) {
    const int32_t* p = t.data<int32_t>();
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = p[i];
  } else {
    throw BadInputError(node.label() + ": " + what + " must be int64 or int32, got " +
                        std::string(dtype_name(t.dtype())));
  }
  return v;
}

double read_scalar(const Tensor& t, const NodeInfo& node, const char* what) {
  if (t.numel() != 1)
    throw BadInputError(node.label() + ": " + what + " must hold one value, got shape " + shape_str(t.shape()));
  double v = 0;
  if (t.dtype() == DType::Bool) return t.raw()[0] != std::byte{0};
  dispatch_numeric(t.dtype(), node, [&]<class T>() { v = static_cast<double>(t.data<T>()[0]); });
  return v;
}

std::vector<int64_t> strides_of(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

void strided_copy(Tensor& out, const Tensor& in, int64_t offset, const std::vector<int64_t>& in_strides,
                  const NodeInfo& node, int threads) {
  const Shape& shape = out.shape();
  if (out.numel() == 0) return;
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t inner = rank ? shape.back() : 1;
  const int64_t inner_stride = rank ? in_strides.back() : 0;
  const int64_t rows = out.numel() / inner;
  const size_t es = element_size(in.dtype(), node);
  dispatch_bits(es, node, [&]<class U>() {
    const U* src = reinterpret_cast<const U*>(in.raw()) + offset;
    U* dst = reinterpret_cast<U*>(out.raw());
    parallel_range(
        rows, threads,
        [&](int64_t b, int64_t e) {
          // Row b's coordinates over the outer axes, then an odometer (no division per row).
          std::vector<int64_t> idx(static_cast<size_t>(std::max<int64_t>(rank - 1, 0)));
          int64_t off = 0;
          for (int64_t d = rank - 2, rem = b; d >= 0; --d) {
            idx[d] = rem % shape[d];
            rem /= shape[d];
            off += idx[d] * in_strides[d];
          }
          for (int64_t r = b; r < e; ++r) {
            const U* s = src + off;
            U* o = dst + r * inner;
            if (inner_stride == 1)
              copy_rows(reinterpret_cast<std::byte*>(o), 0, reinterpret_cast<const std::byte*>(s), 0, 1,
                        sizeof(U) * inner);
            else
              for (int64_t j = 0; j < inner; ++j) o[j] = s[j * inner_stride];
            for (int64_t d = rank - 2; d >= 0; --d) {
              off += in_strides[d];
              if (++idx[d] < shape[d]) break;
              off -= idx[d] * in_strides[d];
              idx[d] = 0;
            }
          }
        },
        std::max<int64_t>(1, kParallelGrain / inner));
  });
}

}  // namespace qtool::runtime::kernels
