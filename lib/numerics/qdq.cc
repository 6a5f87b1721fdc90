#include "numerics/qdq.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/float_formats.h"

namespace qtool::numerics {
namespace {

bool is_quantized_dtype(DType t) {
  switch (t) {
    case DType::Int8:
    case DType::UInt8:
    case DType::Int16:
    case DType::UInt16:
    case DType::Int4:
    case DType::UInt4:
    case DType::Float8E4M3FN:
    case DType::Float8E4M3FNUZ:
    case DType::Float8E5M2:
    case DType::Float8E5M2FNUZ:
      return true;
    default:
      return false;
  }
}
bool is_scale_dtype(DType t) { return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16; }

std::string dt(DType t) { return std::string(dtype_name(t)); }

// ---- Element operations: the contract of qdq.h, shared by the fast paths and the reference twins. ----

// Round half to even for |v| <= 2^22 under the default rounding mode (v is already clamped to a 17-bit range).
inline float round_half_even_small(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (v + kMagic) - kMagic;
}

template <bool Recip>
inline float apply_scale(float x, float s) {
  if constexpr (Recip)
    return x * (1.0f / s);
  else
    return x / s;
}

// Integer QuantizeLinear of one value. lo = qmin - zp, hi = qmax - zp. The comparisons are written so that NaN
// takes `lo` (x86 MAXPS semantics, as in ORT's MLAS kernel).
template <bool Recip>
inline int32_t quantize_int(float x, float s, int32_t zp, float lo, float hi) {
  float v = apply_scale<Recip>(x, s);
  v = v > lo ? v : lo;
  v = v < hi ? v : hi;
  return static_cast<int32_t>(round_half_even_small(v)) + zp;
}

// The value an FP8 output encodes (before float -> FP8 conversion).
template <bool Recip>
inline float quantize_fp8_value(float x, float s, float zp) {
  const float v = apply_scale<Recip>(x, s);
  return zp != 0.0f ? v + zp : v;
}

inline float dequantize_int(int32_t q, float s, int32_t zp) { return static_cast<float>(q - zp) * s; }
inline float dequantize_fp8(float q, float s, float zp) { return (zp != 0.0f ? q - zp : q) * s; }

using Fp8Encode = uint8_t (*)(float, bool);
Fp8Encode fp8_encoder(DType t) {
  switch (t) {
    case DType::Float8E4M3FN:
      return float_to_float8e4m3fn;
    case DType::Float8E4M3FNUZ:
      return float_to_float8e4m3fnuz;
    case DType::Float8E5M2:
      return float_to_float8e5m2;
    case DType::Float8E5M2FNUZ:
      return float_to_float8e5m2fnuz;
    default:
      throw InternalError("fp8_encoder: not an FP8 dtype: " + dt(t));
  }
}

// Decoded value of every code of an 8-bit float type.
const std::array<float, 256>& fp8_decode_table(DType t) {
  auto make = [](DType d) {
    std::array<float, 256> a{};
    const auto load = dtype_info(d).load;
    for (int c = 0; c < 256; ++c) {
      const std::byte b{static_cast<uint8_t>(c)};
      a[static_cast<size_t>(c)] = load(&b, 0);
    }
    return a;
  };
  static const std::array<float, 256> e4m3fn = make(DType::Float8E4M3FN), e4m3fnuz = make(DType::Float8E4M3FNUZ),
                                      e5m2 = make(DType::Float8E5M2), e5m2fnuz = make(DType::Float8E5M2FNUZ);
  switch (t) {
    case DType::Float8E4M3FN:
      return e4m3fn;
    case DType::Float8E4M3FNUZ:
      return e4m3fnuz;
    case DType::Float8E5M2:
      return e5m2;
    default:
      return e5m2fnuz;
  }
}

// Small parameter tensors (scale, zero point) read once into float / int32 arrays via the dtype table.
std::vector<float> to_floats(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  const auto load = dtype_info(t.dtype()).load;
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = load(t.raw(), i);
  return v;
}

// ---- Layout and the one loop shape ----

// Calls fn(first_flat_index, length, first_scale_index, scale_index_step) for maximal runs of elements in
// [begin, end) whose scale index advances by a constant step.
template <class Fn>
void for_each_run(const QdqLayout& L, int64_t begin, int64_t end, Fn&& fn) {
  int64_t i = begin;
  if (L.inner > 1) {  // runs along the inner dimension
    int64_t row = begin / L.inner, n = begin % L.inner;
    while (i < end) {
      const int64_t m = row / L.axis_len, k = row % L.axis_len;
      const int64_t len = std::min(L.inner - n, end - i);
      fn(i, len, m * L.scale_stride_outer + (k / L.block) * L.scale_stride_axis + n * L.scale_stride_inner,
         L.scale_stride_inner);
      i += len;
      ++row;
      n = 0;
    }
    return;
  }
  // inner == 1: runs along the quantized axis (per-axis: step 1 per element; blocked: constant per block).
  int64_t m = begin / L.axis_len, k = begin % L.axis_len;
  while (i < end) {
    const int64_t base = m * L.scale_stride_outer + (k / L.block) * L.scale_stride_axis;
    int64_t len = std::min(L.axis_len - k, end - i);
    int64_t step = L.scale_stride_axis;
    if (L.block > 1 || L.scale_stride_axis == 0) {
      if (L.block > 1) len = std::min(len, L.block - k % L.block);
      step = 0;
    }
    fn(i, len, base, step);
    i += len;
    k += len;
    if (k == L.axis_len) {
      k = 0;
      ++m;
    }
  }
}

// Splits [0, numel) into even-sized chunks (4-bit outputs never share a byte between threads) and runs them on
// `threads` OpenMP threads. Small tensors run serially.
template <class Fn>
void parallel_runs(const QdqLayout& L, int64_t numel, int threads, Fn&& fn) {
  constexpr int64_t kChunk = int64_t{1} << 15;
  const int64_t tasks = (numel + kChunk - 1) / kChunk;
  if (threads <= 1 || tasks <= 1) {
    for_each_run(L, 0, numel, fn);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t t = 0; t < tasks; ++t) for_each_run(L, t * kChunk, std::min(numel, (t + 1) * kChunk), fn);
}

// ---- Typed element access for the fast paths ----

template <class T>
inline float load_as_float(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, Float16>)
    return float16_to_float(p[i].bits);
  else if constexpr (std::is_same_v<T, BFloat16>)
    return bfloat16_to_float(p[i].bits);
  else
    return static_cast<float>(p[i]);
}

template <class T>
inline void store_float_as(T* p, int64_t i, float v) {
  if constexpr (std::is_same_v<T, Float16>)
    p[i].bits = float_to_float16(v);
  else if constexpr (std::is_same_v<T, BFloat16>)
    p[i].bits = float_to_bfloat16(v);
  else
    p[i] = v;
}

template <class F>
void with_float_type(DType t, F&& f) {
  switch (t) {
    case DType::Float32:
      f(std::type_identity<float>{});
      break;
    case DType::Float16:
      f(std::type_identity<Float16>{});
      break;
    case DType::BFloat16:
      f(std::type_identity<BFloat16>{});
      break;
    default:
      throw InternalError("with_float_type: " + dt(t));
  }
}

struct Nibbles {};  // marker: packed 4-bit storage

template <class F>
void with_int_storage(DType t, F&& f) {
  switch (t) {
    case DType::Int8:
      f(std::type_identity<int8_t>{});
      break;
    case DType::UInt8:
      f(std::type_identity<uint8_t>{});
      break;
    case DType::Int16:
      f(std::type_identity<int16_t>{});
      break;
    case DType::UInt16:
      f(std::type_identity<uint16_t>{});
      break;
    case DType::Int32:
      f(std::type_identity<int32_t>{});
      break;
    case DType::Int4:
    case DType::UInt4:
      f(std::type_identity<Nibbles>{});
      break;
    default:
      throw InternalError("with_int_storage: " + dt(t));
  }
}

inline void put_nibble(uint8_t* y, int64_t i, int32_t v) {
  const int shift = static_cast<int>(i & 1) * 4;
  uint8_t& b = y[i >> 1];
  b = static_cast<uint8_t>((b & ~(0xF << shift)) | ((v & 0xF) << shift));
}
inline int32_t get_nibble(const uint8_t* x, int64_t i, bool is_signed) {
  return nibble_at(reinterpret_cast<const std::byte*>(x), i, is_signed);
}

template <class In>
inline int32_t load_int(const std::byte* x, int64_t i, bool is_signed) {
  if constexpr (std::is_same_v<In, Nibbles>) {
    return get_nibble(reinterpret_cast<const uint8_t*>(x), i, is_signed);
  } else {
    (void)is_signed;
    return static_cast<int32_t>(reinterpret_cast<const In*>(x)[i]);
  }
}

// The hot loops of per-tensor and per-axis runs (one scale per run), written so the compiler vectorizes them.
template <bool Recip, class In, class Out>
void quantize_run(const In* __restrict x, Out* __restrict y, int64_t len, float s, int32_t z, float lo, float hi) {
  for (int64_t j = 0; j < len; ++j) y[j] = static_cast<Out>(quantize_int<Recip>(load_as_float(x, j), s, z, lo, hi));
}
template <class In>
void dequantize_run(const In* __restrict x, float* __restrict y, int64_t len, float s, int32_t z) {
  for (int64_t j = 0; j < len; ++j) y[j] = dequantize_int(static_cast<int32_t>(x[j]), s, z);
}

struct Prepared {
  QdqLayout layout;
  std::vector<float> scale;
  std::vector<float> zp_float;  // zero point as float (0 when absent)
  std::vector<int32_t> zp_int;  // zero point as int32 (integer types)
};

Prepared prepare(const Tensor& x, const Tensor& scale, const Tensor* zp, const QdqAttrs& a, const char* sname,
                 const char* zname) {
  Prepared p;
  p.layout = qdq_layout(x.shape(), scale, zp, a.axis, a.block_size, sname, zname);
  p.scale = to_floats(scale);
  if (zp) {
    p.zp_float = to_floats(*zp);
  } else {
    p.zp_float.assign(p.scale.size(), 0.0f);
  }
  p.zp_int.resize(p.zp_float.size());
  for (size_t i = 0; i < p.zp_float.size(); ++i) p.zp_int[i] = static_cast<int32_t>(p.zp_float[i]);
  return p;
}

void check_x(const Tensor& x, bool quantize) {
  if (quantize) {
    if (!is_scale_dtype(x.dtype()) && x.dtype() != DType::Int32)
      throw UnsupportedError("QuantizeLinear: input x has dtype " + dt(x.dtype()) +
                             "; ONNX allows float, float16, bfloat16 or int32");
  } else if (!is_quantized_dtype(x.dtype()) && x.dtype() != DType::Int32) {
    throw UnsupportedError("DequantizeLinear: input x has dtype " + dt(x.dtype()) +
                           "; ONNX allows int8, uint8, int16, uint16, int32, int4, uint4 or a float8 type");
  }
}

void check_scale(const Tensor& scale, const char* op, const char* sname) {
  if (!is_scale_dtype(scale.dtype()))
    throw UnsupportedError(std::string(op) + ": " + sname + " has dtype " + dt(scale.dtype()) +
                           "; use float, float16 or bfloat16");
}

template <bool Recip>
void quantize_fast(const Tensor& x, const Prepared& p, DType out, bool saturate, Tensor& y, int threads) {
  const QdqLayout& L = p.layout;
  const float* sc = p.scale.data();
  const bool fp8 = is_float8(out);
  with_float_type(x.dtype() == DType::Int32 ? DType::Float32 : x.dtype(), [&](auto in_tag) {
    using In0 = typename decltype(in_tag)::type;
    // int32 inputs are read through their own pointer type.
    auto run_with = [&](const auto* xin) {
      if (fp8) {
        const Fp8Encode enc = fp8_encoder(out);
        uint8_t* yo = reinterpret_cast<uint8_t*>(y.raw());
        const float* zf = p.zp_float.data();
        parallel_runs(L, x.numel(), threads, [&](int64_t i, int64_t len, int64_t s0, int64_t ss) {
          for (int64_t j = 0; j < len; ++j) {
            const int64_t si = s0 + j * ss;
            yo[i + j] = enc(quantize_fp8_value<Recip>(load_as_float(xin, i + j), sc[si], zf[si]), saturate);
          }
        });
        return;
      }
      const DTypeInfo& info = dtype_info(out);
      const int32_t qmin = static_cast<int32_t>(info.qmin), qmax = static_cast<int32_t>(info.qmax);
      const int32_t* zi = p.zp_int.data();
      with_int_storage(out, [&](auto out_tag) {
        using Out = typename decltype(out_tag)::type;
        parallel_runs(L, x.numel(), threads, [&](int64_t i, int64_t len, int64_t s0, int64_t ss) {
          auto put = [&](int64_t idx, int32_t v) {
            if constexpr (std::is_same_v<Out, Nibbles>)
              put_nibble(reinterpret_cast<uint8_t*>(y.raw()), idx, v);
            else
              reinterpret_cast<Out*>(y.raw())[idx] = static_cast<Out>(v);
          };
          if (ss == 0) {  // one scale for the whole run: the hot loop
            const float s = sc[s0];
            const int32_t z = zi[s0];
            const float lo = static_cast<float>(qmin - z), hi = static_cast<float>(qmax - z);
            if constexpr (std::is_same_v<Out, Nibbles>) {
              for (int64_t j = 0; j < len; ++j)
                put(i + j, quantize_int<Recip>(load_as_float(xin, i + j), s, z, lo, hi));
            } else {
              quantize_run<Recip>(xin + i, reinterpret_cast<Out*>(y.raw()) + i, len, s, z, lo, hi);
            }
          } else {
            for (int64_t j = 0; j < len; ++j) {
              const int64_t si = s0 + j * ss;
              const int32_t z = zi[si];
              put(i + j, quantize_int<Recip>(load_as_float(xin, i + j), sc[si], z, static_cast<float>(qmin - z),
                                             static_cast<float>(qmax - z)));
            }
          }
        });
      });
    };
    if (x.dtype() == DType::Int32)
      run_with(x.data<int32_t>());
    else
      run_with(reinterpret_cast<const In0*>(x.raw()));
  });
}

}  // namespace

