// Cast, CastLike, Identity and inference-mode Dropout.
#include <cmath>
#include <cstring>
#include <limits>

#include "core/float_formats.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {

// Cast contract: numeric/bool types convert as C++ does, except as noted below; the narrow float
// formats (float16, bfloat16, FP8) convert through float32 with core/float_formats.h rounding
// (round to nearest even; `saturate`, opset 19, applies to FP8 targets only).
// Float -> integer: truncation toward zero; NaN gives 0 and out-of-range values saturate (ONNX leaves
// these undefined; C++ makes them undefined behaviour, so they are pinned here).
template <class To, class From>
To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From{0};
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(v)) return To{0};
    if (v <= static_cast<From>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (v >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

// Narrow float formats (16- and 8-bit) <-> float32, one table of codecs.
struct NarrowFloat {
  DType dtype;
  float (*decode)(uint16_t);
  uint16_t (*encode)(float, bool saturate);
};
float dec_f16(uint16_t b) { return float16_to_float(b); }
float dec_bf16(uint16_t b) { return bfloat16_to_float(b); }
float dec_e4m3fn(uint16_t b) { return float8e4m3fn_to_float(static_cast<uint8_t>(b)); }
float dec_e4m3fnuz(uint16_t b) { return float8e4m3fnuz_to_float(static_cast<uint8_t>(b)); }
float dec_e5m2(uint16_t b) { return float8e5m2_to_float(static_cast<uint8_t>(b)); }
float dec_e5m2fnuz(uint16_t b) { return float8e5m2fnuz_to_float(static_cast<uint8_t>(b)); }
uint16_t enc_f16(float v, bool) { return float_to_float16(v); }
uint16_t enc_bf16(float v, bool) { return float_to_bfloat16(v); }
uint16_t enc_e4m3fn(float v, bool s) { return float_to_float8e4m3fn(v, s); }
uint16_t enc_e4m3fnuz(float v, bool s) { return float_to_float8e4m3fnuz(v, s); }
uint16_t enc_e5m2(float v, bool s) { return float_to_float8e5m2(v, s); }
uint16_t enc_e5m2fnuz(float v, bool s) { return float_to_float8e5m2fnuz(v, s); }
constexpr NarrowFloat kNarrowFloats[] = {
    {DType::Float16, dec_f16, enc_f16},
    {DType::BFloat16, dec_bf16, enc_bf16},
    {DType::Float8E4M3FN, dec_e4m3fn, enc_e4m3fn},
    {DType::Float8E4M3FNUZ, dec_e4m3fnuz, enc_e4m3fnuz},
    {DType::Float8E5M2, dec_e5m2, enc_e5m2},
    {DType::Float8E5M2FNUZ, dec_e5m2fnuz, enc_e5m2fnuz},
};
const NarrowFloat* narrow(DType t) {
  for (const auto& n : kNarrowFloats)
    if (n.dtype == t) return &n;
  return nullptr;
}

Tensor decode_narrow(const Tensor& x, const NarrowFloat& nf, int threads) {
  Tensor y(DType::Float32, x.shape());
  float* out = y.data<float>();
  const size_t es = static_cast<size_t>(dtype_info(x.dtype()).bits / 8);
  const std::byte* in = x.raw();
  parallel_range(x.numel(), threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      uint16_t bits = 0;
      std::memcpy(&bits, in + i * es, es);
      out[i] = nf.decode(bits);
    }
  });
  return y;
}

Tensor encode_narrow(const Tensor& x, const NarrowFloat& nf, bool saturate, int threads) {
  Tensor y(nf.dtype, x.shape());
  const float* in = x.data<float>();
  const size_t es = static_cast<size_t>(dtype_info(nf.dtype).bits / 8);
  std::byte* out = y.raw();
  parallel_range(x.numel(), threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const uint16_t bits = nf.encode(in[i], saturate);
      std::memcpy(out + i * es, &bits, es);
    }
  });
  return y;
}

}  // namespace

bool is_narrow_float(DType t) { return narrow(t) != nullptr; }

Tensor cast_tensor(const Tensor& x, DType to, const NodeInfo& node, int threads, bool saturate) {
  if (x.dtype() == to) return x;
  // Narrow floats go through float32 (exact on decode; one rounding on encode).
  if (const NarrowFloat* src = narrow(x.dtype()))
    return cast_tensor(decode_narrow(x, *src, threads), to, node, threads, saturate);
  if (const NarrowFloat* dst = narrow(to))
    return encode_narrow(cast_tensor(x, DType::Float32, node, threads), *dst, saturate, threads);
  Tensor y(to, x.shape());
  dispatch_numeric_bool(x.dtype(), node, [&]<class From>() {
    dispatch_numeric_bool(to, node, [&]<class To>() {
      const From* in = x.data<From>();
      To* out = y.data<To>();
      parallel_range(x.numel(), threads, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) out[i] = convert<To>(in[i]);
      });
    });
  });
  return y;
}

namespace {

class CastKernel final : public Kernel {
 public:
  explicit CastKernel(const NodeInfo& n) {
    const int64_t to = n.attrs.require_int("to");
    const DTypeInfo* info = dtype_info_or_null(static_cast<int32_t>(to));
    if (!info) throw_unknown_dtype(static_cast<int32_t>(to), n.label() + ": attribute 'to'");
    to_ = info->dtype;
    saturate_ = n.attrs.get_int("saturate", 1) != 0;
  }
  void run(KernelContext& ctx) override {
    ctx.outputs[0] = cast_tensor(ctx.input(0), to_, ctx.node, ctx.threads, saturate_);
  }

 private:
  DType to_ = DType::Float32;
  bool saturate_ = true;
};

void castlike_kernel(KernelContext& ctx) {
  ctx.outputs[0] = cast_tensor(ctx.input(0), ctx.input(1).dtype(), ctx.node, ctx.threads);
}

// Identity shares the input's storage (tensors are immutable once produced); a sequence (Identity-14) passes as it is.
void identity_kernel(KernelContext& ctx) {
  if (ctx.is_sequence(0))
    ctx.set_output(0, ctx.value(0));
  else
    ctx.outputs[0] = ctx.input(0);
}

// Dropout in inference: y = x; the optional mask output is all true. Training mode is supported
// only with ratio 0 (random masks are not reproducible across runtimes).
void dropout_kernel(KernelContext& ctx) {
  ctx.outputs[0] = ctx.input(0);
  if (ctx.has_input(2) && read_scalar(ctx.input(2), ctx.node, "training_mode") != 0) {
    const double ratio = ctx.has_input(1) ? read_scalar(ctx.input(1), ctx.node, "ratio") : 0.5;
    if (ratio != 0)
      throw UnsupportedError(ctx.node.label() + ": Dropout in training mode is not supported (inference only)");
  }
  if (ctx.outputs.size() > 1 && !ctx.node.outputs[1].empty()) {
    Tensor mask(DType::Bool, ctx.input(0).shape());
    std::memset(mask.raw(), 1, mask.nbytes());
    ctx.outputs[1] = std::move(mask);
  }
}

}  // namespace

std::unique_ptr<Kernel> make_cast(const NodeInfo& n) { return std::make_unique<CastKernel>(n); }
std::unique_ptr<Kernel> make_castlike(const NodeInfo& n) { return make_function_kernel<castlike_kernel>(n); }
std::unique_ptr<Kernel> make_identity(const NodeInfo& n) { return make_function_kernel<identity_kernel>(n); }
std::unique_ptr<Kernel> make_dropout(const NodeInfo& n) { return make_function_kernel<dropout_kernel>(n); }

}  // namespace qtool::runtime::kernels