QdqLayout qdq_layout(const Shape& x, const Tensor& scale, const Tensor* zero_point, int64_t axis_in, int64_t block_size,
                     const char* sname, const char* zname) {
  const Shape& s = scale.shape();
  if (zero_point && zero_point->shape() != s)
    throw BadInputError(std::string(zname) + " has shape " + shape_str(zero_point->shape()) + " but " + sname +
                        " has shape " + shape_str(s) + "; they must match");
  if (block_size < 0) throw BadInputError("block_size is " + std::to_string(block_size) + "; it must be >= 0");
  QdqLayout L;
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t numel = shape_numel(x);
  const bool scalar_scale = s.empty() || (s.size() == 1 && s[0] == 1);
  if (scalar_scale && block_size == 0) {  // per-tensor
    L.inner = numel;
    return L;
  }
  if (axis_in < -rank || axis_in >= rank)
    throw BadInputError("axis " + std::to_string(axis_in) + " is out of range for input x of shape " + shape_str(x) +
                        " (" + sname + " has shape " + shape_str(s) + ")");
  const int64_t axis = axis_in < 0 ? axis_in + rank : axis_in;
  const size_t ax = static_cast<size_t>(axis);
  for (size_t d = 0; d < ax; ++d) L.outer *= x[d];
  L.axis_len = x[ax];
  for (size_t d = ax + 1; d < x.size(); ++d) L.inner *= x[d];
  if (block_size == 0) {  // per-axis
    if (s.size() != 1 || s[0] != x[ax])
      throw BadInputError(std::string(sname) + " has shape " + shape_str(s) + "; per-axis quantization of x " +
                          shape_str(x) + " along axis " + std::to_string(axis) + " needs a 1-D scale of " +
                          std::to_string(x[ax]) + " elements (or a scalar for per-tensor)");
    L.scale_stride_axis = 1;
    return L;
  }
  // blocked (opset 21)
  const int64_t nblocks = x[ax] / block_size + (x[ax] % block_size != 0);  // no overflow for huge block_size
  bool ok = static_cast<int64_t>(s.size()) == rank;
  for (size_t d = 0; ok && d < s.size(); ++d) ok = d == ax ? s[d] == nblocks : s[d] == x[d];
  if (!ok) {
    Shape want = x;
    want[ax] = nblocks;
    throw BadInputError(std::string(sname) + " has shape " + shape_str(s) + "; blocked quantization of x " +
                        shape_str(x) + " along axis " + std::to_string(axis) + " with block_size " +
                        std::to_string(block_size) + " needs shape " + shape_str(want));
  }
  L.block = block_size;
  L.scale_stride_inner = 1;
  L.scale_stride_axis = L.inner;
  L.scale_stride_outer = nblocks * L.inner;
  return L;
}

DType quantize_output_dtype(const Tensor* zero_point, const QdqAttrs& a) {
  DType out = a.output_dtype;
  if (zero_point) {
    if (out != DType::Undefined && out != zero_point->dtype())
      throw BadInputError("QuantizeLinear: output_dtype " + dt(out) + " differs from y_zero_point's dtype " +
                          dt(zero_point->dtype()));
    out = zero_point->dtype();
  }
  if (out == DType::Undefined) out = DType::UInt8;
  if (!is_quantized_dtype(out))
    throw UnsupportedError("QuantizeLinear: output dtype " + dt(out) +
                           " is not a quantized type (int8, uint8, int16, uint16, int4, uint4, float8*)");
  return out;
}

Tensor quantize_linear(const Tensor& x, const Tensor& scale, const Tensor* zp, const QdqAttrs& a, int threads) {
  check_x(x, true);
  check_scale(scale, "QuantizeLinear", "y_scale");
  const DType out = quantize_output_dtype(zp, a);
  const Prepared p = prepare(x, scale, zp, a, "y_scale", "y_zero_point");
  Tensor y = is_packed4(out) ? Tensor::zeros(out, x.shape()) : Tensor(out, x.shape());
  if (a.scale_apply == ScaleApply::Divide)
    quantize_fast<false>(x, p, out, a.saturate, y, threads);
  else
    quantize_fast<true>(x, p, out, a.saturate, y, threads);
  return y;
}

Tensor dequantize_linear(const Tensor& x, const Tensor& scale, const Tensor* zp, const QdqAttrs& a, int threads) {
  check_x(x, false);
  check_scale(scale, "DequantizeLinear", "x_scale");
  if (zp && zp->dtype() != x.dtype())
    throw BadInputError("DequantizeLinear: x_zero_point has dtype " + dt(zp->dtype()) + " but x has dtype " +
                        dt(x.dtype()) + "; they must match");
  const Prepared p = prepare(x, scale, zp, a, "x_scale", "x_zero_point");
  Tensor y(scale.dtype(), x.shape());
  const QdqLayout& L = p.layout;
  const float* sc = p.scale.data();
  with_float_type(scale.dtype(), [&](auto out_tag) {
    using Out = typename decltype(out_tag)::type;
    Out* yo = reinterpret_cast<Out*>(y.raw());
    if (is_float8(x.dtype())) {
      const std::array<float, 256>& table = fp8_decode_table(x.dtype());
      const uint8_t* xi = reinterpret_cast<const uint8_t*>(x.raw());
      const float* zf = p.zp_float.data();
      parallel_runs(L, x.numel(), threads, [&](int64_t i, int64_t len, int64_t s0, int64_t ss) {
        for (int64_t j = 0; j < len; ++j) {
          const int64_t si = s0 + j * ss;
          store_float_as(yo, i + j, dequantize_fp8(table[xi[i + j]], sc[si], zf[si]));
        }
      });
      return;
    }
    const bool is_signed = dtype_info(x.dtype()).is_signed;
    const int32_t* zi = p.zp_int.data();
    with_int_storage(x.dtype(), [&](auto in_tag) {
      using In = typename decltype(in_tag)::type;
      parallel_runs(L, x.numel(), threads, [&](int64_t i, int64_t len, int64_t s0, int64_t ss) {
        auto get = [&](int64_t idx) { return load_int<In>(x.raw(), idx, is_signed); };
        if (ss == 0) {
          const float s = sc[s0];
          const int32_t z = zi[s0];
          if constexpr (!std::is_same_v<In, Nibbles> && std::is_same_v<Out, float>) {
            dequantize_run(reinterpret_cast<const In*>(x.raw()) + i, yo + i, len, s, z);
          } else {
            for (int64_t j = 0; j < len; ++j) store_float_as(yo, i + j, dequantize_int(get(i + j), s, z));
          }
        } else {
          for (int64_t j = 0; j < len; ++j) {
            const int64_t si = s0 + j * ss;
            store_float_as(yo, i + j, dequantize_int(get(i + j), sc[si], zi[si]));
          }
        }
      });
    });
  });
  return y;
}

// ---- Reference twins ----

namespace {
// Scale index of flat element i, computed from scratch.
int64_t scale_index(const QdqLayout& L, int64_t i) {
  const int64_t n = i % L.inner;
  const int64_t k = (i / L.inner) % L.axis_len;
  const int64_t m = i / (L.inner * L.axis_len);
  return m * L.scale_stride_outer + (k / L.block) * L.scale_stride_axis + n * L.scale_stride_inner;
}
}  // namespace

Tensor quantize_linear_ref(const Tensor& x, const Tensor& scale, const Tensor* zp, const QdqAttrs& a) {
  check_x(x, true);
  check_scale(scale, "QuantizeLinear", "y_scale");
  const DType out = quantize_output_dtype(zp, a);
  const QdqLayout L = qdq_layout(x.shape(), scale, zp, a.axis, a.block_size, "y_scale", "y_zero_point");
  Tensor y = Tensor::zeros(out, x.shape());
  const DTypeInfo& xi = dtype_info(x.dtype());
  const DTypeInfo& si = dtype_info(scale.dtype());
  const DTypeInfo& yi = dtype_info(out);
  const bool recip = a.scale_apply == ScaleApply::MultiplyReciprocal;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t s_idx = scale_index(L, i);
    const float xv = xi.load(x.raw(), i);
    const float s = si.load(scale.raw(), s_idx);
    const float z = zp ? yi.load(zp->raw(), s_idx) : 0.0f;
    if (is_float8(out)) {
      const float v = recip ? quantize_fp8_value<true>(xv, s, z) : quantize_fp8_value<false>(xv, s, z);
      yi.store(y.raw(), i, v, a.saturate);
    } else {
      const int32_t zi = static_cast<int32_t>(z);
      const float lo = static_cast<float>(yi.qmin - zi), hi = static_cast<float>(yi.qmax - zi);
      const int32_t q = recip ? quantize_int<true>(xv, s, zi, lo, hi) : quantize_int<false>(xv, s, zi, lo, hi);
      yi.store(y.raw(), i, static_cast<float>(q), false);
    }
  }
  return y;
}

Tensor dequantize_linear_ref(const Tensor& x, const Tensor& scale, const Tensor* zp, const QdqAttrs& a) {
  check_x(x, false);
  check_scale(scale, "DequantizeLinear", "x_scale");
  const QdqLayout L = qdq_layout(x.shape(), scale, zp, a.axis, a.block_size, "x_scale", "x_zero_point");
  Tensor y(scale.dtype(), x.shape());
  const DTypeInfo& xi = dtype_info(x.dtype());
  const DTypeInfo& si = dtype_info(scale.dtype());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t s_idx = scale_index(L, i);
    const float s = si.load(scale.raw(), s_idx);
    float v;
    if (is_float8(x.dtype())) {
      v = dequantize_fp8(xi.load(x.raw(), i), s, zp ? xi.load(zp->raw(), s_idx) : 0.0f);
    } else {  // integers: exact int32 values (a float load would round int32 beyond 2^24)
      auto int_at = [&](const Tensor& t, int64_t j) {
        return t.dtype() == DType::Int32 ? t.data<int32_t>()[j] : static_cast<int32_t>(xi.load(t.raw(), j));
      };
      v = dequantize_int(int_at(x, i), s, zp ? int_at(*zp, s_idx) : 0);
    }
    si.store(y.raw(), i, v, false);
  }
  return y;
}

}  // namespace qtool::numerics
